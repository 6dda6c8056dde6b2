//! How Kinesis calls name the stream: by its name (a stream of the credentials' own account, in the
//! client's region) or by its ARN, `arn:<partition>:kinesis:<region>:<account>:stream/<name>`. A
//! stream of another AWS account needs the ARN: AWS looks a name up in the caller's account only,
//! and checks a stream's resource-based policy only for a call that carries `StreamARN`. With an
//! ARN every call that takes one carries it and no name; with a name the calls are as they always
//! were (GetRecords then carries neither: its shard iterator names the stream).
//!
//! The AWS SDK sends a call with `StreamARN` to the client's region (its endpoint rules prefer the
//! client's region over the ARN's) and to an account endpoint
//! (`<account>.control-kinesis.<region>.<domain>`, `<account>.data-kinesis...`), so the ARN's
//! region must be the processor's Region; [`StreamArn::check_partition`] asks the SDK's own
//! endpoint rules whether the ARN's partition fits that region.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use aws_sdk_kinesis::config::endpoint::{DefaultResolver, Params, ResolveEndpoint};
use aws_sdk_kinesis::operation::describe_stream::builders::DescribeStreamFluentBuilder;
use aws_sdk_kinesis::operation::get_records::builders::GetRecordsFluentBuilder;
use aws_sdk_kinesis::operation::get_shard_iterator::builders::GetShardIteratorFluentBuilder;
use aws_sdk_kinesis::operation::list_shards::builders::ListShardsFluentBuilder;

/// Kinesis stream names: 1-128 of `[a-zA-Z0-9_.-]`.
pub fn is_stream_name(name: &str) -> bool {
    (1..=128).contains(&name.len()) && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// Whether a Stream Name property's value is meant as an ARN.
pub fn looks_like_arn(value: &str) -> bool {
    value.starts_with("arn:")
}

/// A Kinesis stream's ARN, taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamArn {
    pub partition: String,
    pub region: String,
    pub account: String,
    pub name: String,
}

/// Why a text is not a Kinesis stream's ARN.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArnError {
    #[error("has {0} of the 6 parts of a stream ARN, arn:<partition>:kinesis:<region>:<account>:stream/<name>")]
    Parts(usize),
    #[error("names no partition (aws, aws-cn, aws-us-gov, ...)")]
    Partition,
    #[error("is an ARN of service '{0}', not of Kinesis")]
    Service(String),
    #[error("names no region")]
    NoRegion,
    #[error("has region '{0}', not an AWS region code such as us-east-1")]
    Region(String),
    #[error("has account '{0}', not a 12-digit AWS account ID")]
    Account(String),
    #[error("names '{0}', not stream/<name> (an Enhanced Fan-Out consumer's ARN, or another resource's)")]
    Resource(String),
    #[error("names stream '{0}', not a Kinesis stream name (1-128 letters, digits, '_', '.', '-')")]
    Name(String),
}

/// AWS region codes: lower-case words and digits joined by '-', ending in a number (us-east-1).
pub fn is_region_code(region: &str) -> bool {
    let parts: Vec<&str> = region.split('-').collect();
    parts.len() >= 3
        && parts.iter().all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()))
        && parts.last().is_some_and(|p| p.chars().all(|c| c.is_ascii_digit()))
}

impl StreamArn {
    pub fn parse(text: &str) -> Result<Self, ArnError> {
        let parts: Vec<&str> = text.splitn(6, ':').collect();
        let [arn, partition, service, region, account, resource] = parts[..] else {
            return Err(ArnError::Parts(parts.len()));
        };
        if arn != "arn" {
            return Err(ArnError::Parts(0));
        }
        if partition.is_empty() || !partition.chars().all(|c| c.is_ascii_lowercase() || c == '-') {
            return Err(ArnError::Partition);
        }
        if service != "kinesis" {
            return Err(ArnError::Service(service.to_owned()));
        }
        if region.is_empty() {
            return Err(ArnError::NoRegion);
        }
        if !is_region_code(region) {
            return Err(ArnError::Region(region.to_owned()));
        }
        if account.len() != 12 || !account.bytes().all(|b| b.is_ascii_digit()) {
            return Err(ArnError::Account(account.to_owned()));
        }
        let name = match resource.strip_prefix("stream/") {
            Some(name) if !name.contains(['/', ':']) => name,
            _ => return Err(ArnError::Resource(resource.to_owned())),
        };
        if !is_stream_name(name) {
            return Err(ArnError::Name(name.to_owned()));
        }
        Ok(Self {
            partition: partition.to_owned(),
            region: region.to_owned(),
            account: account.to_owned(),
            name: name.to_owned(),
        })
    }

