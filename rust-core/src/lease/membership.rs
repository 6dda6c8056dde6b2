//! Which nodes are alive, judged from their heartbeat rows without trusting anyone's clock: a node
//! is live while its heartbeat counter keeps changing, measured on this node's own monotonic clock.
//! A node never seen beating (a leftover owner, or a node whose row is gone) counts as dead once
//! this node has watched the table for the failover timeout.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use tokio::time::Instant;

use super::store::NodeBeat;

pub struct Membership {
    me: String,
    timeout: Duration,
    started: Instant,
    /// Per node: the last heartbeat counter seen and when it was first seen with that value.
    seen: HashMap<String, (u64, Instant)>,
}

impl Membership {
    pub fn new(me: impl Into<String>, timeout: Duration) -> Self {
        Self { me: me.into(), timeout, started: Instant::now(), seen: HashMap::new() }
    }

    /// Takes in the heartbeat rows of one scan.
    pub fn observe(&mut self, beats: &[NodeBeat], now: Instant) {
        for b in beats {
            let entry = self.seen.entry(b.owner.clone()).or_insert((b.beat, now));
            if entry.0 != b.beat {
                *entry = (b.beat, now);
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
            Some((_, since)) => now.duration_since(*since) < self.timeout,
            None => now.duration_since(self.started) < self.timeout,
        }
    }

    /// Nodes with a heartbeat that is still changing, this node included.
    pub fn live_nodes(&self, now: Instant) -> BTreeSet<String> {
        let mut live: BTreeSet<String> =
            self.seen.iter().filter(|(_, (_, since))| now.duration_since(*since) < self.timeout).map(|(o, _)| o.clone()).collect();
        live.insert(self.me.clone());
        live
    }

    /// Heartbeat rows unchanged for ten timeouts: nodes long dead whose rows can be removed.
    pub fn long_dead(&self, now: Instant) -> Vec<String> {
        self.seen
            .iter()
            .filter(|(owner, (_, since))| *owner != &self.me && now.duration_since(*since) > self.timeout * 10)
            .map(|(o, _)| o.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn beat(owner: &str, beat: u64) -> NodeBeat {
        NodeBeat { owner: owner.into(), beat }
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

    #[test]
    fn rows_unchanged_for_ten_timeouts_are_long_dead() {
        let t0 = Instant::now();
        let mut m = Membership::new("me", Duration::from_secs(1));
        m.observe(&[beat("a", 5), beat("b", 1)], t0);
        m.observe(&[beat("a", 5), beat("b", 2)], t0 + Duration::from_secs(9));
        assert_eq!(m.long_dead(t0 + Duration::from_secs(11)), vec!["a".to_owned()]);
        m.observe(&[beat("b", 3)], t0 + Duration::from_secs(11));
        assert!(m.long_dead(t0 + Duration::from_secs(11)).is_empty(), "a's row is gone");
    }
}
