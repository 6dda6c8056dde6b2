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
use kinesnow_core::kinesis::deaggregate::{deaggregate, key_bomb, Outcome};
use kinesnow_core::kinesis::record::KinesisRecord;

#[global_allocator]
static ALLOCATOR: counting_alloc::Counting = counting_alloc::Counting;

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
    assert!(!matches!(out.outcome, Outcome::Aggregated { .. } | Outcome::NotAggregated), "{:?}", out.outcome);
    assert_eq!(out.records, vec![parent(bomb)], "delivered whole, unchanged");
    assert!(peak < 1 << 20, "de-aggregation allocated {peak} bytes for a record it passes through");
}
