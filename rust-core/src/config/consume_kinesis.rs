//! ConsumeKinesis settings. Property names follow NiFi's own ConsumeKinesis where it has them, so
//! users moving between the two processors recognise every field.

use std::time::{Duration, SystemTime};

use super::properties::{PropertyMap, Reader};
use super::{ConfigProblems, Secret};
pub use crate::consumer::resume::FailoverPosition;

pub const STREAM_NAME: &str = "Stream Name";
pub const APPLICATION_NAME: &str = "Application Name";
pub const REGION: &str = "Region";
pub const ACCESS_KEY_ID: &str = "AWS Access Key ID";
pub const SECRET_ACCESS_KEY: &str = "AWS Secret Access Key";
pub const ENDPOINT_OVERRIDE: &str = "Endpoint Override URL";
pub const DYNAMODB_ENDPOINT_OVERRIDE: &str = "DynamoDB Endpoint Override URL";
pub const CONSUMER_TYPE: &str = "Consumer Type";
pub const INITIAL_POSITION: &str = "Initial Stream Position";
pub const POSITION_TIMESTAMP: &str = "Stream Position Timestamp";
pub const MAX_RECORDS_PER_REQUEST: &str = "Max Records Per Request";
pub const MAX_BATCH_DURATION: &str = "Max Batch Duration";
pub const MAX_BATCH_SIZE: &str = "Max Batch Size";
pub const MAX_BUFFER_SIZE: &str = "Max Buffer Size";
pub const PROCESSING_STRATEGY: &str = "Processing Strategy";
pub const OUTPUT_STRATEGY: &str = "Output Strategy";
pub const LAG_WARNING_THRESHOLD: &str = "Lag Warning Threshold";
pub const FAILOVER_TIMEOUT: &str = "Failover Timeout";
pub const FAILOVER_POSITION: &str = "Failover Position";
/// Not a property: the NiFi node this processor runs on, as Java names it (FlowFiles carry it, so
/// PutSnowflake can tell FlowFiles of its own node's consumers from others').
pub const NODE_IDENTITY: &str = "Node Identity";

pub const PROPERTY_NAMES: &[&str] = &[
    STREAM_NAME,
    APPLICATION_NAME,
    REGION,
    ACCESS_KEY_ID,
    SECRET_ACCESS_KEY,
    ENDPOINT_OVERRIDE,
    DYNAMODB_ENDPOINT_OVERRIDE,
    CONSUMER_TYPE,
    INITIAL_POSITION,
    POSITION_TIMESTAMP,
    MAX_RECORDS_PER_REQUEST,
    MAX_BATCH_DURATION,
    MAX_BATCH_SIZE,
    MAX_BUFFER_SIZE,
    PROCESSING_STRATEGY,
    OUTPUT_STRATEGY,
    LAG_WARNING_THRESHOLD,
    FAILOVER_TIMEOUT,
    FAILOVER_POSITION,
];

