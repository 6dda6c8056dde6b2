//! Parent before child across a split or merge. ConsumeKinesis hands NiFi a parent shard's records
//! before its children's and marks the children's FlowFiles with their parents
//! (`aws.kinesis.parent.shard.ids`). Each shard has its own channels, and channels commit
//! independently, so without a gate a child's first rows could be committed before its parent's
//! last ones. The gate holds a child shard's FlowFiles until every FlowFile submitted earlier for a
//! parent shard has its outcome (committed, or routed to failure/invalid); FlowFiles of one shard
//! keep their order while held. Shards are known by a key (`naming::ChannelNames::lineage_key`),
//! whichever channel their FlowFiles take.
//!
//! The gate counts each FlowFile id once: admitting an id that is already pending changes nothing,
//! and so does resolving one twice, so the counts always return to zero.

use std::collections::{HashMap, VecDeque};

/// `T` is what is held: the FlowFile's rows and where they go.
pub struct LineageGate<T> {
    /// FlowFile id -> its shard's key, for every FlowFile submitted and without an outcome yet.
    pending: HashMap<i64, String>,
    /// Shard key -> FlowFiles submitted for it without an outcome yet (held ones included).
    unresolved: HashMap<String, usize>,
    /// Shard key -> FlowFiles waiting for the parents, in submission order.
    held: HashMap<String, VecDeque<(T, Vec<String>)>>,
}

impl<T> Default for LineageGate<T> {
    fn default() -> Self {
        Self { pending: HashMap::new(), unresolved: HashMap::new(), held: HashMap::new() }
    }
}

impl<T> LineageGate<T> {
    /// Whether FlowFile `id` was admitted and has no outcome yet.
    pub fn contains(&self, id: i64) -> bool {
        self.pending.contains_key(&id)
    }

    /// Registers FlowFile `id` of shard `key`, whose parents are `parent_keys`. Returns what may go
    /// to the channel writers now: `item`, unless it must wait or the id is already pending (then
    /// `item` is dropped: the FlowFile's first submission gets its outcome).
    pub fn admit(&mut self, id: i64, key: &str, parent_keys: Vec<String>, item: T) -> Option<T> {
        if self.pending.contains_key(&id) {
            return None;
        }
        let (channel, work) = (key, item);
        self.pending.insert(id, channel.to_owned());
        *self.unresolved.entry(channel.to_owned()).or_default() += 1;
        let queue_waiting = self.held.get(channel).is_some_and(|q| !q.is_empty());
        if queue_waiting || !self.parents_clear(&parent_keys) {
            self.held.entry(channel.to_owned()).or_default().push_back((work, parent_keys));
            None
        } else {
            Some(work)
        }
    }

    /// A FlowFile has its outcome. Returns the held FlowFiles that may now go.
    pub fn resolved(&mut self, flow_file_id: i64) -> Vec<T> {
        let Some(channel) = self.pending.remove(&flow_file_id) else { return Vec::new() };
        if let Some(n) = self.unresolved.get_mut(&channel) {
            *n -= 1;
            if *n == 0 {
                self.unresolved.remove(&channel);
            }
        }
        self.release()
    }

    /// FlowFiles held back right now.
    pub fn held(&self) -> usize {
        self.held.values().map(VecDeque::len).sum()
    }

    fn parents_clear(&self, parents: &[String]) -> bool {
        parents.iter().all(|p| !self.unresolved.contains_key(p))
    }

    /// Shards with FlowFiles without an outcome (for tests of the counts).
    pub fn unresolved_shards(&self) -> usize {
        self.unresolved.len()
    }

