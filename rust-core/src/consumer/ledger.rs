//! The engine's bookkeeping of the shards it leases, without I/O: buffers filled by readers,
//! batches handed to NiFi, their acknowledgements, rewinds, lost and handed-back leases, and the
//! end of a shard. Every operation returns what the engine must do next (a checkpoint to write, a
//! reader to start, a shard to finish, a reader to stop), and the engine (`engine.rs`) does it.
//!
//! The rules it keeps:
//! - generations are unique for the engine's lifetime: a reader of an earlier generation (rewound)
//!   has its records refused, and a reader of an earlier lease of the same shard ends;
//! - a checkpoint covers only the acknowledged front of a shard's batches, and at most one
//!   checkpoint write per shard is in flight, always of the highest acknowledged position, so
//!   checkpoints land in order and only move forward;
//! - a rewound shard whose reader had reached the end gets a new reader; a failed checkpoint stays
//!   pending until written; a shard is finished only once its end was read and everything of it
//!   is acknowledged and checkpointed.
//!
//! `model.rs` drives it with random sequences against in-memory services.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use tokio::time::Instant;

use super::state::{Buffered, InFlight, ShardState};
use super::status::{EngineFacts, ShardStatus};
use crate::config::consume_kinesis::InitialPosition;
use crate::feedback::Loaded;
use crate::kinesis::position::{is_after, Position};
use crate::kinesis::record::{KinesisRecord, ShardRecords};
use crate::lease::{Holder, Lease};

/// Where a (re)started reader of a shard begins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadFrom {
    /// The lease's initial position: nothing read yet.
    Initial,
    /// The checkpoint or the acknowledged front: its record comes again, and what it covers is dropped.
    Committed(Position),
    /// Nothing acknowledged since the lease began at its initial position: the first record it read
    /// and everything after it come again (issue 34: a new LATEST would skip them).
    FirstRead(Position),
}

/// Where a reader's next iterator (polling) or subscription (Enhanced Fan-Out) starts.
#[derive(Debug, Clone)]
pub enum Start {
    /// The lease's initial position.
    Initial,
    /// At a checkpoint: its record comes again and what it covers is dropped.
    Committed(Position),
    /// After this sequence number: the last record handed to the buffer (an expired iterator),
    /// or the previous subscription's last continuation sequence number.
    After(String),
    /// At the first record the lease read, which nothing acknowledged yet.
    At(String),
}

impl Start {
    /// The checkpoint it starts at, whose record comes again and is dropped.
    pub fn committed(&self) -> Option<&Position> {
        match self {
            Start::Committed(position) => Some(position),
            _ => None,
        }
    }
}

impl From<ReadFrom> for Start {
    fn from(from: ReadFrom) -> Self {
        match from {
            ReadFrom::Initial => Start::Initial,
            ReadFrom::Committed(p) => Start::Committed(p),
            ReadFrom::FirstRead(p) => Start::At(p.sequence_number),
        }
    }
}

impl ReadFrom {
    /// The position whose records a reader drops as already committed.
    pub fn committed(&self) -> Option<&Position> {
        match self {
            ReadFrom::Committed(p) => Some(p),
            ReadFrom::Initial | ReadFrom::FirstRead(_) => None,
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

/// A reader to spawn for a shard, from this generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReaderStart {
    pub shard_id: String,
    pub generation: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointWrite {
    pub lease: Lease,
    pub position: Position,
    /// What Snowflake has of the shard, written with the checkpoint (`SNOWFLAKE_COMMIT` only).
    pub loaded: Option<Loaded>,
}

/// Which pass asks for the loaded positions to write: the keeper's, once per heartbeat interval,
/// or the engine's last one when it stops (every position not yet written).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    Periodic,
    Final,
}

/// A loaded position to write into a lease row without a checkpoint (the shard is idle).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedWrite {
    pub lease: Lease,
    pub loaded: Loaded,
}

/// A shard read to its end with everything committed: write its children's rows, then its
/// shard-end marker (which gives the lease up).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinishShard {
    pub lease: Lease,
    pub children: Vec<(String, Vec<String>)>,
}

/// How a write to the lease table went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    Written,
    /// Not written (or not known to be): tried again later.
    Failed,
    /// The lease moved on.
    Fenced,
}

/// What the engine does next for a shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    Write(CheckpointWrite),
    Finish(FinishShard),
    /// The lease is gone: stop the shard's readers.
    Lost(String),
}

/// A shard rewound by a nack, and the reader to start when its reader had already returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewound {
    pub shard_id: String,
    pub restart: Option<ReaderStart>,
    /// Records of the shard handed to NiFi and not acknowledged, now to be read again.
    pub records_in_flight: u64,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("batch {0} is unknown or already settled")]
