//! The protobuf messages of the KPL aggregation format (amazon-kinesis-producer's
//! `aggregation-format.md`, the KCL's `messages.proto`), written as prost derives so the build
//! needs neither a build script nor `protoc`.
//!
//! ```proto
//! message AggregatedRecord {
//!   repeated string partition_key_table     = 1;
//!   repeated string explicit_hash_key_table = 2;
//!   repeated Record records                 = 3;
//! }
//! message Record {
//!   required uint64 partition_key_index     = 1;
//!   optional uint64 explicit_hash_key_index = 2;
//!   required bytes  data                    = 3;
//!   repeated Tag    tags                    = 4;
//! }
//! message Tag { required string key = 1; optional string value = 2; }
//! ```
//!
//! The key tables are declared `bytes` here although the schema says `string`: the wire encoding
//! is the same, and it lets the de-aggregator turn a key that is not UTF-8 into a lossy string,
//! as the KCL's Java protobuf does, instead of rejecting the whole aggregate.
//!
//! The consumer does not decode aggregates into these owned messages (their size grows with the
//! number of entries, not with the bytes: see [`super::kpl_view`], which reads them in place);
//! they encode the aggregates of tests and the benchmark, and serve tests as the reference decoder.

/// The body of a KPL aggregate, between the magic bytes and the MD5 trailer.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AggregatedRecord {
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub partition_key_table: Vec<Vec<u8>>,
    #[prost(bytes = "vec", repeated, tag = "2")]
    pub explicit_hash_key_table: Vec<Vec<u8>>,
    #[prost(message, repeated, tag = "3")]
    pub records: Vec<Record>,
}

/// One user record inside an aggregate; its keys are indexes into the aggregate's key tables.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Record {
    #[prost(uint64, required, tag = "1")]
    pub partition_key_index: u64,
    #[prost(uint64, optional, tag = "2")]
    pub explicit_hash_key_index: Option<u64>,
    #[prost(bytes = "vec", required, tag = "3")]
    pub data: Vec<u8>,
    #[prost(message, repeated, tag = "4")]
    pub tags: Vec<Tag>,
}

/// A KPL tag on a user record; carried by the format, not used by the consumer.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Tag {
    #[prost(string, required, tag = "1")]
    pub key: String,
    #[prost(string, optional, tag = "2")]
    pub value: Option<String>,
}