    /// Whether the SDK's endpoint rules accept this ARN for a client of `region`: their verdict,
    /// such as "Partition: aws from ARN doesn't match with partition name: aws-cn.", when not.
    pub fn check_partition(&self, region: &str) -> Result<(), String> {
        let params = Params::builder()
            .region(region)
            .use_fips(false)
            .use_dual_stack(false)
            .operation_type("control")
            .stream_arn(self.to_string())
            .build()
            .map_err(|e| e.to_string())?;
        // The default resolver answers at once (its future is ready when made).
        let resolver = DefaultResolver::new();
        let mut resolving = pin!(resolver.resolve_endpoint(&params));
        match resolving.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(result) => result.map(|_| ()).map_err(|e| e.to_string()),
            Poll::Pending => Ok(()),
        }
    }
}

impl std::fmt::Display for StreamArn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "arn:{}:kinesis:{}:{}:stream/{}", self.partition, self.region, self.account, self.name)
    }
}

/// How calls name the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamRef<'a> {
    Name(&'a str),
    Arn(&'a str),
}

impl<'a> StreamRef<'a> {
    /// The name or the ARN, as errors and messages show the stream.
    pub fn as_str(self) -> &'a str {
        match self {
            Self::Name(s) | Self::Arn(s) => s,
        }
    }

    /// The ARN, when calls name the stream by it.
    pub fn arn(self) -> Option<&'a str> {
        match self {
            Self::Name(_) => None,
            Self::Arn(arn) => Some(arn),
        }
    }
}

