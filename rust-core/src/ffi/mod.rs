//! The only JNI code of the crate: exported functions, the handle table, panic and error mapping,
//! the batch codec and the bridge from `tracing` to NiFi's ComponentLog.
//!
//! Rules every export follows: it runs inside [`guard::call`], so a panic or error becomes a typed
//! Java exception and never unwinds into the JVM; Rust objects are reached only through handles;
//! records cross in one call per batch.

pub mod batch;
mod credentials_callback;
pub mod guard;
pub mod handles;
pub mod log_bridge;
pub mod sink_io;
pub mod skips;
mod wire;

mod exports;
mod java;
mod test_support;
