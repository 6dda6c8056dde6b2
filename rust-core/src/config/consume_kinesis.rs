//! ConsumeKinesis settings. Property names follow NiFi's own ConsumeKinesis where it has them, so
//! users moving between the two processors recognise every field.

use std::time::{Duration, SystemTime};

use super::properties::{PropertyMap, Reader};
use super::{ConfigProblems, Secret};
use crate::kinesis::address::{self, is_region_code, StreamArn, StreamRef};

/// The properties' names (and, in the contract, their defaults and allowed values).
pub use crate::contract::properties::consume_kinesis::{
    ACCESS_KEY_ID, APPLICATION_NAME, ASSUME_ROLE_ARN, ASSUME_ROLE_EXTERNAL_ID, ASSUME_ROLE_SESSION_NAME,
    ASSUME_ROLE_SESSION_TIME, ASSUME_ROLE_STS_ENDPOINT, ASSUME_ROLE_STS_REGION, CONSUMER_TYPE, CREDENTIALS_FILE,
    DYNAMODB_ENDPOINT_OVERRIDE, ENDPOINT_OVERRIDE, FAILOVER_POSITION, FAILOVER_TIMEOUT, INITIAL_POSITION,
    LAG_WARNING_THRESHOLD, MAX_BATCH_DURATION, MAX_BATCH_SIZE, MAX_BUFFER_SIZE, MAX_RECORDS_PER_REQUEST,
    MESSAGE_DEMARCATOR, OUTPUT_STRATEGY, POSITION_TIMESTAMP, PROCESSING_STRATEGY, PROFILE_NAME, REGION,
    SECRET_ACCESS_KEY, STREAM_NAME, STUCK_SHARD_WARNING, WEB_IDENTITY_TOKEN_FILE,
};

/// ConsumeKinesis' Failover Position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailoverPosition {
    NiFiCommit,
    SnowflakeCommit,
}

/// NiFi's AWS credentials controller service (only offered where its API NAR is the parent).
pub const CREDENTIALS_SERVICE: &str = "AWS Credentials Provider Service";
/// The bytes between records with Processing Strategy DEMARCATOR (as NiFi's ConsumeKinesis).
/// Not a property: the NiFi node this processor runs on, as Java names it (FlowFiles carry it, so
/// PutSnowflake can tell FlowFiles of its own node's consumers from others').
pub const NODE_IDENTITY: &str = "Node Identity";
/// Not a property: the handle of the callback the shim registered for the credentials service
/// (`secrets::credentials_service::register`), while it opens or verifies the processor.
pub const CREDENTIALS_SERVICE_HANDLE: &str = "AWS Credentials Provider Service Handle";
/// Not a property: the credentials service's name on the canvas, for messages.
pub const CREDENTIALS_SERVICE_NAME: &str = "AWS Credentials Provider Service Name";

