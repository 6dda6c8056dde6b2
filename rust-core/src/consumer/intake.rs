//! Hands the records of one GetRecords response or fan-out event to their shard's buffer within
//! the memory budget.
//!
//! Each Kinesis record is first checked and counted ([`deaggregate::plan`]: what its KPL
//! aggregate, if any, expands to), then its bytes of the budget are reserved, and only then are
//! its user records materialised. So the records the engine holds never exceed what it reserved,
//! whatever an aggregate describes: Max Buffer Size, plus one record's expansion when a single
//! one is larger than the whole budget (admitted alone once the budget is free; at most
//! [`deaggregate::MAX_EXPANSION_BYTES`], or the record itself when it passes through whole). When
//! the budget is short, what is already materialised goes to the buffer before the wait, so NiFi
//! can take it and give budget back: a reader never waits while holding records NiFi cannot see.
//!
//! A record that starts with the KPL magic but is passed through whole (not a valid aggregate, or
//! one that would expand beyond the bound) is reported in a warning bulletin naming the shard, its
//! sequence number and why.

use std::cmp::Ordering;
use std::sync::Arc;

use tracing::warn;

use super::budget::Reservation;
use super::shared::Shared;
use super::state::Buffered;
use crate::kinesis::deaggregate::{self, Outcome, Planned};
use crate::kinesis::position::{compare_sequence_numbers, Position};
use crate::kinesis::record::{record_cost, KinesisRecord};

/// What one GetRecords call or fan-out event brought for a shard.
pub(super) struct Fetched {
    pub records: Vec<aws_sdk_kinesis::types::Record>,
    pub millis_behind: i64,
    /// The shard ended with this fetch: its children (child, its parents), possibly none known.
    pub ended: Option<Vec<(String, Vec<String>)>>,
}

/// The budget bytes a Kinesis record as fetched would hold, before any de-aggregation.
pub(super) fn fetched_cost(r: &aws_sdk_kinesis::types::Record) -> u64 {
    record_cost(r.data.as_ref().len(), r.sequence_number.len(), r.partition_key.as_deref().map_or(0, str::len))
}

/// Hands `fetched` to the shard's buffer, reserving before materialising (see the module doc).
/// Records at or before `committed` are dropped. `admitted` hears the [`fetched_cost`] of the
/// fetched records whose user records have reached the buffer (or were dropped), each time some
/// do. Returns false when the shard was rewound or lost meanwhile: the reader then starts again
/// from the checkpoint, or ends.
pub(super) async fn hand_over(
    shared: &Shared,
    shard_id: &str,
    generation: u64,
    committed: Option<&Position>,
    fetched: Fetched,
    admitted: &mut (dyn FnMut(u64) + Send),
) -> bool {
    let Fetched { records, millis_behind, ended } = fetched;
    let mut ready: Vec<Buffered> = Vec::with_capacity(records.len());
    let mut ready_fetched_cost = 0u64;
    let mut whole = PassedWhole::default();
    for fetched in records {
        let fetched_cost = fetched_cost(&fetched);
        let record = from_sdk(fetched);
        if committed
            .is_some_and(|p| compare_sequence_numbers(&record.sequence_number, &p.sequence_number) == Ordering::Less)
        {
            ready_fetched_cost += fetched_cost; // wholly before the checkpoint, aggregate or not
            continue;
        }
        let planned = deaggregate::plan(record);
        whole.note(&planned);
        let cost = planned.cost();
        let reservation = match shared.budget.try_reserve(cost) {
            Some(reservation) => reservation,
            None => {
                if !ready.is_empty() {
                    let pushed = shared.push(shard_id, generation, std::mem::take(&mut ready), millis_behind, None);
                    admitted(std::mem::take(&mut ready_fetched_cost));
                    if !pushed {
                        whole.warn(shared, shard_id);
                        return false;
                    }
                }
                shared.budget.reserve(cost).await
            }
        };
        materialise(planned, reservation, committed, &mut ready);
        ready_fetched_cost += fetched_cost;
    }
    whole.warn(shared, shard_id);
    let pushed = shared.push(shard_id, generation, ready, millis_behind, ended);
    admitted(ready_fetched_cost);
    pushed
}

