//! The Kinesis side of the engine: the record model, positions, shard discovery, the polling
//! reader's calls and limits, and KPL de-aggregation.

pub mod deaggregate;
mod kpl_messages;
pub mod limiter;
pub mod position;
pub mod record;
pub mod shards;

use crate::error::{Classify, ErrorClass};

#[derive(Debug, thiserror::Error)]
pub enum KinesisError {
    #[error("stream '{stream}' was not found ({message})")]
    StreamNotFound { stream: String, message: String },
    #[error("access to stream '{stream}' is denied; check the credentials and the IAM policy ({message})")]
    AccessDenied { stream: String, message: String },
    #[error("Kinesis throttled reads of {}shard{} of stream '{stream}'", .shard.as_deref().map(|s| format!("{s} ")).unwrap_or_default(), if .shard.is_some() { "" } else { "s" })]
    Throttled { stream: String, shard: Option<String> },
    #[error("the shard iterator of shard {shard} expired")]
    ExpiredIterator { shard: String },
    #[error("Kinesis rejected a request for stream '{stream}': {message}")]
    InvalidArgument { stream: String, message: String },
    #[error("Kinesis call for stream '{stream}' failed: {message}")]
    Service { stream: String, message: String },
}

impl KinesisError {
    /// Classifies an SDK failure by its error code.
    pub fn from_sdk(stream: &str, shard: Option<&str>, message: String, code: Option<String>) -> Self {
        let stream = stream.to_owned();
        match code.as_deref().unwrap_or_default() {
            "ResourceNotFoundException" => Self::StreamNotFound { stream, message },
            "AccessDeniedException" | "UnrecognizedClientException" | "InvalidSignatureException"
            | "ExpiredTokenException" | "IncompleteSignature" | "MissingAuthenticationToken" => {
                Self::AccessDenied { stream, message }
            }
            "ProvisionedThroughputExceededException" | "LimitExceededException" | "KMSThrottlingException"
            | "ThrottlingException" => Self::Throttled { stream, shard: shard.map(str::to_owned) },
            "ExpiredIteratorException" => Self::ExpiredIterator { shard: shard.unwrap_or_default().to_owned() },
            "InvalidArgumentException" => Self::InvalidArgument { stream, message },
            _ => Self::Service { stream, message },
        }
    }
}

impl Classify for KinesisError {
    fn class(&self) -> ErrorClass {
        match self {
            Self::StreamNotFound { .. } | Self::AccessDenied { .. } => ErrorClass::Configuration,
            _ => ErrorClass::Retryable,
        }
    }
}
