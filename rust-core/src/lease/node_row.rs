//! This engine's heartbeat row. Heartbeat rows are slots (`__node__slot<N>`) that name their
//! owner in `nodeOwner`, so the table keeps one heartbeat row per engine running at once, whatever
//! the number of starts: a start takes the lowest slot no live row holds (a stopped node's
//! tombstone, or a new slot), while its owner id stays new on every start (operators and tests
//! read a JVM's PID from it). A slot another node took over, after this node was silent so long
//! that a peer removed its row, is given up for another one at the next beat.

use std::collections::BTreeSet;
use std::sync::Mutex;

use super::store::{LeaseStore, NodeBeat};
use super::LeaseError;
use crate::runtime::lock;

/// The prefix of a slot's name after `__node__`.
const SLOT: &str = "slot";

/// How many free slots one beat tries to take before it gives up until the next beat.
const TRIES: usize = 4;

/// The first `n` slot names that no row in `taken` holds, lowest first.
pub fn free_slots(taken: &BTreeSet<&str>, n: usize) -> Vec<String> {
    (0..).map(|i| format!("{SLOT}{i}")).filter(|slot| !taken.contains(slot.as_str())).take(n).collect()
}

/// The heartbeat row of one engine: its owner id and the slot it beats on, once it has one.
pub struct NodeRow {
    owner: String,
    slot: Mutex<Option<String>>,
}

impl NodeRow {
    pub fn new(owner: impl Into<String>) -> Self {
        Self { owner: owner.into(), slot: Mutex::new(None) }
    }

    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The slot this engine beats on, if it holds one.
    pub fn slot(&self) -> Option<String> {
        lock(&self.slot).clone()
    }

    fn set_slot(&self, slot: Option<String>) {
        *lock(&self.slot) = slot;
    }

    /// Bumps this engine's heartbeat counter; takes a free slot first when it holds none, or when
    /// the one it held has been taken over.
    pub async fn beat(&self, store: &LeaseStore) -> Result<(), LeaseError> {
        if let Some(slot) = self.slot() {
            if store.heartbeat(&slot, &self.owner).await? {
                return Ok(());
            }
            self.set_slot(None);
        }
        let nodes = store.scan().await?.nodes;
        self.take_free_slot(store, &nodes).await
    }

    async fn take_free_slot(&self, store: &LeaseStore, nodes: &[NodeBeat]) -> Result<(), LeaseError> {
        let taken: BTreeSet<&str> = nodes.iter().map(|n| n.row.as_str()).collect();
        for slot in free_slots(&taken, TRIES) {
            if store.claim_node_row(&slot, &self.owner).await? {
                self.set_slot(Some(slot));
                return Ok(());
            }
        }
        Err(LeaseError::Service {
            table: store.table().to_owned(),
            message: format!(
                "other nodes took each of {TRIES} free heartbeat rows first; trying again at the next beat"
            ),
        })
    }

    /// Removes this engine's heartbeat row on a stop (a tombstone the next start may take), unless
    /// another node has taken the slot over meanwhile.
    pub async fn remove(&self, store: &LeaseStore) -> Result<(), LeaseError> {
        let Some(slot) = self.slot() else { return Ok(()) };
        store.remove_node(&slot, &self.owner, None).await?;
        self.set_slot(None);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_slots_are_the_lowest_not_taken() {
        assert_eq!(free_slots(&BTreeSet::new(), 2), ["slot0", "slot1"]);
        let taken = BTreeSet::from(["slot0", "slot2", "kinesnow-legacy-owner"]);
        assert_eq!(free_slots(&taken, 3), ["slot1", "slot3", "slot4"]);
    }
}
