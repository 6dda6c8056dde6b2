//! The Enhanced Fan-Out reader of one shard: a SubscribeToShard subscription from the committed
//! position (exact to the KPL sub-record, as in polling), renewed from the last continuation
//! sequence number when Kinesis ends it (every 5 minutes), replaced when silent for longer than the
//! watchdog, retried at least a second apart after ResourceInUseException. Events are read only as
//! fast as the memory budget takes their records (`intake.rs`): the engine holds at most Max Buffer
//! Size of records (or one record's, when a single one is larger: it is admitted alone once the
//! whole budget is free) plus one received event per subscription waiting for budget; the rest stays
//! with Kinesis behind HTTP flow control (`consumer_fanout.rs` measures this). The shard ends with
//! an event that names its children (ChildShards) and no continuation, or, when no such event comes
//! (kinesis-local never sends one), once the listing shows the shard closed, its subscription has
//! been quiet, and GetRecords confirms the end (`end_probe.rs` decides; the I/O is here).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_kinesis::error::ProvideErrorMetadata;
use aws_sdk_kinesis::primitives::DateTime;
use aws_sdk_kinesis::types::{ShardIteratorType, StartingPosition, SubscribeToShardEvent, SubscribeToShardEventStream};
use tracing::{info, warn};

use super::end_probe::{self, EndCheck, ProbeStart};
use super::intake::{self, fetched_cost, Fetched};
use super::ledger::{ReadFrom, Start};
use super::shared::Shared;
use crate::config::consume_kinesis::InitialPosition;
use crate::kinesis::address::ForStream;
use crate::kinesis::limiter::{Backoff, ShardLimiter};
use crate::kinesis::position::Position;
use crate::kinesis::KinesisError;
use crate::runtime::lock;

/// SubscribeToShard allows one call per second per consumer and shard.
const RESUBSCRIBE_FLOOR: Duration = Duration::from_secs(1);

/// How far the current generation has read: where the next subscription starts, the last record
/// its events carried and when records last came.
struct Progress {
    start: Start,
    /// The last record of this generation's events (delivered, or covered by the checkpoint).
    last_record: Option<String>,
    /// When records last came, or the generation began: a shard's quiet time counts from here.
    last_records_at: tokio::time::Instant,
}

impl Progress {
    fn new(from: ReadFrom) -> Self {
        Self { start: Start::from(from), last_record: None, last_records_at: tokio::time::Instant::now() }
    }

    fn continuation(&self) -> Option<&str> {
        match &self.start {
            Start::After(c) => Some(c),
            _ => None,
        }
    }
}

/// Why a subscription ended.
#[allow(clippy::enum_variant_names)] // ShardEnd is Kinesis's own name (SHARD_END), as in Checkpoint::ShardEnd
enum End {
    /// Kinesis closed it (the 5-minute limit) or the watchdog fired: resubscribe from the continuation.
    Renew,
    /// The listing shows the shard closed and the subscription was quiet: confirm the end by polling.
    Probe,
    /// The shard was rewound or lost, or the engine stops: look at the shard's state again.
    Recheck,
    /// The shard ended; the children are known.
    ShardEnd,
    Failed(KinesisError),
}

pub async fn run(
    shared: Arc<Shared>,
    shard_id: String,
    generation: u64,
    client: aws_sdk_kinesis::Client,
    consumer_arn: String,
) {
    let mut stopping = shared.stopping.subscribe();
    let mut backoff = Backoff::new(RESUBSCRIBE_FLOOR, Duration::from_secs(10));
    let Some((mut generation, from)) = shared.reader_generation(&shard_id, generation) else { return };
    let mut committed = from.committed().cloned();
    let mut progress = Progress::new(from);
    let mut last_subscribe: Option<tokio::time::Instant> = None;
    let mut probe = false;
    loop {
        if *stopping.borrow() {
            return;
        }
        match shared.reader_generation(&shard_id, generation) {
            None => return,
            Some((g, from)) if g != generation => {
                generation = g;
                committed = from.committed().cloned();
                progress = Progress::new(from);
                probe = false;
            }
            Some(_) => {}
        }
        if !probe && end_probe_due(&shared, &shard_id, &progress) {
            probe = begin_confirmation(&shared, &shard_id);
        }
        let end = if probe {
            tokio::select! {
                end = confirm_end(&shared, &shard_id, generation, committed.as_ref(), &mut progress) => end,
                _ = stopping.changed() => return,
            }
        } else {
            if let Some(at) = last_subscribe {
                tokio::time::sleep_until(at + RESUBSCRIBE_FLOOR).await;
            }
            last_subscribe = Some(tokio::time::Instant::now());
            let subscription = tokio::select! {
                s = subscribe(&shared, &client, &consumer_arn, &shard_id, &progress.start) => s,
                _ = stopping.changed() => return,
            };
            match subscription {
                Ok(events) => {
                    tokio::select! {
                        end = read(&shared, &shard_id, generation, committed.as_ref(), events, &mut progress) => end,
                        _ = stopping.changed() => return,
                    }
                }
                Err(e) => End::Failed(e),
            }
        };
        match end {
            End::Renew => backoff.reset(),
            // Once begun, the confirmation goes on (after a failure too) until the shard's end:
            // the subscription is not read again, so one reader alone delivers.
            End::Probe => probe = begin_confirmation(&shared, &shard_id),
            End::Recheck => {}
            End::ShardEnd => {
                info!("shard {shard_id} of stream '{}' has ended", shared.settings.stream);
                shared.on_reader_finished(&shard_id, generation).await;
                return;
            }
            End::Failed(e) => pause(&shared, &shard_id, &e, &mut backoff).await,
        }
    }
}

