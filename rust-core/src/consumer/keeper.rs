//! Lease keeping for one engine, on its own task, independent of NiFi's triggers and of
//! back-pressure. Each pass: bump the heartbeat when due, read the table once, drop leases that are
//! no longer ours (fencing), work out which shards are readable (parents before children), take
//! and hand back leases for a fair share, and release handed-back leases once their batches are
//! settled. Delivery is allowed only while the last heartbeat is fresh enough that no other node
//! can have judged this one dead.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::{info, warn};

use super::end_probe::ListingView;
use super::resume;
use super::shared::Shared;
use super::watchdog::{Alarm, Watchdog};
use super::ConsumerError;
use crate::config::consume_kinesis::InitialPosition;
use crate::contract::counters::consume_kinesis::ConsumerCounter;
use crate::kinesis::shards::{list_shards, ShardInfo};
use crate::lease::balance::{self, Readable};
use crate::lease::kcl::StartHint;
use crate::lease::membership::Membership;
use crate::lease::{now_ms, Checkpoint, Holder, LeaseError, LeaseRow};
use crate::runtime::lock;

/// A listing of the stream's shards and when it was started.
struct Listing {
    shards: Vec<ShardInfo>,
    started: Instant,
}

pub(super) struct Keeper {
    shared: Arc<Shared>,
    membership: Membership,
    listing: Listing,
    /// When the last successful heartbeat was sent.
    last_beat: Option<Instant>,
    next_beat: Instant,
    /// Rows of children not (yet) in the listing, and when each was first seen.
    unlisted: HashMap<String, Instant>,
    /// Rows of finished shards, and when each was first seen finished.
    finished_seen: HashMap<String, Instant>,
    /// Malformed rows already warned about, and when.
    malformed_warned: HashMap<String, Instant>,
    /// Failover Position `SNOWFLAKE_COMMIT`: when loaded positions were last written alone, and
    /// what is known about PutSnowflake's reports (for the warning when none come).
    next_loaded_write: Instant,
    reports: ReportWatch,
    /// The stuck-shard watchdog and when it looks next.
    watchdog: Watchdog,
    next_watch: Instant,
}

/// Watches whether PutSnowflake in this JVM reports loaded positions for this consumer.
struct ReportWatch {
    /// When a tracked shard's checkpoint first ran ahead of its loaded position without a report
    /// since.
    behind_since: Option<Instant>,
    warned_at: Option<Instant>,
}

/// A consumer whose checkpoints run ahead of every loaded position for this long is warned about.
const NO_REPORT_WARNING: Duration = Duration::from_secs(120);

/// How often the stuck-shard watchdog looks at the shards.
const WATCH_INTERVAL: Duration = Duration::from_secs(2);

/// A malformed row is warned about again after this long.
const MALFORMED_REWARN: Duration = Duration::from_secs(600);

/// The warning that no PutSnowflake reports loaded rows is repeated at most this often.
const NO_REPORT_REWARN: Duration = Duration::from_secs(600);

impl Keeper {
    pub async fn new(shared: Arc<Shared>) -> Result<Self, ConsumerError> {
        let started = Instant::now();
        let stuck_after = shared.settings.stuck_shard_warning;
        let shards = list_shards(&shared.kinesis, shared.settings.stream_ref()).await?;
        *lock(&shared.listing) = ListingView::of(&shards, started);
        Ok(Self {
            membership: Membership::new(shared.owner.clone(), shared.settings.failover_timeout),
            shared,
            listing: Listing { shards, started },
            last_beat: None,
            next_beat: started,
            unlisted: HashMap::new(),
            finished_seen: HashMap::new(),
            malformed_warned: HashMap::new(),
            next_loaded_write: started,
            reports: ReportWatch { behind_since: None, warned_at: None },
            watchdog: Watchdog::new(stuck_after),
            next_watch: started,
        })
    }

    /// Joins the cluster and takes the first share; errors (table access, stream) reach the user.
    pub async fn first_pass(&mut self) -> Result<(), ConsumerError> {
        self.beat().await?;
        self.pass().await
    }

