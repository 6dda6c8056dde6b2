//! snowflake-standin: a local stand-in for Snowflake's Snowpipe Streaming v2
//! ("high-performance") REST service, storing rows in DuckDB. Tests, the
//! PutSnowflake processor and the demo talk to it as they would to Snowflake;
//! the official SDK passes against it (see `conformance/`).
//!
//! Modules, one per capability: `server` (start-up), `tls`, `auth`, `routes`
//! (control, ingest, admin), `channels`, `payload` (body decoding), `commit`,
//! `catalog`, `ddl`, `account` (the set-up script's account-level statements), `schema` (types and conversion), `storage` (DuckDB), `faults`, `limits`
//! (Snowflake's per-channel request rate and throughput).

pub mod account;
pub mod auth;
pub mod catalog;
pub mod channels;
pub mod commit;
pub mod ddl;
pub mod error;
pub mod faults;
pub mod limits;
pub mod payload;
pub mod routes;
pub mod schema;
pub mod server;
pub mod state;
pub mod storage;
pub mod tls;

pub use server::{start, Options, Running};
pub use state::Settings;
