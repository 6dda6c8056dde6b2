//! The Kinesis side of the engine. So far only the record model shared with the JNI batch codec;
//! shard discovery, readers, de-aggregation and rate limiting arrive with the consumer engine.

pub mod record;