type Events = aws_sdk_kinesis::primitives::event_stream::EventReceiver<
    SubscribeToShardEventStream,
    aws_sdk_kinesis::types::error::SubscribeToShardEventStreamError,
>;

async fn subscribe(
    shared: &Shared,
    client: &aws_sdk_kinesis::Client,
    consumer_arn: &str,
    shard_id: &str,
    start: &Start,
) -> Result<Events, KinesisError> {
    let position = match start {
        Start::Committed(p) => {
            StartingPosition::builder().r#type(ShardIteratorType::AtSequenceNumber).sequence_number(&p.sequence_number)
        }
        Start::After(seq) => {
            StartingPosition::builder().r#type(ShardIteratorType::AfterSequenceNumber).sequence_number(seq)
        }
        Start::At(seq) => StartingPosition::builder().r#type(ShardIteratorType::AtSequenceNumber).sequence_number(seq),
        Start::Initial => match shared.initial_position(shard_id) {
            InitialPosition::TrimHorizon => StartingPosition::builder().r#type(ShardIteratorType::TrimHorizon),
            InitialPosition::Latest => StartingPosition::builder().r#type(ShardIteratorType::Latest),
            InitialPosition::AtTimestamp(t) => {
                StartingPosition::builder().r#type(ShardIteratorType::AtTimestamp).timestamp(DateTime::from(t))
            }
        },
    };
    let position = position
        .build()
        .map_err(|e| KinesisError::Service { stream: shared.settings.stream.clone(), message: e.to_string() })?;
    shared.fan_out_stats.subscriptions.fetch_add(1, Ordering::Relaxed);
    let out = client
        .subscribe_to_shard()
        .consumer_arn(consumer_arn)
        .shard_id(shard_id)
        .starting_position(position)
        .send()
        .await
        .map_err(|e| {
            if e.as_service_error().is_some_and(|s| s.is_resource_in_use_exception()) {
                return KinesisError::ResourceInUse { shard: shard_id.to_owned() };
            }
            let code = e.code().map(str::to_owned);
            KinesisError::from_sdk(&shared.settings.stream, Some(shard_id), crate::kinesis::sdk_error_text(&e), code)
        })?;
    Ok(out.event_stream)
}

/// Reads events until the subscription ends; `progress` follows the continuation. Every
/// [`end_probe::CHECK_EVERY`] it looks whether the shard's end should be confirmed by polling.
async fn read(
    shared: &Shared,
    shard_id: &str,
    generation: u64,
    committed: Option<&Position>,
    mut events: Events,
    progress: &mut Progress,
) -> End {
    let watchdog = shared.settings.fan_out_watchdog;
    let mut next_check = tokio::time::Instant::now() + end_probe::CHECK_EVERY;
    loop {
        let silent_until = tokio::time::Instant::now() + watchdog;
        let received = {
            let next = events.recv();
            tokio::pin!(next);
            loop {
                if tokio::time::Instant::now() >= next_check {
                    next_check = tokio::time::Instant::now() + end_probe::CHECK_EVERY;
                    if end_probe_due(shared, shard_id, progress) {
                        return End::Probe;
                    }
                }
                tokio::select! {
                    r = &mut next => break Some(r),
                    _ = tokio::time::sleep_until(silent_until.min(next_check)) => {
                        if tokio::time::Instant::now() >= silent_until {
                            break None;
                        }
                    }
                }
            }
        };
        let event = match received {
            None => {
                warn!(
                    "the fan-out subscription of shard {shard_id} was silent for {} s; replacing it",
                    watchdog.as_secs()
                );
                shared.fan_out_stats.watchdog_replacements.fetch_add(1, Ordering::Relaxed);
                return End::Renew;
            }
            Some(Ok(None)) => return End::Renew, // the 5-minute session is over
            Some(Ok(Some(SubscribeToShardEventStream::SubscribeToShardEvent(event)))) => event,
            Some(Ok(Some(_))) => continue,
            Some(Err(e)) if e.as_service_error().is_some_and(|s| s.is_resource_in_use_exception()) => {
                return End::Failed(KinesisError::ResourceInUse { shard: shard_id.to_owned() });
            }
            Some(Err(e)) => {
                let code = e.as_service_error().and_then(|s| s.code()).map(str::to_owned);
                let text = crate::kinesis::sdk_error_text(&e);
                return End::Failed(KinesisError::from_sdk(&shared.settings.stream, Some(shard_id), text, code));
            }
        };
        match take_event(shared, shard_id, generation, committed, event, progress).await {
            Some(end) => return end,
            None => continue,
        }
    }
}