    pub async fn run(mut self) {
        let mut stopping = self.shared.stopping.subscribe();
        loop {
            tokio::select! {
                _ = tokio::time::sleep(self.shared.settings.scan_interval) => {}
                _ = self.shared.rebalance.notified() => {}
                _ = stopping.changed() => return,
            }
            if self.suspended() {
                continue;
            }
            if Instant::now() >= self.next_beat {
                if let Err(e) = self.beat().await {
                    warn!("heartbeat not written: {e}");
                }
            }
            if let Err(e) = self.pass().await {
                warn!("lease pass on stream '{}' failed: {e}", self.shared.settings.stream);
            }
            self.watch_progress();
        }
    }

    /// The stuck-shard watchdog, at most once per [`WATCH_INTERVAL`]: a warning when a shard
    /// makes no progress while records wait, and one when it moves again.
    fn watch_progress(&mut self) {
        let now = Instant::now();
        if now < self.next_watch {
            return;
        }
        self.next_watch = now + WATCH_INTERVAL;
        for alarm in self.watchdog.observe(now, &self.shared.status()) {
            match alarm {
                Alarm::Stuck { shard_id, stalled, waiting, children } => {
                    let blocked = if children.is_empty() {
                        String::new()
                    } else {
                        format!("; no node reads its child shard(s) {} before it ends", children.join(", "))
                    };
                    warn!(
                        "shard {shard_id} has made no progress for {} s while records wait: it waits for {}{blocked}",
                        stalled.as_secs(),
                        waiting.describe()
                    )
                }
                Alarm::Moving { shard_id, stalled } => {
                    warn!("shard {shard_id} moves again after {} s without progress", stalled.as_secs())
                }
            }
        }
    }

    #[cfg(feature = "test-support")]
    fn suspended(&self) -> bool {
        lock(&self.shared.suspended_until).is_some_and(|t| t > Instant::now())
    }

    #[cfg(not(feature = "test-support"))]
    fn suspended(&self) -> bool {
        false
    }

    async fn beat(&mut self) -> Result<(), LeaseError> {
        let sent = Instant::now();
        self.next_beat = sent + self.shared.settings.heartbeat_interval;
        self.shared.node_row.beat(&self.shared.store).await?;
        self.last_beat = Some(sent);
        Ok(())
    }

    async fn pass(&mut self) -> Result<(), ConsumerError> {
        let view = self.shared.store.scan().await?;
        let now = Instant::now();
        self.warn_malformed(&view.malformed, now);
        self.membership.observe(&view.nodes, now);
        let rows: HashMap<&str, &LeaseRow> = view.leases.iter().map(|r| (r.shard_id.as_str(), r)).collect();
        self.drop_leases_moved_on(&rows);
        if let Some(beat) = self.last_beat {
            // Others judge this node dead no sooner than a failover timeout after the beat they
            // saw; stop delivering a scan interval before that.
            let settings = &self.shared.settings;
            self.shared.deliver_until(beat + settings.failover_timeout.saturating_sub(settings.scan_interval));
        }
        self.retry_failed_writes().await;
        self.follow_snowflake(&view.leases, now).await;
        self.complete_hand_backs().await;
        if *self.shared.stopping.borrow() {
            return Ok(());
        }
        self.refresh_listing(&view.leases).await?;
        let gone: HashSet<String> =
            self.unlisted.iter().filter(|(_, seen)| **seen < self.listing.started).map(|(id, _)| id.clone()).collect();
        let malformed: HashSet<String> = view.malformed.iter().map(|(id, _)| id.clone()).collect();
        let readable = readable(&self.listing.shards, &view.leases, &gone, &malformed);
        self.balance(&readable, &view.leases, now).await?;
        self.retire_rows(&view.leases, now).await;
        for node in self.membership.long_dead(now) {
            if self.shared.store.remove_node(&node.row, &node.owner, Some(node.beat)).await.is_ok() {
                info!("removed the heartbeat row of node {}, silent for long", node.owner);
            }
        }
        Ok(())
    }

