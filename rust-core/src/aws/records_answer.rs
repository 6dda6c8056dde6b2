//! GetRecords' JSON answer read in one pass: the records, and the rest of the answer for the SDK.
//!
//! The SDK's JSON codec reads a record's `Data` byte by byte to find the closing quote, checks it
//! as UTF-8, copies it into a `String` and only then decodes the base64. Here `serde_json` borrows
//! each string from the body and the base64 is decoded straight from it (the same decoder the SDK
//! uses, `aws_smithy_types::base64`). Every field is read as the SDK reads it: the arrival time
//! from its number text (with a fraction or exponent through `from_secs_f64`, else whole seconds),
//! the encryption type through the SDK's own enum.
//!
//! [`split`] returns the records and the answer without them (`"Records":[]` and the other
//! members this SDK version models, `NextShardIterator`, `MillisBehindLatest` and `ChildShards`,
//! copied as they came), so the SDK still reads those itself. Pure: no I/O.

use std::borrow::Cow;

use aws_sdk_kinesis::types::{EncryptionType, Record};
use aws_smithy_types::{Blob, DateTime};
use serde::Deserialize;
use serde_json::value::RawValue;

/// The answer's records, and the answer without them.
#[derive(Debug)]
pub struct Split {
    pub records: Vec<Record>,
    /// The answer as JSON with an empty `Records` list, for the SDK to read the rest.
    pub remainder: Vec<u8>,
}

/// Why an answer was not split (it then goes to the SDK whole, which reports what is wrong).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SplitError {
    #[error("not a GetRecords answer: {0}")]
    Json(String),
    #[error("record {index}: {problem}")]
    Record { index: usize, problem: String },
}

#[derive(Deserialize)]
struct Answer<'a> {
    #[serde(rename = "Records", borrow, default)]
    records: Vec<WireRecord<'a>>,
    #[serde(rename = "NextShardIterator", borrow)]
    next_shard_iterator: Option<&'a RawValue>,
    #[serde(rename = "MillisBehindLatest", borrow)]
    millis_behind_latest: Option<&'a RawValue>,
    #[serde(rename = "ChildShards", borrow)]
    child_shards: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct WireRecord<'a> {
    #[serde(rename = "SequenceNumber", borrow)]
    sequence_number: Cow<'a, str>,
    #[serde(rename = "ApproximateArrivalTimestamp", borrow)]
    approximate_arrival_timestamp: Option<&'a RawValue>,
    #[serde(rename = "Data", borrow)]
    data: Cow<'a, str>,
    #[serde(rename = "PartitionKey", borrow)]
    partition_key: Option<Cow<'a, str>>,
    #[serde(rename = "EncryptionType", borrow)]
    encryption_type: Option<Cow<'a, str>>,
}

/// Splits a GetRecords answer (HTTP 200's body) into its records and the rest.
pub fn split(body: &[u8]) -> Result<Split, SplitError> {
    let answer: Answer<'_> = serde_json::from_slice(body).map_err(|e| SplitError::Json(e.to_string()))?;
    let records = answer
        .records
        .into_iter()
        .enumerate()
        .map(|(index, r)| record(r).map_err(|problem| SplitError::Record { index, problem }))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Split {
        records,
        remainder: remainder(&answer.next_shard_iterator, &answer.millis_behind_latest, &answer.child_shards),
    })
}

fn record(wire: WireRecord<'_>) -> Result<Record, String> {
    let data =
        aws_smithy_types::base64::decode(wire.data.as_ref() as &str).map_err(|e| format!("invalid base64: {e}"))?;
    let arrival = match wire.approximate_arrival_timestamp {
        None => None,
        Some(raw) if raw.get() == "null" => None,
        Some(raw) => Some(epoch_seconds(raw.get())?),
    };
    Record::builder()
        .sequence_number(wire.sequence_number.into_owned())
        .set_approximate_arrival_timestamp(arrival)
        .data(Blob::new(data))
        .set_partition_key(wire.partition_key.map(Cow::into_owned))
        .set_encryption_type(wire.encryption_type.map(|e| EncryptionType::from(e.as_ref())))
        .build()
        .map_err(|e| e.to_string())
}

/// An epoch-seconds timestamp from its JSON number text, as the SDK's codec reads it.
fn epoch_seconds(text: &str) -> Result<DateTime, String> {
    let invalid = || format!("invalid arrival timestamp {text}");
    if text.contains(['.', 'e', 'E']) {
        let f: f64 = text.parse().map_err(|_| invalid())?;
        if !f.is_finite() || !(i64::MIN as f64..i64::MAX as f64).contains(&f) {
            return Err(invalid());
        }
        Ok(DateTime::from_secs_f64(f))
    } else {
        text.parse::<i64>().map(DateTime::from_secs).map_err(|_| invalid())
    }
}