/// True when the shard's end should be confirmed by polling now; asks the keeper for a new
/// listing when the shard is quiet and the last listing may predate its end.
fn end_probe_due(shared: &Shared, shard_id: &str, progress: &Progress) -> bool {
    let listed = lock(&shared.listing).listed(shard_id);
    match end_probe::end_check(listed, progress.last_records_at, tokio::time::Instant::now()) {
        EndCheck::Probe => true,
        EndCheck::List => {
            shared.list_now.store(true, Ordering::Relaxed);
            false
        }
        EndCheck::Wait => false,
    }
}

/// Buffers one event's records (waiting for budget: the stream is not read meanwhile). Returns
/// how the subscription ends, if this event ends it.
async fn take_event(
    shared: &Shared,
    shard_id: &str,
    generation: u64,
    committed: Option<&Position>,
    mut event: SubscribeToShardEvent,
    progress: &mut Progress,
) -> Option<End> {
    let children = shard_end(&event);
    let ended = children.is_some();
    let records = std::mem::take(&mut event.records);
    let last_record = records.last().map(|r| r.sequence_number().to_owned());
    let new_records = has_new_records(&records, committed);
    let fetched_bytes: u64 = records.iter().map(fetched_cost).sum();
    let stats = &shared.fan_out_stats;
    stats.largest_event_bytes.fetch_max(fetched_bytes, Ordering::Relaxed);
    // While the budget is spent this waits, and the subscription is not read meanwhile: HTTP flow
    // control (the h2 stream window, or TCP's) holds Kinesis back. The event's records count as
    // waiting until the budget has taken them, so the engine's held bytes stay within Max Buffer
    // Size plus one event per subscription. Records at or before the checkpoint (the checkpoint's
    // own record comes again, and with it the sub-records of an aggregate already committed) are
    // dropped.
    let waiting = Waiting::new(stats, fetched_bytes);
    let fetched = Fetched { records, millis_behind: event.millis_behind_latest(), ended: children };
    let mut admitted = |bytes| waiting.admitted(bytes);
    let pushed = intake::hand_over(shared, shard_id, generation, committed, fetched, &mut admitted).await;
    drop(waiting);
    if !pushed {
        return Some(End::Recheck);
    }
    if ended {
        return Some(End::ShardEnd);
    }
    if last_record.is_some() {
        progress.last_record = last_record;
    }
    if new_records {
        progress.last_records_at = tokio::time::Instant::now();
    }
    progress.start = Start::After(event.continuation_sequence_number().to_owned());
    None
}

/// Whether a fetch brought a record beyond the checkpoint's own (a subscription or probe at the
/// checkpoint gets that record again; it is not news of the shard).
fn has_new_records(records: &[aws_sdk_kinesis::types::Record], committed: Option<&Position>) -> bool {
    records.iter().any(|r| committed.is_none_or(|p| r.sequence_number() != p.sequence_number))
}

/// Logs and counts a confirmation of the shard's end by polling; true.
fn begin_confirmation(shared: &Shared, shard_id: &str) -> bool {
    info!(
        "shard {shard_id} of stream '{}' is closed and its fan-out subscription brought no records for {} s; \
         confirming its end with GetRecords",
        shared.settings.stream,
        end_probe::QUIET.as_secs()
    );
    shared.fan_out_stats.end_probes.fetch_add(1, Ordering::Relaxed);
    true
}

