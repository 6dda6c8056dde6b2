//! The only JNI code of the crate: exported functions, the handle table, panic and error mapping,
//! the batch codec and the bridge from `tracing` to NiFi's ComponentLog.
//!
//! Rules every export follows: it runs inside [`guard::call`], so a panic or error becomes a typed
//! Java exception and never unwinds into the JVM; Rust objects are reached only through handles;
//! records cross in one call per batch.
//!
//! The map: `exports` are the native methods of `NativeBridge` (`test_support` those of the
//! test-only `NativeTestSupport`), with `java` converting values; `guard` catches panics and maps
//! errors; `handles` is the handle table; the byte layouts are `batch` (records out), `sink_io`
//! (PutSnowflake's FlowFiles in, outcomes out) and `skips` (records Java sent to
//! `parse.failure`), read with `wire`'s cursor; `log_bridge` forwards `tracing` to NiFi's
//! ComponentLog; `credentials_callback` calls NiFi's AWS credentials service from Rust.

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
