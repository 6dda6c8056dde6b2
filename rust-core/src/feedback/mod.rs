//! What PutSnowflake tells ConsumeKinesis in the same NiFi JVM: how far Snowflake has committed
//! each shard's rows, and which lease tenure of a shard is current. Both processors live in this
//! one native library, so the meeting point is a board per process, which both engines are given
//! at their start as a [`BoardHandle`] (a test can give engines a board of their own). The records
//! ConsumeKinesis routed to `parse.failure`, which PutSnowflake's order passes over, are noted
//! beside it (`parse_failures`).
//!
//! The rules (ConsumeKinesis' Failover Position `SNOWFLAKE_COMMIT`; see `consumer::resume`):
//! - A **loaded position** is a fact about Snowflake: every record of the shard up to it is in
//!   the table. PutSnowflake reports one when a FlowFile of the shard's shared channel succeeds
//!   (its rows are committed, or were already). The board keeps the highest per shard.
//! - The consumer engine holding the shard's lease reads the board on each lease pass and writes
//!   the position into the lease row (`loadedSequenceNumber`) with its next checkpoint, so a node
//!   that takes the lease over resumes from what Snowflake has, not from what NiFi committed.
//! - One destination (database, schema, pipe) per application and stream. Rows of one shard
//!   loaded into two tables give two positions, and the lower one is the truth; the board does
//!   not guess: once a second destination reports, the key is **conflicted** and gives no more
//!   positions (the lease rows keep their last one, so a new owner re-reads more, never less).
//! - Tenures: the engine publishes, from its table scans, the lease counter of each shard's
//!   latest tracking tenure (rows with a loaded position) and whether it is held, and the leases it
//!   holds itself, so PutSnowflake can tell a FlowFile of an ended tenure (the new holder re-reads
//!   its records) from one of a current tenure. Tenures only grow on the board.
//!
//! - Chains: a shard's shared channel skips every row at or below Snowflake's committed token, so
//!   a node may put a lease's FlowFiles into it only as one unbroken run, and may report a position
//!   only when every FlowFile of the lease before it went in. Each FlowFile names the record read
//!   just before its first one (`previous`); the board keeps, per shard, the lease this JVM's
//!   engine took last, where it started, and how far this JVM's PutSnowflake has put it into the
//!   shared channel (plus the spans of records the engine routed to `parse.failure`, which never
//!   reach PutSnowflake). A FlowFile whose `previous` lies beyond that end follows a gap: one of
//!   its lease's FlowFiles went elsewhere (a load-balanced connection), so it and the rest of the
//!   lease go to the per-node channels instead (see `snowflake::link`). The chain also keeps how
//!   far Snowflake committed the lease; a PutSnowflake that stops rewinds the chains it put into
//!   back to that, since its uncommitted FlowFiles roll back to NiFi's queue and may come back
//!   behind later ones (an offload, a load-balanced connection).
//!
//! Memory: keys are the consumers of this JVM; shards per key are capped ([`MAX_SHARDS_PER_KEY`]);
//! beyond the cap a report is dropped, which only leaves a lease row's position behind. A chain
//! key keeps at most [`MAX_SKIPS`] parse-failure spans not yet committed, over all its shards and
//! chains (about 100 bytes each), and one chain at most [`MAX_SKIPS_PER_CHAIN`] of them, so one
//! shard's flood of malformed records cannot use up the others' room. Spans that touch are joined
//! (`spans`), so a run of malformed records is one span. Beyond either bound a span is dropped,
//! which can only break that chain (the per-node channels, at least once), never extend it.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};

use crate::kinesis::position::Position;

pub const MAX_SHARDS_PER_KEY: usize = 100_000;
/// Parse-failure spans a key (all its shards' chains) keeps until their committed positions pass them.
pub const MAX_SKIPS: usize = 65_536;
/// Parse-failure spans one chain keeps (a share of [`MAX_SKIPS`]), so that one shard's flood of
/// malformed records breaks that shard's chain alone, not every shard's of the key.
pub const MAX_SKIPS_PER_CHAIN: usize = MAX_SKIPS / 64;
/// Leases of a shard whose chains the board keeps (the latest ones; FlowFiles of older leases are
/// superseded by the time they come).
pub const CHAINS_PER_SHARD: usize = 4;

/// Which consumer a FlowFile came from: the stream (its ARN, or region and name when the ARN is
/// unknown) and the Application Name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LinkKey {
    pub stream: String,
    pub application: String,
}

pub use crate::lease::Loaded;

/// What a report did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reported {
    Recorded,
    /// Dropped: the key has more than one destination (`first` is the one seen before).
    Conflicted {
        first: String,
        newly: bool,
    },
    /// Dropped: the key tracks [`MAX_SHARDS_PER_KEY`] shards already.
    Full,
}

/// A shard's lease as the engine last read it: the counter of its latest tracking tenure and
/// whether someone holds it now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardTenure {
    pub counter: u64,
    pub held: bool,
}

/// Whether a FlowFile of a lease follows on from what this JVM put of that lease into the shard's
/// shared channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chain {
    /// Nothing of the lease is missing before it.
    Linked,
    /// Some of the lease's records before it never reached this JVM's PutSnowflake.
    Broken,
    /// No engine of this JVM took that lease (or it took several later ones since): nothing is known.
    Unknown,
}

