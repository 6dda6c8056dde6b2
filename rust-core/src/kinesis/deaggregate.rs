//! KPL de-aggregation: turns one Kinesis record, which may carry a KPL aggregate, into the user
//! records it holds.
//!
//! This module owns the aggregate format check (magic bytes `F3 89 9A C2`, protobuf body, 16-byte
//! MD5 trailer of the body, key-table indexes) and the numbering of sub-records. A sub-record
//! gets its index in the aggregate as sub-sequence number, its partition key from the aggregate's
//! table, and the parent's sequence number and arrival time. A record without the magic passes
//! through as it is ([`Outcome::NotAggregated`]); a record with the magic that is not a valid
//! aggregate passes through whole too, and [`Outcome::Invalid`] says why, so the engine can count
//! it. As the KCL does, nothing is half-delivered: an aggregate yields all its user records or
//! none. Shards and hash ranges are not this module's business (the KCL's drop of aggregates with
//! sub-records outside the shard's hash range is deliberately not copied).

use md5::{Digest, Md5};
use prost::Message;

use super::kpl_messages::AggregatedRecord;
use super::record::KinesisRecord;

/// The four bytes that open every KPL aggregate.
pub const KPL_MAGIC: [u8; 4] = [0xF3, 0x89, 0x9A, 0xC2];

/// Length of the MD5 trailer that closes every KPL aggregate.
pub const KPL_DIGEST_LEN: usize = 16;

/// The user records of one Kinesis record and what de-aggregation made of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deaggregated {
    pub outcome: Outcome,
    /// The sub-records of a valid aggregate, or else the record itself, unchanged.
    pub records: Vec<KinesisRecord>,
}

/// What de-aggregation made of one Kinesis record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// No KPL magic: a plain record, passed through unchanged.
    NotAggregated,
    /// A valid aggregate of `count` user records (possibly zero).
    Aggregated { count: usize },
    /// Starts with the KPL magic but is not a valid aggregate: passed through whole, unchanged.
    Invalid(InvalidAggregate),
}

/// Why a record that starts with the KPL magic is not a valid aggregate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidAggregate {
    #[error("{len} bytes: shorter than the KPL magic plus the MD5 trailer")]
    TooShort { len: usize },
    #[error("the MD5 trailer does not match the protobuf body")]
    DigestMismatch,
    #[error("the protobuf body does not decode: {0}")]
    Protobuf(#[from] prost::DecodeError),
    #[error("sub-record {sub_record} has partition key index {index}, but the table has {table_len} keys")]
    PartitionKeyIndexOutOfRange {
        sub_record: usize,
        index: u64,
        table_len: usize,
    },
    #[error("sub-record {sub_record} has explicit hash key index {index}, but the table has {table_len} keys")]
    ExplicitHashKeyIndexOutOfRange {
        sub_record: usize,
        index: u64,
        table_len: usize,
    },
}

/// De-aggregates one Kinesis record. See [`deaggregate_into`] to append to an existing batch
/// without the intermediate `Vec`.
pub fn deaggregate(record: KinesisRecord) -> Deaggregated {
    let mut records = Vec::new();
    let outcome = deaggregate_into(record, &mut records);
    Deaggregated { outcome, records }
}

/// De-aggregates one Kinesis record, appending its user records to `out` in aggregate order.
///
/// A record that is passed through is moved, not copied; the sub-records' data is copied once out
/// of the aggregate's bytes.
pub fn deaggregate_into(record: KinesisRecord, out: &mut Vec<KinesisRecord>) -> Outcome {
    if !is_kpl_aggregate(&record.data) {
        out.push(record);
        return Outcome::NotAggregated;
    }
    match decode_aggregate(&record.data) {
        Ok(aggregate) => {
            let count = aggregate.records.len();
            push_user_records(&record, aggregate, out);
            Outcome::Aggregated { count }
        }
        Err(reason) => {
            out.push(record);
            Outcome::Invalid(reason)
        }
    }
}

/// Whether the bytes claim to be a KPL aggregate (they start with the magic).
pub fn is_kpl_aggregate(data: &[u8]) -> bool {
    data.starts_with(&KPL_MAGIC)
}

