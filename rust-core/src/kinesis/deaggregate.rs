//! KPL de-aggregation: turns one Kinesis record, which may carry a KPL aggregate, into the user
//! records it holds, within a bound on what it expands to.
//!
//! This module owns the aggregate format check (magic bytes `F3 89 9A C2`, protobuf body, 16-byte
//! MD5 trailer of the body, key-table indexes), the numbering of sub-records and the expansion
//! bound. A sub-record gets its index in the aggregate as sub-sequence number, its partition key
//! from the aggregate's table (shared, not copied: one `Arc<str>` per key), and the parent's
//! sequence number and arrival time. A record without the magic passes through as it is
//! ([`Outcome::NotAggregated`]); a record with the magic that is not a valid aggregate passes
//! through whole too, and [`Outcome::Invalid`] says why, so the engine can warn about it. As the
//! KCL does, nothing is half-delivered: an aggregate yields all its user records or none. Shards
//! and hash ranges are not this module's business (the KCL's drop of aggregates with sub-records
//! outside the shard's hash range is deliberately not copied).
//!
//! ## The expansion bound
//!
//! A small aggregate can describe a huge expansion: one 1 MiB record with a 512 KiB key in its
//! table and 130,000 empty sub-records that all point at it. Shared keys keep the engine's own
//! copy small, but every FlowFile downstream carries its record's key as an attribute, and the
//! memory budget charges each record its key ([`record_cost`]), so the expansion is what the
//! sub-records would cost: the sum of their [`record_cost`]s, plus what expanding needs besides
//! them ([`KEY_SLOT_BYTES`] a key of the table, [`SUB_RECORD_SLOT_BYTES`] a sub-record). It is
//! counted before anything is materialised ([`plan`] reads the body in place,
//! [`super::kpl_view`]): first the entries are only counted, which bounds the expansion from below
//! without allocating anything, then the key table and the sub-records are indexed (at most 8
//! bytes a key and 12 a sub-record, within the bound) and the exact expansion is summed. An
//! aggregate that would cost more than its bound ([`expansion_bound`]) passes through whole, as
//! one record, with [`Outcome::Oversized`] saying why. It is never dropped. The engine reserves
//! [`Planned::cost`] of its budget before it calls [`Planned::expand`].
//!
//! The bound is proportional to the aggregate's own size: [`EXPANSION_FACTOR`] (16) times its
//! bytes, and never less than [`MAX_EXPANSION_BYTES`] (16 MiB, the bound of a 1 MiB aggregate), so
//! 160 MiB for the largest, 10 MiB, that a stream's maximum record size (`MaxRecordSizeInKiB`,
//! 1024 to 10240) allows. Real aggregates stay well inside it: Kinesis allows keys of at most 256
//! bytes, and the KPL writes 50 KiB per aggregate by default. A sub-record takes at least 6 bytes
//! of the body plus its data `d`, and costs `d` + key + sequence number (56 digits) + 144, at most
//! `d` + 456: at most 16 times its 6 + `d` bytes whenever `d` is 24 bytes or more (12 bytes with
//! keys of up to 64 bytes). So an aggregate of 1 MiB or more whose user records average 24 bytes
//! or more stays inside its bound whatever its size, a full 10 MiB one included, and an aggregate
//! of the KPL's default size always does (at most about 3.9 MB, within 16 MiB). A hostile
//! aggregate gains nothing from being small (its bound is then still 16 MiB) and at most 16 times
//! its own bytes from being large. Decoding never
//! builds prost's owned messages, whose size grows with the number of entries (72 bytes for a
//! 2-byte empty `Record`), not with the bytes of the aggregate.

use std::ops::Range;
use std::sync::Arc;

use super::kpl_view::{entries, Entry, RecordView};
use super::record::{record_cost, KinesisRecord};

/// The four bytes that open every KPL aggregate.
pub const KPL_MAGIC: [u8; 4] = [0xF3, 0x89, 0x9A, 0xC2];

/// Length of the MD5 trailer that closes every KPL aggregate.
pub const KPL_DIGEST_LEN: usize = 16;

/// The bound of an aggregate of at most 1 MiB, and the least bound of any ([`expansion_bound`]).
/// See the module documentation for why 16 MiB.
pub const MAX_EXPANSION_BYTES: u64 = 16 * 1024 * 1024;

/// An aggregate larger than 1 MiB may expand to this many times its own bytes.
pub const EXPANSION_FACTOR: u64 = 16;

