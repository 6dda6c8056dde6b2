//! The engine's shared state and its API to the processor: start, poll a batch, ack or nack it,
//! stop. A background task renews leases and picks up shards whose parents are finished.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use super::budget::MemoryBudget;
use super::reader;
use super::state::{Buffered, InFlight, ShardState};
use super::ConsumerError;
use crate::aws::AwsClients;
use crate::config::consume_kinesis::{ConsumeKinesisConfig, InitialPosition};
use crate::kinesis::position::Position;
use crate::kinesis::record::ShardRecords;
use crate::kinesis::shards::{list_shards, ShardInfo};
use crate::lease::{table, Checkpoint, LeaseError, LeaseStore};

#[derive(Debug, Clone)]
pub struct EngineSettings {
    pub stream: String,
    pub application: String,
    pub initial_position: InitialPosition,
    pub max_records_per_request: u32,
    pub max_buffer_size: u64,
    pub lease_duration: Duration,
    pub shard_refresh: Duration,
    /// Warn when a shard lags by more than this share of the stream's retention period.
    pub lag_warning_percent: u8,
    /// The component handle, so log events reach the processor's bulletins.
    pub component: u64,
}

impl EngineSettings {
    pub fn from_config(c: &ConsumeKinesisConfig, component: u64) -> Self {
        Self {
            stream: c.stream_name.clone(),
            application: c.application_name.clone(),
            initial_position: c.initial_position,
            max_records_per_request: c.max_records_per_request,
            max_buffer_size: c.max_buffer_size,
            lease_duration: Duration::from_secs(10),
            shard_refresh: Duration::from_secs(30),
            lag_warning_percent: c.lag_warning_threshold_percent,
            component,
        }
    }
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
    next_batch: AtomicI64,
    cursor: AtomicUsize,
    pub stopping: watch::Sender<bool>,
    readers: Mutex<Vec<JoinHandle<()>>>,
}

pub struct ConsumerEngine {
    shared: Arc<Shared>,
    keeper: Mutex<Option<JoinHandle<()>>>,
}

impl ConsumerEngine {
    /// Creates the lease table if needed, leases the stream's readable shards and starts reading.
    pub async fn start(settings: EngineSettings, clients: AwsClients) -> Result<Self, ConsumerError> {
        table::ensure_table(&clients.dynamodb, &settings.application, Duration::from_secs(60)).await?;
        let store = LeaseStore::new(clients.dynamodb, &settings.application, &settings.stream, settings.lease_duration);
        let lag_warning_ms = retention_ms(&clients.kinesis, &settings.stream)
            .await?
            .map(|r| r * i64::from(settings.lag_warning_percent) / 100);
        let (stopping, _) = watch::channel(false);
        let shared = Arc::new(Shared {
            lag_warning_ms,
            owner: format!("kinesnow-{}", uuid_like()),
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
            next_batch: AtomicI64::new(1),
            cursor: AtomicUsize::new(0),
            stopping,
            readers: Mutex::new(Vec::new()),
        });
        shared.clone().take_readable_shards().await?;
        let keeper = tokio::spawn(keep_leases(shared.clone()));
        Ok(Self { shared, keeper: Mutex::new(Some(keeper)) })
    }

    pub fn owner(&self) -> &str {
        &self.shared.owner
    }

    /// Shards currently leased by this engine.
    pub fn leased_shards(&self) -> Vec<String> {
        self.shared.lock_shards().iter().filter(|(_, s)| !s.finished).map(|(k, _)| k.clone()).collect()
    }

    pub fn budget_available(&self) -> u64 {
        self.shared.budget.available()
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

    /// Stops reading, waits briefly for batches in flight, and releases every lease.
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
        let leases: Vec<_> = self.shared.lock_shards().values().map(|s| s.lease.clone()).collect();
        for lease in leases {
            if let Err(e) = self.shared.store.release(&lease).await {
                warn!(component = self.shared.settings.component, "could not release the lease of shard {}: {e}", lease.shard_id);
            }
        }
        self.shared.lock_shards().clear();
        info!(component = self.shared.settings.component, "consumer of stream '{}' stopped", self.shared.settings.stream);
    }
}