/// What this JVM put into a shard's shared channel of the lease its engine took last.
#[derive(Debug, Clone)]
struct ChainState {
    tenure: u64,
    /// Every record of the lease up to here is in the shared channel, or went to `parse.failure`;
    /// `None`: the lease started at the shard's start and nothing is in yet.
    end: Option<Position>,
    /// Every record of the lease up to here is committed in the shared channel (or was before the
    /// lease started); a PutSnowflake that stops rewinds `end` to it.
    committed: Option<Position>,
    /// `parse.failure` spans not yet passed: (the record before, the last record).
    skips: Spans,
    /// Spans `end` passed over and `committed` not yet: a rewind puts them back in `skips`.
    passed: Spans,
    /// The destination (database, schema, pipe) whose shared channel the chain is: the first one a
    /// PutSnowflake of this JVM put the lease's FlowFiles into.
    destination: Option<String>,
}

/// Records of `shard` routed to `parse.failure`: those after `previous` (`None`: from the lease's
/// start) through `last`, read by lease `tenure` when it tracks what Snowflake has. See
/// [`Board::skipped`] and [`parse_failures`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip {
    pub shard: String,
    pub tenure: Option<u64>,
    pub previous: Option<Position>,
    pub last: Position,
}

use crate::runtime::lock;
use spans::{reaches, Spans};

fn extend(end: &mut Option<Position>, last: &Position) {
    if end.as_ref().is_none_or(|e| crate::kinesis::position::is_after(last, e)) {
        *end = Some(last.clone());
    }
}

impl ChainState {
    fn reaches(&self, previous: Option<&Position>) -> bool {
        reaches(previous, self.end.as_ref())
    }

    fn extend(&mut self, last: &Position) {
        extend(&mut self.end, last);
    }

    /// Moves the end over every parse-failure span that follows on from it; a span Snowflake's
    /// committed position reaches too is let go at once. Returns how many spans the chain holds
    /// fewer than before.
    fn pass_skips(&mut self) -> usize {
        let before = self.spans();
        while let Some(span) = self.skips.take_reached(self.end.as_ref()) {
            self.extend(&span.1);
            self.passed.insert(span);
        }
        self.release_committed();
        before.saturating_sub(self.spans())
    }

    /// Snowflake committed the lease's records up to `last`: so are the spans that follow on.
    /// Returns how many spans the chain holds fewer than before.
    fn commit(&mut self, last: &Position) -> usize {
        let before = self.spans();
        extend(&mut self.committed, last);
        self.release_committed();
        before.saturating_sub(self.spans())
    }

    fn release_committed(&mut self) {
        while let Some((_, span_last)) = self.passed.take_reached(self.committed.as_ref()) {
            extend(&mut self.committed, &span_last);
        }
    }

    fn spans(&self) -> usize {
        self.skips.len() + self.passed.len()
    }

    /// Returns how many spans the chain holds fewer than before (joined ones).
    fn rewind(&mut self) -> usize {
        let before = self.spans();
        self.end = self.committed.clone();
        for span in self.passed.take_all() {
            self.skips.insert(span);
        }
        before.saturating_sub(self.spans())
    }

    /// A FlowFile put in after `previous` did not load: the chain ends before it again, or at what
    /// Snowflake committed when that is later; spans passed beyond the new end count again.
    /// Returns how many spans the chain holds fewer than before (joined ones).
    fn unput(&mut self, previous: Option<&Position>) -> usize {
        let mut target = previous.cloned();
        if later(self.committed.as_ref(), target.as_ref()) {
            target = self.committed.clone();
        }
        if !later(self.end.as_ref(), target.as_ref()) {
            return 0;
        }
        let before = self.spans();
        self.end = target;
        for span in self.passed.take_ending_after(self.end.as_ref()) {
            self.skips.insert(span);
        }
        before.saturating_sub(self.spans())
    }
}

/// Whether `a` is after `b`, where `None` is before every record.
fn later(a: Option<&Position>, b: Option<&Position>) -> bool {
    match (a, b) {
        (None, _) => false,
        (Some(_), None) => true,
        (Some(a), Some(b)) => crate::kinesis::position::is_after(a, b),
    }
}

#[derive(Default)]
struct KeyState {
    /// When the lease table the tenures and chains below come from was created (ms).
    table_created: Option<i64>,
    /// Table reads published so far.
    scans: u64,
    /// The consumer's Failover Timeout, as it published it.
    failover: Option<std::time::Duration>,
    destination: Option<String>,
    conflicted: bool,
    loaded: HashMap<String, Position>,
    /// Per shard with a loaded position: the Kinesis arrival (ms) of the newest FlowFile reported
    /// loaded (its first record's), for the consumer's View State.
    loaded_arrival: HashMap<String, i64>,
    tenures: HashMap<String, ShardTenure>,
    /// The leases each running engine of this JVM holds (by owner): shard and counter.
    held_here: HashMap<String, HashMap<String, u64>>,
    /// The leases of shards each running engine of this JVM read to their end (by owner): their
    /// FlowFiles still queued here are the tail of that lease, and nobody reads the shard again.
    finished_here: HashMap<String, HashMap<String, u64>>,
    /// Per shard, the last [`CHAINS_PER_SHARD`] leases this JVM's engines took and how far each is
    /// in the shared channel.
    chains: HashMap<String, Vec<ChainState>>,
    /// Parse-failure spans over all of `chains` (at most [`MAX_SKIPS`]).
    spans: usize,
}

#[derive(Default)]
pub struct Board {
    keys: HashMap<LinkKey, KeyState>,
}

