//! The polling reader of one shard: GetShardIterator from the committed position, then GetRecords
//! under the shard's limiter and a fetch slot, and hand-off into the shard's buffer within the
//! memory budget (de-aggregation included, `intake.rs`). It ends when the shard ends, its lease is
//! lost, or the engine stops.

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_kinesis::primitives::DateTime;
use aws_sdk_kinesis::types::ShardIteratorType;
use tracing::{info, warn};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::intake::{self, Fetched};
use super::ledger::Start;
use super::shared::Shared;
use crate::config::consume_kinesis::InitialPosition;
use crate::contract::counters::consume_kinesis::ConsumerCounter;
use crate::kinesis::address::ForStream;
use crate::kinesis::limiter::{Backoff, ShardLimiter};
use crate::kinesis::record::KinesisRecord;
use crate::kinesis::KinesisError;

/// Wait after an empty read of a shard that is caught up: one GetRecords per second, KCL's default
/// (`PollingConfig.idleTimeBetweenReadsInMillis` = 1000). A shard allows 5 GetRecords calls per second
/// shared by every consumer of the stream, so an idle reader of ours leaves 4 of them to the others, and
/// a caught-up consumer costs one call per shard per second. A new record then waits at most one
/// second longer; a shard that is behind is read back to back (see the limiter).
const IDLE_DELAY: Duration = Duration::from_millis(1000);

/// Reads the shard for its lease begun at (or rewound to) `generation`; ends when the shard ends,
/// is lost or handed back, or the engine stops.
pub async fn run(shared: Arc<Shared>, shard_id: String, generation: u64) {
    let mut stopping = shared.stopping.subscribe();
    let mut limiter = ShardLimiter::default();
    let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(10));
    let Some((mut generation, from)) = shared.reader_generation(&shard_id, generation) else { return };
    let mut start = Start::from(from);
    let mut iterator: Option<String> = None;
    let mut lag_warned: Option<tokio::time::Instant> = None;
    loop {
        if *stopping.borrow() {
            return;
        }
        match shared.reader_generation(&shard_id, generation) {
            None => return, // lease lost or shard dropped
            Some((g, from)) if g != generation => (generation, start, iterator) = (g, Start::from(from), None),
            Some(_) => {}
        }
        let it = match iterator.take() {
            Some(it) => it,
            None => match shard_iterator(&shared, &shard_id, &start).await {
                Ok(it) => it,
                Err(e) => {
                    pause_after(&shared, &shard_id, &e, &mut limiter, &mut backoff);
                    limiter.ready().await;
                    continue;
                }
            },
        };
        // A fetch slot bounds the responses held while decoding and waiting for budget: memory
        // stays within Max Buffer Size (or one record admitted alone when a single one is larger,
        // see `budget`) plus (slots x 10 MiB), whatever the number of shards.
        let slot = tokio::select! {
            s = fetch_turn(&limiter, &shared.fetch_slots) => s,
            _ = stopping.changed() => return,
        };
        let out = match get_records(&shared, &shard_id, &it).await {
            Ok(out) => out,
            Err(error) => {
                if matches!(error, KinesisError::ExpiredIterator { .. }) {
                    info!("iterator of shard {shard_id} expired; renewing it");
                } else {
                    pause_after(&shared, &shard_id, &error, &mut limiter, &mut backoff);
                    iterator = Some(it).filter(|_| !matches!(error, KinesisError::InvalidArgument { .. }));
                }
                continue;
            }
        };
        backoff.reset();
        shared.counters.increment(ConsumerCounter::GetRecordsCalls);
        let Page { fetched, fetched_bytes, last_sequence, next, caught_up } = Page::of(out, &shard_id);
        limiter.record_call(fetched_bytes);
        warn_if_lagging(&shared, &shard_id, fetched.millis_behind, &mut lag_warned);
        let mut ignore = |_| {};
        let pushed = tokio::select! {
            pushed = intake::hand_over(&shared, &shard_id, generation, start.committed(), fetched, &mut ignore) => pushed,
            _ = stopping.changed() => return,
        };
        drop(slot);
        if !pushed {
            continue; // rewound or lost while fetching: the generation check above restarts or ends
        }
        if let Some(seq) = last_sequence {
            start = Start::After(seq);
        }
        match next {
            None => {
                info!("shard {shard_id} of stream '{}' has ended", shared.settings.stream);
                shared.on_reader_finished(&shard_id, generation).await;
                return;
            }
            Some(n) => iterator = Some(n),
        }
        if caught_up {
            limiter.delay(IDLE_DELAY);
        }
    }
}