pub struct UnknownBatch(pub i64);

#[derive(Default)]
pub struct Ledger {
    shards: BTreeMap<String, ShardState>,
    batches: HashMap<i64, Vec<String>>,
    next_batch: i64,
    last_generation: u64,
    cursor: usize,
}

fn later(a: Option<&Position>, b: Option<&Position>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => is_after(a, b),
        (Some(_), None) => true,
        (None, _) => false,
    }
}

impl Ledger {
    pub fn new() -> Self {
        Self { next_batch: 1, ..Self::default() }
    }

    fn fresh_generation(&mut self) -> u64 {
        self.last_generation += 1;
        self.last_generation
    }

    /// A lease was just taken: its state starts a new tenure (replacing any left over).
    pub fn start(
        &mut self,
        lease: Lease,
        committed: Option<Position>,
        parents: Vec<String>,
        initial: Option<InitialPosition>,
    ) -> ReaderStart {
        let generation = self.fresh_generation();
        let shard_id = lease.shard_id.clone();
        let mut state = ShardState::new(lease, committed, generation);
        state.parents = parents;
        state.initial = initial;
        self.shards.insert(shard_id.clone(), state);
        ReaderStart { shard_id, generation }
    }

    /// For a reader of `generation`: the shard's current generation and where to resume (after
    /// everything acknowledged). `None` when the reader must end: the shard is finished, lost,
    /// handed back, or this reader belongs to an earlier lease of it.
    pub fn reader_position(&self, shard_id: &str, generation: u64) -> Option<(u64, ReadFrom)> {
        self.shards.get(shard_id).filter(|s| !s.finished && s.handing_back.is_none() && generation >= s.tenure).map(
            |s| {
                let from = match (&s.acked, &s.first_read) {
                    (Some(acked), _) => ReadFrom::Committed(acked.clone()),
                    (None, Some(first)) => ReadFrom::FirstRead(first.clone()),
                    (None, None) => ReadFrom::Initial,
                };
                (s.generation, from)
            },
        )
    }

    pub fn initial_position(&self, shard_id: &str) -> Option<InitialPosition> {
        self.shards.get(shard_id).and_then(|s| s.initial)
    }

    /// Adds fetched records to a shard's buffer (and, at its end, its children); false when the
    /// reader's generation is not the shard's (rewound, lost, handed back): nothing is added.
    pub fn push(
        &mut self,
        shard_id: &str,
        generation: u64,
        records: Vec<Buffered>,
        millis_behind: i64,
        ended: Option<Vec<(String, Vec<String>)>>,
    ) -> bool {
        let Some(state) = self.shards.get_mut(shard_id).filter(|s| s.generation == generation && !s.finished) else {
            return false;
        };
        state.millis_behind = millis_behind;
        if state.acked.is_none() && state.first_read.is_none() {
            state.first_read =
                records.first().map(|b| Position::new(b.record.sequence_number.clone(), b.record.sub_sequence_number));
        }
        if let Some(last) = records.last() {
            state.last_read_arrival_ms = Some(last.record.approximate_arrival_ms);
        }
        for b in records {
            state.buffered_bytes += b.reservation.bytes();
            state.buffer.push_back(b);
        }
        if let Some(children) = ended {
            state.reader_finished = true;
            state.children = children;
        }
        true
    }

    /// The reader of `generation` returned at the shard's end: the shard may be finished now.
    pub fn reader_ended(&mut self, shard_id: &str, generation: u64) -> Option<Next> {
        self.shards.get(shard_id).filter(|s| s.generation == generation && s.reader_finished)?;
        self.advance(shard_id)
    }