/// Confirms the end of a closed shard whose subscription went quiet (the subscription is already
/// dropped): GetShardIterator from where the subscription would go on, then GetRecords until there
/// is no next iterator. What the subscription had not delivered yet is delivered here, in order,
/// within the memory budget (this response is the shard's one held event), and the shard ends
/// with the children GetRecords names (or, if none, those of the next listing).
async fn confirm_end(
    shared: &Shared,
    shard_id: &str,
    generation: u64,
    committed: Option<&Position>,
    progress: &mut Progress,
) -> End {
    let from = end_probe::probe_start(
        progress.last_record.as_deref(),
        committed,
        shared.initial_position(shard_id),
        progress.continuation(),
    );
    let mut iterator = match probe_iterator(shared, shard_id, &from).await {
        Ok(it) => it,
        Err(e) => return End::Failed(e),
    };
    let mut limiter = ShardLimiter::default();
    loop {
        limiter.ready().await;
        let mut out = match shared
            .kinesis
            .get_records()
            .for_stream(shared.settings.stream_ref())
            .shard_iterator(&iterator)
            .limit(shared.settings.max_records_per_request as i32)
            .send()
            .await
        {
            Ok(out) => out,
            Err(e) => {
                let text = crate::kinesis::sdk_error_text(&e);
                return End::Failed(KinesisError::from_sdk(
                    &shared.settings.stream,
                    Some(shard_id),
                    text,
                    e.code().map(str::to_owned),
                ));
            }
        };
        limiter.record_call(out.records().iter().map(|r| r.data().as_ref().len() as u64).sum());
        let ended = out.next_shard_iterator().is_none().then(|| {
            out.child_shards().iter().map(|c| (c.shard_id().to_owned(), c.parent_shards().to_vec())).collect::<Vec<_>>()
        });
        let records = std::mem::take(&mut out.records);
        let last_record = records.last().map(|r| r.sequence_number().to_owned());
        if has_new_records(&records, committed) {
            info!(
                "shard {shard_id}: {} record(s) its fan-out subscription had not delivered came by GetRecords",
                records.len()
            );
        }
        let fetched_bytes: u64 = records.iter().map(fetched_cost).sum();
        let waiting = Waiting::new(&shared.fan_out_stats, fetched_bytes);
        let fetched = Fetched { records, millis_behind: out.millis_behind_latest().unwrap_or(-1), ended };
        let mut admitted = |bytes| waiting.admitted(bytes);
        let pushed = intake::hand_over(shared, shard_id, generation, committed, fetched, &mut admitted).await;
        drop(waiting);
        if !pushed {
            return End::Recheck;
        }
        if let Some(last) = last_record {
            progress.last_record = Some(last.clone());
            progress.start = Start::After(last);
        }
        match out.next_shard_iterator() {
            None => return End::ShardEnd,
            Some(next) => iterator = next.to_owned(),
        }
    }
}

/// The probe's iterator. A position Kinesis refuses (trimmed by retention, or a continuation it
/// does not take as a sequence number) falls back to TRIM_HORIZON: at least once, never skipped.
async fn probe_iterator(shared: &Shared, shard_id: &str, from: &ProbeStart) -> Result<String, KinesisError> {
    match shard_iterator(shared, shard_id, from).await {
        Err(KinesisError::InvalidArgument { message, .. })
            if !matches!(from, ProbeStart::TrimHorizon | ProbeStart::AtTimestamp(_)) =>
        {
            if !matches!(from, ProbeStart::AfterContinuation(_)) {
                warn!(
                    "the position of shard {shard_id} is no longer in stream '{}' ({message}): records were lost; \
                     continuing from TRIM_HORIZON",
                    shared.settings.stream
                );
            }
            shard_iterator(shared, shard_id, &ProbeStart::TrimHorizon).await
        }
        other => other,
    }
}

async fn shard_iterator(shared: &Shared, shard_id: &str, from: &ProbeStart) -> Result<String, KinesisError> {
    let request = shared.kinesis.get_shard_iterator().for_stream(shared.settings.stream_ref()).shard_id(shard_id);
    let request = match from {
        ProbeStart::AfterRecord(seq) | ProbeStart::AfterContinuation(seq) => {
            request.shard_iterator_type(ShardIteratorType::AfterSequenceNumber).starting_sequence_number(seq)
        }
        ProbeStart::AtCheckpoint(p) => request
            .shard_iterator_type(ShardIteratorType::AtSequenceNumber)
            .starting_sequence_number(&p.sequence_number),
        ProbeStart::TrimHorizon => request.shard_iterator_type(ShardIteratorType::TrimHorizon),
        ProbeStart::AtTimestamp(t) => {
            request.shard_iterator_type(ShardIteratorType::AtTimestamp).timestamp(DateTime::from(*t))
        }
    };
    let out = request.send().await.map_err(|e| KinesisError::of_call(&shared.settings.stream, Some(shard_id), &e))?;
    out.shard_iterator().map(str::to_owned).ok_or_else(|| KinesisError::Service {
        stream: shared.settings.stream.clone(),
        message: format!("GetShardIterator for shard {shard_id} returned no iterator"),
    })
}

