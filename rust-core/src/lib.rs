//! kinesnow-core: the engine behind the kinesnow NiFi processors.
//!
//! Everything that decides anything lives here; the Java shim only declares properties, moves
//! batches across JNI and talks to the NiFi session. `unsafe` and `jni` types appear only under
//! [`ffi`]; every other module is plain Rust, testable without a JVM.

pub mod aws;
pub mod component;
pub mod config;
pub mod consumer;
pub mod error;
pub mod feedback;
pub mod ffi;
pub mod kinesis;
pub mod lease;
pub mod runtime;
pub mod snowflake;
pub mod verify;
