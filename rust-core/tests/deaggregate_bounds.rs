//! De-aggregation within bounds: a hostile aggregate (the KPL key bomb of issue 15) is delivered
//! whole within a small allocation, and what a valid aggregate materialises stays within the cost
//! counted for it before.
//!
//! The test binary counts allocations per thread (`support/counting_alloc.rs`); a test caps its
//! thread, so a regression that asks for gigabytes aborts the binary instead of exhausting the
//! machine.

#[path = "support/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::thread_peak;
use kinesnow_core::kinesis::deaggregate::{
    aggregate, deaggregate, key_bomb, plan, Outcome, KEY_SLOT_BYTES, MAX_EXPANSION_BYTES, SUB_RECORD_SLOT_BYTES,
};
use kinesnow_core::kinesis::record::KinesisRecord;

#[global_allocator]
static ALLOCATOR: counting_alloc::Counting = counting_alloc::Counting;

/// User records of an aggregate: (partition key, data).
type UserRecords = Vec<(String, Vec<u8>)>;

const SEQUENCE: &str = "49590338271490256608559692538361571095921575989136588898";

fn parent(data: Vec<u8>) -> KinesisRecord {
    KinesisRecord {
        sequence_number: SEQUENCE.into(),
        sub_sequence_number: None,
        partition_key: "outer".into(),
        approximate_arrival_ms: 1_700_000_000_123,
        data,
    }
}

/// One 1 MiB Kinesis record: a 512 KiB key and 130,000 empty sub-records that all use it, with a
/// valid MD5. Copying the key into each sub-record would take 68 GB; it must come back whole, as
/// one record, and de-aggregation must allocate next to nothing (the thread is capped at 64 MiB).
#[test]
fn a_key_bomb_is_delivered_whole_within_a_bounded_allocation() {
    let bomb = key_bomb(512 * 1024, 130_000);
    assert!(bomb.len() <= 1 << 20, "one Kinesis record: {} bytes", bomb.len());
    let input = parent(bomb.clone());
    let (out, peak) = thread_peak(64 << 20, || deaggregate(input));
    match &out.outcome {
        Outcome::Oversized(why) => {
            assert_eq!((why.sub_records, why.keys), (130_000, 1));
            assert!(why.at_least > MAX_EXPANSION_BYTES, "{why}");
        }
        other => panic!("expected Oversized, got {other:?}"),
    }
    assert_eq!(out.records, vec![parent(bomb)], "delivered whole, unchanged");
    assert!(peak < 1 << 20, "de-aggregation allocated {peak} bytes for a record it passes through");
}

/// For aggregates up to the expansion bound, what planning allocates (the key table's index) and
/// what expanding materialises (the records, their shared keys) stay within the cost planned,
/// which the engine reserves of its budget before it expands.
#[test]
fn what_an_aggregate_materialises_stays_within_its_planned_cost() {
    let near_bound_key = "k".repeat(200);
    let each = 56 + 200 + 128 + SUB_RECORD_SLOT_BYTES;
    let cases: Vec<(&str, UserRecords)> = vec![
        (
            "at the bound: one 200-byte key, empty records",
            vec![(near_bound_key, vec![]); ((MAX_EXPANSION_BYTES - KEY_SLOT_BYTES) / each) as usize],
        ),
        ("many distinct keys", (0..20_000).map(|i| (format!("device-{i:08}"), vec![1u8; 10])).collect()),
        (
            "the benchmark's shape: 1000 x 1 KiB over 100 keys",
            (0..1000).map(|i| (format!("device-{:03}", i % 100), vec![9u8; 1024])).collect(),
        ),
    ];
    for (name, users) in cases {
        let count = users.len();
        let record = parent(aggregate(&users));
        drop(users);
        let (planned, planning) = thread_peak(64 << 20, || plan(record));
        let cost = planned.cost();
        assert!(cost <= MAX_EXPANSION_BYTES, "{name}: {cost}");
        let (out, expanding) = thread_peak(64 << 20, || {
            let mut out = Vec::new();
            let outcome = planned.expand_into(&mut out);
            (outcome, out)
        });
        assert_eq!(out.0, Outcome::Aggregated { count }, "{name}");
        eprintln!("{name}: cost {cost} bytes; planning allocated {planning}, expanding {expanding}");
        assert!(
            expanding as u64 <= cost,
            "{name}: expanding allocated {expanding} bytes, more than the {cost} planned"
        );
        assert!(planning as u64 <= cost / 4 + 64, "{name}: planning allocated {planning} bytes of {cost}");
    }
}