    /// A bulletin names each row that cannot be understood (its shard is not read, and its
    /// children wait, until the row is fixed or deleted); the other rows go on.
    fn warn_malformed(&mut self, malformed: &[(String, String)], now: Instant) {
        self.malformed_warned.retain(|id, _| malformed.iter().any(|(m, _)| m == id));
        for (shard_id, message) in malformed {
            if self.malformed_warned.get(shard_id).is_some_and(|t| now.saturating_duration_since(*t) < MALFORMED_REWARN)
            {
                continue;
            }
            self.malformed_warned.insert(shard_id.clone(), now);
            warn!(
                "the row of shard {shard_id} of stream '{}' in table '{}' is malformed ({message}); the shard is not read until \
                 the row is fixed or deleted",
                self.shared.settings.stream,
                self.shared.store.table()
            );
        }
    }

    /// Removes the rows of finished shards that have left the stream (see [`retired`]), so the
    /// table does not grow with every reshard. Children without a checkpoint first get the start
    /// position the parent's row gave them.
    async fn retire_rows(&mut self, rows: &[LeaseRow], now: Instant) {
        self.finished_seen
            .retain(|id, _| rows.iter().any(|r| &r.shard_id == id && matches!(r.checkpoint, Checkpoint::ShardEnd(_))));
        for row in rows.iter().filter(|r| matches!(r.checkpoint, Checkpoint::ShardEnd(_))) {
            self.finished_seen.entry(row.shard_id.clone()).or_insert(now);
        }
        for retire in retired(&self.listing.shards, self.listing.started, rows, &self.finished_seen) {
            let mut kept = true;
            for child in &retire.children_to_mark {
                if let Err(e) = self.shared.store.keep_child_start(child).await {
                    warn!("start position of child shard {child} not written: {e}");
                    kept = false;
                }
            }
            if !kept {
                continue;
            }
            match self.shared.store.remove_finished(&retire.shard_id).await {
                Ok(()) => {
                    self.finished_seen.remove(&retire.shard_id);
                    info!(
                        "removed the row of shard {}: finished and no longer in stream '{}'",
                        retire.shard_id, self.shared.settings.stream
                    );
                }
                Err(e) => warn!("row of finished shard {} not removed: {e}", retire.shard_id),
            }
        }
    }

    /// With Failover Position `SNOWFLAKE_COMMIT`: publishes the shards' lease counters for
    /// PutSnowflake, takes in the loaded positions it reported, writes those of idle shards into
    /// their rows (at most once per heartbeat interval; busy shards' checkpoints carry theirs), and
    /// warns when no PutSnowflake of this NiFi reports while checkpoints run ahead.
    async fn follow_snowflake(&mut self, rows: &[LeaseRow], now: Instant) {
        let Some(key) = self.shared.link.clone() else { return };
        {
            let mut board = self.shared.settings.board.lock();
            let held = self.shared.held().into_iter().map(|(shard, h)| (shard, h.counter));
            board.publish_held(&key, &self.shared.owner, held);
            board.publish_tenures(
                &key,
                self.shared.settings.failover_timeout,
                rows.iter().filter(|r| r.loaded.is_some()).filter_map(tenure_of),
            );
        }
        let advanced = self.shared.take_in_loaded(&key);
        self.watch_reports(rows, advanced, now);
        if now < self.next_loaded_write {
            return;
        }
        self.next_loaded_write = now + self.shared.settings.heartbeat_interval;
        self.shared.write_loaded_positions(super::ledger::Pass::Periodic).await;
    }

