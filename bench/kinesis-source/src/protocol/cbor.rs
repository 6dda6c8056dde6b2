//! AWS CBOR 1.1, as the Java SDK v2 speaks it to Kinesis: the same shapes as JSON, but blobs are CBOR
//! byte strings and timestamps are tag 1 around epoch milliseconds (the SDK's `UNIX_TIMESTAMP_MILLIS`;
//! RFC 8949's tag 1 means seconds, and a float under tag 1 is read as seconds here).
//!
//! Requests are decoded with ciborium into a `ciborium::Value`, then turned into the JSON value `ops`
//! reads (timestamps as epoch seconds). Answers: serde structs through ciborium; GetRecords written with
//! ciborium's low-level encoder straight into one buffer.

use ciborium::value::Value as Cbor;
use ciborium_ll::{Encoder, Header};
use serde_json::{Map, Number, Value};

use super::BatchTail;
use crate::error::ApiError;
use crate::ops::{RecordBatch, Reply};

pub const TIMESTAMP_TAG: u64 = 1;

pub fn decode_request(body: &[u8]) -> Result<Value, ApiError> {
    let value: Cbor =
        ciborium::from_reader(body).map_err(|e| ApiError::Serialization(format!("invalid CBOR body: {e}")))?;
    if !value.is_map() {
        return Err(ApiError::Serialization("the CBOR body is not a map".into()));
    }
    to_json(value)
}

/// A CBOR request value as the JSON value the same request would have had in AWS JSON.
fn to_json(value: Cbor) -> Result<Value, ApiError> {
    Ok(match value {
        Cbor::Null => Value::Null,
        Cbor::Bool(b) => Value::Bool(b),
        Cbor::Text(s) => Value::String(s),
        Cbor::Integer(i) => integer(i128::from(i))?,
        Cbor::Float(f) => float(f)?,
        Cbor::Bytes(b) => {
            use base64::Engine;
            Value::String(base64::engine::general_purpose::STANDARD.encode(b))
        }
        Cbor::Tag(TIMESTAMP_TAG, inner) => match *inner {
            Cbor::Integer(ms) => float(i128::from(ms) as f64 / 1000.0)?,
            Cbor::Float(seconds) => float(seconds)?,
            other => return Err(ApiError::Serialization(format!("tag 1 around {other:?}, not a number"))),
        },
        Cbor::Tag(_, inner) => to_json(*inner)?,
        Cbor::Array(items) => Value::Array(items.into_iter().map(to_json).collect::<Result<_, _>>()?),
        Cbor::Map(entries) => {
            let mut map = Map::with_capacity(entries.len());
            for (k, v) in entries {
                let Cbor::Text(key) = k else {
                    return Err(ApiError::Serialization(format!("a map key that is not text: {k:?}")));
                };
                map.insert(key, to_json(v)?);
            }
            Value::Object(map)
        }
        other => return Err(ApiError::Serialization(format!("unsupported CBOR value {other:?}"))),
    })
}

fn integer(i: i128) -> Result<Value, ApiError> {
    let n = if let Ok(u) = u64::try_from(i) {
        Number::from(u)
    } else if let Ok(s) = i64::try_from(i) {
        Number::from(s)
    } else {
        return Err(ApiError::Serialization(format!("integer {i} out of range")));
    };
    Ok(Value::Number(n))
}

fn float(f: f64) -> Result<Value, ApiError> {
    Number::from_f64(f).map(Value::Number).ok_or_else(|| ApiError::Serialization(format!("number {f} is not finite")))
}

pub fn encode_reply(reply: &Reply) -> Vec<u8> {
    let mut out = Vec::new();
    let written = match reply {
        Reply::GetRecords(batch) => {
            return encode_records(batch, BatchTail::NextShardIterator(&batch.next_shard_iterator))
        }
        Reply::Empty | Reply::SubscribeToShard(_) => return vec![0xA0], // a map of 0 entries
        Reply::RegisterStreamConsumer(o) => ciborium::into_writer(o, &mut out),
        Reply::DescribeStreamConsumer(o) => ciborium::into_writer(o, &mut out),
        Reply::ListStreamConsumers(o) => ciborium::into_writer(o, &mut out),
        Reply::ListShards(o) => ciborium::into_writer(o, &mut out),
        Reply::DescribeStream(o) => ciborium::into_writer(o, &mut out),
        Reply::DescribeStreamSummary(o) => ciborium::into_writer(o, &mut out),
        Reply::GetShardIterator(o) => ciborium::into_writer(o, &mut out),
    };
    written.expect("plain structs serialize into a Vec");
    out
}

pub fn encode_error(error: &ApiError) -> Vec<u8> {
    let mut out = Vec::new();
    let body = Cbor::Map(vec![
        (Cbor::Text("__type".into()), Cbor::Text(error.type_name().into())),
        (Cbor::Text("message".into()), Cbor::Text(error.message())),
    ]);
    ciborium::into_writer(&body, &mut out).expect("a map serializes into a Vec");
    out
}

/// `{"Records":[{"SequenceNumber","ApproximateArrivalTimestamp": 1(ms),"Data": bytes,"PartitionKey"}...],
/// "NextShardIterator" (or "ContinuationSequenceNumber"),"MillisBehindLatest"}`, definite lengths throughout.
pub fn encode_records(batch: &RecordBatch, tail: BatchTail) -> Vec<u8> {
    let mut out = Vec::with_capacity(batch.data.len() + batch.records.len() * 160 + 256);
    write_records(&mut Encoder::from(&mut out), batch, tail).expect("writing to a Vec cannot fail");
    out
}

