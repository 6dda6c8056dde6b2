//! A Kinesis server for benchmarks only: it serves a stream generated in memory (see `generate`) over
//! AWS JSON 1.1 and CBOR, at a small fraction of a consumer's cost per record. It is a load generator,
//! not an emulator: the stream is fixed, shards never close, nothing can be written. See README.md.

pub mod dump;
pub mod error;
pub mod fan_out;
pub mod generate;
pub mod iterator;
pub mod kpl;
pub mod limits;
pub mod ops;
pub mod protocol;
pub mod sequence;
pub mod server;
pub mod spec;
pub mod stats;
