//! The DynamoDB table named after the Application Name: its schema, shard leases with fencing
//! counters, and checkpoints written only by the lease's current holder.
//!
//! Rows are a superset of NiFi's own ConsumeKinesis rows (key `streamName` + `shardId`;
//! `leaseOwner`, `leaseExpiry`, `sequenceNumber`, `lastUpdateTimestamp`), so a user can switch
//! between the two processors in either direction without losing position. Added here:
//! `subSequenceNumber` (resume exact to the KPL sub-record), `leaseCounter` (fencing token, bumped
//! on every take) and `shardEnd` (the shard was read to its end and committed).

pub mod store;
pub mod table;

pub use store::{Checkpoint, Lease, LeaseStore};

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
