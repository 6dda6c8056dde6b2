//! The engine's shared state and its API to the processor: start, poll a batch, ack or nack it,
//! stop. The lease keeper (`keeper.rs`) runs beside it on its own task.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use super::budget::MemoryBudget;
use super::keeper::Keeper;
use super::reader;
use super::state::{Buffered, InFlight, ShardState};
use super::ConsumerError;
use crate::aws::AwsClients;
use crate::config::consume_kinesis::{ConsumeKinesisConfig, ConsumerType, InitialPosition};
use crate::kinesis::fan_out;
use crate::kinesis::position::Position;
use crate::kinesis::record::ShardRecords;
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

/// Records handed to NiFi in one call; settle it with `ack` or `nack`.
#[derive(Debug)]
pub struct Batch {
    pub id: i64,
    pub shards: Vec<ShardRecords>,
    pub bytes: u64,
}

pub struct Shared {
    pub settings: EngineSettings,
    pub kinesis: aws_sdk_kinesis::Client,
    pub store: LeaseStore,
    pub owner: String,
    pub budget: MemoryBudget,
    /// Lag beyond which records risk expiring unread (a share of the retention period).
    pub lag_warning_ms: Option<i64>,
    /// GetRecords responses that may be held at once (each at most 10 MiB).
    pub fetch_slots: Arc<tokio::sync::Semaphore>,
    shards: Mutex<BTreeMap<String, ShardState>>,
    batches: Mutex<HashMap<i64, Vec<String>>>,
    data_ready: Notify,
    /// Wakes the keeper for a pass now (a shard finished, a hand-back's batches settled).
    pub(super) rebalance: Notify,
    /// A shard ended without naming its children: list the stream on the next pass.
    pub(super) list_now: std::sync::atomic::AtomicBool,
    /// Records are delivered only while this node's last heartbeat is recent enough that no
    /// other node can have judged it dead and taken its leases.
    deliver_until: Mutex<tokio::time::Instant>,
    #[cfg(feature = "test-support")]
    pub(super) suspended_until: Mutex<Option<tokio::time::Instant>>,
    next_batch: AtomicI64,
    cursor: AtomicUsize,
    pub stopping: watch::Sender<bool>,
    readers: Mutex<Vec<JoinHandle<()>>>,
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
}

pub struct ConsumerEngine {
    shared: Arc<Shared>,
    keeper: Mutex<Option<JoinHandle<()>>>,
}

impl ConsumerEngine {
    /// Creates the lease table if needed, joins the nodes of the Application Name, takes its share
    /// of the readable shards and starts reading.
    pub async fn start(settings: EngineSettings, clients: AwsClients) -> Result<Self, ConsumerError> {
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
        let store = LeaseStore::new(clients.dynamodb.clone(), &settings.application, &settings.stream);
        let lag_warning_ms = retention_ms(&clients.kinesis, &settings.stream)
            .await?
            .map(|r| r * i64::from(settings.lag_warning_percent) / 100);
        let fan_out = match settings.consumer_type {
            ConsumerType::SharedThroughput => None,
            ConsumerType::EnhancedFanOut => Some(start_fan_out(&clients, &settings).await?),
        };
        let (stopping, _) = watch::channel(false);
        let shared = Arc::new(Shared {
            fan_out,
            fan_out_stats: FanOutStats::default(),
            lag_warning_ms,
            owner,
            budget: MemoryBudget::new(settings.max_buffer_size),
            fetch_slots: Arc::new(tokio::sync::Semaphore::new(
                ((settings.max_buffer_size / super::budget::MAX_RESPONSE_BYTES) as usize).clamp(1, 16),
            )),
            kinesis: clients.kinesis,
            store,
            settings,
            shards: Mutex::new(BTreeMap::new()),
            batches: Mutex::new(HashMap::new()),
            data_ready: Notify::new(),
            rebalance: Notify::new(),
            list_now: std::sync::atomic::AtomicBool::new(false),
            deliver_until: Mutex::new(tokio::time::Instant::now()),
            #[cfg(feature = "test-support")]
            suspended_until: Mutex::new(None),
            next_batch: AtomicI64::new(1),
            cursor: AtomicUsize::new(0),
            stopping,
            readers: Mutex::new(Vec::new()),
        });
        let mut keeper = Keeper::new(shared.clone()).await?;
        keeper.first_pass().await?;
        let keeper = tokio::spawn(keeper.run());
        Ok(Self { shared, keeper: Mutex::new(Some(keeper)) })
    }