    /// Takes up to `max_bytes` of records, by their [`KinesisRecord::cost`] (at least one record, so
    /// a record larger than `max_bytes` goes alone), round-robin over the shards, and registers the batch.
    pub fn take(&mut self, max_bytes: u64) -> Option<Batch> {
        let ids: Vec<String> = self
            .shards
            .iter()
            .filter(|(_, s)| !s.buffer.is_empty() && s.handing_back.is_none() && !s.finished)
            .map(|(k, _)| k.clone())
            .collect();
        if ids.is_empty() {
            return None;
        }
        let id = self.next_batch;
        self.next_batch += 1;
        let first = self.cursor % ids.len();
        self.cursor = self.cursor.wrapping_add(1);
        let mut out = Vec::new();
        let mut bytes = 0u64;
        for shard_id in ids.iter().cycle().skip(first).take(ids.len()) {
            if bytes >= max_bytes {
                break;
            }
            let state = self.shards.get_mut(shard_id).expect("listed above");
            let mut records = Vec::new();
            let mut reservations = Vec::new();
            while let Some(front) = state.buffer.front() {
                // What the record costs, not what it holds of the budget: a record admitted with an
                // admission clamped to the whole budget may hold less, or nothing.
                let size = front.record.cost();
                if bytes + size > max_bytes && !(records.is_empty() && out.is_empty()) {
                    break;
                }
                let b = state.buffer.pop_front().expect("front exists");
                bytes += size;
                state.buffered_bytes -= b.reservation.bytes();
                reservations.push(b.reservation);
                records.push(b.record);
            }
            if records.is_empty() {
                continue;
            }
            let last = records.last().map(|r| Position::new(r.sequence_number.clone(), r.sub_sequence_number));
            let last_arrival_ms = records.last().map(|r| r.approximate_arrival_ms);
            let previous = state.in_flight.back().and_then(|f| f.last.clone()).or_else(|| state.acked.clone());
            state.in_flight.push_back(InFlight { batch_id: id, last, last_arrival_ms, acked: false, reservations });
            out.push(ShardRecords {
                shard_id: shard_id.clone(),
                parent_shard_ids: state.parents.clone(),
                millis_behind: state.millis_behind,
                records,
                tenure: state.loaded.is_some().then_some(state.lease.counter),
                previous,
            });
        }
        self.batches.insert(id, out.iter().map(|s| s.shard_id.clone()).collect());
        Some(Batch { id, shards: out, bytes })
    }

    /// NiFi committed the batch: each shard's acknowledged front moves on; returns the
    /// checkpoints to write (none for a shard whose write is still in flight: it follows that one)
    /// and the shards to finish.
    pub fn ack(&mut self, batch_id: i64) -> Result<Vec<Next>, UnknownBatch> {
        let shards = self.batches.remove(&batch_id).ok_or(UnknownBatch(batch_id))?;
        let mut next = Vec::new();
        for shard_id in shards {
            let Some(state) = self.shards.get_mut(&shard_id) else { continue };
            let Some(entry) = state.in_flight.iter_mut().find(|f| f.batch_id == batch_id) else { continue };
            entry.acked = true;
            if let Some(position) = state.settle_front() {
                if later(Some(&position), state.acked.as_ref()) {
                    state.acked = Some(position);
                }
            }
            next.extend(self.advance(&shard_id));
        }
        Ok(next)
    }

    /// NiFi did not commit the batch: its shards drop what they buffered and have in flight and
    /// read again after what is acknowledged, in a new generation.
    pub fn nack(&mut self, batch_id: i64) -> Result<Vec<Rewound>, UnknownBatch> {
        let shards = self.batches.remove(&batch_id).ok_or(UnknownBatch(batch_id))?;
        let mut rewound = Vec::new();
        for shard_id in shards {
            let in_flight =
                self.shards.get(&shard_id).is_some_and(|s| s.in_flight.iter().any(|f| f.batch_id == batch_id));
            if !in_flight {
                continue;
            }
            let generation = self.fresh_generation();
            let state = self.shards.get_mut(&shard_id).expect("checked above");
            let records_in_flight =
                state.in_flight.iter().filter(|f| !f.acked).map(|f| f.reservations.len() as u64).sum();
            state.buffer.clear();
            state.buffered_bytes = 0;
            state.in_flight.clear();
            state.generation = generation;
            // The reader returned at the shard's end: nothing would read the shard again.
            let restart = (state.reader_finished && state.handing_back.is_none() && !state.finished)
                .then(|| ReaderStart { shard_id: shard_id.clone(), generation });
            state.reader_finished = false;
            state.children.clear();
            rewound.push(Rewound { shard_id, restart, records_in_flight });
        }
        Ok(rewound)
    }

    /// A checkpoint write came back. A write of an earlier lease of the shard is ignored.
    pub fn checkpoint_written(&mut self, write: &CheckpointWrite, outcome: WriteOutcome) -> Option<Next> {
        let shard_id = write.lease.shard_id.as_str();
        let state = self.shards.get_mut(shard_id).filter(|s| same_lease(&s.lease, &write.lease))?;
        if state.writing.as_ref() != Some(&write.position) {
            return None;
        }
        state.writing = None;
        match outcome {
            WriteOutcome::Written => {
                if later(Some(&write.position), state.committed.as_ref()) {
                    state.committed = Some(write.position.clone());
                }
                if write.loaded.is_some() {
                    state.loaded_written = write.loaded.clone();
                }
                state.checkpointed_since_pass = true;
                self.advance(shard_id)
            }
            // Kept pending: `pending_checkpoints` hands it out again.
            WriteOutcome::Failed => None,
            WriteOutcome::Fenced => {
                self.shards.remove(shard_id);
                Some(Next::Lost(shard_id.to_owned()))
            }
        }
    }