impl Board {
    /// Snowflake committed every row of `shard` up to `position` in `destination`.
    pub fn report(&mut self, key: &LinkKey, destination: &str, shard: &str, position: Position) -> Reported {
        let state = self.keys.entry(key.clone()).or_default();
        match &state.destination {
            None => state.destination = Some(destination.to_owned()),
            Some(first) if first != destination => {
                let newly = !state.conflicted;
                state.conflicted = true;
                state.loaded.clear();
                state.loaded_arrival.clear();
                return Reported::Conflicted { first: first.clone(), newly };
            }
            Some(_) => {}
        }
        if state.conflicted {
            return Reported::Conflicted { first: state.destination.clone().unwrap_or_default(), newly: false };
        }
        let full = state.loaded.len() >= MAX_SHARDS_PER_KEY;
        match state.loaded.get_mut(shard) {
            Some(known) => {
                if crate::kinesis::position::is_after(&position, known) {
                    *known = position;
                }
            }
            None if full => return Reported::Full,
            None => {
                state.loaded.insert(shard.to_owned(), position);
            }
        }
        Reported::Recorded
    }

    /// The key's consumer found its lease table created at `created` (ms). A table made anew since
    /// the last one (a reset: the table deleted, NiFi not restarted) starts its lease counters
    /// again, so the tenures, held leases and chains known from the old table are forgotten (a
    /// stale higher tenure would otherwise supersede the new leases' FlowFiles, and they would go
    /// to `success` unsent). Loaded positions are facts about Snowflake and stay. Returns whether
    /// anything was forgotten.
    pub fn table_created(&mut self, key: &LinkKey, created: i64) -> bool {
        let state = self.keys.entry(key.clone()).or_default();
        let known = state.table_created.replace(created);
        if known.is_none_or(|k| k == created) {
            return false;
        }
        state.tenures.clear();
        state.held_here.clear();
        state.finished_here.clear();
        state.chains.clear();
        state.spans = 0;
        state.scans = 0;
        true
    }

    /// The newest FlowFile of `shard` reported loaded began with a record that arrived at
    /// `arrival_ms`. Kept only for shards with a loaded position (so bounded as they are).
    pub fn report_arrival(&mut self, key: &LinkKey, shard: &str, arrival_ms: i64) {
        let Some(state) = self.keys.get_mut(key).filter(|s| s.loaded.contains_key(shard)) else { return };
        let known = state.loaded_arrival.entry(shard.to_owned()).or_insert(arrival_ms);
        *known = (*known).max(arrival_ms);
    }

    /// What [`Board::report_arrival`] keeps for `shard`, unless the key is conflicted.
    pub fn loaded_arrival(&self, key: &LinkKey, shard: &str) -> Option<i64> {
        self.keys.get(key).filter(|s| !s.conflicted).and_then(|s| s.loaded_arrival.get(shard).copied())
    }

    /// The highest position reported for `shard`, unless the key is conflicted.
    pub fn loaded(&self, key: &LinkKey, shard: &str) -> Option<Position> {
        self.keys.get(key).filter(|s| !s.conflicted).and_then(|s| s.loaded.get(shard).cloned())
    }

    /// The engine's latest view of the tracking tenures' leases (rows with a loaded position);
    /// a view older than one already published (a lower counter) changes nothing.
    pub fn publish_tenures(
        &mut self,
        key: &LinkKey,
        failover: std::time::Duration,
        tenures: impl IntoIterator<Item = (String, ShardTenure)>,
    ) {
        let state = self.keys.entry(key.clone()).or_default();
        state.scans += 1;
        state.failover = Some(failover);
        for (shard, tenure) in tenures.into_iter() {
            let room = state.tenures.len() < MAX_SHARDS_PER_KEY;
            match state.tenures.get_mut(&shard) {
                Some(known) if tenure.counter >= known.counter => *known = tenure,
                Some(_) => {}
                None if room => {
                    state.tenures.insert(shard, tenure);
                }
                None => {}
            }
        }
    }

    /// The shard's latest tracking tenure seen by an engine of this JVM.
    pub fn tenure(&self, key: &LinkKey, shard: &str) -> Option<ShardTenure> {
        self.keys.get(key).and_then(|s| s.tenures.get(shard).copied())
    }

    /// The leases engine `owner` of this JVM holds now, replacing what it published before.
    pub fn publish_held(&mut self, key: &LinkKey, owner: &str, leases: impl IntoIterator<Item = (String, u64)>) {
        let state = self.keys.entry(key.clone()).or_default();
        state.held_here.insert(owner.to_owned(), leases.into_iter().take(MAX_SHARDS_PER_KEY).collect());
    }

    /// Engine `owner` of this JVM has just taken `shard`'s lease as `tenure` (the lease counter its
    /// take wrote), to read after `start` (`None`: from the shard's start), before its reader
    /// starts, so no FlowFile of that lease comes before the board knows it.
    pub fn took_here(&mut self, key: &LinkKey, owner: &str, shard: &str, tenure: u64, start: Option<Position>) {
        let state = self.keys.entry(key.clone()).or_default();
        let leases = state.held_here.entry(owner.to_owned()).or_default();
        if leases.len() < MAX_SHARDS_PER_KEY || leases.contains_key(shard) {
            leases.insert(shard.to_owned(), tenure);
        }
        if state.chains.len() >= MAX_SHARDS_PER_KEY && !state.chains.contains_key(shard) {
            return;
        }
        let chains = state.chains.entry(shard.to_owned()).or_default();
        let before: usize = chains.iter().map(ChainState::spans).sum();
        chains.retain(|c| c.tenure != tenure);
        chains.push(ChainState {
            tenure,
            end: start.clone(),
            committed: start,
            skips: Spans::default(),
            passed: Spans::default(),
            destination: None,
        });
        chains.sort_by_key(|c| c.tenure);
        if chains.len() > CHAINS_PER_SHARD {
            chains.remove(0);
        }
        let after: usize = chains.iter().map(ChainState::spans).sum();
        state.spans -= before - after;
    }