    fn release(&mut self) -> Vec<T> {
        let mut out = Vec::new();
        let channels: Vec<String> = self.held.keys().cloned().collect();
        for channel in channels {
            loop {
                let ready = self
                    .held
                    .get(&channel)
                    .and_then(|q| q.front())
                    .is_some_and(|(_, parents)| self.parents_clear(parents));
                if !ready {
                    break;
                }
                let (work, _) = self.held.get_mut(&channel).and_then(VecDeque::pop_front).expect("front checked");
                out.push(work);
            }
            if self.held.get(&channel).is_some_and(VecDeque::is_empty) {
                self.held.remove(&channel);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A held item: the shard key and the FlowFile id.
    type Item = (String, i64);

    struct Gate(LineageGate<Item>);

    impl Gate {
        fn admit(&mut self, key: &str, parents: Vec<String>, id: i64) -> Option<Item> {
            self.0.admit(id, key, parents, (key.to_owned(), id))
        }
        fn resolved(&mut self, id: i64) -> Vec<Item> {
            self.0.resolved(id)
        }
        fn held(&self) -> usize {
            self.0.held()
        }
    }

    fn gate() -> Gate {
        Gate(LineageGate::default())
    }

    fn work(id: i64) -> i64 {
        id
    }

    fn ids(released: Vec<Item>) -> Vec<(String, i64)> {
        released
    }

    #[test]
    fn a_child_waits_until_its_parents_flow_files_have_their_outcomes() {
        let mut g = gate();
        assert!(g.admit("p", vec![], work(1)).is_some());
        assert!(g.admit("p", vec![], work(2)).is_some());
        assert!(g.admit("c", vec!["p".into()], work(3)).is_none(), "the parent has rows in flight");
        assert!(g.admit("c", vec!["p".into()], work(4)).is_none());
        assert!(g.resolved(1).is_empty(), "one of the parent's FlowFiles is still open");
        assert_eq!(ids(g.resolved(2)), vec![("c".to_owned(), 3), ("c".to_owned(), 4)], "released in order");
        assert_eq!(g.held(), 0);
        // The child's own later FlowFiles pass once nothing of the parent is open.
        assert!(g.admit("c", vec!["p".into()], work(5)).is_some());
    }

    #[test]
    fn a_merge_child_waits_for_both_parents_and_unrelated_channels_never_wait() {
        let mut g = gate();
        g.admit("p1", vec![], work(1));
        g.admit("p2", vec![], work(2));
        assert!(g.admit("other", vec![], work(9)).is_some());
        assert!(g.admit("m", vec!["p1".into(), "p2".into()], work(3)).is_none());
        assert!(g.resolved(2).is_empty());
        assert_eq!(ids(g.resolved(1)), vec![("m".to_owned(), 3)]);
    }

    #[test]
    fn a_grandchild_waits_for_a_held_child() {
        let mut g = gate();
        g.admit("p", vec![], work(1));
        assert!(g.admit("c", vec!["p".into()], work(2)).is_none());
        assert!(g.admit("g", vec!["c".into()], work(3)).is_none(), "the held child counts as unresolved");
        assert_eq!(ids(g.resolved(1)), vec![("c".to_owned(), 2)]);
        assert_eq!(ids(g.resolved(2)), vec![("g".to_owned(), 3)]);
    }

    #[test]
    fn unknown_outcomes_change_nothing() {
        let mut g = gate();
        assert!(g.resolved(77).is_empty());
    }

    /// Issue 15, defect 4: a FlowFile submitted again while pending (a rolled-back session comes
    /// back) counted twice, so its shard never became clear and its children waited forever.
    #[test]
    fn a_flow_file_admitted_twice_counts_once() {
        let mut g = gate();
        assert!(g.admit("p", vec![], work(1)).is_some());
        assert!(g.admit("p", vec![], work(1)).is_none(), "the second submission is dropped");
        assert!(g.admit("c", vec!["p".into()], work(2)).is_none());
        assert_eq!(ids(g.resolved(1)), vec![("c".to_owned(), 2)], "one outcome clears the parent");
        assert!(g.resolved(1).is_empty(), "a second outcome changes nothing");
        assert!(g.resolved(2).is_empty());
        assert_eq!(g.0.unresolved_shards(), 0, "the counts are back at zero");
    }
}
