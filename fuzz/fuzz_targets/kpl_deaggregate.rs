//! KPL de-aggregation (`kinesis::deaggregate`) of hostile Kinesis records.
//!
//! Input: first byte even, the rest is a protobuf body that is sealed (magic + body + MD5) so the
//! fuzzer gets past the digest, or sent as it is when it already starts with the magic (the digest
//! and framing checks). First byte odd, the rest is read as instructions that build an aggregate with
//! the crate's own encoder: up to 4 partition keys (given, or up to 64 KiB of one repeated letter) and
//! up to 8 groups of identical sub-records (a key, data, a repeat count: byte r < 0xC0 is r + 1,
//! else 2^(8 + r % 16)), at most 100 000 sub-records, 1 MiB of data (a Kinesis record's limit) and
//! 16 MiB of keys counted per sub-record. That is how a small input asks for a large expansion.
//!
//! Checked for every input, besides "no panic":
//! - a record that is not a valid aggregate comes back whole and unchanged, alone;
//! - a valid aggregate of `count` sub-records yields exactly `count` records, numbered 0..count, each
//!   with the parent's sequence number and arrival time, and no more data than the aggregate held;
//! - the records' memory (the records themselves plus every distinct heap buffer they point to, so
//!   a shared partition key counts once) stays within 128 bytes per aggregate byte plus 64 KiB
//!   (check `kpl-expansion`, see `KINESNOW_FUZZ_SKIP`);
//! - re-aggregating the sub-records and de-aggregating again gives the same keys and data.

#![no_main]

use std::collections::HashSet;

use kinesnow_core::kinesis::deaggregate::{aggregate, deaggregate, Outcome, KPL_MAGIC};
use kinesnow_core::kinesis::record::KinesisRecord;
use kinesnow_fuzz::{seal, skipped, trace, Input};
use libfuzzer_sys::fuzz_target;

const SEQUENCE: &str = "49590338271490256608559692538361571095921575989136588898";
const ARRIVAL_MS: i64 = 1_700_000_000_123;
const MAX_SUB_RECORDS: usize = 100_000;
const MAX_DATA_BYTES: usize = 1 << 20;
const MAX_KEY_BYTES_PER_SUB_RECORD: usize = 16 << 20;
/// Memory the sub-records may take per byte of the aggregate, plus a constant.
const BYTES_PER_INPUT_BYTE: usize = 128;
const CONSTANT_BYTES: usize = 64 << 10;

fuzz_target!(|input: &[u8]| {
    let Some((&mode, rest)) = input.split_first() else { return };
    let data = if mode & 1 == 0 {
        if rest.starts_with(&KPL_MAGIC) {
            rest.to_vec()
        } else {
            seal(rest)
        }
    } else {
        built_aggregate(rest)
    };
    check(data);
});

fn parent(data: Vec<u8>) -> KinesisRecord {
    KinesisRecord {
        sequence_number: SEQUENCE.into(),
        sub_sequence_number: None,
        partition_key: "outer-key".into(),
        approximate_arrival_ms: ARRIVAL_MS,
        data,
    }
}

fn check(data: Vec<u8>) {
    let len = data.len();
    let record = parent(data);
    let before = record.clone();
    let out = deaggregate(record);
    trace(|| format!("{len}-byte record: {:?}, {} records", out.outcome, out.records.len()));
    #[allow(unreachable_patterns)]
    match out.outcome {
        Outcome::Aggregated { count } => {
            check_sub_records(count, len, &out.records);
            check_round_trip(&out.records);
        }
        Outcome::NotAggregated | Outcome::Invalid(_) | _ => {
            assert_eq!(
                out.records,
                vec![before],
                "a record that is not a valid aggregate must come back whole: {:?}",
                out.outcome
            )
        }
    }
}