    /// The chain of lease `tenure` of `shard`, and the key's count of spans (which its changes keep).
    fn chain_and_spans(&mut self, key: &LinkKey, shard: &str, tenure: u64) -> Option<(&mut ChainState, &mut usize)> {
        let state = self.keys.get_mut(key)?;
        let chain = state.chains.get_mut(shard)?.iter_mut().find(|c| c.tenure == tenure)?;
        Some((chain, &mut state.spans))
    }

    fn chain_of(&mut self, key: &LinkKey, shard: &str, tenure: u64) -> Option<&mut ChainState> {
        self.keys.get_mut(key)?.chains.get_mut(shard)?.iter_mut().find(|c| c.tenure == tenure)
    }

    /// The engine routed the records after `previous` through `last` of lease `tenure` to
    /// `parse.failure`: they never reach PutSnowflake, and the chain passes over them.
    pub fn skipped(&mut self, key: &LinkKey, shard: &str, tenure: u64, previous: Option<Position>, last: Position) {
        let Some((chain, spans)) = self.chain_and_spans(key, shard, tenure) else { return };
        if *spans >= MAX_SKIPS || chain.spans() >= MAX_SKIPS_PER_CHAIN {
            return;
        }
        let added = chain.skips.insert((previous, last));
        *spans = spans.saturating_add_signed(added);
    }

    /// Parse-failure spans the key keeps (for tests and the bound).
    pub fn spans(&self, key: &LinkKey) -> usize {
        self.keys.get(key).map_or(0, |s| s.spans)
    }

    /// Whether a FlowFile of lease `tenure` whose first record follows `previous` follows on from
    /// what this JVM put of that lease into the shard's shared channel.
    pub fn chain(&mut self, key: &LinkKey, shard: &str, tenure: u64, previous: Option<&Position>) -> Chain {
        let Some((chain, spans)) = self.chain_and_spans(key, shard, tenure) else {
            return Chain::Unknown;
        };
        *spans -= chain.pass_skips();
        if chain.reaches(previous) {
            Chain::Linked
        } else {
            Chain::Broken
        }
    }

    /// The destination whose shared channel the chain of lease `tenure` of `shard` is, when it is
    /// not `destination`; otherwise `None`, and the chain is `destination`'s from now on. A chain
    /// says what went into one channel: two PutSnowflakes of this JVM loading one lease into two
    /// destinations (two pipes, two channels) must not follow on from each other's FlowFiles.
    pub fn chain_destination(&mut self, key: &LinkKey, shard: &str, tenure: u64, destination: &str) -> Option<String> {
        let chain = self.chain_of(key, shard, tenure)?;
        match &chain.destination {
            Some(d) if d != destination => Some(d.clone()),
            Some(_) => None,
            None => {
                chain.destination = Some(destination.to_owned());
                None
            }
        }
    }

    /// A FlowFile of lease `tenure` ending at `last` goes into the shard's shared channel.
    pub fn put_in_channel(&mut self, key: &LinkKey, shard: &str, tenure: u64, last: &Position) {
        if let Some(chain) = self.chain_of(key, shard, tenure) {
            chain.extend(last);
        }
    }

    /// Snowflake committed a FlowFile of lease `tenure` ending at `last` in the shard's shared channel.
    pub fn committed_in_channel(&mut self, key: &LinkKey, shard: &str, tenure: u64, last: &Position) {
        if let Some((chain, spans)) = self.chain_and_spans(key, shard, tenure) {
            *spans -= chain.commit(last);
        }
    }

    /// A FlowFile of lease `tenure` whose first record follows `previous` was put into the shard's
    /// shared channel but did not load (routed to `failure`, or back to the queue): the FlowFiles
    /// after it no longer follow on until it comes again (issue 34: else they commit past it, and
    /// its rows are skipped when the user sends it back).
    pub fn unput_from_channel(&mut self, key: &LinkKey, shard: &str, tenure: u64, previous: Option<&Position>) {
        if let Some((chain, spans)) = self.chain_and_spans(key, shard, tenure) {
            *spans -= chain.unput(previous);
        }
    }

    /// The PutSnowflake that put FlowFiles of lease `tenure` into the shard's shared channel
    /// stopped: those not committed roll back to NiFi's queue, where they may come back in another
    /// order (an offload, a load-balanced connection), so only what Snowflake committed counts as
    /// in the channel. A FlowFile after it that arrives first then no longer follows on.
    pub fn rewind_chain(&mut self, key: &LinkKey, shard: &str, tenure: u64) {
        if let Some((chain, spans)) = self.chain_and_spans(key, shard, tenure) {
            *spans -= chain.rewind();
        }
    }

    /// Engine `owner` of this JVM finished `shard` (read to its end, everything committed) under
    /// lease `tenure`.
    pub fn finished_here(&mut self, key: &LinkKey, owner: &str, shard: &str, tenure: u64) {
        let state = self.keys.entry(key.clone()).or_default();
        let shards = state.finished_here.entry(owner.to_owned()).or_default();
        if shards.len() < MAX_SHARDS_PER_KEY {
            shards.insert(shard.to_owned(), tenure);
        }
    }