    /// Fan-out subscriptions made, ResourceInUse retries and watchdog replacements so far.
    pub fn fan_out_stats(&self) -> &FanOutStats {
        &self.shared.fan_out_stats
    }

    /// The Enhanced Fan-Out consumer's ARN, when reading with it.
    pub fn consumer_arn(&self) -> Option<&str> {
        self.shared.fan_out.as_ref().map(|f| f.consumer_arn.as_str())
    }

    /// Write requests this engine sent to the lease table so far.
    pub fn dynamodb_writes(&self) -> u64 {
        self.shared.store.writes()
    }

    /// Test hook: the lease keeper does nothing for `pause` (no heartbeats, no scans), as if the
    /// node were frozen by a long GC pause or SIGSTOP; reading and polling go on.
    #[cfg(feature = "test-support")]
    pub fn suspend_lease_keeping(&self, pause: Duration) {
        *self.shared.suspended_until.lock().unwrap_or_else(|p| p.into_inner()) = Some(tokio::time::Instant::now() + pause);
    }

    pub fn owner(&self) -> &str {
        &self.shared.owner
    }

    /// Shards currently leased and read by this engine (not those being handed back).
    pub fn leased_shards(&self) -> Vec<String> {
        self.shared.lock_shards().iter().filter(|(_, s)| !s.finished && s.handing_back.is_none()).map(|(k, _)| k.clone()).collect()
    }

    pub fn budget_available(&self) -> u64 {
        self.shared.budget.available()
    }

