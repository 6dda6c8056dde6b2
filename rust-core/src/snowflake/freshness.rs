//! How fresh each shard's rows in Snowflake are, as PutSnowflake sees them: per shard, the
//! Kinesis arrival time of the newest FlowFile Snowflake has committed (the arrival of its first
//! record, the `aws.kinesis.approximate.arrival.timestamp.ms` attribute, so the age shown is at
//! most one FlowFile's span older than the newest row's), when that commit was learned, and the
//! FlowFiles of the shard this processor holds without an outcome yet.
//!
//! The Freshness Warning: a shard whose FlowFiles wait here while the newest row committed (or,
//! before any commit, the oldest FlowFile waiting) arrived in Kinesis longer ago than the
//! threshold is reported once, and once more when it is fresh again or nothing of it waits. An
//! idle stream is never reported: nothing waits. Pure: the engine feeds it and logs what it says.
//!
//! Memory: one entry per FlowFile without an outcome (bounded by Max In-Flight Size) and one per
//! shard seen, at most [`MAX_SHARDS`] (beyond it, the shard updated least recently is forgotten).

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Shards one PutSnowflake keeps freshness for.
pub const MAX_SHARDS: usize = 10_000;
/// Shards View State lists, the stalest first.
pub const VIEW_SHARDS: usize = 1_000;

/// A shard of a stream.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShardKey {
    pub stream: String,
    pub shard_id: String,
}

/// What the Freshness Warning reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Alarm {
    /// FlowFiles of the shard wait while its newest row in Snowflake (`committed`: none yet, then
    /// the oldest waiting FlowFile counts) arrived `age` ago.
    Stale { shard: ShardKey, age: Duration, waiting: usize, committed: bool },
    /// A shard reported stale is fresh again (or nothing of it waits): its age now.
    Fresh { shard: ShardKey, age: Option<Duration> },
}

#[derive(Debug, Default)]
struct ShardFreshness {
    /// Kinesis arrival (ms) of the newest FlowFile committed.
    committed_arrival_ms: Option<i64>,
    committed_at: Option<SystemTime>,
    /// FlowFiles without an outcome: their arrival (ms), by FlowFile id.
    waiting: HashMap<i64, i64>,
    warned: bool,
    touched: u64,
}

impl ShardFreshness {
    /// The age the warning weighs: of the newest row committed, or before any of the oldest waiting.
    fn age(&self, now_ms: i64) -> Option<Duration> {
        let arrival = self.committed_arrival_ms.or_else(|| self.waiting.values().min().copied())?;
        Some(Duration::from_millis(u64::try_from(now_ms - arrival).unwrap_or(0)))
    }
}

/// Freshness of the shards whose FlowFiles one PutSnowflake loads.
#[derive(Debug, Default)]
pub struct Freshness {
    shards: HashMap<ShardKey, ShardFreshness>,
    /// Each FlowFile waiting: its shard.
    flow_files: HashMap<i64, ShardKey>,
    clock: u64,
}

impl Freshness {
    /// PutSnowflake took FlowFile `id` of `shard`, whose first record arrived at `arrival_ms`.
    pub fn taken(&mut self, id: i64, shard: ShardKey, arrival_ms: i64) {
        self.clock += 1;
        if !self.shards.contains_key(&shard) && self.shards.len() >= MAX_SHARDS {
            self.forget_least_recent();
        }
        let entry = self.shards.entry(shard.clone()).or_default();
        entry.waiting.insert(id, arrival_ms);
        entry.touched = self.clock;
        if let Some(old) = self.flow_files.insert(id, shard.clone()) {
            if old != shard {
                if let Some(s) = self.shards.get_mut(&old) {
                    s.waiting.remove(&id);
                }
            }
        }
    }

    /// FlowFile `id` has its outcome: `committed` when Snowflake committed its rows, at `now`.
    pub fn settled(&mut self, id: i64, committed: bool, now: SystemTime) {
        let Some(shard) = self.flow_files.remove(&id) else { return };
        self.clock += 1;
        let Some(s) = self.shards.get_mut(&shard) else { return };
        let arrival = s.waiting.remove(&id);
        s.touched = self.clock;
        if let (true, Some(arrival)) = (committed, arrival) {
            if s.committed_arrival_ms.is_none_or(|known| arrival > known) {
                s.committed_arrival_ms = Some(arrival);
            }
            s.committed_at = Some(now);
        }
    }

    fn forget_least_recent(&mut self) {
        let Some(oldest) = self.shards.iter().min_by_key(|(_, s)| s.touched).map(|(k, _)| k.clone()) else {
            return;
        };
        if let Some(s) = self.shards.remove(&oldest) {
            for id in s.waiting.keys() {
                self.flow_files.remove(id);
            }
        }
    }

