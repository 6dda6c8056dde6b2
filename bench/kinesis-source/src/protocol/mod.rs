//! The two wire protocols the AWS SDKs speak to Kinesis, chosen per request by its Content-Type and used
//! for the answer too: AWS JSON 1.1 (`json`) and AWS CBOR 1.1 (`cbor`, the Java SDK v2's default).
//!
//! Requests are decoded to a `serde_json::Value` (CBOR timestamps become epoch seconds on the way), which
//! `ops` reads. Answers: GetRecords, the hot path, is written by hand by each protocol module; the others
//! are serde structs, serialized by serde_json or ciborium, with `Timestamp` choosing its form by format.

pub mod cbor;
pub mod eventstream;
pub mod json;

use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::error::ApiError;
use crate::ops::Reply;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Json,
    Cbor,
}

pub const JSON_CONTENT_TYPE: &str = "application/x-amz-json-1.1";
pub const CBOR_CONTENT_TYPE: &str = "application/x-amz-cbor-1.1";

impl Protocol {
    pub const ALL: [Protocol; 2] = [Protocol::Json, Protocol::Cbor];

    /// From a request's Content-Type (parameters such as `; charset=utf-8` ignored).
    pub fn from_content_type(content_type: Option<&str>) -> Result<Self, ApiError> {
        let essence = content_type.unwrap_or("").split(';').next().unwrap_or("").trim().to_ascii_lowercase();
        match essence.as_str() {
            "application/x-amz-json-1.1" | "application/x-amz-json-1.0" | "application/json" => Ok(Protocol::Json),
            "application/x-amz-cbor-1.1" | "application/cbor" => Ok(Protocol::Cbor),
            other => Err(ApiError::UnsupportedMediaType(format!("unsupported Content-Type {other:?}"))),
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Protocol::Json => JSON_CONTENT_TYPE,
            Protocol::Cbor => CBOR_CONTENT_TYPE,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Protocol::Json => "json",
            Protocol::Cbor => "cbor",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }

    /// The request body as a JSON value; an empty body is an empty object.
    pub fn decode_request(self, body: &[u8]) -> Result<Value, ApiError> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(Value::Object(Default::default()));
        }
        match self {
            Protocol::Json => json::decode_request(body),
            Protocol::Cbor => cbor::decode_request(body),
        }
    }

    pub fn encode_reply(self, reply: &Reply) -> Vec<u8> {
        match self {
            Protocol::Json => json::encode_reply(reply),
            Protocol::Cbor => cbor::encode_reply(reply),
        }
    }

    /// `{"__type": ..., "message": ...}` in this protocol.
    pub fn encode_error(self, error: &ApiError) -> Vec<u8> {
        match self {
            Protocol::Json => json::encode_error(error),
            Protocol::Cbor => cbor::encode_error(error),
        }
    }
}

/// What follows the records in a batch's encoding: GetRecords' next iterator, or a SubscribeToShardEvent's
/// continuation sequence number. `MillisBehindLatest` comes last in both.
#[derive(Debug, Clone, Copy)]
pub enum BatchTail<'a> {
    NextShardIterator(&'a str),
    ContinuationSequenceNumber(&'a str),
}

impl BatchTail<'_> {
    pub fn field(&self) -> (&'static str, &str) {
        match self {
            BatchTail::NextShardIterator(it) => ("NextShardIterator", it),
            BatchTail::ContinuationSequenceNumber(seq) => ("ContinuationSequenceNumber", seq),
        }
    }
}

/// A point in time (epoch milliseconds) in an answer: epoch seconds with millisecond decimals in JSON
/// (a human-readable format for serde), CBOR tag 1 around epoch milliseconds in CBOR (which the Java SDK
/// v2 reads as `UNIX_TIMESTAMP_MILLIS`, its CBOR default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timestamp(pub u64);

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if serializer.is_human_readable() {
            serializer.serialize_f64(self.0 as f64 / 1000.0)
        } else {
            ciborium::tag::Required::<u64, 1>(self.0).serialize(serializer)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_choose_the_protocol() {
        assert_eq!(Protocol::from_content_type(Some("application/x-amz-json-1.1")), Ok(Protocol::Json));
        assert_eq!(Protocol::from_content_type(Some("application/x-amz-cbor-1.1; charset=utf-8")), Ok(Protocol::Cbor));
        assert!(matches!(Protocol::from_content_type(Some("text/xml")), Err(ApiError::UnsupportedMediaType(_))));
        assert!(matches!(Protocol::from_content_type(None), Err(ApiError::UnsupportedMediaType(_))));
    }

    #[test]
    fn empty_bodies_are_empty_objects() {
        assert_eq!(Protocol::Cbor.decode_request(b"").unwrap(), serde_json::json!({}));
        assert_eq!(Protocol::Json.decode_request(b" ").unwrap(), serde_json::json!({}));
    }
}