    fn watch_reports(&mut self, rows: &[LeaseRow], advanced: bool, now: Instant) {
        let mine: Vec<(String, Holder)> = self.shared.held();
        let behind = mine.iter().any(|(shard, _)| {
            rows.iter().find(|r| &r.shard_id == shard).is_some_and(|r| match (&r.checkpoint, &r.loaded) {
                (Checkpoint::At(c), Some(crate::feedback::Loaded::Through(l))) => {
                    crate::kinesis::position::is_after(c, l)
                }
                (Checkpoint::At(_), Some(crate::feedback::Loaded::FromTrimHorizon)) => true,
                _ => false,
            })
        });
        if advanced || !behind {
            self.reports.behind_since = None;
            return;
        }
        let since = *self.reports.behind_since.get_or_insert(now);
        let warned_recently =
            self.reports.warned_at.is_some_and(|t| now.saturating_duration_since(t) < NO_REPORT_REWARN);
        if now.saturating_duration_since(since) >= NO_REPORT_WARNING && !warned_recently {
            self.reports.warned_at = Some(now);
            warn!(
                "Failover Position is SNOWFLAKE_COMMIT, but for {} s no PutSnowflake in this NiFi has reported rows of stream '{}' \
                 (Application Name '{}') committed in Snowflake while NiFi committed more: a node that takes a shard over \
                 reads again from the last position Snowflake was known to have. Expected while PutSnowflake is stopped or \
                 behind; otherwise check that this ConsumeKinesis feeds a PutSnowflake on the same node (no load-balanced \
                 connection between them), or set Failover Position to NIFI_COMMIT",
                NO_REPORT_WARNING.as_secs(),
                self.shared.settings.stream,
                self.shared.settings.application
            );
        }
    }

    /// A lease whose row names another owner or counter was taken over: drop it at once.
    fn drop_leases_moved_on(&self, rows: &HashMap<&str, &LeaseRow>) {
        // A finished shard's marker also gives its lease up: its row names no owner on purpose.
        let held: Vec<(String, Holder)> = self.shared.held();
        for (shard_id, mine) in held {
            if rows.get(shard_id.as_str()).and_then(|r| r.holder.as_ref()) != Some(&mine) {
                self.shared.lose(&shard_id);
            }
        }
    }

    /// Checkpoints and shard-end markers that could not be written are tried again (a shard
    /// whose final checkpoint is written now finishes, and its children become readable).
    async fn retry_failed_writes(&self) {
        self.shared.retry_checkpoints().await;
        let ended = self.shared.unfinished_ends();
        for finish in ended {
            self.shared.finish_shard(finish).await;
        }
    }

    /// Releases handed-back leases whose batches are settled (or that waited too long).
    async fn complete_hand_backs(&self) {
        let timeout = self.shared.settings.hand_back_timeout;
        let ready = self.shared.hand_backs_due(timeout);
        for (lease, unsettled) in ready {
            if unsettled > 0 {
                warn!(
                    "shard {} handed back with {unsettled} batch(es) still unsettled after {} s; they may be read again",
                    lease.shard_id,
                    timeout.as_secs()
                );
            }
            match self.shared.store.release(&lease).await {
                Ok(()) | Err(LeaseError::Fenced { .. }) => {
                    self.shared.remove(&lease.shard_id);
                    self.shared.counters.increment(ConsumerCounter::LeasesHandedBack);
                    info!("handed shard {} back for balancing", lease.shard_id);
                }
                Err(e) => warn!("lease of shard {} not released: {e}", lease.shard_id),
            }
        }
    }

    /// Lists the stream when the listing is old, when a shard ended without naming its children
    /// or a quiet fan-out reader asks (`end_probe`), or when the table has child rows the listing does not know (at most every 5 s).
    async fn refresh_listing(&mut self, rows: &[LeaseRow]) -> Result<(), ConsumerError> {
        let listed: HashSet<&str> = self.listing.shards.iter().map(|s| s.shard_id.as_str()).collect();
        let now = Instant::now();
        let mut seen_unlisted = HashMap::new();
        for row in rows.iter().filter(|r| !r.parents.is_empty() && !listed.contains(r.shard_id.as_str())) {
            let first = self.unlisted.get(&row.shard_id).copied().unwrap_or(now);
            seen_unlisted.insert(row.shard_id.clone(), first);
        }
        self.unlisted = seen_unlisted;
        let age = self.listing.started.elapsed();
        let due = age >= self.shared.settings.shard_refresh
            || self.shared.list_now.swap(false, Ordering::Relaxed)
            || (!self.unlisted.is_empty() && age >= Duration::from_secs(5));
        if due {
            let started = Instant::now();
            let shards = list_shards(&self.shared.kinesis, self.shared.settings.stream_ref()).await?;
            *lock(&self.shared.listing) = ListingView::of(&shards, started);
            self.listing = Listing { shards, started };
        }
        Ok(())
    }

