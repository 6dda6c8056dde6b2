//! What the engine knows about each shard it leases: the lease, buffered records, batches handed to
//! NiFi and not yet settled, and the committed position.

use std::collections::VecDeque;

use super::budget::Reservation;
use crate::config::consume_kinesis::InitialPosition;
use crate::kinesis::position::Position;
use crate::kinesis::record::KinesisRecord;
use crate::lease::Lease;

/// A record waiting in a shard's buffer, holding its bytes of the memory budget.
pub struct Buffered {
    pub record: KinesisRecord,
    pub reservation: Reservation,
}

/// A batch's share of one shard, awaiting NiFi's verdict.
pub struct InFlight {
    pub batch_id: i64,
    /// The last record of the shard in that batch.
    pub last: Option<Position>,
    pub acked: bool,
    /// Held, not read: dropping them gives the batch's bytes back to the budget.
    #[allow(dead_code)]
    pub reservations: Vec<Reservation>,
}

pub struct ShardState {
    pub lease: Lease,
    /// The shard's parents (split or merge), passed on with its records as lineage.
    pub parents: Vec<String>,
    /// Where to start without a checkpoint when not at the Initial Stream Position: the start of a
    /// child whose parent this application read, or a start position carried over from KCL.
    pub initial: Option<InitialPosition>,
    pub buffer: VecDeque<Buffered>,
    pub buffered_bytes: u64,
    pub millis_behind: i64,
    /// Bumped on a rewind: a reader of an older generation discards what it fetched.
    pub generation: u64,
    /// The last position checkpointed (everything up to it is committed in NiFi).
    pub committed: Option<Position>,
    /// The reader reached the end of a closed shard; it is finished once all its records are committed.
    pub reader_finished: bool,
    pub finished: bool,
    /// Children named by the shard's last GetRecords (ChildShards): (child, its parents).
    pub children: Vec<(String, Vec<String>)>,
    /// Being handed back to balance the cluster: no more reading or delivering; released once
    /// the batches in flight are settled (or the hand-back times out).
    pub handing_back: Option<tokio::time::Instant>,
    pub in_flight: VecDeque<InFlight>,
}

impl ShardState {
    pub fn new(lease: Lease, committed: Option<Position>) -> Self {
        Self {
            lease,
            parents: Vec::new(),
            initial: None,
            buffer: VecDeque::new(),
            buffered_bytes: 0,
            millis_behind: -1,
            generation: 0,
            committed,
            reader_finished: false,
            finished: false,
            children: Vec::new(),
            handing_back: None,
            in_flight: VecDeque::new(),
        }
    }

    /// Drops what is buffered and in flight and starts a new generation from the committed position.
    pub fn rewind(&mut self) {
        self.buffer.clear();
        self.buffered_bytes = 0;
        self.in_flight.clear();
        self.reader_finished = false;
        self.generation += 1;
    }

    /// Stops reading and delivering the shard: its buffered records are dropped (nothing of them
    /// was delivered), and a reader still running sees a new generation and ends.
    pub fn begin_hand_back(&mut self) {
        self.buffer.clear();
        self.buffered_bytes = 0;
        self.generation += 1;
        self.handing_back = Some(tokio::time::Instant::now());
    }

    /// Pops the acknowledged batches at the front; returns the position to checkpoint, if any.
    pub fn settle_front(&mut self) -> Option<Position> {
        let mut result = None;
        while self.in_flight.front().is_some_and(|f| f.acked) {
            let done = self.in_flight.pop_front().expect("front exists");
            result = done.last.or(result);
        }
        result
    }
}