/// The most an aggregate of `len` bytes may expand to, in budget bytes; beyond it the aggregate
/// passes through whole: [`EXPANSION_FACTOR`] times `len`, at least [`MAX_EXPANSION_BYTES`].
pub fn expansion_bound(len: usize) -> u64 {
    (len as u64).saturating_mul(EXPANSION_FACTOR).max(MAX_EXPANSION_BYTES)
}

/// What each entry of the partition key table costs while its aggregate is expanded: its place in
/// the table's index (8 bytes) and its shared key (16 bytes), plus the allocator's share.
pub const KEY_SLOT_BYTES: u64 = 32;

/// What each sub-record costs while its aggregate is expanded, besides its own record cost: its
/// place in the aggregate's index (12 bytes: key index and data range), plus the allocator's share.
pub const SUB_RECORD_SLOT_BYTES: u64 = 16;

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
    /// An aggregate that would expand beyond its [`expansion_bound`]: passed through whole,
    /// unchanged.
    Oversized(Oversized),
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
    PartitionKeyIndexOutOfRange { sub_record: usize, index: u64, table_len: usize },
    #[error("sub-record {sub_record} has explicit hash key index {index}, but the table has {table_len} keys")]
    ExplicitHashKeyIndexOutOfRange { sub_record: usize, index: u64, table_len: usize },
}

/// An aggregate whose expansion exceeds its [`expansion_bound`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "its {sub_records} sub-records and {keys} partition key(s) would expand to at least {at_least} bytes \
     (each sub-record counts its data, partition key, sequence number and 128 bytes), more than the {max} bytes allowed \
     for an aggregate of its size"
)]
pub struct Oversized {
    pub sub_records: usize,
    pub keys: usize,
    /// The expansion counted when the count passed the bound (counting stops there).
    pub at_least: u64,
    /// The aggregate's bound ([`expansion_bound`] of its length).
    pub max: u64,
}

/// De-aggregates one Kinesis record. See [`plan`] to learn the cost first, and
/// [`deaggregate_into`] to append to an existing batch.
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
    plan(record).expand_into(out)
}

/// One Kinesis record checked and counted, nothing of it materialised yet: what it will yield and
/// what that costs of the memory budget.
#[derive(Debug)]
pub struct Planned {
    record: KinesisRecord,
    plan: Plan,
}

#[derive(Debug)]
enum Plan {
    /// Passed through as it is.
    Whole(Outcome),
    /// A checked aggregate: its partition key table and its sub-records, as ranges of its body.
    Expand { keys: Vec<Range<u32>>, records: Vec<SubRecord>, cost: u64 },
}

/// Checks one Kinesis record and counts what it expands to, without materialising anything.
pub fn plan(record: KinesisRecord) -> Planned {
    if !is_kpl_aggregate(&record.data) {
        return Planned { record, plan: Plan::Whole(Outcome::NotAggregated) };
    }
    let plan = count_aggregate(&record.data, record.sequence_number.len()).unwrap_or_else(Plan::Whole);
    Planned { record, plan }
}

impl Planned {
    /// What [`Planned::expand_into`] will report.
    pub fn outcome(&self) -> Outcome {
        match &self.plan {
            Plan::Whole(outcome) => outcome.clone(),
            Plan::Expand { records, .. } => Outcome::Aggregated { count: records.len() },
        }
    }

    /// Budget bytes to reserve before expanding: the [`KinesisRecord::cost`] of every record
    /// [`Planned::expand`] yields, plus what expanding an aggregate needs meanwhile
    /// ([`KEY_SLOT_BYTES`] a key, [`SUB_RECORD_SLOT_BYTES`] a sub-record).
    pub fn cost(&self) -> u64 {
        match &self.plan {
            Plan::Whole(_) => self.record.cost(),
            Plan::Expand { cost, .. } => *cost,
        }
    }

    /// The Kinesis record's sequence number.
    pub fn sequence_number(&self) -> &str {
        &self.record.sequence_number
    }

    /// How many records [`Planned::expand`] yields.
    pub fn len(&self) -> usize {
        match &self.plan {
            Plan::Whole(_) => 1,
            Plan::Expand { records, .. } => records.len(),
        }
    }

    /// Whether it yields no records (an empty aggregate).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Materialises the user records, appending them to `out` in aggregate order.
    pub fn expand_into(self, out: &mut Vec<KinesisRecord>) -> Outcome {
        out.reserve(self.len());
        self.expand(|record| out.push(record))
    }