    /// The Freshness Warning at `now` for `threshold` (zero: off): what to report.
    pub fn check(&mut self, now: SystemTime, threshold: Duration) -> Vec<Alarm> {
        if threshold.is_zero() {
            return Vec::new();
        }
        let now_ms = millis(now);
        let mut alarms = Vec::new();
        for (key, s) in &mut self.shards {
            let age = s.age(now_ms);
            let stale = !s.waiting.is_empty() && age.is_some_and(|a| a > threshold);
            if stale && !s.warned {
                s.warned = true;
                alarms.push(Alarm::Stale {
                    shard: key.clone(),
                    age: age.unwrap_or_default(),
                    waiting: s.waiting.len(),
                    committed: s.committed_arrival_ms.is_some(),
                });
            } else if !stale && s.warned {
                s.warned = false;
                alarms.push(Alarm::Fresh { shard: key.clone(), age: age.filter(|_| !s.waiting.is_empty()) });
            }
        }
        alarms.sort_by(|a, b| alarm_shard(a).cmp(alarm_shard(b)));
        alarms
    }

    /// The Snowflake Freshness Lag gauge at `now`: of the shards with FlowFiles waiting, the largest
    /// age the warning weighs; zero when nothing waits.
    pub fn lag(&self, now: SystemTime) -> Duration {
        let now_ms = millis(now);
        self.shards.values().filter(|s| !s.waiting.is_empty()).filter_map(|s| s.age(now_ms)).max().unwrap_or_default()
    }

    /// View State's lines at `now`: key `shard.<stream>/<shard>`, the stalest [`VIEW_SHARDS`] first.
    pub fn lines(&self, now: SystemTime) -> Vec<(String, String)> {
        let now_ms = millis(now);
        let mut shards: Vec<_> = self.shards.iter().collect();
        shards.sort_by_key(|(k, s)| (std::cmp::Reverse(s.committed_arrival_ms.map(|a| now_ms - a)), (*k).clone()));
        shards
            .into_iter()
            .take(VIEW_SHARDS)
            .map(|(k, s)| (format!("shard.{}/{}", k.stream, k.shard_id), describe(s, now_ms)))
            .collect()
    }
}

fn alarm_shard(a: &Alarm) -> &ShardKey {
    match a {
        Alarm::Stale { shard, .. } | Alarm::Fresh { shard, .. } => shard,
    }
}

/// A shard's line: how old Snowflake's newest row is and what waits first (NiFi's View State cuts a
/// value at its column's width), the timestamps after.
fn describe(s: &ShardFreshness, now_ms: i64) -> String {
    let waiting = format!("FlowFiles waiting here {}", s.waiting.len());
    let learned = s.committed_at.map_or("-".to_owned(), |t| humantime::format_rfc3339_seconds(t).to_string());
    match s.committed_arrival_ms {
        Some(arrival) => format!(
            "{} old in Snowflake; {waiting}; newest FlowFile in Snowflake began with a record that arrived {}; \
             committed learned {learned}",
            age_text(Duration::from_millis(u64::try_from(now_ms - arrival).unwrap_or(0))),
            time(arrival)
        ),
        None => format!(
            "nothing committed in Snowflake since the processor started; {waiting}; committed learned {learned}"
        ),
    }
}

/// An age as an operator reads it (whole seconds above ten seconds).
pub fn age_text(age: Duration) -> String {
    if age < Duration::from_secs(10) {
        format!("{:.1} s", age.as_secs_f64())
    } else {
        humantime::format_duration(Duration::from_secs(age.as_secs())).to_string()
    }
}