    /// Bytes of records this engine holds and has not handed out (buffered, plus received fan-out
    /// events waiting for budget), counted as the budget counts them, but without its clamping: a
    /// record admitted with an oversized event counts in full. Records handed out in a batch and
    /// not yet settled are not included. Walks every buffer: for tests and diagnostics.
    pub fn held_bytes(&self) -> u64 {
        let buffered: u64 = self.shared.lock_shards().values().flat_map(|s| s.buffer.iter()).map(|b| reader::record_cost(&b.record)).sum();
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
    pub async fn ack(&self, batch_id: i64) -> Result<(), ConsumerError> {
        let shards = self.shared.lock_batches().remove(&batch_id).ok_or(ConsumerError::UnknownBatch(batch_id))?;
        for shard_id in shards {
            self.shared.settle(&shard_id, batch_id).await;
        }
        Ok(())
    }

    /// NiFi did not commit the batch: its shards go back to their last checkpoint.
    pub fn nack(&self, batch_id: i64) -> Result<(), ConsumerError> {
        let shards = self.shared.lock_batches().remove(&batch_id).ok_or(ConsumerError::UnknownBatch(batch_id))?;
        let mut states = self.shared.lock_shards();
        for shard_id in shards {
            if let Some(state) = states.get_mut(&shard_id) {
                if state.in_flight.iter().any(|f| f.batch_id == batch_id) {
                    warn!(
                        component = self.shared.settings.component,
                        "NiFi did not commit batch {batch_id}; shard {shard_id} rewinds to its last checkpoint"
                    );
                    state.rewind();
                }
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
        let readers: Vec<JoinHandle<()>> = std::mem::take(&mut *self.shared.lock_readers());
        for r in readers {
            let _ = tokio::time::timeout(Duration::from_secs(5), r).await;
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while !self.shared.lock_batches().is_empty() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let leases: Vec<_> = self.shared.lock_shards().values().filter(|s| !s.finished).map(|s| s.lease.clone()).collect();
        for lease in leases {
            match self.shared.store.release(&lease).await {
                Ok(()) | Err(LeaseError::Fenced { .. }) => {}
                Err(e) => warn!(component = self.shared.settings.component, "could not release the lease of shard {}: {e}", lease.shard_id),
            }
        }
        self.shared.lock_shards().clear();
        if let Err(e) = self.shared.store.remove_node(&self.shared.owner).await {
            warn!(component = self.shared.settings.component, "could not remove this node's heartbeat row: {e}");
        }
        info!(component = self.shared.settings.component, "consumer of stream '{}' stopped", self.shared.settings.stream);
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
        for reader in self.shared.lock_readers().drain(..) {
            reader.abort();
        }
    }
}

impl Shared {
    pub(super) fn lock_shards(&self) -> MutexGuard<'_, BTreeMap<String, ShardState>> {
        self.shards.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_batches(&self) -> MutexGuard<'_, HashMap<i64, Vec<String>>> {
        self.batches.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_readers(&self) -> MutexGuard<'_, Vec<JoinHandle<()>>> {
        self.readers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The shard's generation and committed position; `None` once the shard is finished or lost.
    /// Where a shard without a checkpoint starts.
    pub(super) fn initial_position(&self, shard_id: &str) -> InitialPosition {
        self.lock_shards().get(shard_id).and_then(|s| s.initial).unwrap_or(self.settings.initial_position)
    }

    pub(super) fn reader_generation(&self, shard_id: &str) -> Option<(u64, Option<Position>)> {
        self.lock_shards()
            .get(shard_id)
            .filter(|s| !s.finished && s.handing_back.is_none())
            .map(|s| (s.generation, s.committed.clone()))
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
        let mut shards = self.lock_shards();
        let Some(state) = shards.get_mut(shard_id).filter(|s| s.generation == generation) else { return false };
        state.millis_behind = millis_behind;
        let had_records = !records.is_empty();
        for b in records {
            state.buffered_bytes += b.reservation.bytes();
            state.buffer.push_back(b);
        }
        if let Some(children) = ended {
            state.reader_finished = true;
            state.children = children;
        }
        drop(shards);
        if had_records {
            self.data_ready.notify_waiters();
        }
        true
    }

    /// Takes up to `max_bytes` round-robin over the shards and registers the batch.
    fn take(&self, max_bytes: u64) -> Option<Batch> {
        if !self.may_deliver() {
            return None;
        }
        let mut shards = self.lock_shards();
        let ids: Vec<String> =
            shards.iter().filter(|(_, s)| !s.buffer.is_empty() && s.handing_back.is_none()).map(|(k, _)| k.clone()).collect();
        if ids.is_empty() {
            return None;
        }
        let id = self.next_batch.fetch_add(1, Ordering::Relaxed);
        let first = self.cursor.fetch_add(1, Ordering::Relaxed) % ids.len();
        let mut out = Vec::new();
        let mut bytes = 0u64;
        for shard_id in ids.iter().cycle().skip(first).take(ids.len()) {
            if bytes >= max_bytes {
                break;
            }
            let state = shards.get_mut(shard_id).expect("listed above");
            let mut records = Vec::new();
            let mut reservations = Vec::new();
            while let Some(front) = state.buffer.front() {
                let size = front.reservation.bytes();
                if bytes + size > max_bytes && !(records.is_empty() && out.is_empty()) {
                    break;
                }
                let b = state.buffer.pop_front().expect("front exists");
                bytes += size;
                state.buffered_bytes -= size;
                reservations.push(b.reservation);
                records.push(b.record);
            }
            if records.is_empty() {
                continue;
            }
            let last = records.last().map(|r| Position::new(r.sequence_number.clone(), r.sub_sequence_number));
            state.in_flight.push_back(InFlight { batch_id: id, last, acked: false, reservations });
            out.push(ShardRecords {
                shard_id: shard_id.clone(),
                parent_shard_ids: state.parents.clone(),
                millis_behind: state.millis_behind,
                records,
            });
        }
        drop(shards);
        self.lock_batches().insert(id, out.iter().map(|s| s.shard_id.clone()).collect());
        Some(Batch { id, shards: out, bytes })
    }

    /// Marks the shard's part of a batch acknowledged and checkpoints what is settled.
    async fn settle(self: &Arc<Self>, shard_id: &str, batch_id: i64) {
        let (lease, settled) = {
            let mut shards = self.lock_shards();
            let Some(state) = shards.get_mut(shard_id) else { return };
            let Some(entry) = state.in_flight.iter_mut().find(|f| f.batch_id == batch_id) else { return };
            entry.acked = true;
            (state.lease.clone(), state.settle_front())
        };
        let Some(position) = settled else { return };
        match self.store.checkpoint(&lease, &position, false).await {
            Ok(()) => {
                let finished = {
                    let mut shards = self.lock_shards();
                    let Some(state) = shards.get_mut(shard_id) else { return };
                    state.committed = Some(position);
                    if state.handing_back.is_some() && state.in_flight.is_empty() {
                        self.rebalance.notify_one();
                    }
                    state.reader_finished && state.buffer.is_empty() && state.in_flight.is_empty()
                };
                if finished {
                    self.finish_shard(shard_id).await;
                }
            }
            Err(LeaseError::Fenced { .. }) => self.lose(shard_id),
            Err(e) => warn!(component = self.settings.component, "checkpoint of shard {shard_id} not written: {e}"),
        }
    }

    /// The reader saw the end of the shard.
    pub(super) async fn on_reader_finished(self: &Arc<Self>, shard_id: &str) {
        let finished = {
            let shards = self.lock_shards();
            shards.get(shard_id).is_some_and(|s| s.reader_finished && s.buffer.is_empty() && s.in_flight.is_empty())
        };
        if finished {
            self.finish_shard(shard_id).await;
        }
    }

    /// Writes the children's rows and the shard-end marker once everything of the shard is
    /// committed (which also gives the lease up), then wakes the keeper to take the children.
    /// If the marker cannot be written, the shard stays here as finished and the keeper retries.
    pub(super) async fn finish_shard(self: &Arc<Self>, shard_id: &str) {
        let (lease, children) = {
            let mut shards = self.lock_shards();
            let Some(state) = shards.get_mut(shard_id) else { return };
            state.finished = true;
            (state.lease.clone(), state.children.clone())
        };
        for (child, parents) in &children {
            if let Err(e) = self.store.add_child(child, parents).await {
                warn!(component = self.settings.component, "row of child shard {child} not written: {e}");
            }
        }
        match self.store.mark_shard_end(&lease).await {
            Ok(()) => {
                info!(component = self.settings.component, "shard {shard_id} finished: every record committed");
                self.lock_shards().remove(shard_id);
            }
            Err(LeaseError::Fenced { .. }) => self.lose(shard_id),
            Err(e) => warn!(component = self.settings.component, "shard-end marker of {shard_id} not written: {e}"),
        }
        if children.is_empty() {
            self.list_now.store(true, Ordering::Relaxed);
        }
        self.rebalance.notify_one();
    }

    /// The lease moved on: drop the shard's records at once and stop delivering them.
    pub(super) fn lose(&self, shard_id: &str) {
        if self.lock_shards().remove(shard_id).is_some() {
            warn!(component = self.settings.component, "lease on shard {shard_id} was lost; its buffered records are dropped");
        }
    }

    /// Starts reading a shard whose lease was just taken.
    pub(super) fn start_reading(
        self: &Arc<Self>,
        lease: Lease,
        committed: Option<Position>,
        parents: Vec<String>,
        initial: Option<InitialPosition>,
    ) {
        let shard_id = lease.shard_id.clone();
        let mut state = ShardState::new(lease, committed);
        state.parents = parents;
        state.initial = initial;
        self.lock_shards().insert(shard_id.clone(), state);
        let handle = match &self.fan_out {
            None => tokio::spawn(reader::run(self.clone(), shard_id)),
            Some(f) => {
                let client = fan_out::pooled(&f.pool, f.next.fetch_add(1, Ordering::Relaxed)).clone();
                tokio::spawn(super::subscriber::run(self.clone(), shard_id, client, f.consumer_arn.clone()))
            }
        };
        let mut readers = self.lock_readers();
        readers.retain(|r| !r.is_finished());
        readers.push(handle);
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
    let clients = crate::aws::clients(&config.aws()).await;
    fan_out::deregister(&clients.kinesis, &config.stream_name, &config.application_name).await?;
    Ok(Some(config.application_name.clone()))
}

/// Registers (or finds) the consumer named after the application and builds the client pool: each
/// pooled client has the same configuration and a separate HTTP client and connection pool
/// ([`AwsClients::separate_kinesis`]), so over HTTP/2 each carries its own connection.
async fn start_fan_out(clients: &AwsClients, settings: &EngineSettings) -> Result<FanOut, ConsumerError> {
    let kinesis = &clients.kinesis;
    let consumer_arn = fan_out::ensure_consumer(kinesis, &settings.stream, &settings.application, settings.component).await?;
    let shards = crate::kinesis::shards::list_shards(kinesis, &settings.stream).await?.len();
    let size = fan_out::pool_size(shards, settings.fan_out_subscriptions_per_client);
    let pool = (0..size).map(|_| clients.separate_kinesis()).collect();
    Ok(FanOut { consumer_arn, pool, next: AtomicUsize::new(0) })
}

/// The stream's retention period in milliseconds (checks that the stream exists, too).
async fn retention_ms(client: &aws_sdk_kinesis::Client, stream: &str) -> Result<Option<i64>, ConsumerError> {
    use aws_sdk_kinesis::error::ProvideErrorMetadata;
    let out = client.describe_stream_summary().stream_name(stream).send().await.map_err(|e| {
        crate::kinesis::KinesisError::from_sdk(stream, None, crate::kinesis::sdk_error_text(&e), e.code().map(str::to_owned))
    })?;
    Ok(out.stream_description_summary().map(|d| i64::from(d.retention_period_hours()) * 3_600_000))
}

/// A unique node id without another dependency: time, process id and a random number.
pub(super) fn uuid_like() -> String {
    format!("{:x}-{:x}-{:016x}", crate::lease::now_ms(), std::process::id(), rand::random::<u64>())
}