    /// Materialises the user records one by one, in aggregate order, into `sink`.
    pub fn expand(self, sink: impl FnMut(KinesisRecord)) -> Outcome {
        let Planned { record, plan } = self;
        match plan {
            Plan::Whole(outcome) => {
                let mut sink = sink;
                sink(record);
                outcome
            }
            Plan::Expand { keys, records, .. } => {
                push_user_records(&record, &keys, &records, sink);
                Outcome::Aggregated { count: records.len() }
            }
        }
    }
}

/// Whether the bytes claim to be a KPL aggregate (they start with the magic).
pub fn is_kpl_aggregate(data: &[u8]) -> bool {
    data.starts_with(&KPL_MAGIC)
}

/// Checks the trailer, walks the body and counts the expansion of bytes that start with the magic.
fn count_aggregate(data: &[u8], sequence_len: usize) -> Result<Plan, Outcome> {
    let body = verified_body(data).map_err(Outcome::Invalid)?;
    let census = Census::of(body).map_err(Outcome::Invalid)?;
    let max = expansion_bound(data.len());
    let oversized =
        |at_least| Outcome::Oversized(Oversized { sub_records: census.records, keys: census.keys, at_least, max });
    // The least the sub-records can cost (no data, no key), known before anything is allocated.
    let floor = census.records as u64 * (record_cost(0, sequence_len, 0) + SUB_RECORD_SLOT_BYTES)
        + census.keys as u64 * KEY_SLOT_BYTES;
    if floor > max || u32::try_from(body.len()).is_err() {
        return Err(oversized(floor));
    }
    let (keys, records) = index(body, &census).map_err(Outcome::Invalid)?;
    let mut cost = census.keys as u64 * KEY_SLOT_BYTES;
    for r in &records {
        let key = &keys[r.key as usize]; // in range: checked by index
        cost += record_cost(r.data.len(), sequence_len, key.len()) + SUB_RECORD_SLOT_BYTES;
        if cost > max {
            return Err(oversized(cost));
        }
    }
    Ok(Plan::Expand { keys, records, cost })
}

/// How many entries of each kind a body holds (and that its top level decodes).
struct Census {
    keys: usize,
    hash_keys: usize,
    records: usize,
}

impl Census {
    fn of(body: &[u8]) -> Result<Self, InvalidAggregate> {
        let mut census = Census { keys: 0, hash_keys: 0, records: 0 };
        for entry in entries(body) {
            match entry? {
                Entry::PartitionKey(_) => census.keys += 1,
                Entry::ExplicitHashKey(_) => census.hash_keys += 1,
                Entry::Record(_) => census.records += 1,
            }
        }
        Ok(census)
    }
}

/// Where a sub-record's parts are: its partition key's index in the table, its data in the body.
#[derive(Debug)]
struct SubRecord {
    key: u32,
    data: Range<u32>,
}

/// The partition key table and the sub-records of a body whose top level decodes (the census
/// walked it), as ranges of the body, each sub-record's key indexes checked against the tables.
/// The body is shorter than 4 GiB, so its offsets fit in `u32`.
fn index(body: &[u8], census: &Census) -> Result<(Vec<Range<u32>>, Vec<SubRecord>), InvalidAggregate> {
    // A missing field reads as an empty slice that need not point into the body.
    let range = |part: &[u8]| {
        if part.is_empty() {
            return 0..0;
        }
        let start = (part.as_ptr() as usize - body.as_ptr() as usize) as u32;
        start..start + part.len() as u32
    };
    let mut keys = Vec::with_capacity(census.keys);
    let mut records = Vec::with_capacity(census.records);
    for entry in entries(body).flatten() {
        match entry {
            Entry::PartitionKey(key) => keys.push(range(key)),
            Entry::ExplicitHashKey(_) => {}
            Entry::Record(bytes) => {
                let sub_record = records.len();
                let r = RecordView::parse(bytes)?;
                if !index_in(r.partition_key_index, census.keys) {
                    return Err(InvalidAggregate::PartitionKeyIndexOutOfRange {
                        sub_record,
                        index: r.partition_key_index,
                        table_len: census.keys,
                    });
                }
                if let Some(index) = r.explicit_hash_key_index.filter(|&i| !index_in(i, census.hash_keys)) {
                    return Err(InvalidAggregate::ExplicitHashKeyIndexOutOfRange {
                        sub_record,
                        index,
                        table_len: census.hash_keys,
                    });
                }
                records.push(SubRecord { key: r.partition_key_index as u32, data: range(r.data) });
            }
        }
    }
    Ok((keys, records))
}

