//! The consumer's state shared by its tasks (the readers, the subscriber, the lease keeper and the
//! processor's calls), owned by [`Shared`], and the settings they read. The ledger inside it makes
//! every decision; `Shared`'s methods do the I/O those decisions call for (checkpoint and
//! shard-end writes) and start and stop reader tasks through the spawner `engine` gives it, so
//! this module depends on none of the tasks that use it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use super::budget::MemoryBudget;
pub use super::ledger::Batch;
use super::ledger::{CheckpointWrite, FinishShard, Ledger, Next, Pass, ReaderStart, WriteOutcome};
use super::resume::FailoverPosition;
use super::state::Buffered;
use crate::config::consume_kinesis::{ConsumeKinesisConfig, ConsumerType, InitialPosition};
use crate::contract::counters::consume_kinesis::ConsumerCounter;
use crate::counters::ConsumerCounters;
use crate::feedback::{LinkKey, Loaded};
use crate::kinesis::address::StreamRef;
use crate::kinesis::fan_out;
use crate::kinesis::position::Position;
use crate::lease::migration::MigrationSettings;
use crate::lease::{Lease, LeaseError, LeaseStore};
use crate::runtime::lock;

/// The default silence after which a fan-out subscription is replaced (Kinesis sends an event at
/// least every 5 s while one lives).
pub const FAN_OUT_WATCHDOG: Duration = Duration::from_secs(35);

/// Starts the reader task of a shard's lease `generation`: polling, or with `Some((client,
/// consumer ARN))` an Enhanced Fan-Out subscription.
pub type SpawnReader = fn(Arc<Shared>, String, u64, Option<(aws_sdk_kinesis::Client, String)>) -> JoinHandle<()>;

#[derive(Debug, Clone)]
pub struct EngineSettings {
    /// The stream's name: the lease table's rows, log lines and the records' metadata carry it.
    pub stream: String,
    /// The stream's ARN when the processor was given one: Kinesis calls then name the stream by it.
    pub stream_arn: Option<String>,
    pub application: String,
    pub initial_position: InitialPosition,
    /// Polling (GetRecords) or Enhanced Fan-Out (SubscribeToShard, consumer named after the application).
    pub consumer_type: ConsumerType,
    /// A fan-out subscription silent this long is replaced.
    pub fan_out_watchdog: Duration,
    /// Fan-out subscriptions per pooled Kinesis client (each with its own HTTP connection pool);
    /// [`fan_out::SUBSCRIPTIONS_PER_CLIENT`] unless a test compares pool sizes.
    pub fan_out_subscriptions_per_client: usize,
    pub max_records_per_request: u32,
    pub max_buffer_size: u64,
    /// A node whose heartbeat has not changed for this long is dead and its leases are taken over.
    pub failover_timeout: Duration,
    /// How often this node's heartbeat row is bumped (well inside the failover timeout).
    pub heartbeat_interval: Duration,
    /// How often the table is read to check leases, find readable shards and balance.
    pub scan_interval: Duration,
    /// How often the stream's shards are listed (children of a finished shard do not wait for it:
    /// they come from ChildShards).
    pub shard_refresh: Duration,
    /// How long a lease being handed back waits for its batches in flight before it is released.
    pub hand_back_timeout: Duration,
    /// Warn when a shard lags by more than this share of the stream's retention period.
    pub lag_warning_percent: u8,
    /// Warn about a leased shard whose checkpoint has not moved this long while records wait (zero: never).
    pub stuck_shard_warning: Duration,
    /// Lock and wait timings of the one-time migration from a KCL lease table.
    pub migration: MigrationSettings,
    /// Where a node that takes a lease over resumes (see `resume`).
    pub failover_position: FailoverPosition,
    /// The board PutSnowflake reports committed positions on (see `feedback`): the process's.
    pub board: crate::feedback::BoardHandle,
}

impl EngineSettings {
    pub fn from_config(c: &ConsumeKinesisConfig) -> Self {
        Self {
            stream: c.stream_name.clone(),
            stream_arn: c.stream_arn.clone(),
            application: c.application_name.clone(),
            initial_position: c.initial_position,
            consumer_type: c.consumer_type,
            fan_out_watchdog: FAN_OUT_WATCHDOG,
            fan_out_subscriptions_per_client: fan_out::SUBSCRIPTIONS_PER_CLIENT,
            max_records_per_request: c.max_records_per_request,
            max_buffer_size: c.max_buffer_size,
            failover_timeout: c.failover_timeout,
            heartbeat_interval: heartbeat_interval(c.failover_timeout),
            scan_interval: scan_interval(c.failover_timeout),
            shard_refresh: Duration::from_secs(30),
            hand_back_timeout: Duration::from_secs(30),
            lag_warning_percent: c.lag_warning_threshold_percent,
            stuck_shard_warning: c.stuck_shard_warning,
            migration: MigrationSettings::default(),
            failover_position: c.failover_position,
            board: crate::feedback::BoardHandle::process(),
        }
    }
}