impl std::fmt::Display for StreamRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A request that names the stream by `StreamName` or `StreamARN`.
pub trait ForStream {
    fn for_stream(self, stream: StreamRef<'_>) -> Self;
}

macro_rules! for_stream {
    ($($builder:ty),*) => {$(
        impl ForStream for $builder {
            fn for_stream(self, stream: StreamRef<'_>) -> Self {
                match stream {
                    StreamRef::Name(name) => self.stream_name(name),
                    StreamRef::Arn(arn) => self.stream_arn(arn),
                }
            }
        }
    )*};
}

for_stream!(ListShardsFluentBuilder, GetShardIteratorFluentBuilder, DescribeStreamFluentBuilder);

/// GetRecords names the stream by its shard iterator; with an ARN it carries `StreamARN` too, as
/// AWS asks of a call to another account's stream.
impl ForStream for GetRecordsFluentBuilder {
    fn for_stream(self, stream: StreamRef<'_>) -> Self {
        self.set_stream_arn(stream.arn().map(str::to_owned))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_a_stream_arn_of_any_partition_apart() {
        for (text, partition, region) in [
            ("arn:aws:kinesis:eu-west-1:123456789012:stream/orders", "aws", "eu-west-1"),
            ("arn:aws-cn:kinesis:cn-north-1:123456789012:stream/orders", "aws-cn", "cn-north-1"),
            ("arn:aws-us-gov:kinesis:us-gov-west-1:123456789012:stream/orders", "aws-us-gov", "us-gov-west-1"),
        ] {
            let arn = StreamArn::parse(text).unwrap();
            assert_eq!((arn.partition.as_str(), arn.region.as_str()), (partition, region));
            assert_eq!((arn.account.as_str(), arn.name.as_str()), ("123456789012", "orders"));
            assert_eq!(arn.to_string(), text);
        }
    }

    #[test]
    fn says_what_is_wrong_with_a_text_that_is_no_stream_arn() {
        let error = |text: &str| StreamArn::parse(text).unwrap_err();
        assert_eq!(error("arn:aws:kinesis:eu-west-1:123456789012"), ArnError::Parts(5));
        assert_eq!(error("urn:aws:kinesis:eu-west-1:123456789012:stream/orders"), ArnError::Parts(0));
        assert_eq!(error("arn::kinesis:eu-west-1:123456789012:stream/orders"), ArnError::Partition);
        assert_eq!(error("arn:aws:s3:eu-west-1:123456789012:stream/orders"), ArnError::Service("s3".into()));
        assert_eq!(error("arn:aws:kinesis::123456789012:stream/orders"), ArnError::NoRegion);
        assert_eq!(error("arn:aws:kinesis:Ireland:123456789012:stream/orders"), ArnError::Region("Ireland".into()));
        assert_eq!(error("arn:aws:kinesis:eu-west-1:12345:stream/orders"), ArnError::Account("12345".into()));
        assert_eq!(
            error("arn:aws:kinesis:eu-west-1:123456789012:stream/orders/consumer/app:1525898737"),
            ArnError::Resource("stream/orders/consumer/app:1525898737".into())
        );
        assert_eq!(
            error("arn:aws:kinesis:eu-west-1:123456789012:deliverystream/orders"),
            ArnError::Resource("deliverystream/orders".into())
        );
        assert_eq!(error("arn:aws:kinesis:eu-west-1:123456789012:stream/"), ArnError::Name("".into()));
        assert_eq!(error("arn:aws:kinesis:eu-west-1:123456789012:stream/or ders"), ArnError::Name("or ders".into()));
        assert!(error("arn:aws:kinesis:eu-west-1").to_string().contains("arn:<partition>:kinesis:<region>"));
    }

    #[test]
    fn the_sdks_endpoint_rules_judge_the_partition() {
        let arn = |text: &str| StreamArn::parse(text).unwrap();
        assert_eq!(arn("arn:aws:kinesis:us-east-1:123456789012:stream/s").check_partition("us-east-1"), Ok(()));
        assert_eq!(arn("arn:aws-cn:kinesis:cn-north-1:123456789012:stream/s").check_partition("cn-north-1"), Ok(()));
        let wrong = arn("arn:aws:kinesis:cn-north-1:123456789012:stream/s").check_partition("cn-north-1").unwrap_err();
        assert!(wrong.contains("Partition: aws from ARN doesn't match with partition name: aws-cn"), "{wrong}");
        let gov = arn("arn:aws:kinesis:us-gov-west-1:123456789012:stream/s").check_partition("us-gov-west-1");
        assert!(gov.unwrap_err().contains("aws-us-gov"));
    }

    #[test]
    fn requests_name_the_stream_as_told() {
        let conf = aws_sdk_kinesis::Config::builder()
            .behavior_version(aws_sdk_kinesis::config::BehaviorVersion::latest())
            .build();
        let client = aws_sdk_kinesis::Client::from_conf(conf);
        let arn = "arn:aws:kinesis:us-east-1:123456789012:stream/s";
        let by_arn = client.list_shards().for_stream(StreamRef::Arn(arn));
        assert_eq!((by_arn.get_stream_arn().as_deref(), by_arn.get_stream_name().as_deref()), (Some(arn), None));
        let by_name = client.get_shard_iterator().for_stream(StreamRef::Name("s"));
        assert_eq!((by_name.get_stream_arn().as_deref(), by_name.get_stream_name().as_deref()), (None, Some("s")));
        let described = client.describe_stream().for_stream(StreamRef::Arn(arn));
        assert_eq!(described.get_stream_arn().as_deref(), Some(arn));
        assert_eq!(client.get_records().for_stream(StreamRef::Arn(arn)).get_stream_arn().as_deref(), Some(arn));
        assert_eq!(client.get_records().for_stream(StreamRef::Name("s")).get_stream_arn().as_deref(), None);
    }
}