/// The protobuf body between the magic and the MD5 trailer, if the trailer matches it.
fn verified_body(data: &[u8]) -> Result<&[u8], InvalidAggregate> {
    let len = data.len();
    if len < KPL_MAGIC.len() + KPL_DIGEST_LEN {
        return Err(InvalidAggregate::TooShort { len });
    }
    let (body, digest) = data[KPL_MAGIC.len()..].split_at(len - KPL_MAGIC.len() - KPL_DIGEST_LEN);
    if super::digest::md5(body).as_slice() != digest {
        return Err(InvalidAggregate::DigestMismatch);
    }
    Ok(body)
}

fn index_in(index: u64, table_len: usize) -> bool {
    usize::try_from(index).is_ok_and(|i| i < table_len)
}

/// Hands over the sub-records of a counted aggregate, numbered by their index in it. Each key of
/// the table becomes one shared string, the first time a sub-record uses it.
fn push_user_records(
    parent: &KinesisRecord,
    keys: &[Range<u32>],
    records: &[SubRecord],
    mut sink: impl FnMut(KinesisRecord),
) {
    let body = &parent.data[KPL_MAGIC.len()..parent.data.len() - KPL_DIGEST_LEN];
    let part = |range: &Range<u32>| &body[range.start as usize..range.end as usize];
    let mut shared: Vec<Option<Arc<str>>> = vec![None; keys.len()];
    for (sub_record, r) in (0u64..).zip(records) {
        let key = r.key as usize;
        let key = shared[key].get_or_insert_with(|| key_string(part(&keys[key]))).clone();
        sink(KinesisRecord {
            sequence_number: parent.sequence_number.clone(),
            sub_sequence_number: Some(sub_record),
            partition_key: key,
            approximate_arrival_ms: parent.approximate_arrival_ms,
            data: part(&r.data).to_vec(),
        });
    }
}

/// A partition key from the table; a key that is not UTF-8 becomes a lossy string, as in the KCL.
fn key_string(bytes: &[u8]) -> Arc<str> {
    Arc::from(String::from_utf8_lossy(bytes))
}