pub const PROPERTY_NAMES: &[&str] = &[
    STREAM_NAME,
    APPLICATION_NAME,
    REGION,
    CREDENTIALS_SERVICE,
    ACCESS_KEY_ID,
    SECRET_ACCESS_KEY,
    PROFILE_NAME,
    CREDENTIALS_FILE,
    WEB_IDENTITY_TOKEN_FILE,
    ASSUME_ROLE_ARN,
    ASSUME_ROLE_SESSION_NAME,
    ASSUME_ROLE_EXTERNAL_ID,
    ASSUME_ROLE_SESSION_TIME,
    ASSUME_ROLE_STS_REGION,
    ASSUME_ROLE_STS_ENDPOINT,
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
    MESSAGE_DEMARCATOR,
    OUTPUT_STRATEGY,
    LAG_WARNING_THRESHOLD,
    FAILOVER_TIMEOUT,
    FAILOVER_POSITION,
    STUCK_SHARD_WARNING,
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

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessingStrategy {
    /// One FlowFile per user record.
    FlowFile,
    /// One FlowFile per shard per batch, records joined by these bytes (never empty): LINE_DELIMITED
    /// is a newline, DEMARCATOR the Message Demarcator's UTF-8 bytes. A record that contains them is
    /// not escaped, so a split on the demarcator downstream cuts that record in pieces.
    Demarcated(Vec<u8>),
    /// One entry per user record with its bytes as they are; the shim reads them with NiFi's Record
    /// Reader and writes each shard's records with the Record Writer (Output Strategy applied there).
    Record,
}

impl ProcessingStrategy {
    /// LINE_DELIMITED: DEMARCATOR with a newline.
    pub fn line_delimited() -> Self {
        Self::Demarcated(b"\n".to_vec())
    }

    /// Whether a FlowFile may hold several records (so, with USE_VALUE, no per-record positions).
    pub fn groups_records(&self) -> bool {
        !matches!(self, Self::FlowFile)
    }
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

/// Where the processor's AWS credentials come from, and the role they assume, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsCredentials {
    pub source: CredentialSource,
    /// With `source` a web identity: the role the token is exchanged for. Otherwise a role the
    /// source's credentials assume (AssumeRole), whose session's credentials every call uses.
    pub role: Option<AssumeRole>,
}

impl AwsCredentials {
    /// The AWS SDK's default chain, no role.
    pub fn default_chain() -> Self {
        Self { source: CredentialSource::DefaultChain, role: None }
    }

    /// Static keys, no role.
    pub fn fixed(access_key_id: &str, secret_access_key: &str) -> Self {
        Self {
            source: CredentialSource::Static {
                access_key_id: Secret::new(access_key_id),
                secret_access_key: Secret::new(secret_access_key),
            },
            role: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialSource {
    /// The AWS SDK's default chain (environment, profile, web identity, container or instance role).
    DefaultChain,
    Static {
        access_key_id: Secret,
        secret_access_key: Secret,
    },
    /// A profile of the AWS shared config and credentials files (`None`: `default`; `file`: that
    /// credentials file instead of `~/.aws/credentials`).
    Profile {
        name: Option<String>,
        file: Option<std::path::PathBuf>,
    },
    /// An OIDC token read from this file at each refresh (what EKS mounts for IRSA), exchanged for
    /// the role's credentials with AssumeRoleWithWebIdentity.
    WebIdentity {
        token_file: std::path::PathBuf,
    },
    /// NiFi's AWS credentials controller service, through the shim. Exclusive: no other credential
    /// property may be set with it (as NiFi's own AWS processors, where the service is the only source).
    Service(crate::secrets::credentials_service::ServiceRef),
}

/// A role to assume, as NiFi's AWS credentials service names its settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssumeRole {
    pub role_arn: String,
    pub session_name: String,
    pub external_id: Option<String>,
    /// The session's lifetime asked of STS; the SDK refreshes before it ends.
    pub session_time: Duration,
    /// STS' region; `None`: the processor's Region.
    pub sts_region: Option<String>,
    pub sts_endpoint: Option<url::Url>,
}

/// AWS accepts role sessions of 15 minutes to 12 hours (the role's maximum may be lower).
pub const SESSION_TIME_SECONDS: (u64, u64) = (900, 43_200);
pub const DEFAULT_SESSION_TIME_SECONDS: u64 = 3600;
const DEFAULT_SESSION_NAME: &str = "nifi-kinesnow";

#[derive(Debug, Clone, PartialEq)]
pub struct ConsumeKinesisConfig {
    /// The stream's name (from the ARN when Stream Name holds one): the lease table's rows, the
    /// FlowFiles' attributes and `kinesisMetadata` carry it.
    pub stream_name: String,
    /// The ARN when Stream Name holds one: every Kinesis call then names the stream by it.
    pub stream_arn: Option<String>,
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
    /// A leased shard whose checkpoint has not moved this long while records wait is warned about
    /// (zero: never).
    pub stuck_shard_warning: Duration,
    /// Where a node that takes a shard over resumes: after what NiFi or what Snowflake committed.
    pub failover_position: FailoverPosition,
    /// The NiFi node (a fact Java passes, not a property); empty in validation.
    pub node: String,
    /// The HTTP proxy of every AWS call (facts from the Proxy Configuration Service).
    pub proxy: super::proxy::Proxy,
}

impl ConsumeKinesisConfig {
    /// How Kinesis calls name the stream: by its ARN when one was given, else by its name.
    pub fn stream_ref(&self) -> StreamRef<'_> {
        match &self.stream_arn {
            Some(arn) => StreamRef::Arn(arn),
            None => StreamRef::Name(&self.stream_name),
        }
    }

    pub fn parse(props: &PropertyMap) -> Result<Self, ConfigProblems> {
        let mut r = Reader::new(props);
        let stream = r.required(STREAM_NAME);
        let application_name = r.required(APPLICATION_NAME);
        check_application_name(&mut r, &application_name);
        let region = r.required(REGION);
        check_region(&mut r, &region);
        let (stream_name, stream_arn) = stream_of(&mut r, stream, &region);
        let credentials = credentials(&mut r);
        let endpoint_override = r.url(ENDPOINT_OVERRIDE);
        let dynamodb_endpoint_override = r.url(DYNAMODB_ENDPOINT_OVERRIDE);
        let consumer_type = r.one_of(
            CONSUMER_TYPE,
            ConsumerType::SharedThroughput,
            &[
                ("SHARED_THROUGHPUT", ConsumerType::SharedThroughput),
                ("ENHANCED_FAN_OUT", ConsumerType::EnhancedFanOut),
            ],
        );
        let initial_position = initial_position(&mut r);
        let max_records_per_request = r.int_in(MAX_RECORDS_PER_REQUEST, 1000, 1, 10_000) as u32;
        let max_batch_duration = r.duration_in(
            MAX_BATCH_DURATION,
            Duration::from_secs(1),
            Duration::from_millis(10),
            Duration::from_secs(600),
        );
        let (max_batch_size, max_buffer_size) = batch_and_buffer_sizes(&mut r, props);
        let processing_strategy = processing_strategy(&mut r);
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
        let stuck_shard_warning =
            r.duration_in(STUCK_SHARD_WARNING, Duration::from_secs(300), Duration::ZERO, Duration::from_secs(86_400));
        let failover_position = r.one_of(
            FAILOVER_POSITION,
            FailoverPosition::NiFiCommit,
            &[("NIFI_COMMIT", FailoverPosition::NiFiCommit), ("SNOWFLAKE_COMMIT", FailoverPosition::SnowflakeCommit)],
        );
        let node = r.optional(NODE_IDENTITY).unwrap_or_default();
        let proxy = super::proxy::Proxy::read(&mut r);
        check_exactly_once_layout(&mut r, failover_position, &processing_strategy, output_strategy);
        r.finish(Self {
            failover_position,
            node,
            proxy,
            stream_name,
            stream_arn,
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
            stuck_shard_warning,
        })
    }
}

/// Max Batch Size and Max Buffer Size: a batch must fit in the buffer. A record larger than either
/// (Kinesis records reach 10 MiB when a stream's MaxRecordSizeInKiB is raised) is admitted alone
/// and goes alone in its batch.
fn batch_and_buffer_sizes(r: &mut Reader, props: &PropertyMap) -> (u64, u64) {
    let max_batch_size = r.data_size_in(MAX_BATCH_SIZE, 10 * MIB, 1024, 1024 * MIB);
    let max_buffer_size = r.data_size_in(MAX_BUFFER_SIZE, 64 * MIB, MIB, 64 * 1024 * MIB);
    let either_set = props.get(MAX_BATCH_SIZE).is_some() || props.get(MAX_BUFFER_SIZE).is_some();
    if either_set && max_buffer_size < max_batch_size {
        r.problem(MAX_BUFFER_SIZE, "must be at least Max Batch Size");
    }
    (max_batch_size, max_buffer_size)
}

/// FLOW_FILE, LINE_DELIMITED, DEMARCATOR (with its Message Demarcator) or RECORD.
fn processing_strategy(r: &mut Reader) -> ProcessingStrategy {
    #[derive(Clone, Copy)]
    enum Kind {
        FlowFile,
        LineDelimited,
        Demarcator,
        Record,
    }
    let kind = r.one_of(
        PROCESSING_STRATEGY,
        Kind::FlowFile,
        &[
            ("FLOW_FILE", Kind::FlowFile),
            ("LINE_DELIMITED", Kind::LineDelimited),
            ("DEMARCATOR", Kind::Demarcator),
            ("RECORD", Kind::Record),
        ],
    );
    match kind {
        Kind::FlowFile => ProcessingStrategy::FlowFile,
        Kind::LineDelimited => ProcessingStrategy::line_delimited(),
        Kind::Record => ProcessingStrategy::Record,
        Kind::Demarcator => match r.optional_exact(MESSAGE_DEMARCATOR) {
            Some(demarcator) => ProcessingStrategy::Demarcated(demarcator.into_bytes()),
            None => {
                r.problem(MESSAGE_DEMARCATOR, "is required with Processing Strategy DEMARCATOR: the bytes between two records (empty would run them together)");
                ProcessingStrategy::line_delimited()
            }
        },
    }
}

/// SNOWFLAKE_COMMIT needs every row to carry its position: one record per FlowFile, or records with
/// their own `kinesisMetadata`. The one place this rule lives (the shim only shows its verdict).
fn check_exactly_once_layout(
    r: &mut Reader,
    failover: FailoverPosition,
    processing: &ProcessingStrategy,
    output: OutputStrategy,
) {
    if failover == FailoverPosition::SnowflakeCommit
        && processing.groups_records()
        && output == OutputStrategy::UseValue
    {
        r.problem(
            FAILOVER_POSITION,
            "SNOWFLAKE_COMMIT needs FlowFiles whose rows PutSnowflake loads exactly once: Processing Strategy FLOW_FILE, \
             or Output Strategy INJECT_METADATA or USE_WRAPPER (several records of LINE_DELIMITED, DEMARCATOR or RECORD \
             with USE_VALUE carry no per-record positions)",
        );
    }
}

/// Stream Name holds the stream's name (1-128 of `[a-zA-Z0-9_.-]`) or its ARN, whose region must be
/// the Region (the SDK sends calls to the client's region, see `kinesis::address`): the name, and
/// the ARN if given.
fn stream_of(r: &mut Reader, value: String, region: &str) -> (String, Option<String>) {
    if value.is_empty() {
        return (value, None);
    }
    if !address::looks_like_arn(&value) {
        if !address::is_stream_name(&value) {
            r.problem(
                STREAM_NAME,
                format!(
                    "'{value}' is not a Kinesis stream name (1-128 letters, digits, '_', '.', '-') nor a stream ARN"
                ),
            );
        }
        return (value, None);
    }
    let arn = match StreamArn::parse(&value) {
        Ok(arn) => arn,
        Err(e) => {
            r.problem(STREAM_NAME, format!("'{value}' is not a Kinesis stream ARN: it {e}"));
            return (value, None);
        }
    };
    if !region.is_empty() && arn.region != region {
        r.problem(
            STREAM_NAME,
            format!(
                "the stream ARN's region '{}' is not the Region '{region}': set Region to '{}' (Kinesis calls go to \
                 the Region, and the lease table is kept there too)",
                arn.region, arn.region
            ),
        );
    } else if let Err(e) = arn.check_partition(&arn.region) {
        r.problem(STREAM_NAME, format!("'{value}' does not fit its region: {e}"));
    }
    (arn.name.clone(), Some(arn.to_string()))
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
    if !region.is_empty() && !is_region_code(region) {
        r.problem(REGION, format!("'{region}' is not an AWS region code such as us-east-1"));
    }
}

/// Where and as whom AWS is called, read from the processor's credential, Assume Role and proxy
/// settings alone (property names and the proxy service's facts), with the processor's own checks:
/// `kinesnow-ctl` takes the same settings as its flags.
pub fn aws_access(props: &PropertyMap) -> Result<(AwsCredentials, super::proxy::Proxy), ConfigProblems> {
    let mut r = Reader::new(props);
    let credentials = credentials(&mut r);
    let proxy = super::proxy::Proxy::read(&mut r);
    r.finish((credentials, proxy))
}

fn credentials(r: &mut Reader) -> AwsCredentials {
    if let Some(service) = credentials_service(r) {
        return AwsCredentials { source: CredentialSource::Service(service), role: None };
    }
    let source = credential_source(r);
    let role = assume_role(r);
    if matches!(source, CredentialSource::WebIdentity { .. }) && role.is_none() {
        r.problem(
            ASSUME_ROLE_ARN,
            "is required with Web Identity Token File: the token is exchanged for that role's credentials",
        );
    }
    AwsCredentials { source, role }
}

/// The credentials service, when its property is set: then no other credential property may be
/// (NiFi's own AWS processors take their credentials from the service alone; NiFi 1.x refused a
/// service together with keys or a credentials file). The supplier comes from the handle Java
/// registered, absent in validation.
fn credentials_service(r: &mut Reader) -> Option<crate::secrets::credentials_service::ServiceRef> {
    let id = r.optional(CREDENTIALS_SERVICE)?;
    let others: Vec<&str> =
        [ACCESS_KEY_ID, SECRET_ACCESS_KEY, PROFILE_NAME, CREDENTIALS_FILE, WEB_IDENTITY_TOKEN_FILE, ASSUME_ROLE_ARN]
            .into_iter()
            .filter(|name| r.optional_raw(name).is_some())
            .collect();
    if !others.is_empty() {
        r.problem(
            CREDENTIALS_SERVICE,
            format!(
                "is set together with {}: the credentials service alone supplies the credentials (configure the role, \
                 profile or keys in the service); clear those properties, or this one",
                others.join(", ")
            ),
        );
    }
    let supplier = match r.optional(CREDENTIALS_SERVICE_HANDLE) {
        None => None,
        Some(text) => match text.parse::<u64>() {
            Ok(handle) => crate::secrets::credentials_service::lookup(handle),
            Err(_) => {
                r.problem(CREDENTIALS_SERVICE, format!("the shim passed '{text}' as the service's handle (a bug)"));
                None
            }
        },
    };
    Some(crate::secrets::credentials_service::ServiceRef { id, name: r.optional(CREDENTIALS_SERVICE_NAME), supplier })
}

/// At most one of: static keys, a profile (name and/or credentials file), a web identity token
/// file; none is the default chain.
fn credential_source(r: &mut Reader) -> CredentialSource {
    let keys = match (r.optional_raw(ACCESS_KEY_ID), r.optional_raw(SECRET_ACCESS_KEY)) {
        (Some(id), Some(secret)) => Some(CredentialSource::Static {
            access_key_id: Secret::new(id.trim()),
            secret_access_key: Secret::new(secret.trim()),
        }),
        (None, None) => None,
        (Some(_), None) => {
            r.problem(SECRET_ACCESS_KEY, "is required when AWS Access Key ID is set");
            None
        }
        (None, Some(_)) => {
            r.problem(ACCESS_KEY_ID, "is required when AWS Secret Access Key is set");
            None
        }
    };
    let (profile_name, credentials_file) = (r.optional(PROFILE_NAME), r.optional(CREDENTIALS_FILE));
    let profile = (profile_name.is_some() || credentials_file.is_some())
        .then(|| CredentialSource::Profile { name: profile_name, file: credentials_file.map(Into::into) });
    let web_identity =
        r.optional(WEB_IDENTITY_TOKEN_FILE).map(|f| CredentialSource::WebIdentity { token_file: f.into() });
    let given: Vec<CredentialSource> = [keys, profile, web_identity].into_iter().flatten().collect();
    if given.len() > 1 {
        r.problem(
            WEB_IDENTITY_TOKEN_FILE,
            "set one source of credentials: the access key pair, a Profile Name and/or Credentials File, or a Web Identity Token File",
        );
    }
    given.into_iter().next().unwrap_or(CredentialSource::DefaultChain)
}

fn assume_role(r: &mut Reader) -> Option<AssumeRole> {
    // The other role settings depend on the ARN (hidden in NiFi without it): ignored then.
    let role_arn = r.optional(ASSUME_ROLE_ARN)?;
    if !is_role_arn(&role_arn) {
        r.problem(
            ASSUME_ROLE_ARN,
            format!("'{role_arn}' is not an IAM role ARN such as arn:aws:iam::123456789012:role/kinesis-reader"),
        );
    }
    let session_name = r.optional(ASSUME_ROLE_SESSION_NAME).unwrap_or_else(|| DEFAULT_SESSION_NAME.to_owned());
    if !(2..=64).contains(&session_name.len())
        || !session_name.chars().all(|c| c.is_ascii_alphanumeric() || "=,.@-_".contains(c))
    {
        r.problem(
            ASSUME_ROLE_SESSION_NAME,
            format!("'{session_name}' must be 2-64 letters, digits or any of = , . @ - _"),
        );
    }
    let external_id = r.optional(ASSUME_ROLE_EXTERNAL_ID);
    if external_id.as_ref().is_some_and(|id| !(2..=1224).contains(&id.len())) {
        r.problem(ASSUME_ROLE_EXTERNAL_ID, "must be 2-1224 characters");
    }
    let (min, max) = SESSION_TIME_SECONDS;
    let session_time = Duration::from_secs(r.int_in(ASSUME_ROLE_SESSION_TIME, DEFAULT_SESSION_TIME_SECONDS, min, max));
    let sts_region = r.optional(ASSUME_ROLE_STS_REGION);
    if let Some(sts) = &sts_region {
        if !is_region_code(sts) {
            r.problem(ASSUME_ROLE_STS_REGION, format!("'{sts}' is not an AWS region code such as us-east-1"));
        }
    }
    let sts_endpoint = r.url(ASSUME_ROLE_STS_ENDPOINT);
    Some(AssumeRole { role_arn, session_name, external_id, session_time, sts_region, sts_endpoint })
}

/// `arn:<partition>:iam::<12-digit account>:role/<path/name>`.
fn is_role_arn(arn: &str) -> bool {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    matches!(parts.as_slice(), ["arn", partition, "iam", "", account, resource]
        if partition.starts_with("aws") && account.len() == 12 && account.chars().all(|c| c.is_ascii_digit())
            && resource.strip_prefix("role/").is_some_and(|name| !name.is_empty()))
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
                    r.problem(
                        POSITION_TIMESTAMP,
                        format!("'{text}' is not an ISO-8601 timestamp such as 2026-01-31T12:00:00Z"),
                    );
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
        problems
            .iter()
            .find(|p| p.property == property)
            .unwrap_or_else(|| panic!("no problem for {property}: {problems:?}"))
            .message
            .clone()
    }

    /// The contract's defaults (which Java's descriptors show and NiFi hands over) are what these
    /// settings assume for a property that is not set.
    #[test]
    fn the_contracts_defaults_are_what_an_unset_property_means() {
        let unset = parse(minimal()).unwrap();
        let given =
            parse(super::super::with_defaults(&minimal(), crate::contract::properties::consume_kinesis::ALL)).unwrap();
        assert_eq!(format!("{unset:?}"), format!("{given:?}"));
    }

    #[test]
    fn minimal_settings_take_defaults() {
        let c = parse(minimal()).unwrap();
        assert_eq!(c.consumer_type, ConsumerType::SharedThroughput);
        assert_eq!(c.initial_position, InitialPosition::TrimHorizon);
        assert_eq!(c.credentials, AwsCredentials::default_chain());
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
    fn a_stream_arn_names_the_stream_and_addresses_the_calls() {
        let arn = "arn:aws:kinesis:us-east-1:210987654321:stream/orders";
        let mut p = minimal();
        p[0] = (STREAM_NAME, arn);
        let c = parse(p).unwrap();
        assert_eq!((c.stream_name.as_str(), c.stream_arn.as_deref()), ("orders", Some(arn)));
        assert_eq!(c.stream_ref(), StreamRef::Arn(arn));
        let by_name = parse(minimal()).unwrap();
        assert_eq!((by_name.stream_name.as_str(), by_name.stream_arn.as_deref()), ("orders", None));
        assert_eq!(by_name.stream_ref(), StreamRef::Name("orders"));
    }

    #[test]
    fn a_stream_arn_of_other_partitions_fits_their_regions() {
        for (arn, region) in [
            ("arn:aws-cn:kinesis:cn-northwest-1:210987654321:stream/orders", "cn-northwest-1"),
            ("arn:aws-us-gov:kinesis:us-gov-east-1:210987654321:stream/orders", "us-gov-east-1"),
        ] {
            let c = parse(vec![(STREAM_NAME, arn), (APPLICATION_NAME, "orders-app"), (REGION, region)]).unwrap();
            assert_eq!(c.stream_arn.as_deref(), Some(arn));
        }
    }

    #[test]
    fn rejects_a_stream_arn_that_is_malformed_or_of_another_region() {
        let with = |value: &str, region: &str| {
            problem_for(vec![(STREAM_NAME, value), (APPLICATION_NAME, "orders-app"), (REGION, region)], STREAM_NAME)
        };
        let other = with("arn:aws:kinesis:eu-west-1:210987654321:stream/orders", "us-east-1");
        assert!(
            other.contains("region 'eu-west-1' is not the Region 'us-east-1': set Region to 'eu-west-1'"),
            "{other}"
        );
        let consumer = with("arn:aws:kinesis:us-east-1:210987654321:stream/orders/consumer/app:1", "us-east-1");
        assert!(
            consumer.contains("is not a Kinesis stream ARN: it names 'stream/orders/consumer/app:1'"),
            "{consumer}"
        );
        let account = with("arn:aws:kinesis:us-east-1:2109:stream/orders", "us-east-1");
        assert!(account.contains("not a 12-digit AWS account ID"), "{account}");
        let partition = with("arn:aws:kinesis:cn-north-1:210987654321:stream/orders", "cn-north-1");
        assert!(partition.contains("does not fit its region: Partition: aws from ARN"), "{partition}");
        let neither = with("arn-ish:orders", "us-east-1");
        assert!(neither.contains("nor a stream ARN"), "{neither}");
    }

    #[test]
    fn credentials_come_in_pairs_and_stay_secret() {
        let mut p = minimal();
        p.push((ACCESS_KEY_ID, "AKIAEXAMPLE"));
        assert!(problem_for(p.clone(), SECRET_ACCESS_KEY).contains("required when AWS Access Key ID"));
        p.push((SECRET_ACCESS_KEY, "topsecretvalue"));
        let c = parse(p).unwrap();
        assert!(!format!("{c:?}").contains("topsecretvalue"));
        assert!(matches!(c.credentials.source, CredentialSource::Static { .. }));
        assert_eq!(c.credentials.role, None);
    }

    #[test]
    fn an_assumed_role_takes_nifi_s_defaults_and_checks_its_settings() {
        let mut p = minimal();
        p.push((ASSUME_ROLE_ARN, "arn:aws:iam::123456789012:role/kinesis-reader"));
        let c = parse(p.clone()).unwrap();
        let role = c.credentials.role.expect("a role");
        assert_eq!(c.credentials.source, CredentialSource::DefaultChain, "the default chain's credentials assume it");
        assert_eq!(role.session_name, "nifi-kinesnow");
        assert_eq!(role.session_time, Duration::from_secs(3600));
        assert_eq!((role.external_id, role.sts_region, role.sts_endpoint), (None, None, None));

        p.extend([
            (ASSUME_ROLE_EXTERNAL_ID, "ext-7"),
            (ASSUME_ROLE_SESSION_TIME, "900"),
            (ASSUME_ROLE_STS_REGION, "eu-west-1"),
            (ASSUME_ROLE_STS_ENDPOINT, "http://127.0.0.1:5000"),
            (ACCESS_KEY_ID, "AKIAEXAMPLE"),
            (SECRET_ACCESS_KEY, "topsecretvalue"),
        ]);
        let c = parse(p).unwrap();
        let role = c.credentials.role.expect("a role");
        assert!(matches!(c.credentials.source, CredentialSource::Static { .. }), "the keys assume the role");
        assert_eq!(role.external_id.as_deref(), Some("ext-7"));
        assert_eq!(role.session_time, Duration::from_secs(900));
        assert_eq!(role.sts_region.as_deref(), Some("eu-west-1"));
        assert_eq!(role.sts_endpoint.map(String::from).as_deref(), Some("http://127.0.0.1:5000/"));

        for (name, value, expect) in [
            (ASSUME_ROLE_ARN, "arn:aws:iam::123456789012:user/alice", "not an IAM role ARN"),
            (ASSUME_ROLE_ARN, "kinesis-reader", "not an IAM role ARN"),
            (ASSUME_ROLE_SESSION_TIME, "60", "900"),
            (ASSUME_ROLE_SESSION_NAME, "a b", "2-64"),
            (ASSUME_ROLE_STS_REGION, "Ireland", "region code"),
            (ASSUME_ROLE_STS_ENDPOINT, "not a url", ""),
        ] {
            let mut p = minimal();
            p.push((ASSUME_ROLE_ARN, "arn:aws:iam::123456789012:role/r"));
            p.retain(|(n, _)| *n != name);
            p.push((name, value));
            assert!(problem_for(p, name).contains(expect), "{name}={value}");
        }
    }

    #[test]
    fn role_settings_without_a_role_are_ignored_and_two_sources_refused() {
        let mut p = minimal();
        p.extend([(ASSUME_ROLE_EXTERNAL_ID, "ext-7"), (ASSUME_ROLE_SESSION_TIME, "5")]);
        assert_eq!(
            parse(p).unwrap().credentials,
            AwsCredentials::default_chain(),
            "as NiFi hides them without Assume Role ARN"
        );
        let mut p = minimal();
        p.extend([(PROFILE_NAME, "reader"), (ACCESS_KEY_ID, "AKIAEXAMPLE"), (SECRET_ACCESS_KEY, "topsecretvalue")]);
        assert!(problem_for(p, WEB_IDENTITY_TOKEN_FILE).contains("one source of credentials"));
        let mut p = minimal();
        p.push((WEB_IDENTITY_TOKEN_FILE, "/var/run/secrets/eks.amazonaws.com/serviceaccount/token"));
        assert!(problem_for(p, ASSUME_ROLE_ARN).contains("required with Web Identity Token File"));
    }

    #[test]
    fn profiles_and_web_identity_are_sources() {
        let mut p = minimal();
        p.extend([(PROFILE_NAME, "reader"), (CREDENTIALS_FILE, "/etc/nifi/aws-credentials")]);
        let c = parse(p).unwrap();
        assert_eq!(
            c.credentials.source,
            CredentialSource::Profile { name: Some("reader".into()), file: Some("/etc/nifi/aws-credentials".into()) }
        );
        let mut p = minimal();
        p.extend([
            (WEB_IDENTITY_TOKEN_FILE, "/var/run/token"),
            (ASSUME_ROLE_ARN, "arn:aws-cn:iam::123456789012:role/irsa"),
        ]);
        let c = parse(p).unwrap();
        assert_eq!(c.credentials.source, CredentialSource::WebIdentity { token_file: "/var/run/token".into() });
        assert_eq!(c.credentials.role.map(|r| r.role_arn).as_deref(), Some("arn:aws-cn:iam::123456789012:role/irsa"));
    }

    #[test]
    fn the_credentials_service_stands_alone() {
        let mut p = minimal();
        p.push((CREDENTIALS_SERVICE, "4f1c-service-id"));
        let c = parse(p.clone()).unwrap();
        let CredentialSource::Service(service) = &c.credentials.source else { panic!("{:?}", c.credentials) };
        assert_eq!(
            (service.id.as_str(), service.name.as_deref(), service.supplier.is_none()),
            ("4f1c-service-id", None, true)
        );
        assert_eq!(c.credentials.role, None);

        for (name, value) in [
            (ACCESS_KEY_ID, "AKIAEXAMPLE"),
            (SECRET_ACCESS_KEY, "topsecretvalue"),
            (PROFILE_NAME, "reader"),
            (CREDENTIALS_FILE, "/etc/nifi/aws"),
            (WEB_IDENTITY_TOKEN_FILE, "/var/run/token"),
            (ASSUME_ROLE_ARN, "arn:aws:iam::123456789012:role/r"),
        ] {
            let mut q = p.clone();
            q.push((name, value));
            let message = problem_for(q, CREDENTIALS_SERVICE);
            assert!(message.contains(name) && message.contains("alone supplies"), "{name}: {message}");
            assert!(!message.contains(value), "the values stay out of the message: {message}");
        }
        // Role settings without a role stay hidden and ignored, as without a service.
        let mut q = p.clone();
        q.push((ASSUME_ROLE_EXTERNAL_ID, "ext-7"));
        assert!(parse(q).is_ok());
    }

    #[test]
    fn the_service_s_supplier_comes_from_the_handle_the_shim_registered() {
        use crate::secrets::credentials_service::{self as svc, CredentialsSupplier, Supplied, SupplyError};
        struct Never;
        impl CredentialsSupplier for Never {
            fn supply(&self) -> Result<Supplied, SupplyError> {
                Err(SupplyError::Provider("never".into()))
            }
        }
        let supplier: std::sync::Arc<dyn CredentialsSupplier> = std::sync::Arc::new(Never);
        let handle = svc::register(supplier.clone());
        let mut p = minimal();
        let text = handle.to_string();
        p.extend([
            (CREDENTIALS_SERVICE, "4f1c"),
            (CREDENTIALS_SERVICE_HANDLE, text.as_str()),
            (CREDENTIALS_SERVICE_NAME, "Reader"),
        ]);
        let c = parse(p.clone()).unwrap();
        svc::release(handle);
        let CredentialSource::Service(service) = c.credentials.source else { panic!() };
        assert!(
            service.supplier.is_some_and(|s| std::sync::Arc::ptr_eq(&s, &supplier)),
            "the settings keep it after the release"
        );
        assert_eq!(service.name.as_deref(), Some("Reader"));
        let CredentialSource::Service(after) = parse(p.clone()).unwrap().credentials.source else { panic!() };
        assert!(after.supplier.is_none(), "a released handle gives none");
        p.retain(|(n, _)| *n != CREDENTIALS_SERVICE_HANDLE);
        p.push((CREDENTIALS_SERVICE_HANDLE, "seven"));
        assert!(problem_for(p, CREDENTIALS_SERVICE).contains("a bug"));
    }

    #[test]
    fn processing_strategies_and_their_demarcators() {
        let strategy = |extra: Vec<(&'static str, &'static str)>| {
            let mut p = minimal();
            p.extend(extra);
            parse(p).map(|c| c.processing_strategy)
        };
        assert_eq!(strategy(vec![]).unwrap(), ProcessingStrategy::FlowFile);
        assert_eq!(
            strategy(vec![(PROCESSING_STRATEGY, "LINE_DELIMITED")]).unwrap(),
            ProcessingStrategy::Demarcated(b"\n".to_vec())
        );
        assert_eq!(strategy(vec![(PROCESSING_STRATEGY, "RECORD")]).unwrap(), ProcessingStrategy::Record);
        assert_eq!(
            strategy(vec![(PROCESSING_STRATEGY, "DEMARCATOR"), (MESSAGE_DEMARCATOR, "\u{1F4A5}|\r\n")]).unwrap(),
            ProcessingStrategy::Demarcated("\u{1F4A5}|\r\n".as_bytes().to_vec()),
            "multi-byte UTF-8, exactly as given"
        );
        assert_eq!(
            strategy(vec![(PROCESSING_STRATEGY, "DEMARCATOR"), (MESSAGE_DEMARCATOR, " ")]).unwrap(),
            ProcessingStrategy::Demarcated(b" ".to_vec()),
            "whitespace is a demarcator, not blank"
        );
        assert_eq!(
            strategy(vec![(PROCESSING_STRATEGY, "LINE_DELIMITED"), (MESSAGE_DEMARCATOR, "|")]).unwrap(),
            ProcessingStrategy::line_delimited(),
            "the demarcator only counts with DEMARCATOR (it depends on it in NiFi)"
        );
        let mut p = minimal();
        p.push((PROCESSING_STRATEGY, "DEMARCATOR"));
        assert!(problem_for(p.clone(), MESSAGE_DEMARCATOR).contains("required with Processing Strategy DEMARCATOR"));
        p.push((MESSAGE_DEMARCATOR, ""));
        assert!(problem_for(p, MESSAGE_DEMARCATOR).contains("empty would run them together"));
        let mut p = minimal();
        p.push((PROCESSING_STRATEGY, "SPLIT"));
        assert!(problem_for(p, PROCESSING_STRATEGY).contains("FLOW_FILE, LINE_DELIMITED, DEMARCATOR, RECORD"));
    }

    #[test]
    fn snowflake_commit_refuses_grouped_records_without_their_metadata() {
        for (processing, demarcator) in [("LINE_DELIMITED", None), ("DEMARCATOR", Some("||")), ("RECORD", None)] {
            let mut p = minimal();
            p.extend([(FAILOVER_POSITION, "SNOWFLAKE_COMMIT"), (PROCESSING_STRATEGY, processing)]);
            p.extend(demarcator.map(|d| (MESSAGE_DEMARCATOR, d)));
            assert!(
                problem_for(p.clone(), FAILOVER_POSITION).contains("no per-record positions"),
                "{processing} + USE_VALUE"
            );
            for output in ["INJECT_METADATA", "USE_WRAPPER"] {
                let mut q = p.clone();
                q.push((OUTPUT_STRATEGY, output));
                assert!(parse(q).is_ok(), "{processing} + {output} carries per-record metadata");
            }
        }
        let mut p = minimal();
        p.extend([(FAILOVER_POSITION, "SNOWFLAKE_COMMIT"), (PROCESSING_STRATEGY, "FLOW_FILE")]);
        assert!(parse(p).is_ok(), "one record per FlowFile");
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