/// An event counted as waiting for budget until dropped (also when the wait is cancelled).
struct Waiting<'a> {
    stats: &'a super::shared::FanOutStats,
    bytes: AtomicU64,
}

impl<'a> Waiting<'a> {
    fn new(stats: &'a super::shared::FanOutStats, bytes: u64) -> Self {
        stats.waiting_events.fetch_add(1, Ordering::SeqCst);
        stats.waiting_event_bytes.fetch_add(bytes, Ordering::SeqCst);
        Self { stats, bytes: AtomicU64::new(bytes) }
    }

    fn admitted(&self, bytes: u64) {
        let bytes = bytes.min(self.bytes.load(Ordering::SeqCst));
        self.bytes.fetch_sub(bytes, Ordering::SeqCst);
        self.stats.waiting_event_bytes.fetch_sub(bytes, Ordering::SeqCst);
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.stats.waiting_event_bytes.fetch_sub(*self.bytes.get_mut(), Ordering::SeqCst);
        self.stats.waiting_events.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The children named by the shard's last event: it carries ChildShards, or no continuation.
fn shard_end(event: &SubscribeToShardEvent) -> Option<Vec<(String, Vec<String>)>> {
    let ended = event.continuation_sequence_number().is_empty() || !event.child_shards().is_empty();
    ended.then(|| event.child_shards().iter().map(|c| (c.shard_id().to_owned(), c.parent_shards().to_vec())).collect())
}

/// Waits before the next subscription: at least a second after ResourceInUseException (a previous
/// subscription is still alive), growing back-off otherwise, with a bulletin for what the user
/// must fix.
async fn pause(shared: &Shared, shard_id: &str, error: &KinesisError, backoff: &mut Backoff) {
    let delay = backoff.next_delay().max(RESUBSCRIBE_FLOOR);
    let in_use = matches!(error, KinesisError::ResourceInUse { .. });
    tracing::debug!("fan-out subscription of shard {shard_id} ended: {error}");
    if in_use {
        shared.fan_out_stats.resource_in_use.fetch_add(1, Ordering::Relaxed);
        tracing::debug!("shard {shard_id}: previous subscription still active; retrying");
    } else if matches!(error, KinesisError::StreamNotFound { .. } | KinesisError::AccessDenied { .. })
        || backoff.attempts() >= 3
    {
        warn!("{error}; subscribing to shard {shard_id} again in {} ms", delay.as_millis());
    }
    tokio::time::sleep(if in_use { RESUBSCRIBE_FLOOR } else { delay }).await;
}

#[cfg(test)]
mod tests {
    use aws_sdk_kinesis::types::ChildShard;

    use super::*;

    fn event(continuation: &str, children: &[(&str, &[&str])]) -> SubscribeToShardEvent {
        let mut b = SubscribeToShardEvent::builder().continuation_sequence_number(continuation).millis_behind_latest(0);
        for (id, parents) in children {
            let mut c = ChildShard::builder().shard_id(*id);
            for p in *parents {
                c = c.parent_shards(*p);
            }
            b = b.child_shards(
                c.hash_key_range(
                    aws_sdk_kinesis::types::HashKeyRange::builder()
                        .starting_hash_key("0")
                        .ending_hash_key("1")
                        .build()
                        .unwrap(),
                )
                .build()
                .unwrap(),
            );
        }
        b.set_records(Some(Vec::new())).build().unwrap()
    }

    #[test]
    fn the_last_event_of_a_shard_names_its_children() {
        assert_eq!(shard_end(&event("4960", &[])), None, "a continuation and no children: more to come");
        let split = event("", &[("shardId-1", &["shardId-0"]), ("shardId-2", &["shardId-0"])]);
        assert_eq!(
            shard_end(&split),
            Some(vec![("shardId-1".into(), vec!["shardId-0".into()]), ("shardId-2".into(), vec!["shardId-0".into()])])
        );
        let merge = event("", &[("shardId-5", &["shardId-3", "shardId-4"])]);
        assert_eq!(shard_end(&merge).unwrap()[0].1, vec!["shardId-3".to_owned(), "shardId-4".to_owned()]);
        assert_eq!(shard_end(&event("", &[])), Some(vec![]), "no continuation: ended, children unknown");
    }
}