    async fn balance(&self, readable: &[Readable], rows: &[LeaseRow], now: Instant) -> Result<(), ConsumerError> {
        let mine = self.shared.reading();
        let live = self.membership.live_nodes(now);
        let wall = now_ms();
        let plan =
            balance::plan(&self.shared.owner, readable, &mine, &live, |h| self.membership.may_take_over(h, now, wall));
        for shard_id in &plan.release {
            info!(
                "handing shard {shard_id} back: {} readable shard(s) over {} live node(s)",
                readable.len(),
                live.len()
            );
            self.shared.begin_hand_back(shard_id);
        }
        let mode = self.shared.settings.failover_position;
        for (shard_id, seen) in plan.take {
            let scanned =
                rows.iter().find(|r| r.shard_id == shard_id).map_or(Checkpoint::None, |r| r.checkpoint.clone());
            let on_take = resume::on_take(mode, &scanned);
            let taken = match self.shared.store.acquire(&shard_id, &self.shared.owner, seen.as_ref(), on_take).await {
                Ok(taken) => taken,
                Err(e @ LeaseError::Malformed { .. }) => {
                    warn!("shard {shard_id} not read: {e}");
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            let Some(lease) = taken else { continue }; // another node was quicker
            if let Checkpoint::ShardEnd(_) = &lease.checkpoint {
                let _ = self.shared.store.release(&lease).await;
                continue;
            }
            let resume = resume::resume(mode, &lease.checkpoint, lease.loaded.as_ref());
            let committed = resume.after.clone();
            info!(
                "reading shard {shard_id} of stream '{}' from {}{}",
                self.shared.settings.stream,
                describe_start(&lease.checkpoint, &resume),
                seen.map_or(String::new(), |h| format!(" (taken over from node {}, silent)", h.owner)),
            );
            let parents =
                readable.iter().find(|r| r.shard_id == shard_id).map(|r| r.parents.clone()).unwrap_or_default();
            let mut initial = if resume.trim_horizon {
                Some(InitialPosition::TrimHorizon)
            } else {
                start_without_checkpoint(rows, &shard_id, &parents)
            };
            if committed.is_none() && starts_at_latest(initial.as_ref(), &self.shared.settings.initial_position) {
                let at = now_ms();
                match self.shared.store.pin_latest_start(&lease, at).await {
                    Ok(true) => initial = initial_of(StartHint::AtTimestamp(at)),
                    outcome => {
                        // Reading at a new LATEST could skip what an earlier owner read: not now.
                        let why = outcome.err().map_or("the row changed".to_owned(), |e| e.to_string());
                        warn!("start time of shard {shard_id} not written, so it is not read yet: {why}");
                        let _ = self.shared.store.release(&lease).await;
                        continue;
                    }
                }
            }
            self.shared.start_reading(lease, committed, parents, initial, resume.loaded);
        }
        Ok(())
    }
}

/// A tracking tenure's lease as the row shows it: its counter (0 for a row never taken) and
/// whether it is held.
fn tenure_of(row: &LeaseRow) -> Option<(String, crate::feedback::ShardTenure)> {
    let counter = row.holder.as_ref().map(|h| h.counter).or(row.counter)?;
    Some((row.shard_id.clone(), crate::feedback::ShardTenure { counter, held: row.holder.is_some() }))
}

/// Where reading starts, for the log.
fn describe_start(checkpoint: &Checkpoint, resume: &resume::Resume) -> String {
    let at = match checkpoint {
        Checkpoint::At(p) => Some(p),
        _ => None,
    };
    match (&resume.after, at) {
        (Some(p), Some(c)) if p != c => {
            format!("loaded position {} (what Snowflake has; checkpoint {})", p.sequence_number, c.sequence_number)
        }
        (Some(p), _) => format!("checkpoint {}", p.sequence_number),
        (None, _) if resume.trim_horizon => "TRIM_HORIZON (nothing of it was known loaded in Snowflake)".to_owned(),
        (None, _) => "the initial position".to_owned(),
    }
}

/// A shard without a checkpoint starts at the Initial Stream Position, except a child of a parent
/// this application read records from to its end (it starts at TRIM_HORIZON, so nothing written to
/// it before its lease was taken is skipped, even with LATEST) and a shard whose start KCL recorded.
fn start_without_checkpoint(rows: &[LeaseRow], shard_id: &str, parents: &[String]) -> Option<InitialPosition> {
    let row = |id: &str| rows.iter().find(|r| r.shard_id == id);
    let parent_read =
        parents.iter().any(|p| row(p).is_some_and(|r| matches!(r.checkpoint, Checkpoint::ShardEnd(Some(_)))));
    if parent_read {
        return Some(InitialPosition::TrimHorizon);
    }
    row(shard_id).and_then(|r| r.start).and_then(initial_of)
}

fn initial_of(hint: StartHint) -> Option<InitialPosition> {
    Some(match hint {
        StartHint::TrimHorizon => InitialPosition::TrimHorizon,
        StartHint::Latest => InitialPosition::Latest,
        StartHint::AtTimestamp(ms) => {
            InitialPosition::AtTimestamp(std::time::UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).ok()?))
        }
    })
}