    /// Tracks what Snowflake has of a shard just started (Failover Position `SNOWFLAKE_COMMIT`).
    pub fn track_loaded(&mut self, shard_id: &str, loaded: Loaded) {
        if let Some(state) = self.shards.get_mut(shard_id) {
            state.loaded = Some(loaded);
        }
    }

    /// Shards whose loaded position is tracked.
    /// Each leased shard's status, by shard id (see `status`).
    pub fn status(&self, facts: EngineFacts) -> Vec<ShardStatus> {
        let mut shards: Vec<ShardStatus> =
            self.shards.iter().filter(|(_, s)| !s.finished).map(|(id, s)| ShardStatus::of(id, s, facts)).collect();
        shards.sort_by(|a, b| a.shard_id.cmp(&b.shard_id));
        shards
    }

    /// For the gauges: the most any leased shard was behind the tip on its last read (`None`
    /// before any read), and how many shards are leased. No allocation: it runs once a second.
    pub fn lag(&self) -> (Option<i64>, usize) {
        let leased = self.shards.values().filter(|s| !s.finished);
        leased.fold((None, 0), |(behind, n), s| {
            let behind = if s.millis_behind >= 0 {
                Some(behind.map_or(s.millis_behind, |b: i64| b.max(s.millis_behind)))
            } else {
                behind
            };
            (behind, n + 1)
        })
    }

    pub fn tracked(&self) -> Vec<String> {
        self.shards.iter().filter(|(_, s)| s.loaded.is_some() && !s.finished).map(|(k, _)| k.clone()).collect()
    }

    /// Snowflake reported every record of the shard up to `position` committed; true when that
    /// moved the shard's loaded position on.
    /// The newest FlowFile of the shard PutSnowflake reported loaded began with a record that
    /// arrived at `arrival_ms` (for the shard's status only).
    pub fn note_loaded_arrival(&mut self, shard_id: &str, arrival_ms: i64) {
        if let Some(state) = self.shards.get_mut(shard_id).filter(|s| s.loaded.is_some()) {
            state.loaded_arrival_ms = Some(state.loaded_arrival_ms.map_or(arrival_ms, |a| a.max(arrival_ms)));
        }
    }

    pub fn note_loaded(&mut self, shard_id: &str, position: Position) -> bool {
        let Some(state) = self.shards.get_mut(shard_id) else { return false };
        let Some(known) = state.loaded.take() else { return false };
        let next = known.clone().max(Loaded::Through(position));
        state.loaded = Some(next.clone());
        next != known
    }

    /// Loaded positions not yet in their lease rows, of shards with no checkpoint write in flight
    /// (a checkpoint carries the position itself). With `Pass::Periodic`, only of shards that had
    /// no checkpoint written since the last periodic pass: a shard with records flowing gets its
    /// position with its next checkpoint, so it costs no write of its own; an idle one gets one.
    pub fn loaded_writes_due(&mut self, pass: Pass) -> Vec<LoadedWrite> {
        let due = self
            .shards
            .values()
            .filter(|s| !s.finished && s.writing.is_none() && s.loaded.is_some() && s.loaded != s.loaded_written)
            .filter(|s| pass == Pass::Final || !s.checkpointed_since_pass)
            .map(|s| LoadedWrite { lease: s.lease.clone(), loaded: s.loaded.clone().expect("filtered") })
            .collect();
        if pass == Pass::Periodic {
            self.shards.values_mut().for_each(|s| s.checkpointed_since_pass = false);
        }
        due
    }

    /// A loaded position was written to the lease row of `write.lease`.
    pub fn loaded_written(&mut self, write: &LoadedWrite) {
        if let Some(state) = self.shards.get_mut(&write.lease.shard_id).filter(|s| same_lease(&s.lease, &write.lease)) {
            state.loaded_written = Some(write.loaded.clone());
        }
    }

    /// Checkpoints acknowledged and not yet written (an earlier write failed), now handed out.
    pub fn pending_checkpoints(&mut self) -> Vec<CheckpointWrite> {
        let ids: Vec<String> = self
            .shards
            .iter()
            .filter(|(_, s)| !s.finished && s.writing.is_none() && s.acked != s.committed)
            .map(|(k, _)| k.clone())
            .collect();
        ids.iter()
            .filter_map(|id| match self.advance(id) {
                Some(Next::Write(w)) => Some(w),
                _ => None,
            })
            .collect()
    }

