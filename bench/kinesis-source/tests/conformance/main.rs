//! Conformance: real clients read every record of a running kinesis-source, byte-exact, sequence
//! numbers included: the AWS SDK for Rust (AWS JSON 1.1) in `sdk_json`, hand-built CBOR requests over
//! HTTP/1.1 in `cbor`; SubscribeToShard (the Rust SDK over HTTP/1.1, CBOR over h2c) in `fan_out`.
//! The Java SDK (CBOR and JSON, through KCL) is tests/bench_source in the repository.

mod cbor;
mod common;
mod fan_out;
mod kpl_reference;
mod sdk_json;