/// Dropping an engine without `stop` ends its tasks but keeps its leases, as a crashed node would:
/// they expire and other nodes take them over.
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
    fn lock_shards(&self) -> MutexGuard<'_, BTreeMap<String, ShardState>> {
        self.shards.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_batches(&self) -> MutexGuard<'_, HashMap<i64, Vec<String>>> {
        self.batches.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_readers(&self) -> MutexGuard<'_, Vec<JoinHandle<()>>> {
        self.readers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The shard's generation and committed position; `None` once the shard is finished or lost.
    pub(super) fn reader_generation(&self, shard_id: &str) -> Option<(u64, Option<Position>)> {
        self.lock_shards().get(shard_id).filter(|s| !s.finished).map(|s| (s.generation, s.committed.clone()))
    }

    /// Adds fetched records to a shard's buffer; false when the shard was rewound or lost meanwhile.
    pub(super) fn push(&self, shard_id: &str, generation: u64, records: Vec<Buffered>, millis_behind: i64, ended: bool) -> bool {
        let mut shards = self.lock_shards();
        let Some(state) = shards.get_mut(shard_id).filter(|s| s.generation == generation) else { return false };
        state.millis_behind = millis_behind;
        let had_records = !records.is_empty();
        for b in records {
            state.buffered_bytes += b.reservation.bytes();
            state.buffer.push_back(b);
        }
        if ended {
            state.reader_finished = true;
        }
        drop(shards);
        if had_records {
            self.data_ready.notify_waiters();
        }
        true
    }

    /// Takes up to `max_bytes` round-robin over the shards and registers the batch.
    fn take(&self, max_bytes: u64) -> Option<Batch> {
        let mut shards = self.lock_shards();
        let ids: Vec<String> = shards.iter().filter(|(_, s)| !s.buffer.is_empty()).map(|(k, _)| k.clone()).collect();
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
            out.push(ShardRecords { shard_id: shard_id.clone(), millis_behind: state.millis_behind, records });
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

    /// Writes the shard-end marker once everything of the shard is committed, then looks for children.
    async fn finish_shard(self: &Arc<Self>, shard_id: &str) {
        let lease = {
            let mut shards = self.lock_shards();
            let Some(state) = shards.get_mut(shard_id).filter(|s| !s.finished) else { return };
            state.finished = true;
            state.lease.clone()
        };
        match self.store.mark_shard_end(&lease).await {
            Ok(()) => info!(component = self.settings.component, "shard {shard_id} finished: every record committed"),
            Err(LeaseError::Fenced { .. }) => self.lose(shard_id),
            Err(e) => warn!(component = self.settings.component, "shard-end marker of {shard_id} not written: {e}"),
        }
        if let Err(e) = self.clone().take_readable_shards().await {
            warn!(component = self.settings.component, "could not look for child shards of {shard_id}: {e}");
        }
    }

    /// The lease moved on: drop the shard's records at once and stop delivering them.
    fn lose(&self, shard_id: &str) {
        if self.lock_shards().remove(shard_id).is_some() {
            warn!(component = self.settings.component, "lease on shard {shard_id} was lost; its buffered records are dropped");
        }
    }

    /// Leases every shard that can be read now: not finished, and whose parents are finished or
    /// gone from the stream. Parents are always read to their end before their children.
    /// Boxed (and `Send`) because readers call it back when a shard ends.
    fn take_readable_shards(self: Arc<Self>) -> Pin<Box<dyn Future<Output = Result<(), ConsumerError>> + Send>> {
        Box::pin(async move {
            if *self.stopping.borrow() {
                return Ok(());
            }
            let listed = list_shards(&self.kinesis, &self.settings.stream).await?;
            let rows = self.store.rows().await?;
            let finished: HashSet<String> = rows
                .iter()
                .filter(|(_, c, _)| matches!(c, Checkpoint::ShardEnd(_)))
                .map(|(id, _, _)| id.clone())
                .chain(self.lock_shards().iter().filter(|(_, s)| s.finished).map(|(k, _)| k.clone()))
                .collect();
            let present: HashSet<&str> = listed.iter().map(|s| s.shard_id.as_str()).collect();
            for shard in readable(&listed, &finished, &present) {
                if self.lock_shards().contains_key(&shard.shard_id) {
                    continue;
                }
                let Some(lease) = self.store.acquire(&shard.shard_id, &self.owner).await? else { continue };
                let committed = match &lease.checkpoint {
                    Checkpoint::ShardEnd(_) => continue,
                    Checkpoint::At(p) => Some(p.clone()),
                    Checkpoint::None => None,
                };
                info!(
                    component = self.settings.component,
                    "reading shard {} of stream '{}' from {}",
                    shard.shard_id,
                    self.settings.stream,
                    committed.as_ref().map_or("the initial position".to_owned(), |p| format!("checkpoint {}", p.sequence_number))
                );
                self.lock_shards().insert(shard.shard_id.clone(), ShardState::new(lease, committed));
                let handle = tokio::spawn(reader::run(self.clone(), shard.shard_id.clone()));
                self.lock_readers().push(handle);
            }
            Ok(())
        })
    }
}

