//! The engine's shared state and its API to the processor: start, poll a batch, ack or nack it,
//! stop. The lease keeper (`keeper.rs`) runs beside it on its own task.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use super::budget::MemoryBudget;
use super::keeper::Keeper;
pub use super::ledger::Batch;
use super::ledger::{CheckpointWrite, FinishShard, Ledger, Next, Pass, ReaderStart, WriteOutcome};
use super::reader;
pub use super::resume::FailoverPosition;
use super::state::Buffered;
use super::ConsumerError;
use crate::aws::AwsClients;
use crate::config::consume_kinesis::{ConsumeKinesisConfig, ConsumerType, InitialPosition};
use crate::feedback::{LinkKey, Loaded};
use crate::kinesis::fan_out;
use crate::kinesis::position::Position;
use crate::lease::migration::{self, MigrationSettings};
use crate::lease::{Lease, LeaseError, LeaseStore};

#[derive(Debug, Clone)]
pub struct EngineSettings {
    pub stream: String,
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
    /// The component handle, so log events reach the processor's bulletins.
    pub component: u64,
    /// Lock and wait timings of the one-time migration from a KCL lease table.
    pub migration: MigrationSettings,
    /// Where a node that takes a lease over resumes (see `resume`).
    pub failover_position: FailoverPosition,
}