/// One GetRecords call of the shard's reader at iterator `it`.
async fn get_records(
    shared: &Shared,
    shard_id: &str,
    it: &str,
) -> Result<aws_sdk_kinesis::operation::get_records::GetRecordsOutput, KinesisError> {
    shared
        .kinesis
        .get_records()
        .for_stream(shared.settings.stream_ref())
        .shard_iterator(it)
        .limit(shared.settings.max_records_per_request as i32)
        .send()
        .await
        .map_err(|e| KinesisError::of_call(&shared.settings.stream, Some(shard_id), &e))
}

/// What one GetRecords answer brings the reader.
struct Page {
    fetched: Fetched,
    /// The records' bytes as fetched (what the shard's read limit counts).
    fetched_bytes: u64,
    last_sequence: Option<String>,
    /// The next iterator; `None` once the shard has ended.
    next: Option<String>,
    /// No records and nothing behind: the reader waits [`IDLE_DELAY`].
    caught_up: bool,
}

impl Page {
    fn of(mut out: aws_sdk_kinesis::operation::get_records::GetRecordsOutput, shard_id: &str) -> Self {
        tracing::debug!(
            "shard {shard_id}: GetRecords returned {} record(s), behind {:?} ms, next iterator: {}",
            out.records().len(),
            out.millis_behind_latest(),
            out.next_shard_iterator().is_some()
        );
        let fetched_bytes = out.records().iter().map(|r| r.data().as_ref().len() as u64).sum();
        let last_sequence = out.records().last().map(|r| r.sequence_number().to_owned());
        let next = out.next_shard_iterator.take();
        let millis_behind = out.millis_behind_latest().unwrap_or(-1);
        let caught_up = out.records().is_empty() && millis_behind == 0;
        let ended = next.is_none().then(|| {
            out.child_shards().iter().map(|c| (c.shard_id().to_owned(), c.parent_shards().to_vec())).collect::<Vec<_>>()
        });
        let fetched = Fetched { records: std::mem::take(&mut out.records), millis_behind, ended };
        Self { fetched, fetched_bytes, last_sequence, next, caught_up }
    }
}

/// Warns (at most once a minute per shard) when the shard's oldest unread records are close to
/// expiring from the stream.
fn warn_if_lagging(shared: &Shared, shard_id: &str, millis_behind: i64, last: &mut Option<tokio::time::Instant>) {
    let Some(limit) = shared.lag_warning_ms else { return };
    if millis_behind <= limit || last.is_some_and(|t| t.elapsed() < Duration::from_secs(60)) {
        return;
    }
    *last = Some(tokio::time::Instant::now());
    warn!(
        "shard {shard_id} of stream '{}' is {} s behind, more than {}% of the retention period: records may expire unread",
        shared.settings.stream,
        millis_behind / 1000,
        shared.settings.lag_warning_percent
    );
}

/// Bytes a buffered record holds of the budget ([`KinesisRecord::cost`]).
pub(crate) fn record_cost(record: &KinesisRecord) -> u64 {
    record.cost()
}

/// Waits for the shard's next allowed call, then for a fetch slot. The slot is taken only once the
/// shard's limiter allows the call, so it covers the call, its decoding and the budget wait, and
/// never a shard's pause: with many busy shards, each reads at its own limit (2 MiB/s), not
/// slots x 2 MiB/s for all of them together.
async fn fetch_turn(limiter: &ShardLimiter, slots: &Arc<Semaphore>) -> OwnedSemaphorePermit {
    limiter.ready().await;
    slots.clone().acquire_owned().await.expect("fetch slots are never closed")
}