/// Checks the trailer, decodes the body and checks the key indexes of bytes that start with the
/// magic.
fn decode_aggregate(data: &[u8]) -> Result<AggregatedRecord, InvalidAggregate> {
    let body = verified_body(data)?;
    let aggregate = AggregatedRecord::decode(body)?;
    check_key_indexes(&aggregate)?;
    Ok(aggregate)
}

/// The protobuf body between the magic and the MD5 trailer, if the trailer matches it.
fn verified_body(data: &[u8]) -> Result<&[u8], InvalidAggregate> {
    let len = data.len();
    if len < KPL_MAGIC.len() + KPL_DIGEST_LEN {
        return Err(InvalidAggregate::TooShort { len });
    }
    let (body, digest) = data[KPL_MAGIC.len()..].split_at(len - KPL_MAGIC.len() - KPL_DIGEST_LEN);
    if Md5::digest(body).as_slice() != digest {
        return Err(InvalidAggregate::DigestMismatch);
    }
    Ok(body)
}

/// Every sub-record's key indexes must point into the aggregate's key tables.
fn check_key_indexes(aggregate: &AggregatedRecord) -> Result<(), InvalidAggregate> {
    let pk_len = aggregate.partition_key_table.len();
    let ehk_len = aggregate.explicit_hash_key_table.len();
    for (sub_record, r) in aggregate.records.iter().enumerate() {
        if !index_in(r.partition_key_index, pk_len) {
            return Err(InvalidAggregate::PartitionKeyIndexOutOfRange {
                sub_record,
                index: r.partition_key_index,
                table_len: pk_len,
            });
        }
        if let Some(index) = r.explicit_hash_key_index.filter(|&i| !index_in(i, ehk_len)) {
            return Err(InvalidAggregate::ExplicitHashKeyIndexOutOfRange {
                sub_record,
                index,
                table_len: ehk_len,
            });
        }
    }
    Ok(())
}

fn index_in(index: u64, table_len: usize) -> bool {
    usize::try_from(index).is_ok_and(|i| i < table_len)
}

/// Appends the sub-records of a checked aggregate, numbered by their index in it.
fn push_user_records(
    parent: &KinesisRecord,
    aggregate: AggregatedRecord,
    out: &mut Vec<KinesisRecord>,
) {
    let partition_keys: Vec<String> = aggregate
        .partition_key_table
        .into_iter()
        .map(key_string)
        .collect();
    out.reserve(aggregate.records.len());
    for (sub_sequence, r) in (0u64..).zip(aggregate.records) {
        out.push(KinesisRecord {
            sequence_number: parent.sequence_number.clone(),
            sub_sequence_number: Some(sub_sequence),
            // In range: checked by check_key_indexes.
            partition_key: partition_keys[r.partition_key_index as usize].clone(),
            approximate_arrival_ms: parent.approximate_arrival_ms,
            data: r.data,
        });
    }
}

