//! Which nodes are alive, judged from their heartbeat rows without trusting anyone's clock: a node
//! is live while its heartbeat counter keeps changing, measured on this node's own monotonic clock.
//! A node never seen beating (a leftover owner, or a node whose row is gone) counts as dead once
//! this node has watched the table for the failover timeout.
//!
//! A lease whose holder has no heartbeat row of ours is NiFi's own ConsumeKinesis's (or a leftover):
//! NiFi holds a lease until the `leaseExpiry` it wrote, a time on its clock it renews every 10 s,
//! so such a lease is taken over only once that time has passed on this node's clock too (as
//! NiFi's nodes judge each other's leases).

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use tokio::time::Instant;

use super::store::{Holder, NodeBeat};

pub struct Membership {
    me: String,
    timeout: Duration,
    started: Instant,
    /// Per node: its row, the last heartbeat counter seen and when it was first seen with that value.
    seen: HashMap<String, Seen>,
}

struct Seen {
    row: String,
    beat: u64,
    since: Instant,
}

impl Membership {
    pub fn new(me: impl Into<String>, timeout: Duration) -> Self {
        Self { me: me.into(), timeout, started: Instant::now(), seen: HashMap::new() }
    }

    /// Takes in the heartbeat rows of one scan.
    pub fn observe(&mut self, beats: &[NodeBeat], now: Instant) {
        for b in beats {
            let entry =
                self.seen.entry(b.owner.clone()).or_insert(Seen { row: b.row.clone(), beat: b.beat, since: now });
            if entry.beat != b.beat || entry.row != b.row {
                *entry = Seen { row: b.row.clone(), beat: b.beat, since: now };
            }
        }
        let present: BTreeSet<&str> = beats.iter().map(|b| b.owner.as_str()).collect();
        self.seen.retain(|owner, _| present.contains(owner.as_str()));
    }

    /// Whether `owner` may still be alive: this node itself, or a heartbeat that changed within
    /// the timeout, or an owner not yet watched for the whole timeout.
    pub fn is_live(&self, owner: &str, now: Instant) -> bool {
        if owner == self.me {
            return true;
        }
        match self.seen.get(owner) {
            Some(seen) => now.duration_since(seen.since) < self.timeout,
            None => now.duration_since(self.started) < self.timeout,
        }
    }

    /// Whether the lease `holder` holds may be taken over now (`wall_ms`: this node's clock, ms
    /// since the epoch). A holder with a heartbeat row of ours is judged by its heartbeat alone:
    /// the `leaseExpiry` ours writes is for NiFi's sake. Any other holder keeps its lease while it
    /// may be alive by [`Self::is_live`] or while its `leaseExpiry` has not passed.
    pub fn may_take_over(&self, holder: &Holder, now: Instant, wall_ms: i64) -> bool {
        let silent = !self.is_live(&holder.owner, now);
        if self.seen.contains_key(&holder.owner) {
            silent
        } else {
            silent && holder.lease_expiry.is_none_or(|expiry| expiry < wall_ms)
        }
    }

    /// Nodes with a heartbeat that is still changing, this node included.
    pub fn live_nodes(&self, now: Instant) -> BTreeSet<String> {
        let mut live: BTreeSet<String> = self
            .seen
            .iter()
            .filter(|(_, seen)| now.duration_since(seen.since) < self.timeout)
            .map(|(o, _)| o.clone())
            .collect();
        live.insert(self.me.clone());
        live
    }