impl EngineSettings {
    /// How Kinesis calls name the stream.
    pub fn stream_ref(&self) -> StreamRef<'_> {
        match &self.stream_arn {
            Some(arn) => StreamRef::Arn(arn),
            None => StreamRef::Name(&self.stream),
        }
    }
}

/// Heartbeats three times per failover timeout, at least every 10 s.
pub fn heartbeat_interval(failover: Duration) -> Duration {
    (failover * 3 / 7).clamp(Duration::from_millis(100), Duration::from_secs(10))
}

/// Scans the table seven times per failover timeout, at most once a second.
pub fn scan_interval(failover: Duration) -> Duration {
    (failover / 7).clamp(Duration::from_millis(50), Duration::from_secs(1))
}

pub struct Shared {
    pub settings: EngineSettings,
    pub kinesis: aws_sdk_kinesis::Client,
    pub store: LeaseStore,
    pub owner: String,
    /// This engine's heartbeat row (a slot taken at the first beat).
    pub node_row: crate::lease::node_row::NodeRow,
    pub budget: MemoryBudget,
    /// Lag beyond which records risk expiring unread (a share of the retention period).
    pub lag_warning_ms: Option<i64>,
    /// With Failover Position `SNOWFLAKE_COMMIT`: the key PutSnowflake reports this consumer's
    /// loaded positions under (see `feedback`).
    pub link: Option<LinkKey>,
    /// GetRecords responses that may be held at once (each at most 10 MiB).
    pub fetch_slots: Arc<tokio::sync::Semaphore>,
    /// The shards, batches and their decisions (no I/O inside).
    pub(super) ledger: Mutex<Ledger>,
    pub(super) data_ready: Notify,
    /// Wakes the keeper for a pass now (a shard finished, a hand-back's batches settled).
    pub(super) rebalance: Notify,
    /// A shard ended without naming its children: list the stream on the next pass.
    pub(super) list_now: std::sync::atomic::AtomicBool,
    /// The closed shards of the keeper's latest listing (fan-out readers confirm their end).
    pub(super) listing: Mutex<super::end_probe::ListingView>,
    /// Records are delivered only while this node's last heartbeat is recent enough that no
    /// other node can have judged it dead and taken its leases.
    pub(super) deliver_until: Mutex<tokio::time::Instant>,
    #[cfg(feature = "test-support")]
    pub(super) suspended_until: Mutex<Option<tokio::time::Instant>>,
    pub stopping: watch::Sender<bool>,
    /// Reader tasks by shard: aborted when the shard's lease is lost.
    pub(super) readers: Mutex<Vec<(String, JoinHandle<()>)>>,
    /// With Enhanced Fan-Out: the registered consumer and the client pool subscriptions use.
    pub(super) fan_out: Option<FanOut>,
    /// Starts a shard's reader task (polling or fan-out): given by `engine`, which knows the readers.
    pub(super) spawn: SpawnReader,
    pub(super) fan_out_stats: FanOutStats,
    /// What NiFi's counters show (drained by the processor).
    pub counters: ConsumerCounters,
}

pub(super) struct FanOut {
    pub(super) consumer_arn: String,
    pub(super) pool: Vec<aws_sdk_kinesis::Client>,
    pub(super) next: AtomicUsize,
}

/// What the fan-out readers did, for tests and metrics.
#[derive(Default, Debug)]
pub struct FanOutStats {
    pub subscriptions: std::sync::atomic::AtomicU64,
    pub resource_in_use: std::sync::atomic::AtomicU64,
    pub watchdog_replacements: std::sync::atomic::AtomicU64,
    /// Received events whose records wait for budget (at most one per subscription), and the
    /// bytes of their records not yet in a buffer, as the budget counts a record as fetched
    /// (before KPL de-aggregation).
    pub waiting_events: std::sync::atomic::AtomicU64,
    pub waiting_event_bytes: std::sync::atomic::AtomicU64,
    /// The largest event received so far, in the budget's bytes (all its records as fetched).
    pub largest_event_bytes: std::sync::atomic::AtomicU64,
    /// Shard ends confirmed by GetRecords (the listing showed the shard closed and its
    /// subscription was quiet), counted when each confirmation begins.
    pub end_probes: std::sync::atomic::AtomicU64,
}