/// The stream's retention period in milliseconds (checks that the stream exists, too).
async fn retention_ms(client: &aws_sdk_kinesis::Client, stream: &str) -> Result<Option<i64>, ConsumerError> {
    use aws_sdk_kinesis::error::ProvideErrorMetadata;
    let out = client.describe_stream_summary().stream_name(stream).send().await.map_err(|e| {
        crate::kinesis::KinesisError::from_sdk(stream, None, crate::kinesis::sdk_error_text(&e), e.code().map(str::to_owned))
    })?;
    Ok(out.stream_description_summary().map(|d| i64::from(d.retention_period_hours()) * 3_600_000))
}

/// Shards not finished whose parents are all finished or no longer in the stream.
fn readable<'a>(listed: &'a [ShardInfo], finished: &HashSet<String>, present: &HashSet<&str>) -> Vec<&'a ShardInfo> {
    listed
        .iter()
        .filter(|s| !finished.contains(&s.shard_id))
        .filter(|s| s.parent_shard_ids.iter().all(|p| finished.contains(p) || !present.contains(p.as_str())))
        .collect()
}

/// Renews leases and picks up new or newly readable shards, independent of NiFi's triggers.
async fn keep_leases(shared: Arc<Shared>) {
    let mut stopping = shared.stopping.subscribe();
    let renew_every = shared.settings.lease_duration / 3;
    let mut last_refresh = tokio::time::Instant::now();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(renew_every) => {}
            _ = stopping.changed() => return,
        }
        let leases: Vec<_> = shared.lock_shards().values().filter(|s| !s.finished).map(|s| s.lease.clone()).collect();
        for lease in leases {
            match shared.store.renew(&lease).await {
                Ok(()) => {}
                Err(LeaseError::Fenced { .. }) => shared.lose(&lease.shard_id),
                Err(e) => warn!(component = shared.settings.component, "lease of shard {} not renewed: {e}", lease.shard_id),
            }
        }
        if last_refresh.elapsed() >= shared.settings.shard_refresh {
            last_refresh = tokio::time::Instant::now();
            if let Err(e) = shared.clone().take_readable_shards().await {
                warn!(component = shared.settings.component, "shard refresh of stream '{}' failed: {e}", shared.settings.stream);
            }
        }
    }
}

/// A unique node id without another dependency: time, process id and a random number.
fn uuid_like() -> String {
    format!("{:x}-{:x}-{:016x}", crate::lease::now_ms(), std::process::id(), rand::random::<u64>())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(id: &str, parents: &[&str]) -> ShardInfo {
        ShardInfo { shard_id: id.into(), parent_shard_ids: parents.iter().map(|p| p.to_string()).collect(), closed: false }
    }

    #[test]
    fn children_wait_for_every_parent() {
        let listed = vec![shard("p1", &[]), shard("p2", &[]), shard("merged", &["p1", "p2"]), shard("c1", &["p1"])];
        let present: HashSet<&str> = listed.iter().map(|s| s.shard_id.as_str()).collect();
        let ids = |v: Vec<&ShardInfo>| v.iter().map(|s| s.shard_id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(readable(&listed, &HashSet::new(), &present)), vec!["p1", "p2"]);
        let finished: HashSet<String> = ["p1".to_owned()].into();
        assert_eq!(ids(readable(&listed, &finished, &present)), vec!["p2", "c1"]);
        let finished: HashSet<String> = ["p1".to_owned(), "p2".to_owned()].into();
        assert_eq!(ids(readable(&listed, &finished, &present)), vec!["merged", "c1"]);
    }

    #[test]
    fn a_parent_trimmed_from_the_stream_does_not_block() {
        let listed = vec![shard("c1", &["gone"])];
        let present: HashSet<&str> = listed.iter().map(|s| s.shard_id.as_str()).collect();
        assert_eq!(readable(&listed, &HashSet::new(), &present).len(), 1);
    }
}
