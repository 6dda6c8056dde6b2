//! The Kinesis consumer engine of one ConsumeKinesis processor: leases its shards (`keeper`, with
//! `resume` deciding where a take starts), reads each into bounded buffers (`reader` polling, or
//! `subscriber` with Enhanced Fan-Out; `budget`, `end_probe`), keeps every shard's batches and
//! decisions without I/O (`ledger`, `state`), hands batches to NiFi as FlowFiles (`intake`,
//! `output`), and writes each shard's checkpoint only when NiFi acknowledges that the batch
//! holding its records is committed (`engine`, over the state its tasks share, `shared`). What
//! each shard is doing, worded for NiFi's View State, is `status`; the `watchdog` reports a shard
//! stuck with records waiting. Test-only: `model`, the model test of the shard bookkeeping.

pub mod budget;
mod end_probe;
pub mod engine;
mod intake;
mod keeper;
pub(crate) mod ledger;
#[cfg(test)]
mod model;
pub mod output;
mod reader;
pub mod resume;
mod shared;
mod state;
pub mod status;
mod subscriber;
mod watchdog;

pub use engine::{remove_fan_out_consumer, ConsumerEngine, Prepared};
pub use shared::{Batch, EngineSettings, FanOutStats};

use crate::error::{Classify, ErrorClass};
use crate::kinesis::KinesisError;
use crate::lease::LeaseError;

#[derive(Debug, thiserror::Error)]
pub enum ConsumerError {
    #[error(transparent)]
    Kinesis(#[from] KinesisError),
    #[error(transparent)]
    Lease(#[from] LeaseError),
    #[error("batch {0} is unknown or already settled")]
    UnknownBatch(i64),
    #[error("the consumer is stopped")]
    Stopped,
}

impl Classify for ConsumerError {
    fn class(&self) -> ErrorClass {
        match self {
            Self::Kinesis(e) => e.class(),
            Self::Lease(e) => e.class(),
            Self::UnknownBatch(_) => ErrorClass::Fatal,
            Self::Stopped => ErrorClass::Retryable,
        }
    }
}
