//! What each shard this node leases is doing, worded for an operator: NiFi's "View State" of
//! ConsumeKinesis shows it (the processor's local state, which nothing reads back). Pure: the
//! ledger hands each shard's state in, with the engine-wide facts it cannot know.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::state::ShardState;
use crate::feedback::Loaded;
use crate::kinesis::position::Position;

/// Below this many free bytes in Max Buffer Size, a shard with buffered records waits on NiFi.
const BUDGET_LOW: u64 = 1 << 20;

/// Engine-wide facts a shard's status depends on.
#[derive(Debug, Clone, Copy)]
pub struct EngineFacts {
    /// Bytes left in Max Buffer Size.
    pub budget_available: u64,
    /// This node's heartbeat is recent enough to deliver records.
    pub may_deliver: bool,
}

/// What a shard waits for, in the order checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiting {
    /// Being handed back for balancing: its batches in NiFi settle, then the lease is released.
    HandBack,
    /// The reader reached the shard's end: its last records are committed and checkpointed.
    ShardEnd,
    /// This node's last heartbeat is too old to deliver: the lease table has not answered.
    LeaseTable,
    /// Records are buffered and Max Buffer Size is nearly full: NiFi takes batches slower than they arrive.
    BackPressure,
    /// Records are buffered: NiFi's next trigger takes them.
    NiFiTake,
    /// Batches are in NiFi: their sessions commit, then the checkpoint follows.
    NiFiCommit,
    /// Reading: Kinesis has more than this node has read.
    Kinesis,
    /// Nothing: caught up with the tip of the shard.
    Nothing,
}

impl Waiting {
    pub fn describe(self) -> &'static str {
        match self {
            Waiting::HandBack => "hand-back: its batches in NiFi to settle before the lease is released",
            Waiting::ShardEnd => "the shard's end: its last records to be committed and checkpointed",
            Waiting::LeaseTable => "the lease table: this node's heartbeat is too old to deliver records",
            Waiting::BackPressure => {
                "back-pressure: Max Buffer Size is nearly full, NiFi takes batches slower than Kinesis delivers"
            }
            Waiting::NiFiTake => "NiFi to take the buffered records",
            Waiting::NiFiCommit => "NiFi to commit the batches in flight",
            Waiting::Kinesis => "Kinesis: reading, behind the tip",
            Waiting::Nothing => "nothing: caught up with the tip",
        }
    }
}

/// One leased shard's status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardStatus {
    pub shard_id: String,
    pub lease_counter: u64,
    /// The last record written to the lease table as the checkpoint.
    pub checkpoint: Option<Position>,
    /// With Failover Position `SNOWFLAKE_COMMIT`: what Snowflake is known to have committed.
    pub loaded: Option<Loaded>,
    pub millis_behind: i64,
    pub last_read_arrival_ms: Option<i64>,
    pub last_committed_arrival_ms: Option<i64>,
    /// With `SNOWFLAKE_COMMIT`: the first record of the newest FlowFile in Snowflake arrived then.
    pub loaded_arrival_ms: Option<i64>,
    /// The shard's children (a split or merge), which no node reads before it ends.
    pub children: Vec<String>,
    pub waiting: Waiting,
}

impl ShardStatus {
    pub fn of(shard_id: &str, s: &ShardState, facts: EngineFacts) -> Self {
        let waiting = if s.handing_back.is_some() {
            Waiting::HandBack
        } else if s.reader_finished {
            Waiting::ShardEnd
        } else if !facts.may_deliver {
            Waiting::LeaseTable
        } else if !s.buffer.is_empty() && facts.budget_available < BUDGET_LOW {
            Waiting::BackPressure
        } else if !s.buffer.is_empty() {
            Waiting::NiFiTake
        } else if !s.in_flight.is_empty() {
            Waiting::NiFiCommit
        } else if s.millis_behind != 0 {
            Waiting::Kinesis
        } else {
            Waiting::Nothing
        };
        Self {
            shard_id: shard_id.to_owned(),
            lease_counter: s.lease.counter,
            checkpoint: s.committed.clone(),
            loaded: s.loaded.clone(),
            millis_behind: s.millis_behind,
            last_read_arrival_ms: s.last_read_arrival_ms,
            last_committed_arrival_ms: s.acked_arrival_ms,
            loaded_arrival_ms: s.loaded_arrival_ms,
            children: s.children.iter().map(|(child, _)| child.clone()).collect(),
            waiting,
        }
    }

    /// The line View State shows for the shard. NiFi's dialog cuts a value at its column's width, so
    /// what an operator opens it for comes first (the lag, what the shard waits for, the arrival
    /// times) and the long sequence numbers last.
    pub fn describe(&self) -> String {
        let mut parts = vec![];
        if self.millis_behind >= 0 {
            parts.push(format!("{} ms behind the tip", self.millis_behind));
        }
        parts.push(format!("waits for {}", self.waiting.describe()));
        parts.push(format!("last record read arrived {}", time(self.last_read_arrival_ms)));
        parts.push(format!("last record committed in NiFi arrived {}", time(self.last_committed_arrival_ms)));
        if self.loaded.is_some() {
            parts.push(format!(
                "newest FlowFile in Snowflake began with a record that arrived {}",
                time(self.loaded_arrival_ms)
            ));
        }
        parts.push(format!("lease counter {}", self.lease_counter));
        match &self.loaded {
            Some(Loaded::Through(p)) => parts.push(format!("in Snowflake through {}", position(p))),
            Some(Loaded::FromTrimHorizon) => parts.push("in Snowflake: nothing yet".into()),
            None => {}
        }
        parts.push(format!("checkpoint {}", self.checkpoint.as_ref().map_or("none".into(), position)));
        parts.join("; ")
    }
}