fn check_sub_records(count: usize, aggregate_len: usize, records: &[KinesisRecord]) {
    assert_eq!(records.len(), count, "the outcome's count and the records delivered differ");
    for (i, r) in records.iter().enumerate() {
        assert_eq!(r.sub_sequence_number, Some(i as u64), "sub-record {i} is misnumbered");
        assert_eq!(&*r.sequence_number, SEQUENCE, "sub-record {i} lost the parent's sequence number");
        assert_eq!(r.approximate_arrival_ms, ARRIVAL_MS, "sub-record {i} lost the parent's arrival time");
    }
    let data: usize = records.iter().map(|r| r.data.len()).sum();
    assert!(data <= aggregate_len, "{data} bytes of sub-record data out of a {aggregate_len}-byte aggregate");
    if !skipped("kpl-expansion") {
        let used = footprint(records);
        let bound = BYTES_PER_INPUT_BYTE * aggregate_len + CONSTANT_BYTES;
        assert!(
            used <= bound,
            "a {aggregate_len}-byte aggregate of {count} sub-records became {used} bytes of records (bound {bound}): \
             the expansion is not bounded by the input"
        );
    }
}

/// Bytes held by the records: their own size, plus each distinct heap buffer they point to once.
fn footprint(records: &[KinesisRecord]) -> usize {
    let mut seen = HashSet::new();
    let mut bytes = std::mem::size_of_val(records);
    let mut buffer = |ptr: *const u8, len: usize| {
        if len > 0 && seen.insert(ptr as usize) {
            bytes += len;
        }
    };
    for r in records {
        buffer(r.sequence_number.as_ptr(), r.sequence_number.len());
        buffer(r.partition_key.as_ptr(), r.partition_key.len());
        buffer(r.data.as_ptr(), r.data.len());
    }
    bytes
}

fn check_round_trip(records: &[KinesisRecord]) {
    let pairs: Vec<(&str, &[u8])> = records.iter().map(|r| (&*r.partition_key, &r.data[..])).collect();
    let again = deaggregate(parent(aggregate(&pairs)));
    assert_eq!(
        again.outcome,
        Outcome::Aggregated { count: records.len() },
        "re-aggregated sub-records do not de-aggregate"
    );
    let again: Vec<(&str, &[u8])> = again.records.iter().map(|r| (&*r.partition_key, &r.data[..])).collect();
    assert_eq!(again, pairs, "re-aggregated sub-records came back different");
}

/// An aggregate built by instructions (see the module doc).
fn built_aggregate(rest: &[u8]) -> Vec<u8> {
    let mut input = Input::new(rest);
    let key_count = 1 + usize::from(input.byte() % 4);
    let keys: Vec<String> = (0..key_count).map(|_| key(&mut input)).collect();
    let groups = input.byte() % 9;
    let mut records: Vec<(&str, &[u8])> = Vec::new();
    let (mut key_bytes, mut data_bytes) = (0usize, 0usize);
    for _ in 0..groups {
        let key = &keys[usize::from(input.byte()) % key_count];
        let len = usize::from(input.byte());
        let data = input.bytes(len);
        let mut repeat = match input.byte() {
            r @ 0..0xC0 => usize::from(r) + 1,
            r => 1 << (8 + r % 16),
        };
        repeat = repeat.min(MAX_SUB_RECORDS - records.len());
        if !key.is_empty() {
            repeat = repeat.min((MAX_KEY_BYTES_PER_SUB_RECORD - key_bytes) / key.len());
        }
        if !data.is_empty() {
            repeat = repeat.min((MAX_DATA_BYTES - data_bytes) / data.len());
        }
        key_bytes += repeat * key.len();
        data_bytes += repeat * data.len();
        records.extend(std::iter::repeat_n((key.as_str(), data), repeat));
    }
    aggregate(&records)
}

/// A partition key: given text, or (first byte's top bit set) `length:u16` times one letter.
fn key(input: &mut Input) -> String {
    let kind = input.byte();
    if kind & 0x80 != 0 {
        let len = usize::from(input.u16());
        let letter = char::from(b'a' + kind % 26);
        std::iter::repeat_n(letter, len).collect()
    } else {
        input.text(&[])
    }
}