/// Appends the user records of `planned` that `committed` does not cover to `ready`, each holding
/// its part of `reservation`, the bytes reserved for all of them ([`Reservation::split_share`]:
/// its cost, or when the reservation was clamped to the whole budget, its share of it, so the
/// budget is all free again only once every one of them is committed); what is left (the index
/// the expansion counted, records the checkpoint covers) goes back to the budget.
fn materialise(
    planned: Planned,
    mut reservation: Reservation,
    committed: Option<&Position>,
    ready: &mut Vec<Buffered>,
) {
    ready.reserve(planned.len());
    let first = ready.len();
    planned.expand(|record| {
        if !committed.is_some_and(|p| covered(p, &record)) {
            ready.push(Buffered { reservation: Reservation::empty(), record });
        }
    });
    let added = &mut ready[first..];
    let mut remaining: u64 = added.iter().map(|b| b.record.cost()).sum();
    for b in added {
        let cost = b.record.cost();
        b.reservation = reservation.split_share(cost, remaining);
        remaining -= cost;
    }
}

/// Whether the checkpoint covers a record about to be buffered. A record with the KPL magic that is
/// passed through whole, at the checkpoint's own sequence number while the checkpoint points at one
/// of its sub-records, is not covered: an earlier version, or the KCL, de-aggregated it, and its
/// later sub-records may not be committed. It comes again whole (a duplicate, never a loss).
fn covered(checkpoint: &Position, record: &KinesisRecord) -> bool {
    let inside_a_whole_aggregate = record.sub_sequence_number.is_none()
        && checkpoint.sub_sequence_number.is_some()
        && deaggregate::is_kpl_aggregate(&record.data)
        && compare_sequence_numbers(&record.sequence_number, &checkpoint.sequence_number) == Ordering::Equal;
    !inside_a_whole_aggregate && checkpoint.covers(&record.sequence_number, record.sub_sequence_number)
}

/// The SDK's record as ours; its data is moved, not copied.
fn from_sdk(r: aws_sdk_kinesis::types::Record) -> KinesisRecord {
    KinesisRecord {
        approximate_arrival_ms: r.approximate_arrival_timestamp.and_then(|t| t.to_millis().ok()).unwrap_or(0),
        sequence_number: r.sequence_number,
        sub_sequence_number: None,
        partition_key: r.partition_key.map_or_else(|| Arc::from(""), Arc::from),
        data: r.data.into_inner(),
    }
}

/// Records of one fetch that started with the KPL magic but were passed through whole.
#[derive(Default)]
struct PassedWhole {
    count: usize,
    /// The first few, with why: (sequence number, reason).
    first: Vec<(String, String)>,
}

/// Records named one by one in a fetch's warnings; the rest are counted.
const NAMED: usize = 3;

impl PassedWhole {
    fn note(&mut self, planned: &Planned) {
        let why = match planned.outcome() {
            Outcome::Invalid(reason) => format!("it starts with the KPL magic but is not a valid aggregate: {reason}"),
            Outcome::Oversized(reason) => format!("it is a KPL aggregate, but {reason}"),
            Outcome::NotAggregated | Outcome::Aggregated { .. } => return,
        };
        self.count += 1;
        if self.first.len() < NAMED {
            self.first.push((planned.sequence_number().to_owned(), why));
        }
    }

