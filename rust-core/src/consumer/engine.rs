//! The engine's API to the processor: start, poll a batch, ack or nack it, stop. It starts the
//! lease keeper (`keeper.rs`) on its own task and gives the shared state (`shared.rs`) the
//! readers to spawn.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use super::budget::MemoryBudget;
use super::keeper::Keeper;
pub use super::ledger::Batch;
use super::ledger::{Ledger, Pass};
use super::reader;
pub use super::resume::FailoverPosition;
pub use super::shared::{heartbeat_interval, scan_interval, EngineSettings, FanOutStats};
use super::shared::{FanOut, Shared};
use super::status::state_map;
use super::ConsumerError;
use crate::aws::AwsClients;
use crate::config::consume_kinesis::{ConsumeKinesisConfig, ConsumerType};
use crate::contract::counters::consume_kinesis::ConsumerCounter;
use crate::feedback::LinkKey;
use crate::kinesis::fan_out;
use crate::lease::migration;
use crate::lease::{LeaseError, LeaseStore};
use crate::runtime::lock;

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
                if settings.board.lock().table_created(key, created) {
                    info!(
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
            counters: Default::default(),
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
            spawn: spawn_reader,
        });
        let mut keeper = Keeper::new(shared.clone()).await?;
        let engine = ConsumerEngine { shared, keeper: Mutex::new(None) };
        if let Err(e) = keeper.first_pass().await {
            // Readers may have started and leases been taken: stop them and give the leases back.
            engine.stop().await;
            return Err(e);
        }
        *lock(&engine.keeper) = Some(crate::runtime::spawn(keeper.run()));
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
        let owner = owner_id();
        migration::prepare_table(
            &clients.dynamodb,
            &settings.application,
            &settings.stream,
            &owner,
            &settings.migration,
        )
        .await?;
        let facts = crate::kinesis::stream::describe(&clients.kinesis, settings.stream_ref()).await?;
        let lag_warning_ms = Some(facts.retention_ms() * i64::from(settings.lag_warning_percent) / 100);
        let stream_arn = facts.arn;
        let fan_out = match settings.consumer_type {
            ConsumerType::SharedThroughput => None,
            ConsumerType::EnhancedFanOut => Some(start_fan_out(&clients, &settings).await?),
        };
        Ok(Prepared { settings, clients, owner, lag_warning_ms, stream_arn, fan_out })
    }
    /// Fan-out subscriptions made, ResourceInUse retries and watchdog replacements so far.
    /// View State's lines: this node, when, and each leased shard's status (see `status`).
    pub fn status_map(&self) -> Vec<(String, String)> {
        state_map(&self.shared.owner, &self.shared.status(), std::time::SystemTime::now())
    }

    /// The counts of NiFi's counters since the last call, in the contract's order (see `counters`).
    pub fn take_counters(&self) -> Vec<u64> {
        self.shared.counters.take()
    }

    /// The gauges' values now, in the contract's order (`contract::counters::consume_kinesis::GAUGES`).
    pub fn gauges(&self) -> Vec<i64> {
        let (behind, leased) = self.shared.lag();
        vec![behind.unwrap_or(crate::contract::counters::NO_VALUE), leased as i64]
    }

    pub fn fan_out_stats(&self) -> &FanOutStats {
        &self.shared.fan_out_stats
    }

    /// The Enhanced Fan-Out consumer's ARN, when reading with it.
    pub fn consumer_arn(&self) -> Option<&str> {
        self.shared.fan_out.as_ref().map(|f| f.consumer_arn.as_str())
    }

    /// The key PutSnowflake reports this consumer's loaded positions under, with Failover
    /// Position `SNOWFLAKE_COMMIT`.
    /// The board PutSnowflake reports this consumer's loaded positions on.
    pub fn board(&self) -> &crate::feedback::BoardHandle {
        &self.shared.settings.board
    }

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
        *lock(&self.shared.suspended_until) = Some(tokio::time::Instant::now() + pause);
    }

    pub fn owner(&self) -> &str {
        &self.shared.owner
    }

    /// Shards currently leased and read by this engine (not those being handed back).
    pub fn leased_shards(&self) -> Vec<String> {
        self.shared.reading().into_iter().collect()
    }

    pub fn budget_available(&self) -> u64 {
        self.shared.budget.available()
    }

    /// Bytes of records this engine holds and has not handed out (buffered, plus received fan-out
    /// events waiting for budget), counted as the budget counts them, but without its clamping: a
    /// record admitted with an oversized event counts in full. Records handed out in a batch and
    /// not yet settled are not included. Walks every buffer: for tests and diagnostics.
    pub fn held_bytes(&self) -> u64 {
        let buffered = self.shared.buffered_cost(reader::record_cost);
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
        let next = self.shared.ack(batch_id).map_err(|e| ConsumerError::UnknownBatch(e.0))?;
        for step in next {
            self.shared.follow(step).await;
        }
        self.shared.wake_if_hand_back_settled();
        Ok(())
    }

    /// NiFi did not commit the batch: its shards go back to their last checkpoint.
    /// A shard whose reader had already reached the shard's end gets a new reader.
    pub fn nack(&self, batch_id: i64) -> Result<(), ConsumerError> {
        let rewound = self.shared.nack(batch_id).map_err(|e| ConsumerError::UnknownBatch(e.0))?;
        for r in rewound {
            self.shared.counters.add(ConsumerCounter::RecordsReadAgain, r.records_in_flight);
            warn!("NiFi did not commit batch {batch_id}; shard {} rewinds to its last acknowledged record", r.shard_id);
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
        if let Some(keeper) = lock(&self.keeper).take() {
            keeper.abort();
        }
        let readers: Vec<(String, JoinHandle<()>)> = std::mem::take(&mut *self.shared.lock_readers());
        for (_, r) in readers {
            let _ = tokio::time::timeout(Duration::from_secs(5), r).await;
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while self.shared.has_batches() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // What NiFi acknowledged is checkpointed before the leases go.
        self.shared.retry_checkpoints().await;
        while self.shared.writes_in_flight() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // What Snowflake has goes into the rows too, so the next owner reads no more than it must.
        if let Some(key) = &self.shared.link {
            self.shared.take_in_loaded(key);
            self.shared.write_loaded_positions(Pass::Final).await;
        }
        let leases: Vec<_> = self.shared.leases();
        for lease in leases {
            match self.shared.store.release(&lease).await {
                Ok(()) | Err(LeaseError::Fenced { .. }) => {}
                Err(e) => warn!("could not release the lease of shard {}: {e}", lease.shard_id),
            }
        }
        self.shared.clear();
        if let Err(e) = self.shared.node_row.remove(&self.shared.store).await {
            warn!("could not remove this node's heartbeat row: {e}");
        }
        if let Some(key) = &self.shared.link {
            self.shared.settings.board.lock().forget_engine(key, &self.shared.owner);
        }
        info!("consumer of stream '{}' stopped", self.shared.settings.stream);
    }
}

/// Dropping an engine without `stop` ends its tasks but keeps its leases and heartbeat row, as a
/// crashed node would: other nodes take the leases over once its heartbeat stops changing.
impl Drop for ConsumerEngine {
    fn drop(&mut self) {
        let _ = self.shared.stopping.send(true);
        if let Some(keeper) = lock(&self.keeper).take() {
            keeper.abort();
        }
        for (_, reader) in self.shared.lock_readers().drain(..) {
            reader.abort();
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
    fan_out::deregister(&clients.kinesis, config.stream_ref(), &config.application_name).await?;
    Ok(Some(config.application_name.clone()))
}

/// Registers (or finds) the consumer named after the application and builds the client pool: each
/// pooled client has the same configuration and a separate HTTP client and connection pool
/// ([`AwsClients::separate_kinesis`]), so over HTTP/2 each carries its own connection. Each client's
/// connection is opened before any subscription starts ([`fan_out::open_connections`]), so that its
/// subscriptions, started together, share it instead of racing to open one each.
async fn start_fan_out(clients: &AwsClients, settings: &EngineSettings) -> Result<FanOut, ConsumerError> {
    let kinesis = &clients.kinesis;
    let consumer_arn = fan_out::ensure_consumer(kinesis, settings.stream_ref(), &settings.application).await?;
    let shards = crate::kinesis::shards::list_shards(kinesis, settings.stream_ref()).await?.len();
    let size = fan_out::pool_size(shards, settings.fan_out_subscriptions_per_client);
    let pool: Vec<_> = (0..size).map(|_| clients.separate_kinesis()).collect();
    fan_out::open_connections(&pool, settings.stream_ref()).await;
    Ok(FanOut { consumer_arn, pool, next: AtomicUsize::new(0) })
}

/// Starts a shard's reader task: polling (`reader`), or an Enhanced Fan-Out subscription
/// (`subscriber`) on the pooled client given with the consumer's ARN.
fn spawn_reader(
    shared: Arc<Shared>,
    shard_id: String,
    generation: u64,
    subscription: Option<(aws_sdk_kinesis::Client, String)>,
) -> JoinHandle<()> {
    match subscription {
        None => crate::runtime::spawn(reader::run(shared, shard_id, generation)),
        Some((client, consumer_arn)) => {
            crate::runtime::spawn(super::subscriber::run(shared, shard_id, generation, client, consumer_arn))
        }
    }
}

/// This engine's lease owner: `kinesnow-<start ms, hex>-<process id, hex>-<UUID v4, 32 hex digits>`.
/// Unique by its UUID; the process id names the JVM that holds a lease, for operators reading the
/// lease table and for the tests that map owners to NiFi nodes (`tests/lib/lease_table.py`).
pub(super) fn owner_id() -> String {
    format!("kinesnow-{:x}-{:x}-{}", crate::lease::now_ms(), std::process::id(), uuid::Uuid::new_v4().simple())
}

#[cfg(test)]
mod owner_tests {
    /// Found by `test_cluster_exactly_once` (run 19): an owner made of a bare UUID no longer named
    /// its process, so the tests could not tell which node held a lease.
    #[test]
    fn an_owner_names_this_process_in_its_third_field_and_is_unique() {
        let owner = super::owner_id();
        let fields: Vec<&str> = owner.split('-').collect();
        assert_eq!(fields.len(), 4, "{owner}");
        assert_eq!(fields[0], "kinesnow");
        assert_eq!(u32::from_str_radix(fields[2], 16).unwrap(), std::process::id(), "{owner}");
        assert_eq!(fields[3].len(), 32, "{owner}");
        assert_ne!(owner, super::owner_id());
    }
}