    /// The next step of a shard: write its acknowledged position, or finish it once it is ended
    /// and everything of it is checkpointed.
    fn advance(&mut self, shard_id: &str) -> Option<Next> {
        let state = self.shards.get_mut(shard_id)?;
        if state.finished || state.writing.is_some() {
            return None;
        }
        if state.acked != state.committed {
            let position = state.acked.clone()?;
            state.writing = Some(position.clone());
            return Some(Next::Write(CheckpointWrite {
                lease: state.lease.clone(),
                position,
                loaded: state.loaded.clone(),
            }));
        }
        let done = state.reader_finished
            && state.buffer.is_empty()
            && state.in_flight.is_empty()
            && state.handing_back.is_none();
        if !done {
            return None;
        }
        state.finished = true;
        Some(Next::Finish(FinishShard { lease: state.lease.clone(), children: state.children.clone() }))
    }

    /// Finished shards whose shard-end marker is not written yet (an earlier try failed).
    pub fn unfinished_ends(&self) -> Vec<FinishShard> {
        self.shards
            .values()
            .filter(|s| s.finished)
            .map(|s| FinishShard { lease: s.lease.clone(), children: s.children.clone() })
            .collect()
    }

    /// The shard-end marker came back: written or fenced, the shard is gone from here; failed, it
    /// is tried again.
    pub fn finish_done(&mut self, finish: &FinishShard, outcome: WriteOutcome) {
        let shard_id = &finish.lease.shard_id;
        if outcome != WriteOutcome::Failed
            && self.shards.get(shard_id).is_some_and(|s| same_lease(&s.lease, &finish.lease))
        {
            self.shards.remove(shard_id);
        }
    }

    /// The lease moved on: the shard's records are dropped; true if it was here.
    pub fn lose(&mut self, shard_id: &str) -> bool {
        self.shards.remove(shard_id).is_some()
    }

    /// Stops reading and delivering a shard being handed back; its buffered records are dropped.
    pub fn begin_hand_back(&mut self, shard_id: &str, now: Instant) {
        let generation = self.fresh_generation();
        if let Some(state) = self.shards.get_mut(shard_id) {
            state.buffer.clear();
            state.buffered_bytes = 0;
            state.generation = generation;
            state.handing_back = Some(now);
        }
    }

    /// Handed-back leases to release now: their batches are settled and checkpointed, or they
    /// waited `timeout`; with the number of batches still unsettled.
    pub fn hand_backs_due(&self, now: Instant, timeout: Duration) -> Vec<(Lease, usize)> {
        self.shards
            .values()
            .filter(|s| {
                s.handing_back.is_some_and(|t| {
                    (s.in_flight.is_empty() && s.checkpointed()) || now.saturating_duration_since(t) >= timeout
                })
            })
            .map(|s| (s.lease.clone(), s.in_flight.len()))
            .collect()
    }

    /// A shard being handed back has nothing left unsettled or unwritten.
    pub fn hand_back_settled(&self) -> bool {
        self.shards.values().any(|s| s.handing_back.is_some() && s.in_flight.is_empty() && s.checkpointed())
    }

    /// Drops a shard (its lease was released).
    pub fn remove(&mut self, shard_id: &str) {
        self.shards.remove(shard_id);
    }

    /// The leases held (the finished ones gave theirs up with the shard-end marker).
    pub fn held(&self) -> Vec<(String, Holder)> {
        self.shards
            .iter()
            .filter(|(_, s)| !s.finished)
            .map(|(id, s)| {
                (id.clone(), Holder { owner: s.lease.owner.clone(), counter: s.lease.counter, lease_expiry: None })
            })
            .collect()
    }

    /// Shards leased and read (not finished, not being handed back).
    pub fn reading(&self) -> BTreeSet<String> {
        self.shards.iter().filter(|(_, s)| !s.finished && s.handing_back.is_none()).map(|(k, _)| k.clone()).collect()
    }

    /// The leases to release on stop.
    pub fn leases(&self) -> Vec<Lease> {
        self.shards.values().filter(|s| !s.finished).map(|s| s.lease.clone()).collect()
    }

    pub fn has_batches(&self) -> bool {
        !self.batches.is_empty()
    }

    /// Checkpoint writes in flight.
    pub fn writes_in_flight(&self) -> usize {
        self.shards.values().filter(|s| s.writing.is_some()).count()
    }

    pub fn clear(&mut self) {
        self.shards.clear();
        self.batches.clear();
    }

    pub fn buffered_records(&self) -> impl Iterator<Item = &KinesisRecord> {
        self.shards.values().flat_map(|s| s.buffer.iter()).map(|b| &b.record)
    }

    /// Budget bytes held by buffered records and unsettled batches.
    #[cfg(test)]
    pub fn held_bytes(&self) -> u64 {
        self.shards.values().map(ShardState::held_bytes).sum()
    }