/// Encodes user records `(partition key, data)` as one KPL aggregate, sharing equal partition keys
/// in the table. The counterpart of [`deaggregate`], for tests and the benchmark only.
#[cfg(any(test, feature = "test-support"))]
pub fn aggregate<K: AsRef<str>, D: AsRef<[u8]>>(records: &[(K, D)]) -> Vec<u8> {
    use super::kpl_messages::{AggregatedRecord, Record};
    use prost::Message;
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
    out.extend_from_slice(&super::digest::md5(body));
    out
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;
    use crate::kinesis::kpl_messages::{AggregatedRecord, Record, Tag};

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
        assert_eq!(out.records[0].data.as_ptr(), ptr, "the pass-through copied the data");
    }

    fn invalid(data: Vec<u8>) -> InvalidAggregate {
        match deaggregate(parent(data)).outcome {
            Outcome::Invalid(reason) => reason,
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    fn record(pk: u64, ehk: Option<u64>, data: &[u8]) -> Record {
        Record { partition_key_index: pk, explicit_hash_key_index: ehk, data: data.to_vec(), tags: vec![] }
    }

    #[test]
    fn a_plain_record_passes_through_unchanged() {
        assert_passed_through(parent(b"{\"hello\":1}".to_vec()), Outcome::NotAggregated);
        assert_passed_through(parent(vec![]), Outcome::NotAggregated);
        assert_passed_through(parent(KPL_MAGIC[..3].to_vec()), Outcome::NotAggregated);
    }

    #[test]
    fn round_trip_keeps_data_keys_and_parent_fields() {
        let input = [("k1", b"one".to_vec()), ("k2", vec![]), ("k1", vec![0u8, 255, 7])];
        let out = deaggregate(parent(aggregate(&input)));
        assert_eq!(out.outcome, Outcome::Aggregated { count: 3 });
        let p = parent(vec![]);
        for (i, (r, (key, data))) in out.records.iter().zip(&input).enumerate() {
            assert_eq!(&*r.partition_key, *key);
            assert_eq!(&r.data, data);
            assert_eq!(r.sub_sequence_number, Some(i as u64));
            assert_eq!(r.sequence_number, p.sequence_number);
            assert_eq!(r.approximate_arrival_ms, p.approximate_arrival_ms);
        }
    }

    #[test]
    fn sub_sequence_numbers_count_from_zero_in_aggregate_order() {
        let input: Vec<(String, Vec<u8>)> =
            (0..1000).map(|i| (format!("pk{}", i % 7), i.to_string().into_bytes())).collect();
        let out = deaggregate(parent(aggregate(&input)));
        assert_eq!(out.outcome, Outcome::Aggregated { count: 1000 });
        let subs: Vec<_> = out.records.iter().map(|r| r.sub_sequence_number.unwrap()).collect();
        assert_eq!(subs, (0..1000).collect::<Vec<u64>>());
        let sharded: Vec<_> = out.records.iter().map(KinesisRecord::sharded_sequence_number).collect();
        assert!(sharded.windows(2).all(|w| w[0] < w[1]), "offset tokens must increase");
        assert!(out.records.iter().zip(&input).all(|(r, (_, d))| &r.data == d));
    }

    #[test]
    fn a_single_record_aggregate_is_sub_record_zero() {
        let out = deaggregate(parent(aggregate(&[("only", b"x")])));
        assert_eq!(out.outcome, Outcome::Aggregated { count: 1 });
        assert_eq!(out.records.len(), 1);
        assert_eq!(out.records[0].sub_sequence_number, Some(0));
        assert_eq!(&*out.records[0].partition_key, "only");
    }

    #[test]
    fn partition_keys_are_shared_through_the_table() {
        let bytes = aggregate(&[("a", b"1"), ("b", b"2"), ("a", b"3"), ("c", b"4"), ("a", b"5")]);
        let body = verified_body(&bytes).unwrap();
        let message = AggregatedRecord::decode(body).unwrap();
        assert_eq!(message.partition_key_table, vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
        let indexes: Vec<_> = message.records.iter().map(|r| r.partition_key_index).collect();
        assert_eq!(indexes, vec![0, 1, 0, 2, 0]);
        let records = deaggregate(parent(bytes)).records;
        let keys: Vec<&str> = records.iter().map(|r| &*r.partition_key).collect();
        assert_eq!(keys, vec!["a", "b", "a", "c", "a"]);
        assert!(Arc::ptr_eq(&records[0].partition_key, &records[2].partition_key), "one key, shared, not copied");
        assert!(Arc::ptr_eq(&records[0].partition_key, &records[4].partition_key));
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
                    tags: vec![Tag { key: "t".into(), value: Some("v".into()) }, Tag { key: "u".into(), value: None }],
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
        assert_eq!(&*out.records[0].partition_key, "k\u{FFFD}");
    }

    #[test]
    fn too_short_passes_through() {
        assert_eq!(invalid(KPL_MAGIC.to_vec()), InvalidAggregate::TooShort { len: 4 });
        let mut short = KPL_MAGIC.to_vec();
        short.extend_from_slice(&[0; KPL_DIGEST_LEN - 1]);
        assert_passed_through(parent(short), Outcome::Invalid(InvalidAggregate::TooShort { len: 19 }));
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
        assert_passed_through(parent(bytes), Outcome::Invalid(InvalidAggregate::DigestMismatch));
    }

    #[test]
    fn a_flipped_digest_byte_fails_the_digest() {
        let mut bytes = aggregate(&[("k", b"some data")]);
        *bytes.last_mut().unwrap() ^= 0x80;
        assert_passed_through(parent(bytes), Outcome::Invalid(InvalidAggregate::DigestMismatch));
    }

    #[test]
    fn a_truncated_aggregate_fails_the_digest() {
        let bytes = aggregate(&[("k", &b"some data"[..]), ("k2", b"more")]);
        assert_eq!(invalid(bytes[..bytes.len() - 1].to_vec()), InvalidAggregate::DigestMismatch);
    }

    #[test]
    fn a_body_that_is_not_protobuf_passes_through() {
        // Field 3, length-delimited, claims 100 bytes that are not there; the MD5 is right.
        let bytes = seal(&[0x1A, 100, 1, 2, 3]);
        let reason = invalid(bytes.clone());
        assert!(matches!(reason, InvalidAggregate::Protobuf(_)), "{reason:?}");
        assert!(reason.to_string().starts_with("the protobuf body does not decode"));
        assert_passed_through(parent(bytes), Outcome::Invalid(reason));
    }

    #[test]
    fn a_partition_key_index_out_of_range_passes_through() {
        let message = AggregatedRecord {
            partition_key_table: vec![b"a".to_vec(), b"b".to_vec()],
            explicit_hash_key_table: vec![],
            records: vec![record(1, None, b"ok"), record(2, None, b"bad")],
        };
        let expected = InvalidAggregate::PartitionKeyIndexOutOfRange { sub_record: 1, index: 2, table_len: 2 };
        assert_passed_through(parent(seal(&message.encode_to_vec())), Outcome::Invalid(expected));
        let huge = AggregatedRecord { records: vec![record(u64::MAX, None, b"x")], ..message };
        assert!(matches!(
            invalid(seal(&huge.encode_to_vec())),
            InvalidAggregate::PartitionKeyIndexOutOfRange { index: u64::MAX, .. }
        ));
    }

    #[test]
    fn an_explicit_hash_key_index_out_of_range_passes_through() {
        let message = AggregatedRecord {
            partition_key_table: vec![b"a".to_vec()],
            explicit_hash_key_table: vec![],
            records: vec![record(0, Some(0), b"x")],
        };
        let expected = InvalidAggregate::ExplicitHashKeyIndexOutOfRange { sub_record: 0, index: 0, table_len: 0 };
        assert_passed_through(parent(seal(&message.encode_to_vec())), Outcome::Invalid(expected));
    }

    #[test]
    fn deaggregate_into_appends_after_what_is_there() {
        let mut batch = vec![parent(b"earlier".to_vec())];
        let outcome = deaggregate_into(parent(aggregate(&[("a", b"1"), ("b", b"2")])), &mut batch);
        assert_eq!(outcome, Outcome::Aggregated { count: 2 });
        assert_eq!(deaggregate_into(parent(b"later".to_vec()), &mut batch), Outcome::NotAggregated);
        let data: Vec<&[u8]> = batch.iter().map(|r| r.data.as_slice()).collect();
        assert_eq!(data, vec![&b"earlier"[..], b"1", b"2", b"later"]);
    }

    #[test]
    fn the_key_bomb_passes_through_whole_as_oversized_before_anything_is_counted_per_record() {
        let bomb = key_bomb(512 * 1024, 130_000);
        let planned = plan(parent(bomb.clone()));
        let floor = 130_000 * (record_cost(0, 56, 0) + SUB_RECORD_SLOT_BYTES) + KEY_SLOT_BYTES;
        assert_eq!(
            planned.outcome(),
            Outcome::Oversized(Oversized { sub_records: 130_000, keys: 1, at_least: floor, max: MAX_EXPANSION_BYTES })
        );
        assert_eq!(planned.cost(), parent(bomb.clone()).cost(), "it costs what the record itself costs");
        assert_passed_through(
            parent(bomb),
            Outcome::Oversized(Oversized { sub_records: 130_000, keys: 1, at_least: floor, max: MAX_EXPANSION_BYTES }),
        );
        let reason = planned.outcome();
        let Outcome::Oversized(reason) = reason else { unreachable!() };
        assert!(reason.to_string().contains("130000 sub-records"), "{reason}");
    }

    #[test]
    fn the_expansion_bound_is_exact() {
        // Sub-records with no data and a 200-byte key cost 56 + 200 + 128 + 16 = 400 bytes each;
        // the table's one key costs KEY_SLOT_BYTES.
        let key = "k".repeat(200);
        let each = record_cost(0, 56, 200) + SUB_RECORD_SLOT_BYTES;
        let fits = ((MAX_EXPANSION_BYTES - KEY_SLOT_BYTES) / each) as usize;
        let users = |n: usize| vec![(key.as_str(), &b""[..]); n];
        let at_bound = plan(parent(aggregate(&users(fits))));
        assert_eq!(at_bound.outcome(), Outcome::Aggregated { count: fits });
        assert_eq!(at_bound.cost(), fits as u64 * each + KEY_SLOT_BYTES);
        assert!(at_bound.cost() <= MAX_EXPANSION_BYTES);
        let over = fits + 1;
        assert_passed_through(
            parent(aggregate(&users(over))),
            Outcome::Oversized(Oversized {
                sub_records: over,
                keys: 1,
                at_least: over as u64 * each + KEY_SLOT_BYTES,
                max: MAX_EXPANSION_BYTES,
            }),
        );
    }

    /// Issue 38: a Kinesis record may now be up to 10 MiB, and so may a KPL aggregate. A full one of
    /// 24-byte user records with 256-byte keys (the ratio the module doc keeps inside the bound)
    /// expands to about 160 MiB of budget bytes: it is de-aggregated, not passed through whole.
    #[test]
    fn a_full_10_mib_aggregate_of_small_records_is_de_aggregated() {
        let key = "k".repeat(256);
        let data = [7u8; 24];
        // 30 bytes of body per sub-record: tag, length, the key index field (2) and the data field (2 + 24).
        let n = (10 * 1024 * 1024 - 300) / 30;
        let users = vec![(key.as_str(), &data[..]); n];
        let bytes = aggregate(&users);
        assert!(bytes.len() <= 10 * 1024 * 1024 && bytes.len() > 10 * 1024 * 1024 - 400, "{} bytes", bytes.len());
        let planned = plan(parent(bytes));
        assert_eq!(planned.outcome(), Outcome::Aggregated { count: n });
        assert_eq!(planned.cost(), n as u64 * (record_cost(24, 56, 256) + SUB_RECORD_SLOT_BYTES) + KEY_SLOT_BYTES);
        assert!(planned.cost() > 150 * 1024 * 1024, "far beyond the 16 MiB of a 1 MiB aggregate: {}", planned.cost());
        let mut out = Vec::new();
        assert_eq!(planned.expand_into(&mut out), Outcome::Aggregated { count: n });
        assert_eq!(out.len(), n);
        assert!(out.iter().all(|r| r.data == data && *r.partition_key == *key));
    }

    #[test]
    fn the_bound_is_16_times_the_aggregate_and_never_less_than_16_mib() {
        const MIB: usize = 1024 * 1024;
        assert_eq!(expansion_bound(0), MAX_EXPANSION_BYTES);
        assert_eq!(expansion_bound(50 * 1024), MAX_EXPANSION_BYTES, "the KPL's default size");
        assert_eq!(expansion_bound(MIB), MAX_EXPANSION_BYTES, "a 1 MiB aggregate: 16 MiB, as before");
        assert_eq!(expansion_bound(MIB + 1), MAX_EXPANSION_BYTES + EXPANSION_FACTOR);
        assert_eq!(expansion_bound(10 * MIB), 160 * MIB as u64, "the largest record a stream allows");
        assert_eq!(expansion_bound(usize::MAX), u64::MAX);
    }

    /// A 10 MiB key bomb (a 5 MiB key, 1.3 million empty sub-records) is refused like the 1 MiB
    /// one: its floor alone exceeds its 160 MiB bound.
    #[test]
    fn a_10_mib_key_bomb_still_passes_through_whole() {
        let bomb = key_bomb(5 * 1024 * 1024, 1_300_000);
        assert!(bomb.len() <= 10 * 1024 * 1024, "{}", bomb.len());
        let planned = plan(parent(bomb));
        let Outcome::Oversized(why) = planned.outcome() else { panic!("{:?}", planned.outcome()) };
        assert_eq!((why.sub_records, why.max), (1_300_000, expansion_bound(planned.record.data.len())));
        assert!(why.at_least > why.max);
        assert_eq!(planned.cost(), planned.record.cost(), "it costs what the record itself costs");
    }

    #[test]
    fn the_planned_cost_is_what_the_records_cost() {
        let input: Vec<(String, Vec<u8>)> = (0..500).map(|i| (format!("key-{}", i % 37), vec![7u8; i % 90])).collect();
        let planned = plan(parent(aggregate(&input)));
        let cost = planned.cost();
        let mut out = Vec::new();
        assert_eq!(planned.expand_into(&mut out), Outcome::Aggregated { count: 500 });
        assert_eq!(
            cost,
            out.iter().map(KinesisRecord::cost).sum::<u64>() + 37 * KEY_SLOT_BYTES + 500 * SUB_RECORD_SLOT_BYTES
        );
        let plain = parent(b"plain".to_vec());
        assert_eq!(plan(plain.clone()).cost(), plain.cost());
        assert_eq!(plan(plain).len(), 1);
    }

    /// The reference: what this module did before it read aggregates in place, prost decoding the
    /// whole body into owned messages. Its `Record` has no field 4, so tags are skipped unread, as
    /// the in-place reader skips them. `None`: passed through whole.
    fn reference(record: &KinesisRecord) -> Option<Vec<KinesisRecord>> {
        #[derive(Clone, PartialEq, prost::Message)]
        struct RefAggregate {
            #[prost(bytes = "vec", repeated, tag = "1")]
            keys: Vec<Vec<u8>>,
            #[prost(bytes = "vec", repeated, tag = "2")]
            hash_keys: Vec<Vec<u8>>,
            #[prost(message, repeated, tag = "3")]
            records: Vec<RefRecord>,
        }
        #[derive(Clone, PartialEq, prost::Message)]
        struct RefRecord {
            #[prost(uint64, required, tag = "1")]
            key: u64,
            #[prost(uint64, optional, tag = "2")]
            hash_key: Option<u64>,
            #[prost(bytes = "vec", required, tag = "3")]
            data: Vec<u8>,
        }
        let body = verified_body(&record.data).ok()?;
        let message = RefAggregate::decode(body).ok()?;
        let mut out = Vec::new();
        for (i, r) in message.records.into_iter().enumerate() {
            let key = message.keys.get(usize::try_from(r.key).ok()?)?;
            if r.hash_key.is_some_and(|h| !index_in(h, message.hash_keys.len())) {
                return None;
            }
            out.push(KinesisRecord {
                sequence_number: record.sequence_number.clone(),
                sub_sequence_number: Some(i as u64),
                partition_key: Arc::from(String::from_utf8_lossy(key)),
                approximate_arrival_ms: record.approximate_arrival_ms,
                data: r.data,
            });
        }
        Some(out)
    }

    /// A random aggregate: keys (some not UTF-8), hash keys, tags, indexes sometimes out of range,
    /// then sometimes mutated (bytes flipped, inserted or cut; unknown fields appended) and sealed
    /// again with a matching MD5, so the body's decoding, not the digest, decides.
    fn random_aggregate(rng: &mut impl rand::Rng) -> Vec<u8> {
        let keys: Vec<Vec<u8>> = (0..rng.random_range(0..6))
            .map(|_| {
                (0..rng.random_range(0..12))
                    .map(|_| if rng.random_bool(0.05) { 0xFF } else { rng.random_range(b'a'..=b'z') })
                    .collect()
            })
            .collect();
        let hash_keys: Vec<Vec<u8>> = (0..rng.random_range(0..3)).map(|i| format!("{i}").into_bytes()).collect();
        let records = (0..rng.random_range(0..40))
            .map(|_| Record {
                partition_key_index: {
                    let beyond = u64::from(rng.random_bool(0.03));
                    rng.random_range(0..(keys.len() as u64 + beyond).max(1))
                },
                explicit_hash_key_index: rng.random_bool(0.3).then(|| {
                    let beyond = u64::from(rng.random_bool(0.03));
                    rng.random_range(0..(hash_keys.len() as u64 + beyond).max(1))
                }),
                data: (0..rng.random_range(0..30)).map(|_| rng.random()).collect(),
                tags: (0..rng.random_range(0..2))
                    .map(|t| Tag { key: format!("t{t}"), value: rng.random_bool(0.5).then(|| "v".into()) })
                    .collect(),
            })
            .collect();
        let mut body =
            AggregatedRecord { partition_key_table: keys, explicit_hash_key_table: hash_keys, records }.encode_to_vec();
        for _ in 0..rng.random_range(0..4u32).saturating_sub(1) {
            match rng.random_range(0..4) {
                0 if !body.is_empty() => {
                    let i = rng.random_range(0..body.len());
                    body[i] ^= 1 << rng.random_range(0..8);
                }
                1 => {
                    let i = rng.random_range(0..=body.len());
                    body.insert(i, rng.random());
                }
                2 if !body.is_empty() => body.truncate(rng.random_range(0..body.len())),
                _ => body.extend_from_slice(&[
                    (rng.random_range(4..20u8) << 3) | [0, 1, 2, 5][rng.random_range(0..4)],
                    1,
                    2,
                    3,
                    4,
                    5,
                    6,
                    7,
                    8,
                ]),
            }
        }
        seal(&body)
    }

    /// Seeded: reading aggregates in place de-aggregates exactly what decoding them with prost
    /// did, and passes through whole exactly what prost rejected.
    #[test]
    fn in_place_reading_agrees_with_prost_on_random_aggregates() {
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x4B50_4C15);
        let (mut valid, mut invalid) = (0, 0);
        for case in 0..4000 {
            let input = parent(random_aggregate(&mut rng));
            let expected = reference(&input);
            let out = deaggregate(input.clone());
            match expected {
                Some(records) => {
                    valid += 1;
                    assert_eq!(
                        out.outcome,
                        Outcome::Aggregated { count: records.len() },
                        "case {case}: {:02x?}",
                        input.data
                    );
                    assert_eq!(out.records, records, "case {case}");
                }
                None => {
                    invalid += 1;
                    assert!(
                        matches!(out.outcome, Outcome::Invalid(_)),
                        "case {case}: {:?} for {:02x?}",
                        out.outcome,
                        input.data
                    );
                    assert_eq!(out.records, vec![input], "case {case}");
                }
            }
        }
        assert!(valid > 1000 && invalid > 500, "both kinds are exercised: {valid} valid, {invalid} invalid");
    }
}