    /// Heartbeat rows unchanged for ten timeouts: nodes long dead whose rows can be removed (each
    /// with the counter it stands at, so a row beating again meanwhile is not removed).
    pub fn long_dead(&self, now: Instant) -> Vec<NodeBeat> {
        self.seen
            .iter()
            .filter(|(owner, seen)| *owner != &self.me && now.duration_since(seen.since) > self.timeout * 10)
            .map(|(owner, seen)| NodeBeat { owner: owner.clone(), row: seen.row.clone(), beat: seen.beat })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn beat(owner: &str, beat: u64) -> NodeBeat {
        NodeBeat { owner: owner.into(), row: format!("row-{owner}"), beat }
    }

    #[test]
    fn a_node_is_live_while_its_counter_moves() {
        let t0 = Instant::now();
        let mut m = Membership::new("me", Duration::from_secs(7));
        m.observe(&[beat("a", 1), beat("me", 1)], t0);
        assert!(m.is_live("a", t0 + Duration::from_secs(6)));
        m.observe(&[beat("a", 2)], t0 + Duration::from_secs(6));
        assert!(m.is_live("a", t0 + Duration::from_secs(12)), "the counter moved at 6 s");
        assert!(!m.is_live("a", t0 + Duration::from_secs(13)), "unchanged for 7 s");
        assert_eq!(m.live_nodes(t0 + Duration::from_secs(13)), BTreeSet::from(["me".to_owned()]));
        assert!(m.is_live("me", t0 + Duration::from_secs(100)), "this node never judges itself");
    }

    #[test]
    fn unknown_owners_die_after_one_timeout_of_watching() {
        let t0 = Instant::now();
        let m = Membership::new("me", Duration::from_secs(7));
        assert!(m.is_live("leftover", t0));
        assert!(!m.is_live("leftover", t0 + Duration::from_secs(8)));
    }

    fn holder(owner: &str, lease_expiry: Option<i64>) -> Holder {
        Holder { owner: owner.into(), counter: 0, lease_expiry }
    }

    #[test]
    fn a_nifi_lease_is_kept_until_its_expiry_and_ours_by_the_heartbeat_alone() {
        let t0 = Instant::now();
        let wall = 1_000_000;
        let mut m = Membership::new("me", Duration::from_secs(7));
        m.observe(&[beat("ours", 1)], t0);
        let later = t0 + Duration::from_secs(8);
        assert!(!m.may_take_over(&holder("nifi-uuid", Some(wall + 1)), later, wall), "NiFi's lease has not expired");
        assert!(
            !m.may_take_over(&holder("nifi-uuid", Some(wall)), later, wall),
            "NiFi's own rule: live while expiry >= now"
        );
        assert!(m.may_take_over(&holder("nifi-uuid", Some(wall - 1)), later, wall));
        assert!(
            m.may_take_over(&holder("nifi-uuid", None), later, wall),
            "an owner without expiry or heartbeat (a leftover)"
        );
        assert!(!m.may_take_over(&holder("nifi-uuid", Some(wall - 1)), t0, wall), "not yet watched for a timeout");
        assert!(
            m.may_take_over(&holder("ours", Some(wall + 60_000)), later, wall),
            "our silent node: its expiry does not count"
        );
        assert!(!m.may_take_over(&holder("me", None), later, wall), "never from this node itself");
    }

    proptest::proptest! {
        /// Over any heartbeat history, lease expiry and moment: a lease is taken over only from a
        /// holder silent for the whole timeout, and from a holder without a heartbeat row of ours
        /// (NiFi's) never before its `leaseExpiry` has passed; ours is judged by its heartbeat alone.
        #[test]
        fn take_over_needs_silence_and_for_nifi_an_expired_lease(
            beats in proptest::collection::vec((0u64..20_000, 0u64..3), 0..8),
            ours in proptest::bool::ANY,
            at in 0u64..40_000,
            expiry in proptest::option::of(-20_000i64..20_000),
            timeout_ms in 1_000u64..10_000,
        ) {
            let timeout = Duration::from_millis(timeout_ms);
            let mut m = Membership::new("me", timeout);
            let t0 = Instant::now(); // just after the membership started watching
            let wall = 5_000_000i64;
            let mut history: Vec<(u64, u64)> = beats.iter().filter(|(t, _)| *t <= at).copied().collect();
            history.sort();
            // The last moment the holder's counter changed, as this node saw it.
            let mut last_change: Option<(u64, u64)> = None;
            for (t, b) in &history {
                if ours {
                    m.observe(&[beat("h", *b)], t0 + Duration::from_millis(*t));
                    if last_change.is_none_or(|(_, prev)| prev != *b) {
                        last_change = Some((*t, *b));
                    }
                } else {
                    m.observe(&[], t0 + Duration::from_millis(*t));
                }
            }
            let now = t0 + Duration::from_millis(at);
            let h = holder("h", expiry.map(|e| wall + e));
            let silent_for = match last_change {
                Some((t, _)) => at - t,
                None => at, // never seen: watched since the start
            };
            // Not within a few ms of the boundary: the watch started a moment before t0.
            proptest::prop_assume!(silent_for.abs_diff(timeout_ms) > 5);
            let expected_silent = silent_for >= timeout_ms;
            let expired = expiry.is_none_or(|e| e < 0);
            let expected = if ours && last_change.is_some() { expected_silent } else { expected_silent && expired };
            proptest::prop_assert_eq!(m.may_take_over(&h, now, wall), expected);
        }
    }

    #[test]
    fn rows_unchanged_for_ten_timeouts_are_long_dead() {
        let t0 = Instant::now();
        let mut m = Membership::new("me", Duration::from_secs(1));
        m.observe(&[beat("a", 5), beat("b", 1)], t0);
        m.observe(&[beat("a", 5), beat("b", 2)], t0 + Duration::from_secs(9));
        assert_eq!(m.long_dead(t0 + Duration::from_secs(11)), vec![beat("a", 5)]);
        m.observe(&[beat("b", 3)], t0 + Duration::from_secs(11));
        assert!(m.long_dead(t0 + Duration::from_secs(11)).is_empty(), "a's row is gone");
    }
}