    /// Engine `owner` stopped: it holds nothing any more.
    pub fn forget_engine(&mut self, key: &LinkKey, owner: &str) {
        if let Some(state) = self.keys.get_mut(key) {
            state.held_here.remove(owner);
            state.finished_here.remove(owner);
        }
    }

    /// The counter of `shard`'s lease an engine of this JVM holds, or held until it finished the
    /// shard, if one does.
    pub fn held_here(&self, key: &LinkKey, shard: &str) -> Option<u64> {
        self.keys.get(key).and_then(|s| {
            s.held_here.values().chain(s.finished_here.values()).find_map(|leases| leases.get(shard).copied())
        })
    }

    /// How many table reads the key's consumers published: a view is fresher than a FlowFile
    /// parked when this was lower.
    pub fn scans(&self, key: &LinkKey) -> u64 {
        self.keys.get(key).map_or(0, |s| s.scans)
    }

    /// The Failover Timeout the key's consumer published.
    pub fn failover(&self, key: &LinkKey) -> Option<std::time::Duration> {
        self.keys.get(key).and_then(|s| s.failover)
    }
}

/// A handle on a board, given to both engines at their start (in their settings): every
/// ConsumeKinesis and PutSnowflake of one NiFi shares [`BoardHandle::process`]'s board, and a test
/// can give engines a board of their own ([`BoardHandle::new`]).
#[derive(Clone, Default)]
pub struct BoardHandle {
    board: Arc<Mutex<Board>>,
    /// The records ConsumeKinesis routed to `parse.failure`, which PutSnowflake's order passes over.
    parse_failures: Arc<Mutex<parse_failures::ParseFailures>>,
}

impl BoardHandle {
    /// A board of its own, shared with no other engine.
    pub fn new() -> Self {
        Self::default()
    }

    /// The board of this process (of this NiFi): what the processors' engines are given.
    pub fn process() -> Self {
        static PROCESS: LazyLock<BoardHandle> = LazyLock::new(BoardHandle::new);
        PROCESS.clone()
    }

    pub fn lock(&self) -> MutexGuard<'_, Board> {
        lock(&self.board)
    }

    pub fn parse_failures(&self) -> MutexGuard<'_, parse_failures::ParseFailures> {
        lock(&self.parse_failures)
    }

    /// Whether both handles are on the same board.
    pub fn same_as(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.board, &other.board)
    }
}

impl std::fmt::Debug for BoardHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.same_as(&Self::process()) { "BoardHandle(process)" } else { "BoardHandle(own)" })
    }
}

/// The board of this process, locked (tests of this crate's components; the engines use the
/// handle in their settings).
#[cfg(test)]
pub fn board() -> MutexGuard<'static, Board> {
    static GUARD: LazyLock<BoardHandle> = LazyLock::new(BoardHandle::process);
    GUARD.lock()
}