impl Shared {
    fn lock_ledger(&self) -> MutexGuard<'_, Ledger> {
        lock(&self.ledger)
    }

    pub(super) fn lock_readers(&self) -> MutexGuard<'_, Vec<(String, JoinHandle<()>)>> {
        lock(&self.readers)
    }

    /// Records behind the stream's tip (the most of any shard read) and the shards leased.
    pub(super) fn lag(&self) -> (Option<i64>, usize) {
        self.lock_ledger().lag()
    }

    /// Shards leased and read (not those being handed back).
    pub(super) fn reading(&self) -> std::collections::BTreeSet<String> {
        self.lock_ledger().reading()
    }

    /// The sum of `cost` over the buffered records (walks every buffer).
    pub(super) fn buffered_cost(&self, cost: impl Fn(&crate::kinesis::record::KinesisRecord) -> u64) -> u64 {
        self.lock_ledger().buffered_records().map(cost).sum()
    }

    /// NiFi committed the batch: the checkpoint writes it calls for.
    pub(super) fn ack(&self, batch_id: i64) -> Result<Vec<Next>, super::ledger::UnknownBatch> {
        self.lock_ledger().ack(batch_id)
    }

    /// NiFi did not commit the batch: its shards rewind.
    pub(super) fn nack(&self, batch_id: i64) -> Result<Vec<super::ledger::Rewound>, super::ledger::UnknownBatch> {
        self.lock_ledger().nack(batch_id)
    }

    /// Wakes the keeper when a hand-back's batches have settled.
    pub(super) fn wake_if_hand_back_settled(&self) {
        if self.lock_ledger().hand_back_settled() {
            self.rebalance.notify_one();
        }
    }

    /// Batches handed to NiFi and not settled yet.
    pub(super) fn has_batches(&self) -> bool {
        self.lock_ledger().has_batches()
    }

    pub(super) fn writes_in_flight(&self) -> usize {
        self.lock_ledger().writes_in_flight()
    }

    /// The leases held, for their release.
    pub(super) fn leases(&self) -> Vec<Lease> {
        self.lock_ledger().leases()
    }

    /// Forgets every shard (the engine stopped).
    pub(super) fn clear(&self) {
        self.lock_ledger().clear()
    }

    /// Each held lease's holder, by shard.
    pub(super) fn held(&self) -> Vec<(String, crate::lease::Holder)> {
        self.lock_ledger().held()
    }

    /// Finished shards whose shard-end marker is not written yet.
    pub(super) fn unfinished_ends(&self) -> Vec<FinishShard> {
        self.lock_ledger().unfinished_ends()
    }

    /// Handed-back leases ready to release (their batches settled, or `timeout` passed), with the
    /// batches still out.
    pub(super) fn hand_backs_due(&self, timeout: Duration) -> Vec<(Lease, usize)> {
        self.lock_ledger().hand_backs_due(tokio::time::Instant::now(), timeout)
    }

    /// Forgets a shard whose lease was released.
    pub(super) fn remove(&self, shard_id: &str) {
        self.lock_ledger().remove(shard_id)
    }

    /// Starts handing the shard's lease back: no new batches of it.
    pub(super) fn begin_hand_back(&self, shard_id: &str) {
        self.lock_ledger().begin_hand_back(shard_id, tokio::time::Instant::now())
    }

    /// Where a shard without a checkpoint starts.
    pub(super) fn initial_position(&self, shard_id: &str) -> InitialPosition {
        self.lock_ledger().initial_position(shard_id).unwrap_or(self.settings.initial_position)
    }

    /// For the reader of `generation`: the shard's generation and where to resume; `None` once the
    /// shard is finished, lost or handed back, or the reader is of an earlier lease of it.
    pub(super) fn reader_generation(&self, shard_id: &str, generation: u64) -> Option<(u64, super::ledger::ReadFrom)> {
        self.lock_ledger().reader_position(shard_id, generation)
    }

    /// Adds fetched records to a shard's buffer; false when the shard was rewound or lost meanwhile.
    pub(super) fn push(
        &self,
        shard_id: &str,
        generation: u64,
        records: Vec<Buffered>,
        millis_behind: i64,
        ended: Option<Vec<(String, Vec<String>)>>,
    ) -> bool {
        let had_records = !records.is_empty();
        let (count, bytes) = (records.len() as u64, records.iter().map(|b| b.record.data.len() as u64).sum());
        let pushed = self.lock_ledger().push(shard_id, generation, records, millis_behind, ended);
        if pushed && had_records {
            self.counters.add(ConsumerCounter::RecordsRead, count);
            self.counters.add(ConsumerCounter::BytesRead, bytes);
            self.data_ready.notify_waiters();
        }
        pushed
    }

    /// Takes up to `max_bytes` round-robin over the shards and registers the batch.
    pub(super) fn take(&self, max_bytes: u64) -> Option<Batch> {
        if !self.may_deliver() {
            return None;
        }
        let batch = self.lock_ledger().take(max_bytes);
        if batch.is_some() {
            self.counters.increment(ConsumerCounter::Batches);
        }
        batch
    }

    /// Does what the ledger decided: writes checkpoints (one per shard at a time, each followed
    /// by the next acknowledged one), finishes shards, stops the readers of lost leases.
    pub(super) async fn follow(self: &Arc<Self>, step: Next) {
        let mut step = Some(step);
        while let Some(current) = step.take() {
            match current {
                Next::Write(write) => step = self.write_checkpoint(write).await,
                Next::Finish(finish) => self.finish_shard(finish).await,
                Next::Lost(shard_id) => self.lost(&shard_id),
            }
        }
    }

    async fn write_checkpoint(&self, write: CheckpointWrite) -> Option<Next> {
        let outcome = match self.store.checkpoint(&write.lease, &write.position, false, write.loaded.as_ref()).await {
            Ok(()) => {
                self.counters.increment(ConsumerCounter::CheckpointsWritten);
                WriteOutcome::Written
            }
            Err(LeaseError::Fenced { .. }) => WriteOutcome::Fenced,
            Err(e) => {
                warn!(
                    "checkpoint of shard {} not written (tried again on the next lease pass): {e}",
                    write.lease.shard_id
                );
                WriteOutcome::Failed
            }
        };
        let next = self.lock_ledger().checkpoint_written(&write, outcome);
        if self.lock_ledger().hand_back_settled() {
            self.rebalance.notify_one();
        }
        next
    }

    /// Takes in the loaded positions PutSnowflake reported on `feedback`'s board for the shards this
    /// engine tracks; true when one moved on.
    pub(super) fn take_in_loaded(&self, key: &LinkKey) -> bool {
        let tracked = self.lock_ledger().tracked();
        let facts: Vec<(String, Position, Option<i64>)> = {
            let board = self.settings.board.lock();
            tracked
                .iter()
                .filter_map(|shard| {
                    board.loaded(key, shard).map(|p| (shard.clone(), p, board.loaded_arrival(key, shard)))
                })
                .collect()
        };
        let mut ledger = self.lock_ledger();
        facts.into_iter().fold(false, |moved, (shard, p, arrival)| {
            let moved = ledger.note_loaded(&shard, p) || moved;
            if let Some(arrival) = arrival {
                ledger.note_loaded_arrival(&shard, arrival);
            }
            moved
        })
    }

    /// Writes the loaded positions not yet in their lease rows (of shards without a checkpoint
    /// write in flight, which carries its own).
    pub(super) async fn write_loaded_positions(self: &Arc<Self>, pass: Pass) {
        let due = self.lock_ledger().loaded_writes_due(pass);
        for write in due {
            match self.store.write_loaded(&write.lease, &write.loaded).await {
                Ok(()) => self.lock_ledger().loaded_written(&write),
                Err(LeaseError::Fenced { .. }) => self.lose(&write.lease.shard_id),
                Err(e) => warn!("loaded position of shard {} not written: {e}", write.lease.shard_id),
            }
        }
    }

    /// Writes the checkpoints whose earlier writes failed.
    pub(super) async fn retry_checkpoints(self: &Arc<Self>) {
        let writes = self.lock_ledger().pending_checkpoints();
        for write in writes {
            self.follow(Next::Write(write)).await;
        }
    }

    /// The reader of `generation` saw the end of the shard and returned.
    pub(super) async fn on_reader_finished(self: &Arc<Self>, shard_id: &str, generation: u64) {
        let next = self.lock_ledger().reader_ended(shard_id, generation);
        if let Some(step) = next {
            self.follow(step).await;
        }
    }

    /// Writes the children's rows and the shard-end marker once everything of the shard is
    /// committed (which also gives the lease up), then wakes the keeper to take the children.
    /// If the marker cannot be written, the shard stays here as finished and the keeper retries.
    pub(super) async fn finish_shard(self: &Arc<Self>, finish: FinishShard) {
        let shard_id = finish.lease.shard_id.clone();
        for (child, parents) in &finish.children {
            if let Err(e) = self.store.add_child(child, parents).await {
                warn!("row of child shard {child} not written: {e}");
            }
        }
        let outcome = match self.store.mark_shard_end(&finish.lease).await {
            Ok(()) => {
                info!("shard {shard_id} finished: every record committed");
                if let Some(key) = &self.link {
                    // Its FlowFiles still queued here go on into the shared channel, before the children's.
                    self.settings.board.lock().finished_here(key, &self.owner, &shard_id, finish.lease.counter);
                }
                WriteOutcome::Written
            }
            Err(LeaseError::Fenced { .. }) => {
                warn!("lease on shard {shard_id} was lost before its shard-end marker was written");
                WriteOutcome::Fenced
            }
            Err(e) => {
                warn!("shard-end marker of {shard_id} not written: {e}");
                WriteOutcome::Failed
            }
        };
        self.lock_ledger().finish_done(&finish, outcome);
        if finish.children.is_empty() {
            self.list_now.store(true, Ordering::Relaxed);
        }
        self.rebalance.notify_one();
    }

    /// The lease moved on: drop the shard's records at once and stop delivering them.
    pub(super) fn lose(&self, shard_id: &str) {
        if self.lock_ledger().lose(shard_id) {
            self.lost(shard_id);
        }
    }

    /// Ends the readers of a shard whose lease is gone.
    fn lost(&self, shard_id: &str) {
        self.counters.increment(ConsumerCounter::LeasesLost);
        warn!("lease on shard {shard_id} was lost; its buffered records are dropped");
        for (_, reader) in self.lock_readers().iter().filter(|(id, _)| id == shard_id) {
            reader.abort();
        }
    }

    /// Starts reading a shard whose lease was just taken.
    pub(super) fn start_reading(
        self: &Arc<Self>,
        lease: Lease,
        committed: Option<Position>,
        parents: Vec<String>,
        initial: Option<InitialPosition>,
        loaded: Option<Loaded>,
    ) {
        // A reader left from an earlier lease of this shard ends (its generation is older anyway).
        for (_, reader) in self.lock_readers().iter().filter(|(id, _)| *id == lease.shard_id) {
            reader.abort();
        }
        let shard_id = lease.shard_id.clone();
        self.counters.increment(ConsumerCounter::LeasesTaken);
        if let Some(key) = &self.link {
            self.settings.board.lock().took_here(key, &self.owner, &shard_id, lease.counter, committed.clone());
        }
        let start = {
            let mut ledger = self.lock_ledger();
            let start = ledger.start(lease, committed, parents, initial);
            if let Some(loaded) = loaded {
                ledger.track_loaded(&shard_id, loaded);
            }
            start
        };
        self.spawn_reader(start);
    }

    pub(super) fn spawn_reader(self: &Arc<Self>, start: ReaderStart) {
        let ReaderStart { shard_id, generation } = start;
        let subscription = self.fan_out.as_ref().map(|f| {
            (fan_out::pooled(&f.pool, f.next.fetch_add(1, Ordering::Relaxed)).clone(), f.consumer_arn.clone())
        });
        let handle = (self.spawn)(self.clone(), shard_id.clone(), generation, subscription);
        let mut readers = self.lock_readers();
        readers.retain(|(_, r)| !r.is_finished());
        readers.push((shard_id, handle));
    }

    /// Each leased shard's status (see `status`).
    pub(super) fn status(&self) -> Vec<super::status::ShardStatus> {
        let facts =
            super::status::EngineFacts { budget_available: self.budget.available(), may_deliver: self.may_deliver() };
        self.lock_ledger().status(facts)
    }

    pub(super) fn may_deliver(&self) -> bool {
        *lock(&self.deliver_until) > tokio::time::Instant::now()
    }

    pub(super) fn deliver_until(&self, until: tokio::time::Instant) {
        let was = self.may_deliver();
        *lock(&self.deliver_until) = until;
        if !was && until > tokio::time::Instant::now() {
            self.data_ready.notify_waiters();
        }
    }
}
