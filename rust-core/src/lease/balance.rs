//! Fair shares: which leases this node takes and which it hands back, from one scan of the table.
//! Each node's target is ceil(readable shards / live nodes). A node takes free leases (no owner, or
//! a dead owner) up to its target and hands back whatever is above it. When nothing is free and a
//! live node holds fewer than floor(shards / nodes), the most loaded node (ties: smallest id) hands
//! back one lease, so every node ends within one lease of every other. Nodes never take a lease a
//! live holder holds (see `Membership::may_take_over`): leases move only by being handed back.

use std::collections::{BTreeMap, BTreeSet};

use super::store::Holder;

/// A shard that may be read now (not finished, parents finished) and who holds it.
#[derive(Debug, Clone)]
pub struct Readable {
    pub shard_id: String,
    pub holder: Option<Holder>,
    /// Its parents (split or merge), handed on with its records.
    pub parents: Vec<String>,
}

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Leases to take, with the holder the take is conditional on (`None`: free).
    pub take: Vec<(String, Option<Holder>)>,
    /// Leases to hand back gracefully.
    pub release: Vec<String>,
}

/// `mine` holds the leases this node keeps (not those it is already handing back); `live` the live
/// nodes, this one included; `dead` tells whether a holder's lease may be taken over.
pub fn plan(
    me: &str,
    readable: &[Readable],
    mine: &BTreeSet<String>,
    live: &BTreeSet<String>,
    dead: impl Fn(&Holder) -> bool,
) -> Plan {
    let nodes = live.len().max(1);
    let ceil = readable.len().div_ceil(nodes);
    let floor = readable.len() / nodes;
    let mut counts: BTreeMap<&str, usize> = live.iter().map(|n| (n.as_str(), 0)).collect();
    let mut free = Vec::new();
    for shard in readable {
        match &shard.holder {
            _ if mine.contains(&shard.shard_id) => {}
            Some(h) if h.owner == me => {} // being handed back
            Some(h) if !dead(h) => {
                if let Some(c) = counts.get_mut(h.owner.as_str()) {
                    *c += 1;
                }
            }
            holder => free.push((shard.shard_id.clone(), holder.clone())),
        }
    }
    let held = readable.iter().filter(|s| mine.contains(&s.shard_id)).count();
    counts.insert(me, held);

    let mut plan = Plan::default();
    if held > ceil {
        plan.release = mine
            .iter()
            .filter(|m| readable.iter().any(|r| &r.shard_id == *m))
            .rev()
            .take(held - ceil)
            .cloned()
            .collect();
    } else if held < ceil && !free.is_empty() {
        // Start at a node-specific place so nodes starting together do not all race for one lease.
        let offset = stable_hash(me) as usize % free.len();
        free.rotate_left(offset);
        plan.take = free.into_iter().take(ceil - held).collect();
    } else if free.is_empty() && held > floor && counts.values().any(|&c| c < floor) {
        let most = counts.iter().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0))).map(|(n, _)| *n);
        if most == Some(me) {
            plan.release =
                mine.iter().rfind(|m| readable.iter().any(|r| &r.shard_id == *m)).cloned().into_iter().collect();
        }
    }
    plan
}