/// The answer's other members as they came, after an empty `Records` list.
fn remainder(next: &Option<&RawValue>, behind: &Option<&RawValue>, children: &Option<&RawValue>) -> Vec<u8> {
    let mut out = String::from(r#"{"Records":[]"#);
    for (name, value) in [("NextShardIterator", next), ("MillisBehindLatest", behind), ("ChildShards", children)] {
        if let Some(raw) = value {
            out.push_str(",\"");
            out.push_str(name);
            out.push_str("\":");
            out.push_str(raw.get());
        }
    }
    out.push('}');
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANSWER: &str = r#"{
        "Records": [
            {"SequenceNumber": "49590338271490256608559692538361571095921575989136588898",
             "ApproximateArrivalTimestamp": 1.700000000123E9, "Data": "aGVsbG8=", "PartitionKey": "p\u00e9",
             "EncryptionType": "KMS"},
            {"SequenceNumber": "2", "ApproximateArrivalTimestamp": 1700000001, "Data": "YT\/\/+\/8=", "PartitionKey": "k"},
            {"SequenceNumber": "3", "ApproximateArrivalTimestamp": null, "Data": ""}
        ],
        "NextShardIterator": "AAA\/BBB", "MillisBehindLatest": 1234,
        "ChildShards": [{"ShardId": "shardId-000000000002", "ParentShards": ["shardId-000000000000"],
                         "HashKeyRange": {"StartingHashKey": "0", "EndingHashKey": "9"}}]
    }"#;

    #[test]
    fn records_are_read_as_the_sdk_reads_them() {
        let answer = split(ANSWER.as_bytes()).unwrap();
        let r = &answer.records;
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].sequence_number(), "49590338271490256608559692538361571095921575989136588898");
        assert_eq!(r[0].data().as_ref(), b"hello");
        assert_eq!(r[0].partition_key(), Some("pé"));
        assert_eq!(r[0].encryption_type(), Some(&EncryptionType::Kms));
        assert_eq!(r[0].approximate_arrival_timestamp(), Some(&DateTime::from_secs_f64(1.700000000123E9)));
        assert_eq!(r[1].data().as_ref(), b"a?\xff\xfb\xff", "an escaped slash in the base64 is read as a slash");
        assert_eq!(r[1].approximate_arrival_timestamp(), Some(&DateTime::from_secs(1_700_000_001)));
        assert_eq!(r[1].encryption_type(), None);
        assert_eq!(r[2].approximate_arrival_timestamp(), None);
        assert_eq!(r[2].partition_key(), None);
        assert!(r[2].data().as_ref().is_empty());
    }

    #[test]
    fn the_remainder_keeps_every_other_member_as_it_came() {
        let answer = split(ANSWER.as_bytes()).unwrap();
        let rest: serde_json::Value = serde_json::from_slice(&answer.remainder).unwrap();
        let whole: serde_json::Value = serde_json::from_str(ANSWER).unwrap();
        assert_eq!(rest["Records"], serde_json::json!([]));
        for member in ["NextShardIterator", "MillisBehindLatest", "ChildShards"] {
            assert_eq!(rest[member], whole[member], "{member}");
        }
        let end = split(br#"{"Records":[],"MillisBehindLatest":0}"#).unwrap();
        assert_eq!(end.remainder, br#"{"Records":[],"MillisBehindLatest":0}"#, "a shard's end has no iterator");
    }

    #[test]
    fn what_is_not_a_valid_answer_is_refused_whole() {
        assert!(matches!(split(b"{\"Records\": [").unwrap_err(), SplitError::Json(_)));
        assert!(matches!(split(b"[]").unwrap_err(), SplitError::Json(_)));
        let bad = br#"{"Records":[{"SequenceNumber":"1","Data":"!!!"}]}"#;
        assert!(matches!(split(bad).unwrap_err(), SplitError::Record { index: 0, .. }));
        let no_sequence = br#"{"Records":[{"Data":"YQ=="}]}"#;
        assert!(matches!(split(no_sequence).unwrap_err(), SplitError::Json(_)));
        let bad_time = br#"{"Records":[{"SequenceNumber":"1","Data":"YQ==","ApproximateArrivalTimestamp":1e400}]}"#;
        assert!(matches!(split(bad_time).unwrap_err(), SplitError::Record { index: 0, .. }));
    }
}
