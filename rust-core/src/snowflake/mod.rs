//! The Snowpipe Streaming v2 client behind PutSnowflake: authentication (`auth`), the REST calls
//! (`api`), FlowFile-to-row mapping (`rows`, making `row`s), offset tokens (`offset`), channel
//! names (`naming`), the destinations a FlowFile's names resolve to (`destinations`), what one
//! append request may carry (`request_size`), a channel's bookkeeping and order (`book`), the gaps
//! it passed over kept across restarts (`gap_memory`) and its writer task (`channel`), the running
//! writers (`writers`, watched through `supervise`), parent-before-child (`lineage`), the
//! exactly-once path across nodes with `SNOWFLAKE_COMMIT` (`link` decides, `router` routes and
//! parks), the first row's shape check (`row_probe`), commit tracking (`status`), what View State
//! shows of the channels (`views`) and of each shard's freshness (`freshness`), which queued
//! FlowFiles to take (`take_order`) and the engine the processor drives (`sink`).

pub mod api;
pub mod auth;
pub mod book;
pub mod channel;
pub mod destinations;
pub mod freshness;
pub mod gap_memory;
pub mod lineage;
pub mod link;
pub mod naming;
pub mod offset;
pub mod request_size;
pub mod router;
pub mod row;
pub mod row_probe;
pub mod rows;
pub mod sink;
pub mod status;
pub mod supervise;
pub mod take_order;
pub mod views;
pub mod writers;

pub use book::{Outcome, Route};
pub use rows::FlowFileIn;
pub use sink::{SinkEngine, SinkError, SinkSettings};
