//! The operator's tool (`kinesnow-ctl`, in `tools/kinesnow-ctl`): read-only views of a running
//! group that the processors do not give. `status` reads the lease table and the stream, one row
//! per shard as `kafka-consumer-groups --describe` shows partitions; `audit` compares a
//! destination table's `kinesisMetadata` with the records Kinesis holds in a window. Neither
//! writes anything. Pure logic (rows, merges, rendering) stands apart from the calls that feed it.

pub mod audit;
pub mod sql;
pub mod status;

use crate::lease::LeaseError;

/// What stops a command.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    #[error(transparent)]
    Lease(#[from] LeaseError),
    #[error(transparent)]
    Kinesis(#[from] crate::kinesis::KinesisError),
    #[error("Snowflake: {0}")]
    Snowflake(String),
    #[error("{0}")]
    Usage(String),
}