fn time(ms: i64) -> String {
    let ms = u64::try_from(ms).unwrap_or(0);
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

fn millis(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_700_000_000_000;

    fn at(ms: i64) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(ms as u64)
    }

    fn shard(id: &str) -> ShardKey {
        ShardKey { stream: "orders".into(), shard_id: id.into() }
    }

    const LIMIT: Duration = Duration::from_secs(60);

    #[test]
    fn off_reports_nothing_however_stale() {
        let mut f = Freshness::default();
        f.taken(1, shard("a"), T0);
        assert!(f.check(at(T0 + 3_600_000), Duration::ZERO).is_empty());
    }

    #[test]
    fn an_idle_shard_is_never_stale() {
        let mut f = Freshness::default();
        f.taken(1, shard("a"), T0);
        f.settled(1, true, at(T0 + 1000));
        assert!(f.check(at(T0 + 3_600_000), LIMIT).is_empty(), "nothing waits: the table has every row there is");
    }

    #[test]
    fn waiting_rows_behind_an_old_commit_warn_once_then_clear_when_committed() {
        let mut f = Freshness::default();
        f.taken(1, shard("a"), T0);
        f.settled(1, true, at(T0 + 1000));
        f.taken(2, shard("a"), T0 + 2000);
        assert!(f.check(at(T0 + 30_000), LIMIT).is_empty(), "30 s old: under the threshold");
        let alarms = f.check(at(T0 + 61_000), LIMIT);
        assert_eq!(
            alarms,
            vec![Alarm::Stale { shard: shard("a"), age: Duration::from_secs(61), waiting: 1, committed: true }]
        );
        assert!(f.check(at(T0 + 120_000), LIMIT).is_empty(), "once only");
        f.settled(2, true, at(T0 + 121_000));
        assert_eq!(f.check(at(T0 + 122_000), LIMIT), vec![Alarm::Fresh { shard: shard("a"), age: None }]);
        assert!(f.check(at(T0 + 200_000), LIMIT).is_empty());
    }

    #[test]
    fn before_any_commit_the_oldest_waiting_flow_file_counts() {
        let mut f = Freshness::default();
        f.taken(1, shard("a"), T0);
        f.taken(2, shard("a"), T0 + 50_000);
        let alarms = f.check(at(T0 + 70_000), LIMIT);
        assert_eq!(
            alarms,
            vec![Alarm::Stale { shard: shard("a"), age: Duration::from_secs(70), waiting: 2, committed: false }]
        );
    }

    #[test]
    fn the_lag_gauge_weighs_only_shards_with_rows_waiting() {
        let mut f = Freshness::default();
        assert_eq!(f.lag(at(T0)), Duration::ZERO);
        f.taken(1, shard("idle"), T0);
        f.settled(1, true, at(T0));
        f.taken(2, shard("busy"), T0 + 40_000);
        f.taken(3, shard("busy"), T0 + 50_000);
        assert_eq!(f.lag(at(T0 + 60_000)), Duration::from_secs(20), "busy: nothing committed, its oldest waits 20 s");
        f.settled(2, true, at(T0 + 61_000));
        assert_eq!(f.lag(at(T0 + 62_000)), Duration::from_secs(22));
        f.settled(3, true, at(T0 + 63_000));
        assert_eq!(f.lag(at(T0 + 64_000)), Duration::ZERO, "nothing waits");
    }

    #[test]
    fn a_failed_flow_file_leaves_the_commit_as_it_was() {
        let mut f = Freshness::default();
        f.taken(1, shard("a"), T0);
        f.settled(1, true, at(T0 + 1000));
        f.taken(2, shard("a"), T0 + 5000);
        f.settled(2, false, at(T0 + 6000));
        assert_eq!(f.shards[&shard("a")].committed_arrival_ms, Some(T0));
        assert!(f.flow_files.is_empty());
        assert!(f.shards[&shard("a")].waiting.is_empty());
    }

    #[test]
    fn a_late_commit_of_older_rows_does_not_make_the_shard_look_older() {
        let mut f = Freshness::default();
        f.taken(1, shard("a"), T0);
        f.taken(2, shard("a"), T0 + 10_000);
        f.settled(2, true, at(T0 + 11_000));
        f.settled(1, true, at(T0 + 12_000));
        assert_eq!(f.shards[&shard("a")].committed_arrival_ms, Some(T0 + 10_000));
    }

    #[test]
    fn shards_are_bounded_and_the_least_recent_goes_first() {
        let mut f = Freshness::default();
        for i in 0..MAX_SHARDS as i64 + 5 {
            f.taken(i, shard(&format!("s{i}")), T0);
        }
        assert_eq!(f.shards.len(), MAX_SHARDS);
        assert_eq!(f.flow_files.len(), MAX_SHARDS, "a forgotten shard's FlowFiles are forgotten with it");
        assert!(!f.shards.contains_key(&shard("s0")));
        assert!(f.shards.contains_key(&shard(&format!("s{}", MAX_SHARDS + 4))));
    }

    #[test]
    fn view_lists_the_stalest_first() {
        let mut f = Freshness::default();
        f.taken(1, shard("fresh"), T0 + 50_000);
        f.settled(1, true, at(T0 + 51_000));
        f.taken(2, shard("stale"), T0);
        f.settled(2, true, at(T0 + 52_000));
        f.taken(3, shard("stale"), T0 + 1);
        let lines = f.lines(at(T0 + 60_000));
        assert_eq!(lines[0].0, "shard.orders/stale");
        assert!(lines[0].1.starts_with("1m old in Snowflake; FlowFiles waiting here 1; "), "{}", lines[0].1);
        assert!(lines[0].1.ends_with("; committed learned 2023-11-14T22:14:12Z"), "{}", lines[0].1);
        assert_eq!(lines[1].0, "shard.orders/fresh");
        assert!(lines[1].1.starts_with("10s old in Snowflake; FlowFiles waiting here 0; "), "{}", lines[1].1);
        f.taken(4, shard("new"), T0 + 55_000);
        let lines = f.lines(at(T0 + 60_000));
        let new = &lines.iter().find(|(k, _)| k == "shard.orders/new").unwrap().1;
        assert_eq!(
            new,
            "nothing committed in Snowflake since the processor started; FlowFiles waiting here 1; committed learned -"
        );
    }
}
