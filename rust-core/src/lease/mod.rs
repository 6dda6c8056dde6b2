//! The DynamoDB table named after the Application Name: its schema, shard leases with fencing
//! counters, node heartbeats (membership), fair shares (balancing), and checkpoints written only by
//! the lease's current holder.
//!
//! Shard rows keep NiFi's own ConsumeKinesis (2.9+) key and lease/position columns (key
//! `streamName` + `shardId`; `leaseOwner`, `leaseExpiry`, `sequenceNumber`,
//! `lastUpdateTimestamp`), so a group can switch between the two processors (what carries over:
//! the processor's additionalDetails, tests in `tests/nifi_table.rs`). Added here:
//! `subSequenceNumber` (resume exact to the KPL sub-record; NiFi ignores it), `leaseCounter`
//! (fencing token, bumped on every take), `shardEnd` (the shard was read to its end and committed)
//! and `parentShardIds` (written from ChildShards). Among our nodes a lease is valid while its
//! owner's heartbeat row (`shardId` = `__node__slot<N>`, owner `nodeOwner`, counter `heartbeat`; see
//! `node_row`) keeps changing, so
//! keeping N leases costs one write per heartbeat, not N; the `leaseExpiry` ours writes on each
//! take and checkpoint is for NiFi, which holds (and lets others take) leases by that time. A
//! lease of NiFi's (its owner has no heartbeat row of ours) is taken only after its `leaseExpiry`.
//!
//! Rows are never deleted (Snowflake's IAM policy grants no `DeleteItem`): a removed row is a
//! tombstone that every reader treats as absent (see `tombstone`).
//!
//! The map: `table` creates the table; `store` reads and writes its rows (every ownership write
//! conditional on owner and lease counter); `node_row` is this engine's heartbeat slot,
//! `membership` judges which nodes are alive and `balance` computes fair shares; `tombstone` is
//! removal without DeleteItem; `migration` prepares the table when the processor is scheduled,
//! migrating a legacy KCL table (read by `kcl`) under `migration_lock`.

pub mod balance;
pub mod kcl;
pub mod membership;
pub mod migration;
pub mod migration_lock;
pub mod node_row;
pub mod store;
pub mod table;
pub mod tombstone;

pub use store::{Checkpoint, Holder, Lease, LeaseRow, LeaseStore, Loaded, LoadedOnTake, NodeBeat, TableView};

use crate::error::{Classify, ErrorClass};

#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("DynamoDB table '{table}' cannot be used: {message}")]
    Table { table: String, message: String },
    #[error("lease on shard {shard} is held by another consumer or has moved on (fenced)")]
    Fenced { shard: String },
    #[error("DynamoDB access is denied for table '{table}': {message}")]
    AccessDenied { table: String, message: String },
    #[error("DynamoDB call on table '{table}' failed: {message}")]
    Service { table: String, message: String },
    #[error("lease row for shard {shard} is malformed: {message}")]
    Malformed { shard: String, message: String },
}

impl Classify for LeaseError {
    fn class(&self) -> ErrorClass {
        match self {
            Self::Table { .. } | Self::AccessDenied { .. } => ErrorClass::Configuration,
            Self::Fenced { .. } | Self::Service { .. } => ErrorClass::Retryable,
            Self::Malformed { .. } => ErrorClass::Fatal,
        }
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}