/// Whether a shard without a checkpoint would start at LATEST: such a start is pinned to a time in
/// its row first (`StartHint::AtTimestamp`), so that an owner after this one, taking the lease
/// before any checkpoint (a stop, a hand-back, a kill, a rollback then a stop), starts where this
/// one did and not at a new LATEST past the records this one read.
fn starts_at_latest(initial: Option<&InitialPosition>, configured: &InitialPosition) -> bool {
    matches!(initial.unwrap_or(configured), InitialPosition::Latest)
}

/// A finished shard's row to remove, and the children to give a start position first.
#[derive(Debug, PartialEq, Eq)]
struct Retired {
    shard_id: String,
    children_to_mark: Vec<String>,
}

/// Rows of finished shards that have left the stream: marked finished, and absent from a listing
/// begun after the row was first seen finished (Kinesis lists a shard until its records pass the
/// retention period, so such a shard is gone for good). Nothing depends on such a row any more:
/// a child whose parents are not in the stream is readable, and a child without a checkpoint
/// (`children_to_mark`: listed or with a row, and no checkpoint) is given the start position
/// the parent's row implied. So the table holds the stream's shards plus, per open shard, at most
/// its parents, until they too leave the stream.
fn retired(
    listed: &[ShardInfo],
    listing_started: Instant,
    rows: &[LeaseRow],
    finished_seen: &HashMap<String, Instant>,
) -> Vec<Retired> {
    let listed_ids: HashSet<&str> = listed.iter().map(|s| s.shard_id.as_str()).collect();
    let by_id: HashMap<&str, &LeaseRow> = rows.iter().map(|r| (r.shard_id.as_str(), r)).collect();
    rows.iter()
        .filter(|r| matches!(r.checkpoint, Checkpoint::ShardEnd(_)) && !listed_ids.contains(r.shard_id.as_str()))
        .filter(|r| finished_seen.get(&r.shard_id).is_some_and(|seen| *seen < listing_started))
        .map(|r| {
            let id = r.shard_id.as_str();
            let mut children: Vec<String> = listed
                .iter()
                .filter(|s| s.parent_shard_ids.iter().any(|p| p == id))
                .map(|s| s.shard_id.clone())
                .chain(rows.iter().filter(|c| c.parents.iter().any(|p| p == id)).map(|c| c.shard_id.clone()))
                .filter(|c| {
                    by_id.get(c.as_str()).is_none_or(|row| row.checkpoint == Checkpoint::None && row.start.is_none())
                })
                .collect();
            children.sort();
            children.dedup();
            Retired { shard_id: r.shard_id.clone(), children_to_mark: children }
        })
        .collect()
}

