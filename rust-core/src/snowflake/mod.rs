//! The Snowpipe Streaming v2 client behind PutSnowflake: authentication (`auth`), the REST calls
//! (`api`), FlowFile-to-row mapping (`rows`), offset tokens (`offset`), one writer per channel
//! (`channel`), commit tracking (`status`) and the engine Java talks to (`sink`).

pub mod api;
pub mod auth;
pub mod channel;
pub mod lineage;
pub mod offset;
pub mod rows;
pub mod sink;
pub mod status;

pub use channel::{Outcome, Route};
pub use rows::FlowFileIn;
pub use sink::{SinkEngine, SinkError, SinkSettings};
