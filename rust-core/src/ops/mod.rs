//! The operator's tool (`kinesnow-ctl`, in `tools/kinesnow-ctl`): read-only views of a running
//! group that the processors do not give. `status` reads the lease table and the stream, one row
//! per shard as `kafka-consumer-groups --describe` shows partitions; `audit` compares a
//! destination table's `kinesisMetadata` with the records Kinesis holds in a window. Neither
//! writes anything. Pure logic (rows, merges, rendering) stands apart from the calls that feed it.
//! Both take the stream as ConsumeKinesis' Stream Name does: a name or an ARN ([`Stream`]).
//! `sql` is the Snowflake SQL API client `audit` reads the table through.

pub mod audit;
pub mod sql;
pub mod status;

use crate::kinesis::address::{self, StreamArn, StreamRef};
use crate::lease::LeaseError;

/// The stream a command reads, named as ConsumeKinesis' Stream Name names it: by its name, or by
/// its ARN (a stream of another account). The lease table's rows and `kinesisMetadata` carry the
/// name either way; with an ARN every Kinesis call names the stream by it (see `kinesis::address`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stream {
    /// The stream's name (from the ARN when named by one).
    pub name: String,
    /// The ARN taken apart, when the stream was named by it.
    pub arn: Option<StreamArn>,
    /// The ARN as calls carry it.
    arn_text: Option<String>,
}

impl Stream {
    /// A stream named by its name.
    pub fn by_name(name: &str) -> Self {
        Self { name: name.to_owned(), arn: None, arn_text: None }
    }

    /// A stream name, or an ARN (`arn:...`), checked as ConsumeKinesis checks Stream Name.
    pub fn parse(text: &str) -> Result<Self, OpsError> {
        if !address::looks_like_arn(text) {
            if !address::is_stream_name(text) {
                return Err(OpsError::Usage(format!(
                    "'{text}' is not a Kinesis stream name (1-128 letters, digits, '_', '.', '-') nor a stream ARN"
                )));
            }
            return Ok(Self::by_name(text));
        }
        let arn = StreamArn::parse(text)
            .map_err(|e| OpsError::Usage(format!("'{text}' is not a Kinesis stream ARN: it {e}")))?;
        arn.check_partition(&arn.region)
            .map_err(|e| OpsError::Usage(format!("'{text}' does not fit its region: {e}")))?;
        Ok(Self { name: arn.name.clone(), arn_text: Some(arn.to_string()), arn: Some(arn) })
    }

    /// How Kinesis calls name the stream.
    pub fn reference(&self) -> StreamRef<'_> {
        match &self.arn_text {
            Some(arn) => StreamRef::Arn(arn),
            None => StreamRef::Name(&self.name),
        }
    }

    /// The region calls go to must be the ARN's: the AWS SDK sends a call that carries an ARN to
    /// the client's region, not the ARN's.
    pub fn check_region(&self, region: &str) -> Result<(), OpsError> {
        match &self.arn {
            Some(arn) if arn.region != region => Err(OpsError::Usage(format!(
                "the stream ARN's region '{}' is not the region '{region}' the calls go to: give --region {}",
                arn.region, arn.region
            ))),
            _ => Ok(()),
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_is_named_by_its_name_or_its_arn_as_stream_name_takes_them() {
        let by_name = Stream::parse("orders").unwrap();
        assert_eq!((by_name.name.as_str(), by_name.reference()), ("orders", StreamRef::Name("orders")));
        let text = "arn:aws:kinesis:eu-west-1:210987654321:stream/orders";
        let by_arn = Stream::parse(text).unwrap();
        assert_eq!((by_arn.name.as_str(), by_arn.reference()), ("orders", StreamRef::Arn(text)));
        assert_eq!(by_arn.arn.as_ref().map(|a| a.account.as_str()), Some("210987654321"));
        assert!(by_arn.check_region("eu-west-1").is_ok());
        let e = by_arn.check_region("us-east-1").unwrap_err().to_string();
        assert!(e.contains("'eu-west-1'") && e.contains("--region eu-west-1"), "{e}");
        assert!(by_name.check_region("us-east-1").is_ok(), "a name fits any region");
    }

    #[test]
    fn a_text_that_is_neither_says_why() {
        let e = Stream::parse("or ders").unwrap_err().to_string();
        assert!(e.contains("not a Kinesis stream name"), "{e}");
        let e = Stream::parse("arn:aws:kinesis:eu-west-1:12345:stream/orders").unwrap_err().to_string();
        assert!(e.contains("not a 12-digit AWS account ID"), "{e}");
        let e = Stream::parse("arn:aws:kinesis:cn-north-1:123456789012:stream/s").unwrap_err().to_string();
        assert!(e.contains("does not fit its region") && e.contains("aws-cn"), "{e}");
    }
}