impl EngineSettings {
    pub fn from_config(c: &ConsumeKinesisConfig, component: u64) -> Self {
        Self {
            stream: c.stream_name.clone(),
            application: c.application_name.clone(),
            initial_position: c.initial_position,
            consumer_type: c.consumer_type,
            fan_out_watchdog: super::subscriber::WATCHDOG,
            fan_out_subscriptions_per_client: fan_out::SUBSCRIPTIONS_PER_CLIENT,
            max_records_per_request: c.max_records_per_request,
            max_buffer_size: c.max_buffer_size,
            failover_timeout: c.failover_timeout,
            heartbeat_interval: heartbeat_interval(c.failover_timeout),
            scan_interval: scan_interval(c.failover_timeout),
            shard_refresh: Duration::from_secs(30),
            hand_back_timeout: Duration::from_secs(30),
            lag_warning_percent: c.lag_warning_threshold_percent,
            component,
            migration: MigrationSettings::default(),
            failover_position: c.failover_position,
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
    ledger: Mutex<Ledger>,
    data_ready: Notify,
    /// Wakes the keeper for a pass now (a shard finished, a hand-back's batches settled).
    pub(super) rebalance: Notify,
    /// A shard ended without naming its children: list the stream on the next pass.
    pub(super) list_now: std::sync::atomic::AtomicBool,
    /// The closed shards of the keeper's latest listing (fan-out readers confirm their end).
    pub(super) listing: Mutex<super::end_probe::ListingView>,
    /// Records are delivered only while this node's last heartbeat is recent enough that no
    /// other node can have judged it dead and taken its leases.
    deliver_until: Mutex<tokio::time::Instant>,
    #[cfg(feature = "test-support")]
    pub(super) suspended_until: Mutex<Option<tokio::time::Instant>>,
    pub stopping: watch::Sender<bool>,
    /// Reader tasks by shard: aborted when the shard's lease is lost.
    readers: Mutex<Vec<(String, JoinHandle<()>)>>,
    /// With Enhanced Fan-Out: the registered consumer and the client pool subscriptions use.
    fan_out: Option<FanOut>,
    pub(super) fan_out_stats: FanOutStats,
}

struct FanOut {
    consumer_arn: String,
    pool: Vec<aws_sdk_kinesis::Client>,
    next: AtomicUsize,
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

pub struct ConsumerEngine {
    shared: Arc<Shared>,
    keeper: Mutex<Option<JoinHandle<()>>>,
}

/// An engine whose long start-up work is done ([`ConsumerEngine::prepare`]) and that has not
/// joined the nodes of its Application Name yet.
pub struct Prepared {
    settings: EngineSettings,
    clients: AwsClients,
    owner: String,
    lag_warning_ms: Option<i64>,
    stream_arn: String,
    fan_out: Option<FanOut>,
}

impl Prepared {
    /// Writes this node's heartbeat, takes its first share of the shards and starts reading: a
    /// listing, a heartbeat, a scan and the lease takes. Let it run to its end (then `stop` the
    /// engine to undo it): dropped half-way, it would leave the heartbeat row and leases behind.
    pub async fn join(self) -> Result<ConsumerEngine, ConsumerError> {
        let Self { settings, clients, owner, lag_warning_ms, stream_arn, fan_out } = self;
        let store = LeaseStore::new(clients.dynamodb.clone(), &settings.application, &settings.stream);
        let link = (settings.failover_position == FailoverPosition::SnowflakeCommit)
            .then(|| LinkKey { stream: stream_arn, application: settings.application.clone() });
        if let Some(key) = &link {
            // A lease table deleted and made again (a reset) starts its lease counters anew: what
            // this JVM knew of the old table's leases must not supersede the new ones' FlowFiles.
            let created = crate::lease::table::created_at(&clients.dynamodb, &settings.application).await?;
            if let Some(created) = created {
                if crate::feedback::board().table_created(key, created) {
                    info!(
                        component = settings.component,
                        "lease table '{}' was made anew since this NiFi last read it: the leases known before are forgotten",
                        settings.application
                    );
                }
            }
        }
        let (stopping, _) = watch::channel(false);
        let shared = Arc::new(Shared {
            fan_out,
            fan_out_stats: FanOutStats::default(),
            lag_warning_ms,
            link,
            node_row: crate::lease::node_row::NodeRow::new(owner.clone()),
            owner,
            budget: MemoryBudget::new(settings.max_buffer_size),
            fetch_slots: Arc::new(tokio::sync::Semaphore::new(
                ((settings.max_buffer_size / super::budget::MAX_RESPONSE_BYTES) as usize).clamp(1, 16),
            )),
            kinesis: clients.kinesis,
            store,
            settings,
            ledger: Mutex::new(Ledger::new()),
            data_ready: Notify::new(),
            rebalance: Notify::new(),
            list_now: std::sync::atomic::AtomicBool::new(false),
            listing: Mutex::new(super::end_probe::ListingView::of(&[], tokio::time::Instant::now())),
            deliver_until: Mutex::new(tokio::time::Instant::now()),
            #[cfg(feature = "test-support")]
            suspended_until: Mutex::new(None),
            stopping,
            readers: Mutex::new(Vec::new()),
        });
        let mut keeper = Keeper::new(shared.clone()).await?;
        let engine = ConsumerEngine { shared, keeper: Mutex::new(None) };
        if let Err(e) = keeper.first_pass().await {
            // Readers may have started and leases been taken: stop them and give the leases back.
            engine.stop().await;
            return Err(e);
        }
        *engine.keeper.lock().unwrap_or_else(|p| p.into_inner()) = Some(tokio::spawn(keeper.run()));
        Ok(engine)
    }
}

impl ConsumerEngine {
    /// Creates the lease table if needed, joins the nodes of the Application Name, takes its share
    /// of the readable shards and starts reading: [`Self::prepare`], then [`Prepared::join`].
    pub async fn start(settings: EngineSettings, clients: AwsClients) -> Result<Self, ConsumerError> {
        Self::prepare(settings, clients).await?.join().await
    }

    /// The long part of a start: the lease table is ready (a KCL table migrated, or the wait for
    /// another node's migration, up to the migration's wait limit), the stream is known and the
    /// Enhanced Fan-Out consumer is ACTIVE. Nothing of this node is in the lease table yet, so the
    /// future may be dropped at any await to cancel the start: a migration this node was running is
    /// then completed by the next start (or another node, once the lock's counter stops moving), as
    /// after a crash; a fan-out consumer already registered is kept for the next start.
    pub async fn prepare(settings: EngineSettings, clients: AwsClients) -> Result<Prepared, ConsumerError> {
        let owner = format!("kinesnow-{}", uuid_like());
        migration::prepare_table(
            &clients.dynamodb,
            &settings.application,
            &settings.stream,
            &owner,
            &settings.migration,
            settings.component,
        )
        .await?;
        let facts = crate::kinesis::stream::describe(&clients.kinesis, &settings.stream).await?;
        let lag_warning_ms = Some(facts.retention_ms() * i64::from(settings.lag_warning_percent) / 100);
        let stream_arn = facts.arn;
        let fan_out = match settings.consumer_type {
            ConsumerType::SharedThroughput => None,
            ConsumerType::EnhancedFanOut => Some(start_fan_out(&clients, &settings).await?),
        };
        Ok(Prepared { settings, clients, owner, lag_warning_ms, stream_arn, fan_out })
    }
    /// Fan-out subscriptions made, ResourceInUse retries and watchdog replacements so far.
    pub fn fan_out_stats(&self) -> &FanOutStats {
        &self.shared.fan_out_stats
    }

    /// The Enhanced Fan-Out consumer's ARN, when reading with it.
    pub fn consumer_arn(&self) -> Option<&str> {
        self.shared.fan_out.as_ref().map(|f| f.consumer_arn.as_str())
    }

    /// The key PutSnowflake reports this consumer's loaded positions under, with Failover
    /// Position `SNOWFLAKE_COMMIT`.
    pub fn link(&self) -> Option<&LinkKey> {
        self.shared.link.as_ref()
    }

    /// Write requests this engine sent to the lease table so far.
    pub fn dynamodb_writes(&self) -> u64 {
        self.shared.store.writes()
    }

    /// Test hook: the lease keeper does nothing for `pause` (no heartbeats, no scans), as if the
    /// node were frozen by a long GC pause or SIGSTOP; reading and polling go on.
    #[cfg(feature = "test-support")]
    pub fn suspend_lease_keeping(&self, pause: Duration) {
        *self.shared.suspended_until.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(tokio::time::Instant::now() + pause);
    }

    pub fn owner(&self) -> &str {
        &self.shared.owner
    }

    /// Shards currently leased and read by this engine (not those being handed back).
    pub fn leased_shards(&self) -> Vec<String> {
        self.shared.lock_ledger().reading().into_iter().collect()
    }

    pub fn budget_available(&self) -> u64 {
        self.shared.budget.available()
    }

    /// Bytes of records this engine holds and has not handed out (buffered, plus received fan-out
    /// events waiting for budget), counted as the budget counts them, but without its clamping: a
    /// record admitted with an oversized event counts in full. Records handed out in a batch and
    /// not yet settled are not included. Walks every buffer: for tests and diagnostics.
    pub fn held_bytes(&self) -> u64 {
        let buffered: u64 = self.shared.lock_ledger().buffered_records().map(reader::record_cost).sum();
        buffered + self.shared.fan_out_stats.waiting_event_bytes.load(Ordering::SeqCst)
    }

    /// Up to `max_bytes` of buffered records (at least one record when any is ready). Waits at most
    /// `max_wait` for the first record; `None` if nothing arrived.
    pub async fn poll(&self, max_bytes: u64, max_wait: Duration) -> Option<Batch> {
        let deadline = tokio::time::Instant::now() + max_wait;
        loop {
            let notified = self.shared.data_ready.notified();
            if let Some(batch) = self.shared.take(max_bytes) {
                return Some(batch);
            }
            if *self.shared.stopping.borrow() {
                return None;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return None;
            }
        }
    }

    /// NiFi committed the batch: checkpoint each shard up to its last settled record.
    /// A shard whose checkpoint write is still in flight gets the new one written right after it.
    pub async fn ack(&self, batch_id: i64) -> Result<(), ConsumerError> {
        let next = self.shared.lock_ledger().ack(batch_id).map_err(|e| ConsumerError::UnknownBatch(e.0))?;
        for step in next {
            self.shared.follow(step).await;
        }
        if self.shared.lock_ledger().hand_back_settled() {
            self.shared.rebalance.notify_one();
        }
        Ok(())
    }

    /// NiFi did not commit the batch: its shards go back to their last checkpoint.
    /// A shard whose reader had already reached the shard's end gets a new reader.
    pub fn nack(&self, batch_id: i64) -> Result<(), ConsumerError> {
        let rewound = self.shared.lock_ledger().nack(batch_id).map_err(|e| ConsumerError::UnknownBatch(e.0))?;
        for r in rewound {
            warn!(
                component = self.shared.settings.component,
                "NiFi did not commit batch {batch_id}; shard {} rewinds to its last acknowledged record", r.shard_id
            );
            if let Some(start) = r.restart {
                self.shared.spawn_reader(start);
            }
        }
        Ok(())
    }

    /// Stops reading, waits briefly for batches in flight, releases every lease and leaves the
    /// cluster (its heartbeat row is removed), so other nodes take the shards at once.
    pub async fn stop(&self) {
        let _ = self.shared.stopping.send(true);
        self.shared.data_ready.notify_waiters();
        if let Some(keeper) = self.keeper.lock().unwrap_or_else(|p| p.into_inner()).take() {
            keeper.abort();
        }
        let readers: Vec<(String, JoinHandle<()>)> = std::mem::take(&mut *self.shared.lock_readers());
        for (_, r) in readers {
            let _ = tokio::time::timeout(Duration::from_secs(5), r).await;
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while self.shared.lock_ledger().has_batches() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // What NiFi acknowledged is checkpointed before the leases go.
        self.shared.retry_checkpoints().await;
        while self.shared.lock_ledger().writes_in_flight() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // What Snowflake has goes into the rows too, so the next owner reads no more than it must.
        if let Some(key) = &self.shared.link {
            self.shared.take_in_loaded(key);
            self.shared.write_loaded_positions(Pass::Final).await;
        }
        let leases: Vec<_> = self.shared.lock_ledger().leases();
        for lease in leases {
            match self.shared.store.release(&lease).await {
                Ok(()) | Err(LeaseError::Fenced { .. }) => {}
                Err(e) => warn!(
                    component = self.shared.settings.component,
                    "could not release the lease of shard {}: {e}", lease.shard_id
                ),
            }
        }
        self.shared.lock_ledger().clear();
        if let Err(e) = self.shared.node_row.remove(&self.shared.store).await {
            warn!(component = self.shared.settings.component, "could not remove this node's heartbeat row: {e}");
        }
        if let Some(key) = &self.shared.link {
            crate::feedback::board().forget_engine(key, &self.shared.owner);
        }
        info!(
            component = self.shared.settings.component,
            "consumer of stream '{}' stopped", self.shared.settings.stream
        );
    }
}

/// Dropping an engine without `stop` ends its tasks but keeps its leases and heartbeat row, as a
/// crashed node would: other nodes take the leases over once its heartbeat stops changing.
impl Drop for ConsumerEngine {
    fn drop(&mut self) {
        let _ = self.shared.stopping.send(true);
        if let Some(keeper) = self.keeper.lock().unwrap_or_else(|p| p.into_inner()).take() {
            keeper.abort();
        }
        for (_, reader) in self.shared.lock_readers().drain(..) {
            reader.abort();
        }
    }
}

impl Shared {
    pub(super) fn lock_ledger(&self) -> MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_readers(&self) -> MutexGuard<'_, Vec<(String, JoinHandle<()>)>> {
        self.readers.lock().unwrap_or_else(|p| p.into_inner())
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
        let pushed = self.lock_ledger().push(shard_id, generation, records, millis_behind, ended);
        if pushed && had_records {
            self.data_ready.notify_waiters();
        }
        pushed
    }

    /// Takes up to `max_bytes` round-robin over the shards and registers the batch.
    fn take(&self, max_bytes: u64) -> Option<Batch> {
        if !self.may_deliver() {
            return None;
        }
        self.lock_ledger().take(max_bytes)
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
            Ok(()) => WriteOutcome::Written,
            Err(LeaseError::Fenced { .. }) => WriteOutcome::Fenced,
            Err(e) => {
                warn!(
                    component = self.settings.component,
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
        let facts: Vec<(String, Position)> = {
            let board = crate::feedback::board();
            tracked.iter().filter_map(|shard| board.loaded(key, shard).map(|p| (shard.clone(), p))).collect()
        };
        let mut ledger = self.lock_ledger();
        facts.into_iter().fold(false, |moved, (shard, p)| ledger.note_loaded(&shard, p) || moved)
    }

    /// Writes the loaded positions not yet in their lease rows (of shards without a checkpoint
    /// write in flight, which carries its own).
    pub(super) async fn write_loaded_positions(self: &Arc<Self>, pass: Pass) {
        let due = self.lock_ledger().loaded_writes_due(pass);
        for write in due {
            match self.store.write_loaded(&write.lease, &write.loaded).await {
                Ok(()) => self.lock_ledger().loaded_written(&write),
                Err(LeaseError::Fenced { .. }) => self.lose(&write.lease.shard_id),
                Err(e) => warn!(
                    component = self.settings.component,
                    "loaded position of shard {} not written: {e}", write.lease.shard_id
                ),
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
                warn!(component = self.settings.component, "row of child shard {child} not written: {e}");
            }
        }
        let outcome = match self.store.mark_shard_end(&finish.lease).await {
            Ok(()) => {
                info!(component = self.settings.component, "shard {shard_id} finished: every record committed");
                if let Some(key) = &self.link {
                    // Its FlowFiles still queued here go on into the shared channel, before the children's.
                    crate::feedback::board().finished_here(key, &self.owner, &shard_id, finish.lease.counter);
                }
                WriteOutcome::Written
            }
            Err(LeaseError::Fenced { .. }) => {
                warn!(
                    component = self.settings.component,
                    "lease on shard {shard_id} was lost before its shard-end marker was written"
                );
                WriteOutcome::Fenced
            }
            Err(e) => {
                warn!(component = self.settings.component, "shard-end marker of {shard_id} not written: {e}");
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
        warn!(
            component = self.settings.component,
            "lease on shard {shard_id} was lost; its buffered records are dropped"
        );
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
        if let Some(key) = &self.link {
            crate::feedback::board().took_here(key, &self.owner, &shard_id, lease.counter, committed.clone());
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

    fn spawn_reader(self: &Arc<Self>, start: ReaderStart) {
        let ReaderStart { shard_id, generation } = start;
        let handle = match &self.fan_out {
            None => tokio::spawn(reader::run(self.clone(), shard_id.clone(), generation)),
            Some(f) => {
                let client = fan_out::pooled(&f.pool, f.next.fetch_add(1, Ordering::Relaxed)).clone();
                tokio::spawn(super::subscriber::run(
                    self.clone(),
                    shard_id.clone(),
                    generation,
                    client,
                    f.consumer_arn.clone(),
                ))
            }
        };
        let mut readers = self.lock_readers();
        readers.retain(|(_, r)| !r.is_finished());
        readers.push((shard_id, handle));
    }

    pub(super) fn may_deliver(&self) -> bool {
        *self.deliver_until.lock().unwrap_or_else(|p| p.into_inner()) > tokio::time::Instant::now()
    }

    pub(super) fn deliver_until(&self, until: tokio::time::Instant) {
        let was = self.may_deliver();
        *self.deliver_until.lock().unwrap_or_else(|p| p.into_inner()) = until;
        if !was && until > tokio::time::Instant::now() {
            self.data_ready.notify_waiters();
        }
    }
}

/// The processor is removed from the canvas: deregisters its Enhanced Fan-Out consumer, if it reads
/// with one. `Ok(None)` when there is nothing to deregister; `Ok(Some(name))` once it is gone.
pub async fn remove_fan_out_consumer(config: &ConsumeKinesisConfig) -> Result<Option<String>, ConsumerError> {
    if config.consumer_type != ConsumerType::EnhancedFanOut {
        return Ok(None);
    }
    let clients = crate::aws::clients(&crate::aws::AwsSettings::of(config)).await;
    fan_out::deregister(&clients.kinesis, &config.stream_name, &config.application_name).await?;
    Ok(Some(config.application_name.clone()))
}

/// Registers (or finds) the consumer named after the application and builds the client pool: each
/// pooled client has the same configuration and a separate HTTP client and connection pool
/// ([`AwsClients::separate_kinesis`]), so over HTTP/2 each carries its own connection.
async fn start_fan_out(clients: &AwsClients, settings: &EngineSettings) -> Result<FanOut, ConsumerError> {
    let kinesis = &clients.kinesis;
    let consumer_arn =
        fan_out::ensure_consumer(kinesis, &settings.stream, &settings.application, settings.component).await?;
    let shards = crate::kinesis::shards::list_shards(kinesis, &settings.stream).await?.len();
    let size = fan_out::pool_size(shards, settings.fan_out_subscriptions_per_client);
    let pool = (0..size).map(|_| clients.separate_kinesis()).collect();
    Ok(FanOut { consumer_arn, pool, next: AtomicUsize::new(0) })
}

/// A unique node id without another dependency: time, process id and a random number.
pub(super) fn uuid_like() -> String {
    format!("{:x}-{:x}-{:016x}", crate::lease::now_ms(), std::process::id(), rand::random::<u64>())
}
