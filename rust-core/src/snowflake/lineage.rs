//! Parent before child across a split or merge. ConsumeKinesis hands NiFi a parent shard's records
//! before its children's and marks the children's FlowFiles with their parents
//! (`aws.kinesis.parent.shard.ids`). Each shard has its own channel, and channels commit
//! independently, so without a gate a child's first rows could be committed before its parent's
//! last ones. The gate holds a child channel's FlowFiles until every FlowFile submitted earlier to
//! a parent's channel has its outcome (committed, or routed to failure/invalid); FlowFiles of one
//! channel keep their order while held.

use std::collections::{HashMap, VecDeque};

use super::channel::Work;

#[derive(Default)]
pub struct LineageGate {
    /// FlowFile id -> its channel, for every FlowFile submitted and without an outcome yet.
    pending: HashMap<i64, String>,
    /// Channel -> FlowFiles submitted to it without an outcome yet (held ones included).
    unresolved: HashMap<String, usize>,
    /// Channel -> FlowFiles waiting for the parents' channels, in submission order.
    held: HashMap<String, VecDeque<(Work, Vec<String>)>>,
}

impl LineageGate {
    /// Registers a FlowFile for `channel` whose source shard's parents write to `parent_channels`.
    /// Returns what may go to the channel writers now (this FlowFile, unless it must wait).
    pub fn admit(&mut self, channel: &str, parent_channels: Vec<String>, work: Work) -> Option<Work> {
        self.pending.insert(work.flow_file_id, channel.to_owned());
        *self.unresolved.entry(channel.to_owned()).or_default() += 1;
        let queue_waiting = self.held.get(channel).is_some_and(|q| !q.is_empty());
        if queue_waiting || !self.parents_clear(&parent_channels) {
            self.held.entry(channel.to_owned()).or_default().push_back((work, parent_channels));
            None
        } else {
            Some(work)
        }
    }

    /// A FlowFile has its outcome. Returns the held FlowFiles that may now go, with their channels.
    pub fn resolved(&mut self, flow_file_id: i64) -> Vec<(String, Work)> {
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

    fn release(&mut self) -> Vec<(String, Work)> {
        let mut out = Vec::new();
        let channels: Vec<String> = self.held.keys().cloned().collect();
        for channel in channels {
            loop {
                let ready = self.held.get(&channel).and_then(|q| q.front()).is_some_and(|(_, parents)| self.parents_clear(parents));
                if !ready {
                    break;
                }
                let (work, _) = self.held.get_mut(&channel).and_then(VecDeque::pop_front).expect("front checked");
                out.push((channel.clone(), work));
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

    fn work(id: i64) -> Work {
        Work { flow_file_id: id, rows: Vec::new(), bytes: 0 }
    }

    fn ids(released: Vec<(String, Work)>) -> Vec<(String, i64)> {
        released.into_iter().map(|(c, w)| (c, w.flow_file_id)).collect()
    }

    #[test]
    fn a_child_waits_until_its_parents_flow_files_have_their_outcomes() {
        let mut g = LineageGate::default();
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
        let mut g = LineageGate::default();
        g.admit("p1", vec![], work(1));
        g.admit("p2", vec![], work(2));
        assert!(g.admit("other", vec![], work(9)).is_some());
        assert!(g.admit("m", vec!["p1".into(), "p2".into()], work(3)).is_none());
        assert!(g.resolved(2).is_empty());
        assert_eq!(ids(g.resolved(1)), vec![("m".to_owned(), 3)]);
    }

    #[test]
    fn a_grandchild_waits_for_a_held_child() {
        let mut g = LineageGate::default();
        g.admit("p", vec![], work(1));
        assert!(g.admit("c", vec!["p".into()], work(2)).is_none());
        assert!(g.admit("g", vec!["c".into()], work(3)).is_none(), "the held child counts as unresolved");
        assert_eq!(ids(g.resolved(1)), vec![("c".to_owned(), 2)]);
        assert_eq!(ids(g.resolved(2)), vec![("g".to_owned(), 3)]);
    }

    #[test]
    fn unknown_outcomes_change_nothing() {
        let mut g = LineageGate::default();
        assert!(g.resolved(77).is_empty());
    }
}
