//! The stuck-shard watchdog: a leased shard whose checkpoint has not moved for Stuck Shard Warning
//! while records wait (it is not caught up) is reported once, naming what it waits for, and once
//! more when it moves again. Pure: the keeper hands it each pass's statuses and logs what it says.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use super::status::{ShardStatus, Waiting};
use crate::kinesis::position::Position;

/// What the watchdog reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Alarm {
    /// No progress for `stalled` while records wait: the shard waits for `waiting`; `children`
    /// (of a split or merge) cannot start before it ends.
    Stuck { shard_id: String, stalled: Duration, waiting: Waiting, children: Vec<String> },
    /// A shard reported stuck moved again after `stalled`.
    Moving { shard_id: String, stalled: Duration },
}

struct Watch {
    checkpoint: Option<Position>,
    since: Instant,
    warned: bool,
}

/// One entry per leased shard (bounded by the shards this node leases).
pub struct Watchdog {
    after: Duration,
    shards: HashMap<String, Watch>,
}

impl Watchdog {
    /// `after`: Stuck Shard Warning; zero turns the watchdog off.
    pub fn new(after: Duration) -> Self {
        Self { after, shards: HashMap::new() }
    }

    /// Takes in the leased shards' statuses at `now`; returns what to report.
    pub fn observe(&mut self, now: Instant, shards: &[ShardStatus]) -> Vec<Alarm> {
        if self.after.is_zero() {
            return Vec::new();
        }
        self.shards.retain(|id, _| shards.iter().any(|s| &s.shard_id == id));
        let mut alarms = Vec::new();
        for s in shards {
            let watch = self.shards.entry(s.shard_id.clone()).or_insert_with(|| Watch {
                checkpoint: s.checkpoint.clone(),
                since: now,
                warned: false,
            });
            let stalled = now.saturating_duration_since(watch.since);
            if watch.checkpoint != s.checkpoint || s.waiting == Waiting::Nothing {
                if watch.warned {
                    alarms.push(Alarm::Moving { shard_id: s.shard_id.clone(), stalled });
                }
                *watch = Watch { checkpoint: s.checkpoint.clone(), since: now, warned: false };
            } else if !watch.warned && stalled >= self.after {
                watch.warned = true;
                alarms.push(Alarm::Stuck {
                    shard_id: s.shard_id.clone(),
                    stalled,
                    waiting: s.waiting,
                    children: s.children.clone(),
                });
            }
        }
        alarms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(checkpoint: &str, waiting: Waiting) -> ShardStatus {
        ShardStatus {
            shard_id: "shardId-000000000001".into(),
            lease_counter: 1,
            checkpoint: Some(Position::new(checkpoint.to_owned(), None)),
            loaded: None,
            millis_behind: 1000,
            last_read_arrival_ms: None,
            last_committed_arrival_ms: None,
            loaded_arrival_ms: None,
            children: Vec::new(),
            waiting,
        }
    }

    #[test]
    fn a_shard_without_progress_is_reported_once_and_once_more_when_it_moves() {
        let t0 = Instant::now();
        let mut dog = Watchdog::new(Duration::from_secs(60));
        let at = |s| t0 + Duration::from_secs(s);
        assert_eq!(dog.observe(at(0), &[status("1", Waiting::NiFiTake)]), vec![]);
        assert_eq!(dog.observe(at(59), &[status("1", Waiting::NiFiTake)]), vec![]);
        let stuck = dog.observe(at(60), &[status("1", Waiting::BackPressure)]);
        assert_eq!(
            stuck,
            vec![Alarm::Stuck {
                shard_id: "shardId-000000000001".into(),
                stalled: Duration::from_secs(60),
                waiting: Waiting::BackPressure,
                children: vec![]
            }]
        );
        assert_eq!(dog.observe(at(300), &[status("1", Waiting::BackPressure)]), vec![], "reported once");
        assert_eq!(
            dog.observe(at(301), &[status("2", Waiting::Kinesis)]),
            vec![Alarm::Moving { shard_id: "shardId-000000000001".into(), stalled: Duration::from_secs(301) }]
        );
        assert_eq!(dog.observe(at(302), &[status("2", Waiting::Kinesis)]), vec![]);
    }

    #[test]
    fn a_caught_up_shard_is_never_stuck_and_a_lost_one_is_forgotten() {
        let t0 = Instant::now();
        let mut dog = Watchdog::new(Duration::from_secs(10));
        for s in 0..100 {
            assert_eq!(dog.observe(t0 + Duration::from_secs(s), &[status("1", Waiting::Nothing)]), vec![]);
        }
        dog.observe(t0, &[status("1", Waiting::NiFiCommit)]);
        assert_eq!(dog.observe(t0 + Duration::from_secs(5), &[]).len(), 0);
        assert!(dog.shards.is_empty(), "no entry for a shard no longer leased");
    }

    #[test]
    fn a_parent_stuck_at_its_end_names_the_children_waiting_for_it() {
        let t0 = Instant::now();
        let mut dog = Watchdog::new(Duration::from_secs(10));
        let mut parent = status("9", Waiting::ShardEnd);
        parent.children = vec!["shardId-000000000002".into(), "shardId-000000000003".into()];
        dog.observe(t0, std::slice::from_ref(&parent));
        let alarms = dog.observe(t0 + Duration::from_secs(10), &[parent]);
        assert_eq!(
            alarms,
            vec![Alarm::Stuck {
                shard_id: "shardId-000000000001".into(),
                stalled: Duration::from_secs(10),
                waiting: Waiting::ShardEnd,
                children: vec!["shardId-000000000002".into(), "shardId-000000000003".into()],
            }]
        );
    }

    #[test]
    fn zero_turns_it_off() {
        let t0 = Instant::now();
        let mut dog = Watchdog::new(Duration::ZERO);
        dog.observe(t0, &[status("1", Waiting::NiFiTake)]);
        assert_eq!(dog.observe(t0 + Duration::from_secs(86_400), &[status("1", Waiting::NiFiTake)]), vec![]);
    }
}