const MIB: u64 = 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerType {
    SharedThroughput,
    EnhancedFanOut,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitialPosition {
    TrimHorizon,
    Latest,
    AtTimestamp(SystemTime),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessingStrategy {
    /// One FlowFile per user record.
    FlowFile,
    /// One FlowFile per shard per batch, records separated by newlines.
    LineDelimited,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputStrategy {
    /// The record's bytes as they are.
    UseValue,
    /// JSON records wrapped as `{"value": <record>, "kinesisMetadata": {...}}`.
    UseWrapper,
    /// JSON object records with a `kinesisMetadata` field added.
    InjectMetadata,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AwsCredentials {
    /// The AWS SDK's default chain (environment, profile, instance role, ...).
    DefaultChain,
    Static { access_key_id: Secret, secret_access_key: Secret },
}

#[derive(Debug, Clone, PartialEq)]
pub struct ConsumeKinesisConfig {
    pub stream_name: String,
    pub application_name: String,
    pub region: String,
    pub credentials: AwsCredentials,
    pub endpoint_override: Option<url::Url>,
    pub dynamodb_endpoint_override: Option<url::Url>,
    pub consumer_type: ConsumerType,
    pub initial_position: InitialPosition,
    pub max_records_per_request: u32,
    pub max_batch_duration: Duration,
    pub max_batch_size: u64,
    pub max_buffer_size: u64,
    pub processing_strategy: ProcessingStrategy,
    pub output_strategy: OutputStrategy,
    /// Warn when a shard lags by more than this share of the stream's retention period.
    pub lag_warning_threshold_percent: u8,
    /// A node silent this long is dead; its shards are taken over.
    pub failover_timeout: Duration,
    /// Where a node that takes a shard over resumes: after what NiFi or what Snowflake committed.
    pub failover_position: FailoverPosition,
    /// The NiFi node (a fact Java passes, not a property); empty in validation.
    pub node: String,
}

impl ConsumeKinesisConfig {
    pub fn aws(&self) -> crate::aws::AwsSettings {
        crate::aws::AwsSettings {
            region: self.region.clone(),
            credentials: self.credentials.clone(),
            endpoint_override: self.endpoint_override.clone(),
            dynamodb_endpoint_override: self.dynamodb_endpoint_override.clone(),
        }
    }

    pub fn parse(props: &PropertyMap) -> Result<Self, ConfigProblems> {
        let mut r = Reader::new(props);
        let stream_name = r.required(STREAM_NAME);
        check_stream_name(&mut r, &stream_name);
        let application_name = r.required(APPLICATION_NAME);
        check_application_name(&mut r, &application_name);
        let region = r.required(REGION);
        check_region(&mut r, &region);
        let credentials = credentials(&mut r);
        let endpoint_override = r.url(ENDPOINT_OVERRIDE);
        let dynamodb_endpoint_override = r.url(DYNAMODB_ENDPOINT_OVERRIDE);
        let consumer_type = r.one_of(
            CONSUMER_TYPE,
            ConsumerType::SharedThroughput,
            &[("SHARED_THROUGHPUT", ConsumerType::SharedThroughput), ("ENHANCED_FAN_OUT", ConsumerType::EnhancedFanOut)],
        );
        let initial_position = initial_position(&mut r);
        let max_records_per_request = r.int_in(MAX_RECORDS_PER_REQUEST, 1000, 1, 10_000) as u32;
        let max_batch_duration =
            r.duration_in(MAX_BATCH_DURATION, Duration::from_secs(1), Duration::from_millis(10), Duration::from_secs(600));
        let max_batch_size = r.data_size_in(MAX_BATCH_SIZE, 10 * MIB, 1024, 1024 * MIB);
        let max_buffer_size = r.data_size_in(MAX_BUFFER_SIZE, 64 * MIB, MIB, 64 * 1024 * MIB);
        if props.get(MAX_BATCH_SIZE).is_some() || props.get(MAX_BUFFER_SIZE).is_some() {
            // A record of up to 1 MiB must always fit, and a batch must fit in the buffer.
            if max_buffer_size < max_batch_size {
                r.problem(MAX_BUFFER_SIZE, "must be at least Max Batch Size");
            }
        }
        let processing_strategy = r.one_of(
            PROCESSING_STRATEGY,
            ProcessingStrategy::FlowFile,
            &[("FLOW_FILE", ProcessingStrategy::FlowFile), ("LINE_DELIMITED", ProcessingStrategy::LineDelimited)],
        );
        let output_strategy = r.one_of(
            OUTPUT_STRATEGY,
            OutputStrategy::UseValue,
            &[
                ("USE_VALUE", OutputStrategy::UseValue),
                ("USE_WRAPPER", OutputStrategy::UseWrapper),
                ("INJECT_METADATA", OutputStrategy::InjectMetadata),
            ],
        );
        let lag_warning_threshold_percent = r.int_in(LAG_WARNING_THRESHOLD, 50, 1, 100) as u8;
        let failover_timeout =
            r.duration_in(FAILOVER_TIMEOUT, Duration::from_secs(7), Duration::from_secs(1), Duration::from_secs(600));
        let failover_position = r.one_of(
            FAILOVER_POSITION,
            FailoverPosition::NiFiCommit,
            &[("NIFI_COMMIT", FailoverPosition::NiFiCommit), ("SNOWFLAKE_COMMIT", FailoverPosition::SnowflakeCommit)],
        );
        let node = r.optional(NODE_IDENTITY).unwrap_or_default();
        if failover_position == FailoverPosition::SnowflakeCommit
            && processing_strategy == ProcessingStrategy::LineDelimited
            && output_strategy == OutputStrategy::UseValue
        {
            r.problem(
                FAILOVER_POSITION,
                "SNOWFLAKE_COMMIT needs FlowFiles whose rows PutSnowflake loads exactly once: Processing Strategy FLOW_FILE, \
                 or Output Strategy INJECT_METADATA or USE_WRAPPER (several records of LINE_DELIMITED with USE_VALUE \
                 carry no per-record positions)",
            );
        }
        r.finish(Self {
            failover_position,
            node,
            stream_name,
            application_name,
            region,
            credentials,
            endpoint_override,
            dynamodb_endpoint_override,
            consumer_type,
            initial_position,
            max_records_per_request,
            max_batch_duration,
            max_batch_size,
            max_buffer_size,
            processing_strategy,
            output_strategy,
            lag_warning_threshold_percent,
            failover_timeout,
        })
    }
}

/// Kinesis stream names: 1-128 of `[a-zA-Z0-9_.-]`.
fn check_stream_name(r: &mut Reader, name: &str) {
    if !name.is_empty() && !is_aws_name(name, 1, 128) {
        r.problem(STREAM_NAME, format!("'{name}' is not a Kinesis stream name (1-128 letters, digits, '_', '.', '-')"));
    }
}

/// The Application Name names both the DynamoDB table (3-255 chars) and the fan-out consumer
/// (1-128 chars), so it must satisfy both.
fn check_application_name(r: &mut Reader, name: &str) {
    if !name.is_empty() && !is_aws_name(name, 3, 128) {
        r.problem(
            APPLICATION_NAME,
            format!("'{name}' must be 3-128 letters, digits, '_', '.' or '-': it names the DynamoDB table and the fan-out consumer"),
        );
    }
}

fn is_aws_name(name: &str, min: usize, max: usize) -> bool {
    (min..=max).contains(&name.len()) && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// AWS region codes look like `us-east-1`, `eu-central-2`, `us-gov-west-1`.
fn check_region(r: &mut Reader, region: &str) {
    let parts: Vec<&str> = region.split('-').collect();
    let well_formed = parts.len() >= 3
        && parts.iter().all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()))
        && parts.last().is_some_and(|p| p.chars().all(|c| c.is_ascii_digit()));
    if !region.is_empty() && !well_formed {
        r.problem(REGION, format!("'{region}' is not an AWS region code such as us-east-1"));
    }
}

fn credentials(r: &mut Reader) -> AwsCredentials {
    match (r.optional_raw(ACCESS_KEY_ID), r.optional_raw(SECRET_ACCESS_KEY)) {
        (Some(id), Some(secret)) => AwsCredentials::Static {
            access_key_id: Secret::new(id.trim()),
            secret_access_key: Secret::new(secret.trim()),
        },
        (None, None) => AwsCredentials::DefaultChain,
        (Some(_), None) => {
            r.problem(SECRET_ACCESS_KEY, "is required when AWS Access Key ID is set");
            AwsCredentials::DefaultChain
        }
        (None, Some(_)) => {
            r.problem(ACCESS_KEY_ID, "is required when AWS Secret Access Key is set");
            AwsCredentials::DefaultChain
        }
    }
}

fn initial_position(r: &mut Reader) -> InitialPosition {
    #[derive(Clone, Copy)]
    enum Kind {
        TrimHorizon,
        Latest,
        AtTimestamp,
    }
    let kind = r.one_of(
        INITIAL_POSITION,
        Kind::TrimHorizon,
        &[("TRIM_HORIZON", Kind::TrimHorizon), ("LATEST", Kind::Latest), ("AT_TIMESTAMP", Kind::AtTimestamp)],
    );
    match kind {
        Kind::TrimHorizon => InitialPosition::TrimHorizon,
        Kind::Latest => InitialPosition::Latest,
        Kind::AtTimestamp => match r.optional(POSITION_TIMESTAMP) {
            None => {
                r.problem(POSITION_TIMESTAMP, "is required when Initial Stream Position is AT_TIMESTAMP");
                InitialPosition::TrimHorizon
            }
            Some(text) => match humantime::parse_rfc3339_weak(&text) {
                Ok(t) => InitialPosition::AtTimestamp(t),
                Err(_) => {
                    r.problem(POSITION_TIMESTAMP, format!("'{text}' is not an ISO-8601 timestamp such as 2026-01-31T12:00:00Z"));
                    InitialPosition::TrimHorizon
                }
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minimal() -> Vec<(&'static str, &'static str)> {
        vec![(STREAM_NAME, "orders"), (APPLICATION_NAME, "orders-to-snowflake"), (REGION, "us-east-1")]
    }

    fn parse(pairs: Vec<(&str, &str)>) -> Result<ConsumeKinesisConfig, ConfigProblems> {
        ConsumeKinesisConfig::parse(&PropertyMap::from_pairs(pairs))
    }

    fn problem_for(pairs: Vec<(&str, &str)>, property: &str) -> String {
        let problems = parse(pairs).unwrap_err().0;
        problems.iter().find(|p| p.property == property).unwrap_or_else(|| panic!("no problem for {property}: {problems:?}")).message.clone()
    }

    #[test]
    fn minimal_settings_take_defaults() {
        let c = parse(minimal()).unwrap();
        assert_eq!(c.consumer_type, ConsumerType::SharedThroughput);
        assert_eq!(c.initial_position, InitialPosition::TrimHorizon);
        assert_eq!(c.credentials, AwsCredentials::DefaultChain);
        assert_eq!(c.max_batch_size, 10 * MIB);
        assert_eq!(c.max_records_per_request, 1000);
    }

    #[test]
    fn names_every_missing_required_property() {
        let problems = parse(vec![]).unwrap_err().0;
        let names: Vec<&str> = problems.iter().map(|p| p.property.as_str()).collect();
        assert_eq!(names, vec![STREAM_NAME, APPLICATION_NAME, REGION]);
    }

    #[test]
    fn rejects_bad_names_and_region() {
        let mut p = minimal();
        p[0] = (STREAM_NAME, "orders stream!");
        assert!(problem_for(p, STREAM_NAME).contains("not a Kinesis stream name"));
        let mut p = minimal();
        p[1] = (APPLICATION_NAME, "ab");
        assert!(problem_for(p, APPLICATION_NAME).contains("DynamoDB table"));
        let mut p = minimal();
        p[2] = (REGION, "Frankfurt");
        assert!(problem_for(p, REGION).contains("us-east-1"));
    }

    #[test]
    fn credentials_come_in_pairs_and_stay_secret() {
        let mut p = minimal();
        p.push((ACCESS_KEY_ID, "AKIAEXAMPLE"));
        assert!(problem_for(p.clone(), SECRET_ACCESS_KEY).contains("required when AWS Access Key ID"));
        p.push((SECRET_ACCESS_KEY, "topsecretvalue"));
        let c = parse(p).unwrap();
        assert!(!format!("{c:?}").contains("topsecretvalue"));
        assert!(matches!(c.credentials, AwsCredentials::Static { .. }));
    }

    #[test]
    fn enhanced_fan_out_is_a_consumer_type() {
        let mut p = minimal();
        p.push((CONSUMER_TYPE, "ENHANCED_FAN_OUT"));
        assert_eq!(parse(p).unwrap().consumer_type, ConsumerType::EnhancedFanOut);
    }

    #[test]
    fn at_timestamp_needs_a_valid_timestamp() {
        let mut p = minimal();
        p.push((INITIAL_POSITION, "AT_TIMESTAMP"));
        assert!(problem_for(p.clone(), POSITION_TIMESTAMP).contains("required"));
        p.push((POSITION_TIMESTAMP, "yesterday"));
        assert!(problem_for(p.clone(), POSITION_TIMESTAMP).contains("ISO-8601"));
        p.pop();
        p.push((POSITION_TIMESTAMP, "2026-01-31T12:00:00Z"));
        assert!(matches!(parse(p).unwrap().initial_position, InitialPosition::AtTimestamp(_)));
    }

    #[test]
    fn buffer_must_hold_a_batch() {
        let mut p = minimal();
        p.push((MAX_BATCH_SIZE, "100 MB"));
        p.push((MAX_BUFFER_SIZE, "50 MB"));
        assert!(problem_for(p, MAX_BUFFER_SIZE).contains("at least Max Batch Size"));
    }

    #[test]
    fn rejects_malformed_numbers_sizes_and_urls() {
        let mut p = minimal();
        p.push((MAX_RECORDS_PER_REQUEST, "20000"));
        p.push((MAX_BATCH_DURATION, "soon"));
        p.push((ENDPOINT_OVERRIDE, "ftp://127.0.0.1"));
        let problems = parse(p).unwrap_err().0;
        assert_eq!(problems.len(), 3, "{problems:?}");
    }
}
