//! What the engine knows about each shard it leases: the lease, buffered records, batches handed to
//! NiFi and not yet settled, and the acknowledged and checkpointed positions. The decisions taken
//! on them live in `ledger.rs`.

use std::collections::VecDeque;

use super::budget::Reservation;
use crate::config::consume_kinesis::InitialPosition;
use crate::feedback::Loaded;
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
    /// When that record arrived in Kinesis (ms since the epoch), for the shard's status.
    pub last_arrival_ms: Option<i64>,
    pub acked: bool,
    /// One per record: dropping them gives the batch's bytes back to the budget.
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
    /// The generation the shard's lease began with. Generations are unique for the engine's
    /// lifetime and only grow, so a reader of an earlier lease of this shard (a smaller
    /// generation) ends instead of filling this lease's buffer.
    pub tenure: u64,
    /// Renewed on a rewind: a reader of an older generation discards what it fetched.
    pub generation: u64,
    /// Everything up to here is committed in NiFi (the acknowledged front of the batches); a
    /// rewound reader resumes after it.
    pub acked: Option<Position>,
    /// The first record this lease read while nothing was acknowledged (the lease began at its
    /// initial position: LATEST, a timestamp): a reader rewound before any acknowledgement starts
    /// there again, not at a new LATEST.
    pub first_read: Option<Position>,
    /// The last position written to the lease table (at most `acked`).
    pub committed: Option<Position>,
    /// A checkpoint write in flight: at most one per shard, so writes land in order.
    pub writing: Option<Position>,
    /// The reader reached the end of a closed shard (and returned); the shard is finished once
    /// all its records are committed and checkpointed.
    pub reader_finished: bool,
    pub finished: bool,
    /// Children named by the shard's last GetRecords (ChildShards): (child, its parents).
    pub children: Vec<(String, Vec<String>)>,
    /// Being handed back to balance the cluster: no more reading or delivering; released once
    /// the batches in flight are settled and checkpointed (or the hand-back times out).
    pub handing_back: Option<tokio::time::Instant>,
    pub in_flight: VecDeque<InFlight>,
    /// With Failover Position `SNOWFLAKE_COMMIT`: what Snowflake is known to have of the shard
    /// (see `feedback`), written into the lease row with each checkpoint; `None` otherwise.
    pub loaded: Option<Loaded>,
    /// The last `loaded` written to the lease row.
    pub loaded_written: Option<Loaded>,
    /// A checkpoint was written since the keeper's last pass over the loaded positions.
    pub checkpointed_since_pass: bool,
    /// When the last record read arrived in Kinesis (ms since the epoch), for the shard's status.
    pub last_read_arrival_ms: Option<i64>,
    /// When the last record NiFi committed arrived in Kinesis (ms since the epoch), for the status.
    pub acked_arrival_ms: Option<i64>,
    /// With `SNOWFLAKE_COMMIT`: when the first record of the newest FlowFile PutSnowflake reported
    /// loaded arrived in Kinesis (ms since the epoch), for the status.
    pub loaded_arrival_ms: Option<i64>,
}

impl ShardState {
    pub fn new(lease: Lease, committed: Option<Position>, generation: u64) -> Self {
        Self {
            lease,
            parents: Vec::new(),
            initial: None,
            buffer: VecDeque::new(),
            buffered_bytes: 0,
            millis_behind: -1,
            tenure: generation,
            generation,
            acked: committed.clone(),
            first_read: None,
            committed,
            writing: None,
            reader_finished: false,
            finished: false,
            children: Vec::new(),
            handing_back: None,
            in_flight: VecDeque::new(),
            loaded: None,
            loaded_written: None,
            checkpointed_since_pass: false,
            last_read_arrival_ms: None,
            acked_arrival_ms: None,
            loaded_arrival_ms: None,
        }
    }

    /// Pops the acknowledged batches at the front; returns the last position they cover, if any.
    pub fn settle_front(&mut self) -> Option<Position> {
        let mut result = None;
        while self.in_flight.front().is_some_and(|f| f.acked) {
            let done = self.in_flight.pop_front().expect("front exists");
            self.acked_arrival_ms = done.last_arrival_ms.or(self.acked_arrival_ms);
            result = done.last.or(result);
        }
        result
    }

    /// Everything acknowledged is written to the table and no write is in flight.
    pub fn checkpointed(&self) -> bool {
        self.writing.is_none() && self.acked == self.committed
    }

    /// Bytes of the budget this shard holds: buffered records and batches not yet settled.
    #[cfg(test)]
    pub fn held_bytes(&self) -> u64 {
        self.buffered_bytes
            + self.in_flight.iter().flat_map(|f| f.reservations.iter()).map(Reservation::bytes).sum::<u64>()
    }
}
