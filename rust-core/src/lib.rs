//! kinesnow-core: the engine behind the kinesnow NiFi processors.
//!
//! Everything that decides anything lives here; the Java shim only declares properties, moves
//! batches across JNI and talks to the NiFi session. `jni` types and byte layouts appear only
//! under [`ffi`]; `unsafe` only there and in `kinesis::digest` (one call into AWS-LC's MD5).
//! Every other module is plain Rust, testable without a JVM.
//!
//! The modules stand in floors, each using only floors below it (checked by `layers`, which also
//! checks that every module is named on its parent's map, as here):
//! `runtime`; `contract`, `error`, `secrets`; `counters`; `kinesis`; `config`; `aws`; `lease`;
//! `feedback`; `consumer`, `snowflake`; `verify`, `component`; `ops`; `ffi`. Test-only on top:
//! `failover_model`, the model test of exactly once across failover.

pub mod aws;
pub mod component;
pub mod config;
pub mod consumer;
pub mod contract;
pub mod counters;
pub mod error;
pub mod feedback;
pub mod ffi;
pub mod kinesis;
pub mod lease;
pub mod ops;
pub mod runtime;
pub mod secrets;
pub mod snowflake;
pub mod verify;

#[cfg(test)]
mod layers;

/// Model test of exactly once across failover: the feedback board, the consumer's resume and
/// PutSnowflake's link and book together.
#[cfg(test)]
mod failover_model;
