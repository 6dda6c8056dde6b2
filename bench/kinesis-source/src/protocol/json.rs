//! AWS JSON 1.1: requests parsed by serde_json; answers serialized by serde_json, except GetRecords,
//! written straight into one buffer (record data base64-encoded in place, the other strings copied).

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde_json::{json, Value};

use super::BatchTail;
use crate::error::ApiError;
use crate::ops::{RecordBatch, Reply};

pub fn decode_request(body: &[u8]) -> Result<Value, ApiError> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| ApiError::Serialization(format!("invalid JSON body: {e}")))?;
    if !value.is_object() {
        return Err(ApiError::Serialization("the JSON body is not an object".into()));
    }
    Ok(value)
}

pub fn encode_reply(reply: &Reply) -> Vec<u8> {
    let encoded = match reply {
        Reply::GetRecords(batch) => {
            return encode_records(batch, BatchTail::NextShardIterator(&batch.next_shard_iterator))
        }
        Reply::Empty | Reply::SubscribeToShard(_) => return b"{}".to_vec(),
        Reply::RegisterStreamConsumer(out) => serde_json::to_vec(out),
        Reply::DescribeStreamConsumer(out) => serde_json::to_vec(out),
        Reply::ListStreamConsumers(out) => serde_json::to_vec(out),
        Reply::ListShards(out) => serde_json::to_vec(out),
        Reply::DescribeStream(out) => serde_json::to_vec(out),
        Reply::DescribeStreamSummary(out) => serde_json::to_vec(out),
        Reply::GetShardIterator(out) => serde_json::to_vec(out),
    };
    encoded.expect("plain structs of strings and numbers serialize")
}

pub fn encode_error(error: &ApiError) -> Vec<u8> {
    serde_json::to_vec(&json!({"__type": error.type_name(), "message": error.message()})).expect("a JSON object")
}

/// `{"Records":[{"SequenceNumber","ApproximateArrivalTimestamp","Data","PartitionKey"}...],
/// "NextShardIterator" (or "ContinuationSequenceNumber"),"MillisBehindLatest"}`
pub fn encode_records(batch: &RecordBatch, tail: BatchTail) -> Vec<u8> {
    let b64_total = base64::encoded_len(batch.data.len(), true).unwrap_or(0);
    let mut out = Vec::with_capacity(b64_total + batch.records.len() * 192 + 256);
    out.extend_from_slice(b"{\"Records\":[");
    for (i, r) in batch.records.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"SequenceNumber\":\"");
        out.extend_from_slice(r.sequence_number.as_str().as_bytes());
        out.extend_from_slice(b"\",\"ApproximateArrivalTimestamp\":");
        push_epoch_seconds(&mut out, r.arrival_ms);
        out.extend_from_slice(b",\"Data\":\"");
        push_base64(&mut out, batch.data_of(r));
        out.extend_from_slice(b"\",\"PartitionKey\":");
        serde_json::to_writer(&mut out, batch.key_of(r)).expect("writing to a Vec");
        out.push(b'}');
    }
    let (name, value) = tail.field();
    out.extend_from_slice(b"],");
    serde_json::to_writer(&mut out, name).expect("writing to a Vec");
    out.push(b':');
    serde_json::to_writer(&mut out, value).expect("writing to a Vec");
    out.extend_from_slice(b",\"MillisBehindLatest\":");
    out.extend_from_slice(batch.millis_behind_latest.to_string().as_bytes());
    out.push(b'}');
    out
}

fn push_base64(out: &mut Vec<u8>, data: &[u8]) {
    let start = out.len();
    let len = base64::encoded_len(data.len(), true).expect("a record is far below usize::MAX");
    out.resize(start + len, 0);
    STANDARD.encode_slice(data, &mut out[start..]).expect("sized exactly");
}

/// `1700000000.123`
fn push_epoch_seconds(out: &mut Vec<u8>, ms: u64) {
    use std::io::Write;
    write!(out, "{}.{:03}", ms / 1000, ms % 1000).expect("writing to a Vec");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::BatchRecord;
    use crate::sequence::SequenceLayout;

    fn batch() -> RecordBatch {
        let layout = SequenceLayout::new(1_700_000_000_000, 1);
        RecordBatch {
            data: b"hello\x00\xffworld".to_vec(),
            keys: "k1k\"2".into(),
            records: vec![
                BatchRecord {
                    data: 0..7,
                    key: 0..2,
                    sequence_number: layout.format(0, 1),
                    arrival_ms: 1_700_000_000_005,
                },
                BatchRecord {
                    data: 7..12,
                    key: 2..5,
                    sequence_number: layout.format(0, 2),
                    arrival_ms: 1_700_000_001_250,
                },
            ],
            next_shard_iterator: "AQ+/=".into(),
            millis_behind_latest: 7,
        }
    }

    #[test]
    fn get_records_is_valid_json_with_base64_data() {
        let b = batch();
        let out: Value =
            serde_json::from_slice(&encode_records(&b, BatchTail::NextShardIterator(&b.next_shard_iterator))).unwrap();
        let records = out["Records"].as_array().unwrap();
        assert_eq!(records.len(), 2);
        assert_eq!(STANDARD.decode(records[0]["Data"].as_str().unwrap()).unwrap(), b"hello\x00\xff");
        assert_eq!(records[1]["PartitionKey"], "k\"2");
        assert_eq!(records[0]["ApproximateArrivalTimestamp"].as_f64().unwrap(), 1_700_000_000.005);
        assert_eq!(records[1]["SequenceNumber"].as_str().unwrap().len(), 56);
        assert_eq!(out["NextShardIterator"], "AQ+/=");
        assert_eq!(out["MillisBehindLatest"], 7);
        let empty: Value = serde_json::from_slice(&encode_records(
            &RecordBatch::default(),
            BatchTail::ContinuationSequenceNumber("49"),
        ))
        .unwrap();
        assert_eq!(empty, json!({"Records": [], "ContinuationSequenceNumber": "49", "MillisBehindLatest": 0}));
    }

    #[test]
    fn errors_carry_the_aws_type() {
        let out: Value = serde_json::from_slice(&encode_error(&ApiError::ResourceNotFound("gone".into()))).unwrap();
        assert_eq!(out, json!({"__type": "ResourceNotFoundException", "message": "gone"}));
    }

    #[test]
    fn requests_must_be_objects() {
        assert!(decode_request(b"[1]").is_err());
        assert!(decode_request(b"{").is_err());
        assert_eq!(decode_request(br#"{"Limit": 3}"#).unwrap(), json!({"Limit": 3}));
    }
}