    #[cfg(test)]
    pub fn shard(&self, shard_id: &str) -> Option<&ShardState> {
        self.shards.get(shard_id)
    }
}

fn same_lease(a: &Lease, b: &Lease) -> bool {
    a.owner == b.owner && a.counter == b.counter
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consumer::budget::Reservation;
    use crate::lease::Checkpoint;

    fn lease(shard: &str, counter: u64) -> Lease {
        Lease { shard_id: shard.into(), owner: "me".into(), counter, checkpoint: Checkpoint::None, loaded: None }
    }

    fn records(from: u64, n: u64) -> Vec<Buffered> {
        (from..from + n)
            .map(|seq| Buffered {
                record: KinesisRecord {
                    sequence_number: seq.to_string(),
                    sub_sequence_number: None,
                    partition_key: "k".into(),
                    approximate_arrival_ms: 0,
                    data: vec![],
                },
                reservation: Reservation::empty(),
            })
            .collect()
    }

    fn at(seq: u64) -> Position {
        Position::new(seq.to_string(), None)
    }

    fn write(next: Option<Next>) -> CheckpointWrite {
        match next {
            Some(Next::Write(w)) => w,
            other => panic!("expected a checkpoint write, got {other:?}"),
        }
    }

    /// A record (or a KPL aggregate's expansion) larger than the whole budget is admitted alone with
    /// the whole budget, clamped: the records split from it after the budget's bytes run out hold
    /// none. Batches are still cut by what the records cost, so Max Batch Size holds for them too,
    /// and a record larger than Max Batch Size goes alone.
    #[tokio::test]
    async fn batches_keep_to_max_batch_size_when_an_admission_was_clamped_to_the_budget() {
        let budget = crate::consumer::budget::MemoryBudget::new(1000);
        let mut l = Ledger::new();
        let start = l.start(lease("s", 1), None, vec![], None);
        let mut whole = budget.reserve(10 * 430).await; // ten records of 430 bytes: clamped to 1000
        let buffered: Vec<Buffered> = (1..=10u64)
            .map(|seq| {
                let record = KinesisRecord {
                    sequence_number: "1".into(), // the sub-records of one aggregate
                    sub_sequence_number: Some(seq),
                    partition_key: "k".into(),
                    approximate_arrival_ms: 0,
                    data: vec![b'x'; 300],
                };
                assert_eq!(record.cost(), 430);
                Buffered { reservation: whole.split(record.cost()), record }
            })
            .collect();
        assert_eq!(budget.available(), 0);
        l.push("s", start.generation, buffered, 0, None);
        let mut sizes = Vec::new();
        while let Some(batch) = l.take(500) {
            sizes.push(batch.shards.iter().map(|s| s.records.len()).sum::<usize>());
            l.ack(batch.id).expect("a batch acknowledged once");
        }
        assert_eq!(sizes, vec![1; 10], "430-byte records, 500-byte batches: one a batch");
        assert_eq!(budget.available(), 1000, "all given back");
        let mut big = budget.reserve(5000).await;
        let record = KinesisRecord {
            sequence_number: "11".into(),
            sub_sequence_number: None,
            partition_key: "k".into(),
            approximate_arrival_ms: 0,
            data: vec![b'y'; 4800],
        };
        l.push("s", start.generation, vec![Buffered { reservation: big.split(record.cost()), record }], 0, None);
        let batch = l.take(500).expect("a record larger than a batch goes alone");
        assert_eq!(batch.shards[0].records.len(), 1);
    }

    #[test]
    fn the_lag_is_the_most_behind_of_the_leased_shards_read_so_far() {
        let mut l = Ledger::new();
        assert_eq!(l.lag(), (None, 0));
        let a = l.start(lease("a", 1), None, vec![], None);
        l.start(lease("b", 1), None, vec![], None);
        assert_eq!(l.lag(), (None, 2), "nothing read yet");
        l.push("a", a.generation, records(1, 2), 4_000, None);
        assert_eq!(l.lag(), (Some(4_000), 2));
    }

    #[test]
    fn a_loaded_position_rides_with_checkpoints_and_gets_a_write_of_its_own_only_when_the_shard_is_idle() {
        let mut l = Ledger::new();
        let start = l.start(lease("s", 1), None, vec![], None);
        l.track_loaded("s", Loaded::FromTrimHorizon);
        l.push("s", start.generation, records(1, 2), 0, None);
        let batch = l.take(u64::MAX).unwrap();
        let w = write(l.ack(batch.id).unwrap().pop());
        assert_eq!(w.loaded, Some(Loaded::FromTrimHorizon), "the checkpoint carries what Snowflake has");
        assert!(l.note_loaded("s", at(1)), "Snowflake committed record 1 while the checkpoint was written");
        assert_eq!(
            l.loaded_writes_due(Pass::Periodic),
            vec![],
            "a write is in flight: it is not what carries it, but the next one is"
        );
        assert_eq!(l.checkpoint_written(&w, WriteOutcome::Written), None);
        assert_eq!(
            l.loaded_writes_due(Pass::Periodic),
            vec![],
            "records flow: the next checkpoint carries the position"
        );
        let due = l.loaded_writes_due(Pass::Periodic);
        assert_eq!(due.len(), 1, "no checkpoint for a whole pass: the shard is idle, one write of its own");
        assert_eq!(due[0].loaded, Loaded::Through(at(1)));
        l.loaded_written(&due[0]);
        assert_eq!(l.loaded_writes_due(Pass::Periodic), vec![], "written: nothing more to write");
        l.note_loaded("s", at(2));
        l.push("s", start.generation, records(3, 3), 0, None);
        let batch = l.take(u64::MAX).unwrap();
        let w = write(l.ack(batch.id).unwrap().pop());
        l.checkpoint_written(&w, WriteOutcome::Written);
        l.note_loaded("s", at(3));
        assert_eq!(
            l.loaded_writes_due(Pass::Final).len(),
            1,
            "the engine's last pass writes whatever is not written yet"
        );
    }

    #[test]
    fn take_names_the_record_handed_out_before_each_shards_records() {
        let mut l = Ledger::new();
        let start = l.start(lease("s", 1), Some(at(4)), vec![], None);
        l.push("s", start.generation, records(5, 2), 0, None);
        let first = l.take(u64::MAX).unwrap();
        assert_eq!(first.shards[0].previous, Some(at(4)), "where the lease resumed");
        l.push("s", start.generation, records(7, 1), 0, None);
        let second = l.take(u64::MAX).unwrap();
        assert_eq!(second.shards[0].previous, Some(at(6)), "the last record of the batch still in flight");
        l.nack(first.id).unwrap();
        let (generation, _) = l.reader_position("s", start.generation).unwrap();
        l.push("s", generation, records(5, 1), 0, None);
        assert_eq!(
            l.take(u64::MAX).unwrap().shards[0].previous,
            Some(at(4)),
            "after a rewind: the acknowledged position"
        );
        let fresh = l.start(lease("t", 1), None, vec![], None);
        l.push("t", fresh.generation, records(1, 1), 0, None);
        assert_eq!(l.take(u64::MAX).unwrap().shards[0].previous, None, "from the shard's start: nothing before");
    }

    #[test]
    fn a_nack_after_the_shard_end_starts_a_new_reader_from_the_acknowledged_position() {
        let mut l = Ledger::new();
        let start = l.start(lease("s", 1), None, vec![], None);
        assert!(l.push("s", start.generation, records(1, 2), 0, Some(vec![("c".into(), vec!["s".into()])])));
        assert_eq!(l.reader_ended("s", start.generation), None, "records are still buffered");
        let batch = l.take(u64::MAX).unwrap();
        let rewound = l.nack(batch.id).unwrap();
        let restart = rewound[0].restart.clone().expect("the reader had returned: a new one starts");
        assert!(restart.generation > start.generation);
        assert_eq!(
            l.reader_position("s", restart.generation),
            Some((restart.generation, ReadFrom::FirstRead(at(1)))),
            "nothing acknowledged: from the first record read, not from a new initial position"
        );
        assert!(!l.push("s", start.generation, records(1, 2), 0, None), "the old generation's records are refused");
    }

    #[test]
    fn a_nack_counts_the_records_handed_out_and_not_acknowledged_as_read_again() {
        let mut l = Ledger::new();
        let start = l.start(lease("s", 1), None, vec![], None);
        l.push("s", start.generation, records(1, 2), 0, None);
        let acked = l.take(u64::MAX).unwrap();
        l.ack(acked.id).unwrap();
        l.push("s", start.generation, records(3, 3), 0, None);
        let first = l.take(u64::MAX).unwrap();
        l.push("s", start.generation, records(6, 4), 0, None);
        let _second = l.take(u64::MAX).unwrap();
        l.push("s", start.generation, records(10, 5), 0, None);
        let rewound = l.nack(first.id).unwrap();
        assert_eq!(
            rewound[0].records_in_flight, 7,
            "both unacknowledged batches go back (3 + 4); the acknowledged 2 and the 5 only buffered do not count"
        );
    }

    #[test]
    fn a_nack_while_the_reader_runs_starts_no_second_reader() {
        let mut l = Ledger::new();
        let start = l.start(lease("s", 1), None, vec![], None);
        l.push("s", start.generation, records(1, 2), 0, None);
        let batch = l.take(u64::MAX).unwrap();
        assert_eq!(l.nack(batch.id).unwrap()[0].restart, None);
        let (generation, resume) =
            l.reader_position("s", start.generation).expect("the running reader follows the rewind");
        assert!(generation > start.generation);
        assert_eq!(resume, ReadFrom::FirstRead(at(1)));
    }

    #[test]
    fn a_reader_of_an_earlier_lease_of_the_shard_ends() {
        let mut l = Ledger::new();
        let first = l.start(lease("s", 1), None, vec![], None);
        assert!(l.lose("s"));
        let second = l.start(lease("s", 2), None, vec![], None);
        assert_eq!(l.reader_position("s", first.generation), None, "the first lease's reader ends");
        assert!(!l.push("s", first.generation, records(1, 1), 0, None), "and its records are refused");
        assert!(l.reader_position("s", second.generation).is_some());
    }

    #[test]
    fn one_checkpoint_write_per_shard_is_in_flight_and_it_is_the_highest() {
        let mut l = Ledger::new();
        let g = l.start(lease("s", 1), None, vec![], None).generation;
        l.push("s", g, records(1, 2), 0, None);
        let b1 = l.take(u64::MAX).unwrap();
        l.push("s", g, records(3, 2), 0, None);
        let b2 = l.take(u64::MAX).unwrap();
        l.push("s", g, records(5, 2), 0, None);
        let b3 = l.take(u64::MAX).unwrap();
        let first = write(l.ack(b1.id).unwrap().pop());
        assert_eq!(first.position, at(2));
        assert_eq!(l.ack(b2.id).unwrap(), vec![], "the first write is in flight: the next follows it");
        assert_eq!(l.ack(b3.id).unwrap(), vec![]);
        let next = write(l.checkpoint_written(&first, WriteOutcome::Written));
        assert_eq!(next.position, at(6), "the highest acknowledged position, skipping 4");
        assert_eq!(l.checkpoint_written(&next, WriteOutcome::Written), None);
        assert_eq!(l.shard("s").unwrap().committed, Some(at(6)));
    }

    #[test]
    fn a_failed_final_checkpoint_is_handed_out_again_then_the_shard_finishes() {
        let mut l = Ledger::new();
        let g = l.start(lease("s", 1), None, vec![], None).generation;
        l.push("s", g, records(1, 3), 0, Some(vec![]));
        assert_eq!(l.reader_ended("s", g), None);
        let batch = l.take(u64::MAX).unwrap();
        let w = write(l.ack(batch.id).unwrap().pop());
        assert_eq!(l.checkpoint_written(&w, WriteOutcome::Failed), None);
        assert!(l.unfinished_ends().is_empty(), "not finished before its last checkpoint is written");
        let again = l.pending_checkpoints();
        assert_eq!(again, vec![w.clone()]);
        assert_eq!(l.pending_checkpoints(), vec![], "handed out once while in flight");
        match l.checkpoint_written(&again[0], WriteOutcome::Written) {
            Some(Next::Finish(f)) => assert_eq!(f.lease.shard_id, "s"),
            other => panic!("expected the shard to finish, got {other:?}"),
        }
    }

    #[test]
    fn a_write_of_an_earlier_lease_is_ignored() {
        let mut l = Ledger::new();
        let g = l.start(lease("s", 1), None, vec![], None).generation;
        l.push("s", g, records(1, 1), 0, None);
        let batch = l.take(u64::MAX).unwrap();
        let old = write(l.ack(batch.id).unwrap().pop());
        l.lose("s");
        l.start(lease("s", 2), Some(at(0)), vec![], None);
        assert_eq!(
            l.checkpoint_written(&old, WriteOutcome::Fenced),
            None,
            "the new lease is not lost by the old write"
        );
        assert!(l.reader_position("s", u64::MAX).is_some());
    }

    #[test]
    fn a_hand_back_waits_until_the_acknowledged_position_is_written() {
        let mut l = Ledger::new();
        let t0 = Instant::now();
        let g = l.start(lease("s", 1), None, vec![], None).generation;
        l.push("s", g, records(1, 1), 0, None);
        let batch = l.take(u64::MAX).unwrap();
        l.begin_hand_back("s", t0);
        let w = write(l.ack(batch.id).unwrap().pop());
        assert!(l.hand_backs_due(t0, Duration::from_secs(30)).is_empty(), "its checkpoint is in flight");
        l.checkpoint_written(&w, WriteOutcome::Written);
        assert_eq!(l.hand_backs_due(t0, Duration::from_secs(30)).len(), 1);
    }
}