fn position(p: &Position) -> String {
    match p.sub_sequence_number {
        Some(sub) => format!("{} (sub-sequence {sub})", p.sequence_number),
        None => p.sequence_number.clone(),
    }
}

fn time(ms: Option<i64>) -> String {
    match ms.and_then(|ms| u64::try_from(ms).ok()) {
        Some(ms) => humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string(),
        None => "-".into(),
    }
}

/// The local state View State shows: this node's owner name, when it was written, and one entry
/// per leased shard (at most one per shard: bounded by the shards this node leases).
pub fn state_map(owner: &str, shards: &[ShardStatus], now: SystemTime) -> Vec<(String, String)> {
    let mut map = vec![
        ("node".to_owned(), format!("{owner}, leasing {} shard(s)", shards.len())),
        ("updated".to_owned(), humantime::format_rfc3339_seconds(now).to_string()),
    ];
    map.extend(shards.iter().map(|s| (s.shard_id.clone(), s.describe())));
    map
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinesis::record::KinesisRecord;

    fn state() -> ShardState {
        let lease = crate::lease::Lease {
            shard_id: "shardId-000000000001".into(),
            owner: "node-a".into(),
            counter: 7,
            checkpoint: crate::lease::Checkpoint::None,
            loaded: None,
        };
        ShardState::new(lease, Some(Position::new("495".to_owned(), Some(2))), 1)
    }

    const CALM: EngineFacts = EngineFacts { budget_available: u64::MAX, may_deliver: true };

    #[test]
    fn a_caught_up_shard_waits_for_nothing_and_names_its_checkpoint() {
        let mut s = state();
        s.millis_behind = 0;
        s.last_read_arrival_ms = Some(1_764_961_200_123);
        let status = ShardStatus::of("shardId-000000000001", &s, CALM);
        assert_eq!(status.waiting, Waiting::Nothing);
        let line = status.describe();
        assert_eq!(
            line,
            "0 ms behind the tip; waits for nothing: caught up with the tip; \
             last record read arrived 2025-12-05T19:00:00.123Z; last record committed in NiFi arrived -; \
             lease counter 7; checkpoint 495 (sub-sequence 2)",
            "the lag and what the shard waits for first, the checkpoint last (View State cuts long values)"
        );
    }

    #[test]
    fn what_a_shard_waits_for_follows_its_state() {
        let record = KinesisRecord {
            sequence_number: "496".into(),
            sub_sequence_number: None,
            partition_key: "k".into(),
            approximate_arrival_ms: 0,
            data: vec![0; 10],
        };
        let budget = crate::consumer::budget::MemoryBudget::new(1 << 30);
        let mut s = state();
        s.millis_behind = 5_000;
        assert_eq!(ShardStatus::of("s", &s, CALM).waiting, Waiting::Kinesis);
        s.buffer.push_back(crate::consumer::state::Buffered { reservation: budget.try_reserve(10).unwrap(), record });
        assert_eq!(ShardStatus::of("s", &s, CALM).waiting, Waiting::NiFiTake);
        let full = EngineFacts { budget_available: 10, may_deliver: true };
        assert_eq!(ShardStatus::of("s", &s, full).waiting, Waiting::BackPressure);
        let stale = EngineFacts { budget_available: u64::MAX, may_deliver: false };
        assert_eq!(ShardStatus::of("s", &s, stale).waiting, Waiting::LeaseTable);
        s.reader_finished = true;
        assert_eq!(ShardStatus::of("s", &s, CALM).waiting, Waiting::ShardEnd);
    }

    #[test]
    fn a_tracked_shard_names_what_snowflake_has_and_when_it_arrived() {
        let mut s = state();
        s.loaded = Some(Loaded::Through(Position::new("490".to_owned(), None)));
        let line = ShardStatus::of("s", &s, CALM).describe();
        assert!(line.ends_with("lease counter 7; in Snowflake through 490; checkpoint 495 (sub-sequence 2)"), "{line}");
        assert!(line.contains("newest FlowFile in Snowflake began with a record that arrived -"), "{line}");
        s.loaded_arrival_ms = Some(1_764_961_200_000);
        let line = ShardStatus::of("s", &s, CALM).describe();
        assert!(
            line.contains("newest FlowFile in Snowflake began with a record that arrived 2025-12-05T19:00:00.000Z"),
            "{line}"
        );
        s.loaded = None;
        assert!(!ShardStatus::of("s", &s, CALM).describe().contains("newest FlowFile"), "untracked: not shown");
    }

    #[test]
    fn the_state_map_has_one_entry_per_leased_shard_and_two_for_the_node() {
        let s = ShardStatus::of("shardId-000000000001", &state(), CALM);
        let map = state_map("node-a", &[s], UNIX_EPOCH);
        assert_eq!(map.len(), 3);
        assert_eq!(map[0], ("node".to_owned(), "node-a, leasing 1 shard(s)".to_owned()));
        assert_eq!(map[2].0, "shardId-000000000001");
    }
}