pub mod parse_failures;
mod spans;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_board_of_its_own_shares_nothing_and_the_process_board_is_one() {
        let (own, other) = (BoardHandle::new(), BoardHandle::new());
        let at = |s: &str| Position::new(s, None);
        own.lock().took_here(&key(), "engine", "shard-1", 7, Some(at("10")));
        own.lock().put_in_channel(&key(), "shard-1", 7, &at("11"));
        assert!(own.lock().held_here(&key(), "shard-1").is_some());
        assert!(other.lock().held_here(&key(), "shard-1").is_none(), "another board sees nothing of it");
        assert!(BoardHandle::process().same_as(&BoardHandle::process()));
        assert!(!own.same_as(&BoardHandle::process()));
    }

    fn key() -> LinkKey {
        LinkKey { stream: "arn:aws:kinesis:us-east-1:1:stream/s".into(), application: "app".into() }
    }

    fn at(seq: &str, sub: Option<u64>) -> Position {
        Position::new(seq, sub)
    }

    #[test]
    fn keeps_the_highest_position_per_shard() {
        let mut b = Board::default();
        assert_eq!(b.report(&key(), "db.s.p", "shard-1", at("200", None)), Reported::Recorded);
        b.report(&key(), "db.s.p", "shard-1", at("100", None));
        assert_eq!(
            b.loaded(&key(), "shard-1"),
            Some(at("200", None)),
            "a late report of a lower position changes nothing"
        );
        b.report(&key(), "db.s.p", "shard-1", at("300", Some(2)));
        b.report(&key(), "db.s.p", "shard-1", at("300", Some(1)));
        assert_eq!(b.loaded(&key(), "shard-1"), Some(at("300", Some(2))));
        assert_eq!(b.loaded(&key(), "shard-2"), None);
        let other = LinkKey { application: "other".into(), ..key() };
        assert_eq!(b.loaded(&other, "shard-1"), None, "another application's consumer learns nothing");
    }

    #[test]
    fn keeps_the_newest_arrival_of_shards_with_a_loaded_position_until_a_conflict() {
        let mut b = Board::default();
        b.report_arrival(&key(), "shard-1", 5);
        assert_eq!(b.loaded_arrival(&key(), "shard-1"), None, "no loaded position: nothing kept");
        b.report(&key(), "db.s.p", "shard-1", at("200", None));
        b.report_arrival(&key(), "shard-1", 10);
        b.report_arrival(&key(), "shard-1", 7);
        assert_eq!(b.loaded_arrival(&key(), "shard-1"), Some(10), "a late report of an older FlowFile changes nothing");
        b.report(&key(), "other.s.p", "shard-1", at("300", None));
        assert_eq!(b.loaded_arrival(&key(), "shard-1"), None, "conflicted: nothing more is told");
    }

    #[test]
    fn a_second_destination_conflicts_the_key_for_good() {
        let mut b = Board::default();
        b.report(&key(), "db.s.p1", "shard-1", at("100", None));
        assert_eq!(
            b.report(&key(), "db.s.p2", "shard-1", at("50", None)),
            Reported::Conflicted { first: "db.s.p1".into(), newly: true }
        );
        assert_eq!(b.loaded(&key(), "shard-1"), None);
        assert_eq!(
            b.report(&key(), "db.s.p1", "shard-1", at("150", None)),
            Reported::Conflicted { first: "db.s.p1".into(), newly: false }
        );
        assert_eq!(b.loaded(&key(), "shard-1"), None);
    }

    #[test]
    fn tenures_only_grow() {
        let mut b = Board::default();
        let t = |counter, held| ShardTenure { counter, held };
        b.publish_tenures(&key(), std::time::Duration::from_secs(7), [("shard-1".to_owned(), t(3, true))]);
        b.publish_tenures(&key(), std::time::Duration::from_secs(7), [("shard-1".to_owned(), t(2, true))]);
        assert_eq!(b.tenure(&key(), "shard-1"), Some(t(3, true)), "an older view changes nothing");
        b.publish_tenures(&key(), std::time::Duration::from_secs(7), [("shard-1".to_owned(), t(3, false))]);
        assert_eq!(b.tenure(&key(), "shard-1"), Some(t(3, false)), "released since");
    }

    #[test]
    fn a_chain_links_flow_files_that_follow_on_and_breaks_at_a_gap() {
        let mut b = Board::default();
        let k = key();
        assert_eq!(b.chain(&k, "s", 1, None), Chain::Unknown, "no lease taken here");
        b.took_here(&k, "engine", "s", 1, Some(at("10", None)));
        assert_eq!(b.chain(&k, "s", 1, Some(&at("10", None))), Chain::Linked, "the lease's first FlowFile");
        b.put_in_channel(&k, "s", 1, &at("12", None));
        assert_eq!(b.chain(&k, "s", 1, Some(&at("11", None))), Chain::Linked, "a FlowFile put in again (overlap)");
        assert_eq!(b.chain(&k, "s", 1, Some(&at("12", None))), Chain::Linked);
        assert_eq!(b.chain(&k, "s", 1, Some(&at("13", None))), Chain::Broken, "record 13's FlowFile never came");
        b.skipped(&k, "s", 1, Some(at("12", None)), at("13", None));
        assert_eq!(b.chain(&k, "s", 1, Some(&at("13", None))), Chain::Linked, "13 went to parse.failure");
        assert_eq!(b.chain(&k, "s", 2, Some(&at("13", None))), Chain::Unknown, "another lease");
        b.took_here(&k, "other engine", "s", 3, None);
        assert_eq!(
            b.chain(&k, "s", 1, Some(&at("13", None))),
            Chain::Linked,
            "a later lease keeps the earlier one's chain"
        );
        assert_eq!(b.chain(&k, "s", 3, Some(&at("1", Some(0)))), Chain::Broken, "its first FlowFile went elsewhere");
        assert_eq!(b.chain(&k, "s", 3, None), Chain::Linked, "the lease's first FlowFile, from the shard's start");
        for counter in 4..=6 {
            b.took_here(&k, "engine", "s", counter, None);
        }
        assert_eq!(b.chain(&k, "s", 1, None), Chain::Unknown, "only the last leases' chains are kept");
        assert_eq!(b.chain(&k, "s", 3, None), Chain::Linked);
    }

    #[test]
    fn a_rewind_keeps_only_what_snowflake_committed_and_the_skips_after_it() {
        let mut b = Board::default();
        let k = key();
        b.took_here(&k, "engine", "s", 1, Some(at("10", None)));
        b.put_in_channel(&k, "s", 1, &at("12", None));
        b.skipped(&k, "s", 1, Some(at("12", None)), at("13", None));
        assert_eq!(b.chain(&k, "s", 1, Some(&at("13", None))), Chain::Linked, "13 went to parse.failure");
        b.put_in_channel(&k, "s", 1, &at("15", None));
        b.skipped(&k, "s", 1, Some(at("15", None)), at("16", None));
        b.rewind_chain(&k, "s", 1);
        assert_eq!(
            b.chain(&k, "s", 1, Some(&at("11", None))),
            Chain::Broken,
            "nothing is committed: only the lease's start"
        );
        assert_eq!(b.chain(&k, "s", 1, Some(&at("10", None))), Chain::Linked);
        b.committed_in_channel(&k, "s", 1, &at("12", None));
        b.rewind_chain(&k, "s", 1);
        assert_eq!(b.chain(&k, "s", 1, Some(&at("13", None))), Chain::Linked, "committed through 12, and 13 skipped");
        assert_eq!(b.chain(&k, "s", 1, Some(&at("14", None))), Chain::Broken, "14 and 15 rolled back");
        b.put_in_channel(&k, "s", 1, &at("15", None));
        assert_eq!(b.chain(&k, "s", 1, Some(&at("16", None))), Chain::Linked, "16's skip survives the rewinds");
        b.committed_in_channel(&k, "s", 1, &at("15", None));
        b.rewind_chain(&k, "s", 1);
        assert_eq!(b.chain(&k, "s", 1, Some(&at("16", None))), Chain::Linked, "committed through 15, 16 skipped");
        b.rewind_chain(&k, "s", 2);
        b.committed_in_channel(&k, "s", 2, &at("99", None));
        assert_eq!(b.chain(&k, "s", 2, None), Chain::Unknown, "another lease: nothing to rewind");
    }

    /// Issue 34, item 3: a FlowFile of the shared channel went to failure; the chain stayed
    /// extended past it, so the FlowFiles after it went in and committed past its records, and when
    /// it was sent back its rows were skipped.
    #[test]
    fn a_flow_file_that_did_not_load_takes_the_chain_back_to_before_it() {
        let mut b = Board::default();
        let k = key();
        b.took_here(&k, "engine", "s", 1, Some(at("10", None)));
        b.put_in_channel(&k, "s", 1, &at("12", None));
        b.committed_in_channel(&k, "s", 1, &at("12", None));
        b.put_in_channel(&k, "s", 1, &at("14", None)); // records 13 and 14
        b.skipped(&k, "s", 1, Some(at("14", None)), at("15", None));
        assert_eq!(b.chain(&k, "s", 1, Some(&at("15", None))), Chain::Linked);
        b.put_in_channel(&k, "s", 1, &at("17", None)); // records 16 and 17
        b.unput_from_channel(&k, "s", 1, Some(&at("12", None)));
        assert_eq!(
            b.chain(&k, "s", 1, Some(&at("15", None))),
            Chain::Broken,
            "13 and 14 went to failure: what follows them waits until they come again"
        );
        assert_eq!(b.chain(&k, "s", 1, Some(&at("12", None))), Chain::Linked, "they come again");
        b.put_in_channel(&k, "s", 1, &at("14", None));
        assert_eq!(b.chain(&k, "s", 1, Some(&at("15", None))), Chain::Linked, "15's skip counts again");
        b.unput_from_channel(&k, "s", 1, Some(&at("5", None)));
        assert_eq!(
            b.chain(&k, "s", 1, Some(&at("12", None))),
            Chain::Linked,
            "never back past what Snowflake committed"
        );
    }

    /// Issue 34, item 9: two PutSnowflakes of one JVM loading one lease into two destinations
    /// shared its chain, so one of them followed on from FlowFiles that went into the other's
    /// channel, and skipped the gap in its own.
    #[test]
    fn a_chain_belongs_to_one_destination() {
        let mut b = Board::default();
        let k = key();
        assert_eq!(b.chain_destination(&k, "s", 1, "db.s.a"), None, "no lease taken here: nothing to tell");
        b.took_here(&k, "engine", "s", 1, None);
        assert_eq!(b.chain_destination(&k, "s", 1, "db.s.a"), None, "the first destination takes the chain");
        b.put_in_channel(&k, "s", 1, &at("5", None));
        assert_eq!(b.chain_destination(&k, "s", 1, "db.s.a"), None);
        assert_eq!(b.chain_destination(&k, "s", 1, "db.s.b"), Some("db.s.a".to_owned()), "not the other's");
        b.took_here(&k, "engine", "s", 2, None);
        assert_eq!(b.chain_destination(&k, "s", 2, "db.s.b"), None, "a new lease's chain is free again");
    }

    /// Issue 34, item 5: the lease table was deleted and made again with NiFi running; the board
    /// kept the old table's higher tenures, so the new leases' FlowFiles were taken for superseded
    /// (routed to success unsent) and their chains evicted.
    #[test]
    fn a_lease_table_made_anew_forgets_the_old_tables_leases() {
        let mut b = Board::default();
        let k = key();
        let t = |counter, held| ShardTenure { counter, held };
        assert!(!b.table_created(&k, 1_000), "the first table seen");
        b.publish_tenures(&k, std::time::Duration::from_secs(7), [("s".to_owned(), t(57, true))]);
        b.took_here(&k, "engine", "s", 57, None);
        b.report(&k, "db.s.p", "s", at("90", None));
        assert!(!b.table_created(&k, 1_000), "the same table again: a restart of the processor");
        assert_eq!(b.tenure(&k, "s"), Some(t(57, true)));
        assert!(b.table_created(&k, 2_000), "the table was made anew");
        assert_eq!(b.tenure(&k, "s"), None, "lease 57 of the old table supersedes nothing");
        assert_eq!(b.held_here(&k, "s"), None);
        assert_eq!(b.chain(&k, "s", 57, None), Chain::Unknown);
        assert_eq!(b.scans(&k), 0, "no read of the new table yet");
        b.publish_tenures(&k, std::time::Duration::from_secs(7), [("s".to_owned(), t(1, true))]);
        assert_eq!(b.tenure(&k, "s"), Some(t(1, true)), "the new table's first lease");
        assert_eq!(b.loaded(&k, "s"), Some(at("90", None)), "what Snowflake has stays");
    }

    /// Issue 34, item 6: spans were bounded per chain (10,000, four chains per shard, any number
    /// of shards): gigabytes at 256 shards with a high parse-failure rate. Now the key has a bound
    /// and each chain a share of it.
    #[test]
    fn parse_failure_spans_are_bounded_per_key_and_per_chain_and_released_when_committed_or_evicted() {
        let mut b = Board::default();
        let k = key();
        let shards = MAX_SKIPS / MAX_SKIPS_PER_CHAIN + 16;
        for shard in 0..shards {
            b.took_here(&k, "engine", &format!("s{shard}"), 1, Some(at("0", None)));
        }
        // Spans with a good record between them (so none joins another), round robin over the shards.
        for n in 0..(MAX_SKIPS as u64 + 20_000) {
            let shard = format!("s{}", n % shards as u64);
            b.skipped(&k, &shard, 1, Some(at(&(2 * n + 1).to_string(), None)), at(&(2 * n + 2).to_string(), None));
        }
        assert_eq!(b.spans(&k), MAX_SKIPS, "the key's bound, whatever the number of shards");
        for n in 0..(2 * MAX_SKIPS_PER_CHAIN as u64) {
            b.skipped(&k, "s0", 2, Some(at(&(2 * n + 1).to_string(), None)), at(&(2 * n + 2).to_string(), None));
        }
        assert_eq!(b.spans(&k), MAX_SKIPS, "a lease not taken here keeps nothing");
        let s0 = b.spans(&k);
        for counter in 2..=6 {
            b.took_here(&k, "engine", "s0", counter, None);
        }
        let evicted = s0 - b.spans(&k);
        assert!(evicted > 0 && evicted <= MAX_SKIPS_PER_CHAIN, "an evicted chain lets its spans go ({evicted})");
        let before = b.spans(&k);
        // s1's first span is 3 -> 4 (n = 1): it follows on once record 3 is in.
        b.put_in_channel(&k, "s1", 1, &at("3", None));
        assert_eq!(b.chain(&k, "s1", 1, Some(&at("4", None))), Chain::Linked);
        b.committed_in_channel(&k, "s1", 1, &at("3", None));
        assert_eq!(b.spans(&k), before - 1, "a committed span is let go");
        let mut one = Board::default();
        one.took_here(&k, "engine", "s", 1, Some(at("0", None)));
        for n in 0..(2 * MAX_SKIPS_PER_CHAIN as u64) {
            one.skipped(&k, "s", 1, Some(at(&(2 * n + 1).to_string(), None)), at(&(2 * n + 2).to_string(), None));
        }
        assert_eq!(one.spans(&k), MAX_SKIPS_PER_CHAIN, "one chain's share");
    }

    #[test]
    fn sub_records_chain_exactly() {
        let mut b = Board::default();
        let k = key();
        b.took_here(&k, "engine", "s", 1, None);
        b.put_in_channel(&k, "s", 1, &at("7", Some(2)));
        assert_eq!(b.chain(&k, "s", 1, Some(&at("7", Some(2)))), Chain::Linked);
        assert_eq!(b.chain(&k, "s", 1, Some(&at("7", Some(3)))), Chain::Broken);
        b.put_in_channel(&k, "s", 1, &at("7", None));
        assert_eq!(
            b.chain(&k, "s", 1, Some(&at("7", Some(9)))),
            Chain::Linked,
            "a whole record covers its sub-records"
        );
    }

    #[test]
    fn loaded_max_prefers_any_position_over_the_trim_horizon() {
        let p = Loaded::Through(at("5", None));
        assert_eq!(Loaded::FromTrimHorizon.max(p.clone()), p);
        assert_eq!(p.clone().max(Loaded::FromTrimHorizon), p);
        assert_eq!(p.clone().max(Loaded::Through(at("7", None))), Loaded::Through(at("7", None)));
        assert_eq!(Loaded::Through(at("7", None)).max(p), Loaded::Through(at("7", None)));
    }

    /// Issue 51, hole 6: one application's span budget was shared by all its shards, so one
    /// shard's flood of malformed records (its PutSnowflake stopped or behind) filled it, and every
    /// other shard's next malformed record was dropped: their chains broke (at least once).
    #[test]
    fn one_shards_flood_of_parse_failures_leaves_the_other_shards_chains_whole() {
        let mut b = Board::default();
        let k = key();
        for shard in ["flood", "calm"] {
            b.took_here(&k, "engine", shard, 1, Some(at("0", None)));
        }
        // Every other record of shard "flood" malformed: spans with good records between them.
        for n in 0..70_000u64 {
            b.skipped(&k, "flood", 1, Some(at(&(2 * n + 1).to_string(), None)), at(&(2 * n + 2).to_string(), None));
        }
        b.skipped(&k, "calm", 1, Some(at("5", None)), at("6", None));
        b.put_in_channel(&k, "calm", 1, &at("5", None));
        assert_eq!(b.chain(&k, "calm", 1, Some(&at("6", None))), Chain::Linked, "record 6 went to parse.failure");
        assert!(b.spans(&k) <= 65_536, "the key's bound holds");
    }

    /// Issue 51, hole 6: a span per malformed record, so a long run of them (a producer writing
    /// garbage for a while) filled the budget and broke the chain at its end.
    #[test]
    fn a_run_of_malformed_records_costs_one_span() {
        let mut b = Board::default();
        let k = key();
        b.took_here(&k, "engine", "s", 1, Some(at("0", None)));
        for n in 0..100_000u64 {
            b.skipped(&k, "s", 1, Some(at(&n.to_string(), None)), at(&(n + 1).to_string(), None));
        }
        assert_eq!(b.spans(&k), 1);
        assert_eq!(b.chain(&k, "s", 1, Some(&at("100000", None))), Chain::Linked, "the run is passed over whole");
        b.committed_in_channel(&k, "s", 1, &at("0", None));
        assert_eq!(b.spans(&k), 0, "committed through its start: let go");
    }
}