async fn shard_iterator(shared: &Shared, shard_id: &str, start: &Start) -> Result<String, KinesisError> {
    let request = shared.kinesis.get_shard_iterator().for_stream(shared.settings.stream_ref()).shard_id(shard_id);
    let request = match start {
        Start::Committed(p) => request
            .shard_iterator_type(ShardIteratorType::AtSequenceNumber)
            .starting_sequence_number(&p.sequence_number),
        Start::After(seq) => {
            request.shard_iterator_type(ShardIteratorType::AfterSequenceNumber).starting_sequence_number(seq)
        }
        Start::At(seq) => {
            request.shard_iterator_type(ShardIteratorType::AtSequenceNumber).starting_sequence_number(seq)
        }
        Start::Initial => match shared.initial_position(shard_id) {
            InitialPosition::TrimHorizon => request.shard_iterator_type(ShardIteratorType::TrimHorizon),
            InitialPosition::Latest => request.shard_iterator_type(ShardIteratorType::Latest),
            InitialPosition::AtTimestamp(t) => {
                request.shard_iterator_type(ShardIteratorType::AtTimestamp).timestamp(DateTime::from(t))
            }
        },
    };
    match request.send().await {
        Ok(out) => out.shard_iterator().map(str::to_owned).ok_or_else(|| KinesisError::Service {
            stream: shared.settings.stream.clone(),
            message: format!("GetShardIterator for shard {shard_id} returned no iterator"),
        }),
        Err(e) => {
            let error = KinesisError::of_call(&shared.settings.stream, Some(shard_id), &e);
            match (&error, start) {
                // The checkpoint lies before the stream's retention: the records in between are gone.
                (KinesisError::InvalidArgument { .. }, Start::Committed(_) | Start::After(_) | Start::At(_)) => {
                    warn!(
                        "the position of shard {shard_id} is no longer in stream '{}' (trimmed by retention): records were \
                         lost; continuing from TRIM_HORIZON",
                        shared.settings.stream
                    );
                    let out = shared
                        .kinesis
                        .get_shard_iterator()
                        .for_stream(shared.settings.stream_ref())
                        .shard_id(shard_id)
                        .shard_iterator_type(ShardIteratorType::TrimHorizon)
                        .send()
                        .await
                        .map_err(|e| KinesisError::of_call(&shared.settings.stream, Some(shard_id), &e))?;
                    Ok(out.shard_iterator().unwrap_or_default().to_owned())
                }
                _ => Err(error),
            }
        }
    }
}

/// Backs off after an error, with a warning bulletin for errors the user must act on.
fn pause_after(
    shared: &Shared,
    shard_id: &str,
    error: &KinesisError,
    limiter: &mut ShardLimiter,
    backoff: &mut Backoff,
) {
    let delay = match error {
        KinesisError::Throttled { .. } => {
            shared.counters.increment(ConsumerCounter::Throttles);
            backoff.next_delay().max(Duration::from_secs(1))
        }
        KinesisError::StreamNotFound { .. } | KinesisError::AccessDenied { .. } => {
            let delay = backoff.next_delay().max(Duration::from_secs(5));
            warn!("{error}; retrying shard {shard_id} in {} s", delay.as_secs());
            delay
        }
        _ => {
            let delay = backoff.next_delay();
            if backoff.attempts() >= 3 {
                warn!("{error}; retrying shard {shard_id} in {} ms", delay.as_millis());
            }
            delay
        }
    };
    limiter.delay(delay);
}
#[cfg(test)]
mod tests {
    use tokio::time::Instant;

    use super::*;

    /// Twelve shards share two fetch slots. Eight are busy: small responses, so their limiters allow
    /// a call every 200 ms (5 a second). Four are throttled: after each call their limiter backs off
    /// for 2 s. A call takes 20 ms, so the two slots could serve 100 calls a second, more than the
    /// 42 the shards' limiters allow together. The busy shards must read at their own limit whatever
    /// the throttled ones do: a shard pausing in its limiter must not hold a slot meanwhile.
    /// Virtual time (paused clock): deterministic, not a timing test.
    #[tokio::test(start_paused = true)]
    async fn shards_waiting_for_their_limiter_do_not_hold_fetch_slots() {
        let slots = Arc::new(Semaphore::new(2));
        let end = Instant::now() + Duration::from_secs(10);
        let shards: Vec<_> = (0..12)
            .map(|i| {
                let slots = slots.clone();
                let back_off = (i % 3 == 0).then_some(Duration::from_secs(2));
                tokio::spawn(async move {
                    let mut limiter = ShardLimiter::default();
                    let mut calls = 0u64;
                    loop {
                        let slot = fetch_turn(&limiter, &slots).await;
                        if Instant::now() >= end {
                            return (back_off.is_some(), calls);
                        }
                        tokio::time::sleep(Duration::from_millis(20)).await; // the call
                        limiter.record_call(1000);
                        if let Some(pause) = back_off {
                            limiter.delay(pause);
                        }
                        calls += 1;
                        drop(slot);
                    }
                })
            })
            .collect();
        let (mut busy, mut throttled) = (Vec::new(), Vec::new());
        for shard in shards {
            let (is_throttled, calls) = shard.await.unwrap();
            if is_throttled {
                throttled.push(calls)
            } else {
                busy.push(calls)
            }
        }
        // At 5 calls a second (one per 200 ms + 20 ms), a busy shard makes about 45 calls in 10 s.
        assert!(busy.iter().all(|&c| c >= 40), "busy shards' calls in 10 s: {busy:?} (throttled: {throttled:?})");
        assert!(throttled.iter().all(|&c| c <= 5), "throttled shards keep to their back-off: {throttled:?}");
    }
}