/// A partition key from the table; a key that is not UTF-8 becomes a lossy string, as in the KCL.
fn key_string(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Encodes user records `(partition key, data)` as one KPL aggregate, sharing equal partition keys
/// in the table. The counterpart of [`deaggregate`], for tests and the benchmark only.
#[cfg(any(test, feature = "test-support"))]
pub fn aggregate<K: AsRef<str>, D: AsRef<[u8]>>(records: &[(K, D)]) -> Vec<u8> {
    use super::kpl_messages::Record;
    let mut message = AggregatedRecord::default();
    for (key, data) in records {
        let key = key.as_ref().as_bytes();
        let index = match message.partition_key_table.iter().position(|k| k == key) {
            Some(i) => i,
            None => {
                message.partition_key_table.push(key.to_vec());
                message.partition_key_table.len() - 1
            }
        };
        message.records.push(Record {
            partition_key_index: index as u64,
            data: data.as_ref().to_vec(),
            ..Record::default()
        });
    }
    seal(&message.encode_to_vec())
}

/// A valid KPL aggregate built to expand without bound: one partition key of `key_len` bytes
/// and `sub_records` empty sub-records that all point at it (4 bytes each on the wire). With a
/// 512 KiB key and 130,000 sub-records it is a 1 MiB Kinesis record that a de-aggregator copying
/// the key into every sub-record would turn into 68 GB. For tests only.
#[cfg(any(test, feature = "test-support"))]
pub fn key_bomb(key_len: usize, sub_records: usize) -> Vec<u8> {
    let mut body = vec![0x0A]; // field 1, the partition key table
    prost::encoding::encode_varint(key_len as u64, &mut body);
    body.resize(body.len() + key_len, b'k');
    for _ in 0..sub_records {
        body.extend_from_slice(&[0x1A, 0x02, 0x08, 0x00]); // field 3: Record { partition_key_index: 0 }
    }
    seal(&body)
}

/// Frames a protobuf body as a KPL aggregate: magic, body, MD5 of the body. For tests only.
#[cfg(any(test, feature = "test-support"))]
pub fn seal(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(KPL_MAGIC.len() + body.len() + KPL_DIGEST_LEN);
    out.extend_from_slice(&KPL_MAGIC);
    out.extend_from_slice(body);
    out.extend_from_slice(&Md5::digest(body));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinesis::kpl_messages::{Record, Tag};

    fn parent(data: Vec<u8>) -> KinesisRecord {
        KinesisRecord {
            sequence_number: "49590338271490256608559692538361571095921575989136588898".into(),
            sub_sequence_number: None,
            partition_key: "aggregate-key".into(),
            approximate_arrival_ms: 1_700_000_000_123,
            data,
        }
    }

    /// Asserts that `input` came back whole and unmoved (same allocation) with `expected`.
    fn assert_passed_through(input: KinesisRecord, expected: Outcome) {
        let before = input.clone();
        let ptr = input.data.as_ptr();
        let out = deaggregate(input);
        assert_eq!(out.outcome, expected);
        assert_eq!(out.records, vec![before]);
        assert_eq!(
            out.records[0].data.as_ptr(),
            ptr,
            "the pass-through copied the data"
        );
    }

    fn invalid(data: Vec<u8>) -> InvalidAggregate {
        match deaggregate(parent(data)).outcome {
            Outcome::Invalid(reason) => reason,
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    fn record(pk: u64, ehk: Option<u64>, data: &[u8]) -> Record {
        Record {
            partition_key_index: pk,
            explicit_hash_key_index: ehk,
            data: data.to_vec(),
            tags: vec![],
        }
    }

    #[test]
    fn a_plain_record_passes_through_unchanged() {
        assert_passed_through(parent(b"{\"hello\":1}".to_vec()), Outcome::NotAggregated);
        assert_passed_through(parent(vec![]), Outcome::NotAggregated);
        assert_passed_through(parent(KPL_MAGIC[..3].to_vec()), Outcome::NotAggregated);
    }

    #[test]
    fn round_trip_keeps_data_keys_and_parent_fields() {
        let input = [
            ("k1", b"one".to_vec()),
            ("k2", vec![]),
            ("k1", vec![0u8, 255, 7]),
        ];
        let out = deaggregate(parent(aggregate(&input)));
        assert_eq!(out.outcome, Outcome::Aggregated { count: 3 });
        let p = parent(vec![]);
        for (i, (r, (key, data))) in out.records.iter().zip(&input).enumerate() {
            assert_eq!(r.partition_key, *key);
            assert_eq!(&r.data, data);
            assert_eq!(r.sub_sequence_number, Some(i as u64));
            assert_eq!(r.sequence_number, p.sequence_number);
            assert_eq!(r.approximate_arrival_ms, p.approximate_arrival_ms);
        }
    }

    #[test]
    fn sub_sequence_numbers_count_from_zero_in_aggregate_order() {
        let input: Vec<(String, Vec<u8>)> = (0..1000)
            .map(|i| (format!("pk{}", i % 7), i.to_string().into_bytes()))
            .collect();
        let out = deaggregate(parent(aggregate(&input)));
        assert_eq!(out.outcome, Outcome::Aggregated { count: 1000 });
        let subs: Vec<_> = out
            .records
            .iter()
            .map(|r| r.sub_sequence_number.unwrap())
            .collect();
        assert_eq!(subs, (0..1000).collect::<Vec<u64>>());
        let sharded: Vec<_> = out
            .records
            .iter()
            .map(KinesisRecord::sharded_sequence_number)
            .collect();
        assert!(
            sharded.windows(2).all(|w| w[0] < w[1]),
            "offset tokens must increase"
        );
        assert!(out
            .records
            .iter()
            .zip(&input)
            .all(|(r, (_, d))| &r.data == d));
    }

    #[test]
    fn a_single_record_aggregate_is_sub_record_zero() {
        let out = deaggregate(parent(aggregate(&[("only", b"x")])));
        assert_eq!(out.outcome, Outcome::Aggregated { count: 1 });
        assert_eq!(out.records.len(), 1);
        assert_eq!(out.records[0].sub_sequence_number, Some(0));
        assert_eq!(out.records[0].partition_key, "only");
    }

    #[test]
    fn partition_keys_are_shared_through_the_table() {
        let bytes = aggregate(&[
            ("a", b"1"),
            ("b", b"2"),
            ("a", b"3"),
            ("c", b"4"),
            ("a", b"5"),
        ]);
        let body = verified_body(&bytes).unwrap();
        let message = AggregatedRecord::decode(body).unwrap();
        assert_eq!(
            message.partition_key_table,
            vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]
        );
        let indexes: Vec<_> = message
            .records
            .iter()
            .map(|r| r.partition_key_index)
            .collect();
        assert_eq!(indexes, vec![0, 1, 0, 2, 0]);
        let keys: Vec<_> = deaggregate(parent(bytes))
            .records
            .into_iter()
            .map(|r| r.partition_key)
            .collect();
        assert_eq!(keys, vec!["a", "b", "a", "c", "a"]);
    }

    #[test]
    fn an_empty_aggregate_yields_no_user_records() {
        let out = deaggregate(parent(aggregate::<&str, &[u8]>(&[])));
        assert_eq!(out.outcome, Outcome::Aggregated { count: 0 });
        assert!(out.records.is_empty());
    }

    #[test]
    fn explicit_hash_keys_and_tags_are_accepted_and_not_delivered() {
        let message = AggregatedRecord {
            partition_key_table: vec![b"pk".to_vec()],
            explicit_hash_key_table: vec![b"340282366920938463463374607431768211455".to_vec()],
            records: vec![
                Record {
                    tags: vec![
                        Tag {
                            key: "t".into(),
                            value: Some("v".into()),
                        },
                        Tag {
                            key: "u".into(),
                            value: None,
                        },
                    ],
                    ..record(0, Some(0), b"tagged")
                },
                record(0, None, b"plain"),
            ],
        };
        let out = deaggregate(parent(seal(&message.encode_to_vec())));
        assert_eq!(out.outcome, Outcome::Aggregated { count: 2 });
        assert_eq!(out.records[0].data, b"tagged");
        assert_eq!(out.records[1].data, b"plain");
    }

    #[test]
    fn a_partition_key_that_is_not_utf8_becomes_lossy() {
        let message = AggregatedRecord {
            partition_key_table: vec![vec![b'k', 0xFF]],
            explicit_hash_key_table: vec![],
            records: vec![record(0, None, b"d")],
        };
        let out = deaggregate(parent(seal(&message.encode_to_vec())));
        assert_eq!(out.outcome, Outcome::Aggregated { count: 1 });
        assert_eq!(out.records[0].partition_key, "k\u{FFFD}");
    }

    #[test]
    fn too_short_passes_through() {
        assert_eq!(
            invalid(KPL_MAGIC.to_vec()),
            InvalidAggregate::TooShort { len: 4 }
        );
        let mut short = KPL_MAGIC.to_vec();
        short.extend_from_slice(&[0; KPL_DIGEST_LEN - 1]);
        assert_passed_through(
            parent(short),
            Outcome::Invalid(InvalidAggregate::TooShort { len: 19 }),
        );
    }

    #[test]
    fn magic_and_trailer_of_an_empty_body_is_an_empty_aggregate() {
        // The smallest valid aggregate: no body bytes at all.
        let out = deaggregate(parent(seal(&[])));
        assert_eq!(out.outcome, Outcome::Aggregated { count: 0 });
    }

    #[test]
    fn a_flipped_body_byte_fails_the_digest() {
        let mut bytes = aggregate(&[("k", b"some data")]);
        bytes[KPL_MAGIC.len() + 3] ^= 0x01;
        assert_passed_through(
            parent(bytes),
            Outcome::Invalid(InvalidAggregate::DigestMismatch),
        );
    }

    #[test]
    fn a_flipped_digest_byte_fails_the_digest() {
        let mut bytes = aggregate(&[("k", b"some data")]);
        *bytes.last_mut().unwrap() ^= 0x80;
        assert_passed_through(
            parent(bytes),
            Outcome::Invalid(InvalidAggregate::DigestMismatch),
        );
    }

    #[test]
    fn a_truncated_aggregate_fails_the_digest() {
        let bytes = aggregate(&[("k", &b"some data"[..]), ("k2", b"more")]);
        assert_eq!(
            invalid(bytes[..bytes.len() - 1].to_vec()),
            InvalidAggregate::DigestMismatch
        );
    }

    #[test]
    fn a_body_that_is_not_protobuf_passes_through() {
        // Field 3, length-delimited, claims 100 bytes that are not there; the MD5 is right.
        let bytes = seal(&[0x1A, 100, 1, 2, 3]);
        let reason = invalid(bytes.clone());
        assert!(
            matches!(reason, InvalidAggregate::Protobuf(_)),
            "{reason:?}"
        );
        assert!(reason
            .to_string()
            .starts_with("the protobuf body does not decode"));
        assert_passed_through(parent(bytes), Outcome::Invalid(reason));
    }

    #[test]
    fn a_partition_key_index_out_of_range_passes_through() {
        let message = AggregatedRecord {
            partition_key_table: vec![b"a".to_vec(), b"b".to_vec()],
            explicit_hash_key_table: vec![],
            records: vec![record(1, None, b"ok"), record(2, None, b"bad")],
        };
        let expected = InvalidAggregate::PartitionKeyIndexOutOfRange {
            sub_record: 1,
            index: 2,
            table_len: 2,
        };
        assert_passed_through(
            parent(seal(&message.encode_to_vec())),
            Outcome::Invalid(expected),
        );
        let huge = AggregatedRecord {
            records: vec![record(u64::MAX, None, b"x")],
            ..message
        };
        assert!(matches!(
            invalid(seal(&huge.encode_to_vec())),
            InvalidAggregate::PartitionKeyIndexOutOfRange {
                index: u64::MAX,
                ..
            }
        ));
    }

    #[test]
    fn an_explicit_hash_key_index_out_of_range_passes_through() {
        let message = AggregatedRecord {
            partition_key_table: vec![b"a".to_vec()],
            explicit_hash_key_table: vec![],
            records: vec![record(0, Some(0), b"x")],
        };
        let expected = InvalidAggregate::ExplicitHashKeyIndexOutOfRange {
            sub_record: 0,
            index: 0,
            table_len: 0,
        };
        assert_passed_through(
            parent(seal(&message.encode_to_vec())),
            Outcome::Invalid(expected),
        );
    }

    #[test]
    fn deaggregate_into_appends_after_what_is_there() {
        let mut batch = vec![parent(b"earlier".to_vec())];
        let outcome = deaggregate_into(parent(aggregate(&[("a", b"1"), ("b", b"2")])), &mut batch);
        assert_eq!(outcome, Outcome::Aggregated { count: 2 });
        assert_eq!(
            deaggregate_into(parent(b"later".to_vec()), &mut batch),
            Outcome::NotAggregated
        );
        let data: Vec<&[u8]> = batch.iter().map(|r| r.data.as_slice()).collect();
        assert_eq!(data, vec![&b"earlier"[..], b"1", b"2", b"later"]);
    }
}