    fn warn(&self, shared: &Shared, shard_id: &str) {
        let stream = &shared.settings.stream;
        for (sequence_number, why) in &self.first {
            warn!(
                "record {sequence_number} of shard {shard_id} of stream '{stream}' is delivered whole, as one record, not \
                 de-aggregated: {why}"
            );
        }
        if self.count > self.first.len() {
            warn!(
                "{} more record(s) of that read of shard {shard_id} were delivered whole for the same kind of reason",
                self.count - self.first.len()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(sequence_number: &str, sub: Option<u64>, data: &[u8]) -> KinesisRecord {
        KinesisRecord {
            sequence_number: sequence_number.into(),
            sub_sequence_number: sub,
            partition_key: "k".into(),
            approximate_arrival_ms: 0,
            data: data.to_vec(),
        }
    }

    /// Issue 50: two KPL aggregates of one shard, each expanding to more than the whole budget (a
    /// 10 MiB aggregate of 100,000 small records is about 27 MB of records; here 2,000 records of
    /// 80 bytes, about 540 KB, with a 64 KiB budget). The first is admitted alone with the whole
    /// budget, clamped; NiFi then takes and commits small batches while the reader tries to admit
    /// the second after each commit, as `hand_over` does. The second must wait until the first is
    /// all given back: the engine holds at most the larger of the budget and one expansion. Before
    /// the fix the budget came back whole once the first records of the expansion (those that held
    /// its bytes) were committed, and the second was admitted while most of the first was still
    /// buffered (the 40.4 MB `large_records` saw in a busy suite).
    #[tokio::test]
    async fn a_second_expansion_larger_than_the_budget_waits_until_the_first_is_all_given_back() {
        use crate::consumer::budget::MemoryBudget;
        use crate::consumer::ledger::Ledger;
        use crate::lease::{Checkpoint, Lease};

        const BUDGET: u64 = 64 * 1024;
        let aggregate = |sequence_number: &str| {
            let users: Vec<(String, Vec<u8>)> = (0..2_000).map(|i| (format!("pk-{i}"), vec![b'u'; 80])).collect();
            let data = deaggregate::aggregate(&users);
            deaggregate::plan(KinesisRecord {
                sequence_number: sequence_number.into(),
                sub_sequence_number: None,
                partition_key: "outer".into(),
                approximate_arrival_ms: 0,
                data,
            })
        };
        let first = aggregate("100");
        let mut second = Some(aggregate("200"));
        let one_expansion = first.cost();
        assert!(one_expansion > 4 * BUDGET, "each expands to {one_expansion} bytes, far more than the budget");

        let budget = MemoryBudget::new(BUDGET);
        let mut ledger = Ledger::new();
        let lease =
            Lease { shard_id: "s".into(), owner: "me".into(), counter: 1, checkpoint: Checkpoint::None, loaded: None };
        let generation = ledger.start(lease, None, vec![], None).generation;
        let admit = |planned: Planned, reservation: Reservation, ledger: &mut Ledger| {
            let mut ready = Vec::new();
            materialise(planned, reservation, None, &mut ready);
            assert!(ledger.push("s", generation, ready, 0, None));
        };
        let reservation = budget.try_reserve(first.cost()).expect("the budget is free");
        assert_eq!(reservation.bytes(), BUDGET, "clamped to the whole budget");
        admit(first, reservation, &mut ledger);

        let mut delivered = Vec::new();
        while let Some(batch) = ledger.take(4 * 1024) {
            delivered.extend(
                batch
                    .shards
                    .iter()
                    .flat_map(|s| &s.records)
                    .map(|r| (r.sequence_number.clone(), r.sub_sequence_number)),
            );
            ledger.ack(batch.id).expect("a batch acknowledged once");
            if let Some(reservation) = second.as_ref().and_then(|planned| budget.try_reserve(planned.cost())) {
                admit(second.take().expect("pending"), reservation, &mut ledger);
            }
            let held: u64 = ledger.buffered_records().map(KinesisRecord::cost).sum();
            assert!(
                held <= BUDGET.max(one_expansion),
                "held {held} bytes of records after {} were delivered: more than one expansion ({one_expansion})",
                delivered.len()
            );
        }
        assert!(second.is_none(), "the second aggregate was admitted once the first was all given back");
        let expected: Vec<_> =
            ["100", "200"].iter().flat_map(|seq| (0..2_000u64).map(|sub| (seq.to_string(), Some(sub)))).collect();
        assert!(delivered == expected, "every user record once, in order");
        assert_eq!(budget.available(), BUDGET, "every byte given back");
    }

    #[test]
    fn the_per_record_overhead_covers_a_buffer_entry() {
        // The entry itself, plus the allocator's header of its data and of its sequence number.
        let entry = std::mem::size_of::<Buffered>() as u64;
        assert!(entry + 2 * 8 <= crate::kinesis::record::RECORD_OVERHEAD_BYTES, "a buffer entry takes {entry} bytes");
    }

    #[test]
    fn an_aggregate_passed_through_whole_is_not_skipped_by_a_checkpoint_inside_it() {
        let bomb = deaggregate::key_bomb(1000, 10);
        let inside = Position::new("100", Some(3));
        assert!(!covered(&inside, &record("100", None, &bomb)), "its sub-records after 3 may not be committed");
        assert!(covered(&inside, &record("100", Some(3), b"sub")), "sub-records are exact");
        assert!(!covered(&inside, &record("100", Some(4), b"sub")));
        assert!(covered(&inside, &record("99", None, &bomb)), "an earlier record is covered, whole or not");
        assert!(
            covered(&inside, &record("100", None, b"plain")),
            "a plain record at a KCL checkpoint (sub 0) is covered"
        );
        assert!(
            covered(&Position::new("100", None), &record("100", None, &bomb)),
            "a whole-record checkpoint covers it"
        );
        assert!(!covered(&Position::new("100", None), &record("101", None, &bomb)));
    }
}
