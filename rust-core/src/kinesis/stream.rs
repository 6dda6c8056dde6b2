//! The stream's own description from DescribeStream, the action Snowflake's IAM policy for the
//! connector grants (it grants no `DescribeStreamSummary`): the ARN (SubscribeToShard and the
//! consumer calls need it) and the retention period (the lag warning). One page with at most one
//! shard is asked for; the shards themselves come from ListShards.

use aws_sdk_kinesis::error::ProvideErrorMetadata;
use aws_sdk_kinesis::Client;

use super::address::{ForStream, StreamRef};
use super::{sdk_error_text_with, KinesisError};

/// What the engine needs to know of a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamFacts {
    pub arn: String,
    pub retention_hours: i32,
}

impl StreamFacts {
    /// The retention period in milliseconds.
    pub fn retention_ms(&self) -> i64 {
        i64::from(self.retention_hours) * 3_600_000
    }
}

/// Describes `stream` (and so checks that it exists and may be read). Its ARN is the stream
/// owner's: the credentials' account for a name, the ARN's account for an ARN.
pub async fn describe(client: &Client, stream: StreamRef<'_>) -> Result<StreamFacts, KinesisError> {
    let out = client.describe_stream().for_stream(stream).limit(1).send().await.map_err(|e| {
        KinesisError::from_sdk(stream.as_str(), None, sdk_error_text_with(&e, e.message()), e.code().map(str::to_owned))
    })?;
    let d = out.stream_description().ok_or_else(|| KinesisError::Service {
        stream: stream.to_string(),
        message: "DescribeStream returned no stream description".into(),
    })?;
    Ok(StreamFacts { arn: d.stream_arn().to_owned(), retention_hours: d.retention_period_hours() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_hours_read_as_milliseconds() {
        let f = StreamFacts { arn: "arn".into(), retention_hours: 24 };
        assert_eq!(f.retention_ms(), 86_400_000);
        assert_eq!(StreamFacts { retention_hours: 8760, ..f }.retention_ms(), 31_536_000_000);
    }
}