fn write_records(e: &mut Encoder<&mut Vec<u8>>, batch: &RecordBatch, tail: BatchTail) -> std::io::Result<()> {
    e.push(Header::Map(Some(3)))?;
    e.text("Records", None)?;
    e.push(Header::Array(Some(batch.records.len())))?;
    for r in &batch.records {
        e.push(Header::Map(Some(4)))?;
        e.text("SequenceNumber", None)?;
        e.text(r.sequence_number.as_str(), None)?;
        e.text("ApproximateArrivalTimestamp", None)?;
        e.push(Header::Tag(TIMESTAMP_TAG))?;
        e.push(Header::Positive(r.arrival_ms))?;
        e.text("Data", None)?;
        e.bytes(batch.data_of(r), None)?;
        e.text("PartitionKey", None)?;
        e.text(batch.key_of(r), None)?;
    }
    let (name, value) = tail.field();
    e.text(name, None)?;
    e.text(value, None)?;
    e.text("MillisBehindLatest", None)?;
    e.push(Header::Positive(batch.millis_behind_latest))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{BatchRecord, GetShardIteratorOutput};
    use crate::protocol::Timestamp;
    use crate::sequence::SequenceLayout;
    use serde_json::json;

    fn cbor(value: &Cbor) -> Vec<u8> {
        let mut out = Vec::new();
        ciborium::into_writer(value, &mut out).unwrap();
        out
    }

    fn text(s: &str) -> Cbor {
        Cbor::Text(s.into())
    }

    #[test]
    fn requests_become_json_with_timestamps_in_seconds() {
        let body = cbor(&Cbor::Map(vec![
            (text("ShardId"), text("shardId-000000000001")),
            (text("Timestamp"), Cbor::Tag(1, Box::new(Cbor::Integer(1_700_000_000_250i64.into())))),
            (text("Limit"), Cbor::Integer(25.into())),
        ]));
        assert_eq!(
            decode_request(&body).unwrap(),
            json!({"ShardId": "shardId-000000000001", "Timestamp": 1_700_000_000.25, "Limit": 25})
        );
        let seconds = cbor(&Cbor::Map(vec![(text("Timestamp"), Cbor::Tag(1, Box::new(Cbor::Float(12.5))))]));
        assert_eq!(decode_request(&seconds).unwrap(), json!({"Timestamp": 12.5}));
        assert!(decode_request(&cbor(&Cbor::Array(vec![]))).is_err());
        assert!(decode_request(b"\xff\xff").is_err());
    }

    #[test]
    fn get_records_has_byte_strings_and_tagged_millis() {
        let layout = SequenceLayout::new(1_700_000_000_000, 1);
        let batch = RecordBatch {
            data: b"\x00\x01binary".to_vec(),
            keys: "pk".into(),
            records: vec![BatchRecord {
                data: 0..8,
                key: 0..2,
                sequence_number: layout.format(3, 9),
                arrival_ms: 1_700_000_000_042,
            }],
            next_shard_iterator: "next".into(),
            millis_behind_latest: 0,
        };
        let value: Cbor =
            ciborium::from_reader(&encode_records(&batch, BatchTail::NextShardIterator("next"))[..]).unwrap();
        let map = value.as_map().unwrap();
        assert_eq!(map[0].0, text("Records"));
        let record = map[0].1.as_array().unwrap()[0].as_map().unwrap();
        assert_eq!(record[0], (text("SequenceNumber"), text(layout.format(3, 9).as_str())));
        assert_eq!(
            record[1],
            (text("ApproximateArrivalTimestamp"), Cbor::Tag(1, Box::new(Cbor::Integer(1_700_000_000_042u64.into()))))
        );
        assert_eq!(record[2], (text("Data"), Cbor::Bytes(b"\x00\x01binary".to_vec())));
        assert_eq!(record[3], (text("PartitionKey"), text("pk")));
        assert_eq!(map[1], (text("NextShardIterator"), text("next")));
        assert_eq!(map[2], (text("MillisBehindLatest"), Cbor::Integer(0.into())));
    }

    #[test]
    fn structs_and_timestamps_serialize_as_cbor() {
        let out = encode_reply(&Reply::GetShardIterator(GetShardIteratorOutput { shard_iterator: "it".into() }));
        let value: Cbor = ciborium::from_reader(&out[..]).unwrap();
        assert_eq!(value, Cbor::Map(vec![(text("ShardIterator"), text("it"))]));
        let mut ts = Vec::new();
        ciborium::into_writer(&Timestamp(1500), &mut ts).unwrap();
        assert_eq!(
            ciborium::from_reader::<Cbor, _>(&ts[..]).unwrap(),
            Cbor::Tag(1, Box::new(Cbor::Integer(1500.into())))
        );
        assert_eq!(serde_json::to_string(&Timestamp(1500)).unwrap(), "1.5");
    }

    #[test]
    fn errors_are_cbor_maps_with_type() {
        let value: Cbor = ciborium::from_reader(&encode_error(&ApiError::InvalidArgument("bad".into()))[..]).unwrap();
        assert_eq!(
            value,
            Cbor::Map(vec![(text("__type"), text("InvalidArgumentException")), (text("message"), text("bad"))])
        );
    }
}