/// Shards that may be read now, with their holders: every shard of the listing and every child row
/// written from ChildShards (unless known gone), not finished, whose parents are all finished or
/// no longer in the stream. Parents are always read to their end before their children. A shard
/// whose row is `malformed` is not read, and neither are its children.
fn readable(
    listed: &[ShardInfo],
    rows: &[LeaseRow],
    gone: &HashSet<String>,
    malformed: &HashSet<String>,
) -> Vec<Readable> {
    let by_id: HashMap<&str, &LeaseRow> = rows.iter().map(|r| (r.shard_id.as_str(), r)).collect();
    let mut known: Vec<(&str, Vec<String>)> =
        listed.iter().map(|s| (s.shard_id.as_str(), s.parent_shard_ids.clone())).collect();
    let listed_ids: HashSet<&str> = listed.iter().map(|s| s.shard_id.as_str()).collect();
    for row in rows {
        if !row.parents.is_empty() && !listed_ids.contains(row.shard_id.as_str()) && !gone.contains(&row.shard_id) {
            known.push((row.shard_id.as_str(), row.parents.clone()));
        }
    }
    let present: HashSet<&str> = known.iter().map(|(id, _)| *id).collect();
    let finished = |id: &str| by_id.get(id).is_some_and(|r| matches!(r.checkpoint, Checkpoint::ShardEnd(_)));
    known
        .iter()
        .filter(|(id, _)| !finished(id) && !malformed.contains(*id))
        .filter(|(_, parents)| parents.iter().all(|p| finished(p) || !present.contains(p.as_str())))
        .map(|(id, parents)| Readable {
            shard_id: (*id).to_owned(),
            holder: by_id.get(id).and_then(|r| r.holder.clone()),
            parents: parents.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinesis::position::Position;

    fn shard(id: &str, parents: &[&str]) -> ShardInfo {
        ShardInfo {
            shard_id: id.into(),
            parent_shard_ids: parents.iter().map(|p| p.to_string()).collect(),
            closed: false,
        }
    }

    fn row(id: &str, ended: bool, parents: &[&str]) -> LeaseRow {
        LeaseRow {
            shard_id: id.into(),
            checkpoint: if ended { Checkpoint::ShardEnd(None) } else { Checkpoint::None },
            holder: None,
            parents: parents.iter().map(|p| p.to_string()).collect(),
            start: None,
            loaded: None,
            counter: None,
        }
    }

    fn ids(v: Vec<Readable>) -> Vec<String> {
        v.into_iter().map(|r| r.shard_id).collect()
    }

    #[test]
    fn children_wait_for_every_parent() {
        let listed = vec![shard("p1", &[]), shard("p2", &[]), shard("merged", &["p1", "p2"]), shard("c1", &["p1"])];
        let none = HashSet::new();
        assert_eq!(ids(readable(&listed, &[], &none, &none)), vec!["p1", "p2"]);
        let rows = vec![row("p1", true, &[])];
        assert_eq!(ids(readable(&listed, &rows, &none, &none)), vec!["p2", "c1"]);
        let rows = vec![row("p1", true, &[]), row("p2", true, &[])];
        assert_eq!(ids(readable(&listed, &rows, &none, &none)), vec!["merged", "c1"]);
    }

    #[test]
    fn a_child_of_a_parent_read_to_its_end_starts_at_trim_horizon() {
        let ended = |id: &str, position: Option<Position>| LeaseRow {
            checkpoint: Checkpoint::ShardEnd(position),
            ..row(id, true, &[])
        };
        let parents = vec!["p".to_owned()];
        let read = vec![ended("p", Some(Position::new("7", None))), row("c", false, &["p"])];
        assert_eq!(start_without_checkpoint(&read, "c", &parents), Some(InitialPosition::TrimHorizon));
        // A parent that gave nothing (read from LATEST straight to its end) leaves the child to the setting.
        assert_eq!(start_without_checkpoint(&[ended("p", None)], "c", &parents), None);
        let hinted = LeaseRow { start: Some(StartHint::Latest), ..row("k", false, &[]) };
        assert_eq!(start_without_checkpoint(&[hinted], "k", &[]), Some(InitialPosition::Latest));
        assert_eq!(start_without_checkpoint(&[], "x", &[]), None);
    }

    #[test]
    fn a_parent_trimmed_from_the_stream_does_not_block() {
        assert_eq!(ids(readable(&[shard("c1", &["gone"])], &[], &HashSet::new(), &HashSet::new())), vec!["c1"]);
    }

    #[test]
    fn children_written_from_child_shards_are_read_without_a_new_listing() {
        let listed = vec![shard("p1", &[]), shard("p2", &[])];
        let rows = vec![row("p1", true, &[]), row("c1", false, &["p1"]), row("c2", false, &["p1"])];
        assert_eq!(ids(readable(&listed, &rows, &HashSet::new(), &HashSet::new())), vec!["p2", "c1", "c2"]);
        // A merge of c1 with p2 known only from the table waits for both, though c1 is unlisted.
        let rows =
            vec![row("p1", true, &[]), row("c1", false, &["p1"]), row("m", false, &["c1", "p2"]), row("p2", true, &[])];
        assert_eq!(ids(readable(&listed, &rows, &HashSet::new(), &HashSet::new())), vec!["c1"]);
        // Once a later listing lacks c1, it is gone from the stream and blocks nothing.
        let gone: HashSet<String> = ["c1".to_owned()].into();
        assert_eq!(ids(readable(&listed, &rows, &gone, &HashSet::new())), vec!["m"]);
    }

    #[test]
    fn a_malformed_row_is_not_read_and_its_children_wait() {
        let listed = vec![shard("p1", &[]), shard("p2", &[]), shard("c1", &["p1"])];
        let bad: HashSet<String> = ["p1".to_owned()].into();
        assert_eq!(ids(readable(&listed, &[], &HashSet::new(), &bad)), vec!["p2"]);
    }

    #[test]
    fn finished_rows_are_retired_only_once_a_later_listing_lacks_them() {
        let t0 = Instant::now();
        let later = t0 + Duration::from_secs(1);
        let seen: HashMap<String, Instant> = [("p".to_owned(), t0)].into();
        let rows = vec![
            row("p", true, &[]),
            LeaseRow { checkpoint: Checkpoint::At(Position::new("5", None)), ..row("c1", false, &["p"]) },
            row("c2", false, &["p"]),
        ];
        let children = vec![shard("c1", &["p"]), shard("c2", &["p"]), shard("c3", &["p"])];
        let mut listed = children.clone();
        listed.push(shard("p", &[]));
        assert_eq!(retired(&listed, later, &rows, &seen), vec![], "still in the stream");
        assert_eq!(retired(&children, t0, &rows, &seen), vec![], "a listing older than the finish proves nothing");
        assert_eq!(retired(&children, later, &rows, &HashMap::new()), vec![], "not yet seen finished");
        assert_eq!(
            retired(&children, later, &rows, &seen),
            vec![Retired { shard_id: "p".into(), children_to_mark: vec!["c2".into(), "c3".into()] }],
            "gone: the children without a checkpoint (c2's row, c3 without a row) keep their start"
        );
        let open = vec![row("o", false, &[])];
        let seen_o: HashMap<String, Instant> = [("o".to_owned(), t0)].into();
        assert_eq!(retired(&[], later, &open, &seen_o), vec![], "an unfinished row is never removed");
    }
}