/// FNV-1a: stable across runs and platforms, unlike the std hasher.
fn stable_hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A simulated cluster: shard -> holder, applied plan by plan, one node at a time.
    struct Cluster {
        shards: BTreeMap<String, Option<String>>,
    }

    impl Cluster {
        fn new(n: usize) -> Self {
            Self { shards: (0..n).map(|i| (format!("shard-{i:03}"), None)).collect() }
        }

        fn readable(&self) -> Vec<Readable> {
            self.shards
                .iter()
                .map(|(id, h)| Readable {
                    shard_id: id.clone(),
                    holder: h.clone().map(|owner| Holder { owner, counter: 1, lease_expiry: None }),
                    parents: Vec::new(),
                })
                .collect()
        }

        fn step(&mut self, me: &str, live: &BTreeSet<String>) -> Plan {
            let mine: BTreeSet<String> =
                self.shards.iter().filter(|(_, h)| h.as_deref() == Some(me)).map(|(id, _)| id.clone()).collect();
            let plan = plan(me, &self.readable(), &mine, live, |h| !live.contains(&h.owner));
            for id in &plan.release {
                self.shards.insert(id.clone(), None);
            }
            for (id, _) in &plan.take {
                self.shards.insert(id.clone(), Some(me.to_owned()));
            }
            plan
        }

        fn settle(&mut self, live: &BTreeSet<String>) -> usize {
            for round in 0..50 {
                let mut changed = false;
                for node in live {
                    let p = self.step(node, live);
                    changed |= !p.take.is_empty() || !p.release.is_empty();
                }
                if !changed {
                    return round;
                }
            }
            panic!("no stable assignment after 50 rounds: {:?}", self.counts(live));
        }

        fn counts(&self, live: &BTreeSet<String>) -> Vec<usize> {
            live.iter().map(|n| self.shards.values().filter(|h| h.as_deref() == Some(n)).count()).collect()
        }
    }

    fn nodes(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    fn assert_even(counts: &[usize], total: usize) {
        assert_eq!(counts.iter().sum::<usize>(), total, "every shard held: {counts:?}");
        let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
        assert!(max - min <= 1, "within one lease of each other: {counts:?}");
    }

    #[test]
    fn shards_spread_evenly_for_every_size() {
        for shards in 1..=13 {
            for n in 1..=5 {
                let names: Vec<String> = (0..n).map(|i| format!("node-{i}")).collect();
                let live: BTreeSet<String> = names.iter().cloned().collect();
                let mut c = Cluster::new(shards);
                c.settle(&live);
                assert_even(&c.counts(&live), shards);
            }
        }
    }

    #[test]
    fn a_joining_node_gets_its_share_by_hand_back_and_a_leaving_one_is_covered() {
        let mut c = Cluster::new(8);
        let two = nodes(&["a", "b"]);
        c.settle(&two);
        assert_eq!(c.counts(&two), vec![4, 4]);
        let three = nodes(&["a", "b", "c"]);
        c.settle(&three);
        assert_even(&c.counts(&three), 8);
        // b dies: its leases are free for the others (dead owner), and are taken.
        let survivors = nodes(&["a", "c"]);
        c.settle(&survivors);
        assert_eq!(c.counts(&survivors), vec![4, 4]);
    }

    #[test]
    fn balanced_nodes_change_nothing() {
        let mut c = Cluster::new(4);
        let live = nodes(&["a", "b", "c"]);
        c.settle(&live);
        for node in &live {
            assert_eq!(c.step(node, &live), Plan::default());
        }
    }

    #[test]
    fn a_live_holder_is_never_taken_from_and_a_dead_one_is_taken_conditionally() {
        let readable = vec![
            Readable {
                shard_id: "s1".into(),
                holder: Some(Holder { owner: "busy".into(), counter: 3, lease_expiry: None }),
                parents: vec![],
            },
            Readable {
                shard_id: "s2".into(),
                holder: Some(Holder { owner: "gone".into(), counter: 9, lease_expiry: None }),
                parents: vec![],
            },
        ];
        let live = nodes(&["me", "busy"]);
        let p = plan("me", &readable, &BTreeSet::new(), &live, |h| h.owner == "gone");
        assert_eq!(
            p.take,
            vec![("s2".to_owned(), Some(Holder { owner: "gone".into(), counter: 9, lease_expiry: None }))]
        );
        assert!(p.release.is_empty());
    }

    #[test]
    fn leases_being_handed_back_are_neither_counted_nor_taken_again() {
        let readable = vec![
            Readable {
                shard_id: "s1".into(),
                holder: Some(Holder { owner: "me".into(), counter: 1, lease_expiry: None }),
                parents: vec![],
            },
            Readable { shard_id: "s2".into(), holder: None, parents: vec![] },
        ];
        let p = plan("me", &readable, &BTreeSet::new(), &nodes(&["me"]), |_| false);
        assert_eq!(p.take, vec![("s2".to_owned(), None)]);
    }
}
