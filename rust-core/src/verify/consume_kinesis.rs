//! ConsumeKinesis's verification: the credentials resolve; the stream exists (DescribeStream with
//! Limit 1, ListShards: the actions of Snowflake's IAM policy for the connector); whose the lease
//! table is (see `lease_census`); and each action the engine needs, as far as a read-only probe can
//! tell. Every probe reads: the actions a probe could only check by writing (creating the table,
//! writing a lease, registering or subscribing a fan-out consumer) are named as not checked.

use std::time::SystemTime;

use aws_credential_types::provider::ProvideCredentials;
use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::types::{AttributeValue, KeyType, Select, TableStatus};
use aws_sdk_kinesis::types::ShardIteratorType;

use super::lease_census::{self, LeaseFacts, TableShape};
use super::{bounded, Step};
use crate::aws::{self, AwsClients};
use crate::config::consume_kinesis::ConsumerType;
use crate::config::ConsumeKinesisConfig;
use crate::kinesis::address::{ForStream, StreamArn};
use crate::kinesis::shards::ShardInfo;
use crate::kinesis::stream::StreamFacts;
use crate::kinesis::KinesisError;

pub const CREDENTIALS_STEP: &str = "AWS Credentials";
pub const STREAM_STEP: &str = "Kinesis Stream";
pub const PERMISSIONS_STEP: &str = "IAM Permissions";

/// What a read-only probe answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer<T> {
    Ok(T),
    /// The resource is absent: the action itself was allowed (AWS authorises before it looks).
    NotFound(String),
    Denied(String),
    Failed(String),
}

impl<T> Answer<T> {
    fn permission(&self) -> Permission {
        match self {
            Self::Ok(_) | Self::NotFound(_) => Permission::Allowed,
            Self::Denied(m) => Permission::Denied(m.clone()),
            Self::Failed(m) => Permission::Unknown(m.clone()),
        }
    }

    fn ok(&self) -> Option<&T> {
        match self {
            Self::Ok(v) => Some(v),
            _ => None,
        }
    }
}

/// What a probe says of one IAM action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Permission {
    Allowed,
    Denied(String),
    /// The probe failed for another reason (or could not run): nothing is known.
    Unknown(String),
}

/// How the credentials resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Where they came from (`aws::credentials::describe`).
    pub source: String,
    pub temporary: bool,
    pub expires: Option<SystemTime>,
}

/// The stream as the probes saw it.
#[derive(Debug, Clone)]
pub struct StreamProbe {
    pub describe: Answer<StreamFacts>,
    pub shards: Answer<Vec<ShardInfo>>,
    /// GetShardIterator (LATEST) on the first open shard, then GetRecords with it (polling only).
    pub iterator: Option<Answer<()>>,
    pub records: Option<Answer<()>>,
    /// DescribeStreamConsumer of the fan-out consumer (Enhanced Fan-Out only): its status.
    pub consumer: Option<Answer<String>>,
}

/// Everything the probes found; `None` where a probe could not run (no credentials).
#[derive(Debug, Clone)]
pub struct Facts {
    pub credentials: Result<Resolved, String>,
    pub stream: Option<StreamProbe>,
    pub lease: Option<LeaseFacts>,
    /// Query, Scan and GetItem on the lease table (each allowed even when the table is absent).
    pub table_reads: Vec<(&'static str, Permission)>,
}

/// Probes the services and returns the steps.
pub async fn verify(config: &ConsumeKinesisConfig) -> Vec<Step> {
    let clients = aws::clients(&aws::AwsSettings::of(config)).await;
    let facts = probe(&clients, config).await;
    steps(config, &facts)
}

/// Runs every read-only probe.
pub async fn probe(clients: &AwsClients, config: &ConsumeKinesisConfig) -> Facts {
    let credentials = resolve_credentials(config).await;
    if credentials.is_err() {
        return Facts { credentials, stream: None, lease: None, table_reads: vec![] };
    }
    let stream = probe_stream(clients, config).await;
    let (lease, table_reads) = probe_lease_table(clients, config).await;
    Facts { credentials, stream: Some(stream), lease: Some(lease), table_reads }
}

async fn resolve_credentials(config: &ConsumeKinesisConfig) -> Result<Resolved, String> {
    let source = aws::credentials::describe(&config.credentials.source, config.credentials.role.as_ref());
    let provider = aws::credentials_provider(&aws::AwsSettings::of(config))
        .await
        .ok_or("no credentials provider is configured")?;
    let resolved = bounded("the credentials provider", async {
        provider.provide_credentials().await.map_err(|e| crate::kinesis::sdk_error_text(&e))
    })
    .await?;
    Ok(Resolved { source, temporary: resolved.session_token().is_some(), expires: resolved.expiry() })
}

fn kinesis_answer<T>(result: Result<T, KinesisError>) -> Answer<T> {
    match result {
        Ok(v) => Answer::Ok(v),
        Err(KinesisError::StreamNotFound { message, .. }) => Answer::NotFound(message),
        Err(KinesisError::AccessDenied { message, .. }) => Answer::Denied(message),
        Err(e) => Answer::Failed(e.to_string()),
    }
}

fn sdk_answer<T, E, R>(result: Result<T, aws_sdk_kinesis::error::SdkError<E, R>>) -> Answer<T>
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug + 'static,
{
    match result {
        Ok(v) => Answer::Ok(v),
        Err(e) => {
            let code = ProvideErrorMetadata::code(&e).unwrap_or_default().to_owned();
            let message = crate::kinesis::sdk_error_text_with(&e, ProvideErrorMetadata::message(&e));
            let text = if code.is_empty() || message.contains(&code) { message } else { format!("{code}: {message}") };
            if code == "ResourceNotFoundException" {
                Answer::NotFound(text)
            } else if code.contains("AccessDenied")
                || code.contains("UnrecognizedClient")
                || code.contains("InvalidSignature")
            {
                Answer::Denied(text)
            } else {
                Answer::Failed(text)
            }
        }
    }
}

async fn timed<T>(what: &str, probe: impl std::future::Future<Output = Answer<T>>) -> Answer<T> {
    match tokio::time::timeout(super::PROBE_TIMEOUT, probe).await {
        Ok(answer) => answer,
        Err(_) => Answer::Failed(format!("{what} did not answer within {} s", super::PROBE_TIMEOUT.as_secs())),
    }
}

async fn probe_stream(clients: &AwsClients, config: &ConsumeKinesisConfig) -> StreamProbe {
    let k = &clients.kinesis;
    let stream = config.stream_ref();
    let describe =
        timed("DescribeStream", async { kinesis_answer(crate::kinesis::stream::describe(k, stream).await) }).await;
    let shards =
        timed("ListShards", async { kinesis_answer(crate::kinesis::shards::list_shards(k, stream).await) }).await;
    let open = shards.ok().and_then(|s| s.iter().find(|s| !s.closed).map(|s| s.shard_id.clone()));
    let mut probe = StreamProbe { describe, shards, iterator: None, records: None, consumer: None };
    match config.consumer_type {
        ConsumerType::SharedThroughput => {
            if let Some(shard) = open {
                let iterator = timed("GetShardIterator", async {
                    sdk_answer(
                        k.get_shard_iterator()
                            .for_stream(stream)
                            .shard_id(&shard)
                            .shard_iterator_type(ShardIteratorType::Latest)
                            .send()
                            .await,
                    )
                })
                .await;
                if let Some(it) = iterator.ok().and_then(|o| o.shard_iterator().map(str::to_owned)) {
                    let records = timed("GetRecords", async {
                        sdk_answer(k.get_records().for_stream(stream).shard_iterator(it).limit(1).send().await)
                    })
                    .await;
                    probe.records = Some(map_unit(records));
                }
                probe.iterator = Some(map_unit(iterator));
            }
        }
        ConsumerType::EnhancedFanOut => {
            if let Some(facts) = probe.describe.ok() {
                let arn = facts.arn.clone();
                let consumer = timed("DescribeStreamConsumer", async {
                    match sdk_answer(
                        k.describe_stream_consumer()
                            .stream_arn(arn)
                            .consumer_name(&config.application_name)
                            .send()
                            .await,
                    ) {
                        Answer::Ok(out) => Answer::Ok(
                            out.consumer_description()
                                .map(|d| d.consumer_status().as_str().to_owned())
                                .unwrap_or_default(),
                        ),
                        Answer::NotFound(m) => Answer::NotFound(m),
                        Answer::Denied(m) => Answer::Denied(m),
                        Answer::Failed(m) => Answer::Failed(m),
                    }
                })
                .await;
                probe.consumer = Some(consumer);
            }
        }
    }
    probe
}

fn map_unit<T>(a: Answer<T>) -> Answer<()> {
    match a {
        Answer::Ok(_) => Answer::Ok(()),
        Answer::NotFound(m) => Answer::NotFound(m),
        Answer::Denied(m) => Answer::Denied(m),
        Answer::Failed(m) => Answer::Failed(m),
    }
}

async fn describe_shape(client: &aws_sdk_dynamodb::Client, table: &str) -> Answer<TableShape> {
    timed("DescribeTable", async {
        match sdk_answer(client.describe_table().table_name(table).send().await) {
            Answer::Ok(out) => Answer::Ok(match out.table() {
                None => TableShape::Absent,
                Some(t) if t.table_status() != Some(&TableStatus::Active) => TableShape::Busy(
                    t.table_status().map(|s| s.as_str().to_owned()).unwrap_or_else(|| "not ACTIVE".into()),
                ),
                Some(t) => {
                    let keys: Vec<(&str, &KeyType)> =
                        t.key_schema().iter().map(|k| (k.attribute_name(), k.key_type())).collect();
                    match keys.as_slice() {
                        [("streamName", KeyType::Hash), ("shardId", KeyType::Range)] => TableShape::StreamAndShard,
                        [(crate::lease::kcl::KCL_KEY, KeyType::Hash)] => TableShape::Kcl,
                        other => TableShape::Foreign(format!("{other:?}")),
                    }
                }
            }),
            Answer::NotFound(_) => Answer::Ok(TableShape::Absent),
            Answer::Denied(m) => Answer::Denied(m),
            Answer::Failed(m) => Answer::Failed(m),
        }
    })
    .await
}

/// The most rows of the stream read to tell whose the table is (a few pages).
const MAX_ROWS: usize = 5_000;

async fn probe_lease_table(
    clients: &AwsClients,
    config: &ConsumeKinesisConfig,
) -> (LeaseFacts, Vec<(&'static str, Permission)>) {
    let d = &clients.dynamodb;
    let table = config.application_name.as_str();
    let main = describe_shape(d, table).await;
    let copy = describe_shape(d, &format!("{table}_migration")).await;
    let stream_key = AttributeValue::S(config.stream_name.clone());
    let query = timed("Query", async {
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let page = d
                .query()
                .table_name(table)
                .consistent_read(true)
                .key_condition_expression("streamName = :s")
                .expression_attribute_values(":s", stream_key.clone())
                .set_exclusive_start_key(start.take())
                .send()
                .await;
            match sdk_answer(page) {
                Answer::Ok(out) => {
                    items.extend(out.items().iter().cloned());
                    match out.last_evaluated_key() {
                        Some(k) if !k.is_empty() && items.len() < MAX_ROWS => start = Some(k.clone()),
                        _ => return Answer::Ok(items),
                    }
                }
                Answer::NotFound(m) => return Answer::NotFound(m),
                Answer::Denied(m) => return Answer::Denied(m),
                Answer::Failed(m) => return Answer::Failed(m),
            }
        }
    })
    .await;
    let scan =
        timed("Scan", async { sdk_answer(d.scan().table_name(table).select(Select::Count).send().await).map_count() })
            .await;
    let probe_key = [
        ("streamName".to_owned(), AttributeValue::S(config.stream_name.clone())),
        ("shardId".to_owned(), AttributeValue::S("__verify__".into())),
    ];
    let get = timed("GetItem", async {
        map_unit(sdk_answer(d.get_item().table_name(table).set_key(Some(probe_key.into_iter().collect())).send().await))
    })
    .await;
    let is_kcl = matches!(main, Answer::Ok(TableShape::Kcl));
    let is_ours = matches!(main, Answer::Ok(TableShape::StreamAndShard));
    let is_foreign = matches!(main, Answer::Ok(TableShape::Foreign(_)));
    let mut reads = vec![("dynamodb:Scan", scan.permission())];
    // GetItem and Query by streamName only mean something on a table of our key schema (or none yet).
    if !is_kcl && !is_foreign {
        reads.insert(0, ("dynamodb:Query", query.permission()));
        reads.push(("dynamodb:GetItem", get.permission()));
    }
    let rows = is_ours.then(|| match query {
        Answer::Ok(items) => Ok(items),
        Answer::NotFound(m) | Answer::Denied(m) | Answer::Failed(m) => Err(m),
    });
    let kcl_leases = is_kcl.then_some(match scan {
        Answer::Ok(n) => Ok(n),
        Answer::NotFound(m) | Answer::Denied(m) | Answer::Failed(m) => Err(m),
    });
    let facts = LeaseFacts {
        table: table.to_owned(),
        main: shape_result(main),
        copy: shape_result(copy),
        rows,
        kcl_leases,
        now_ms: crate::lease::now_ms(),
    };
    (facts, reads)
}

trait CountAnswer {
    fn map_count(self) -> Answer<usize>;
}

impl CountAnswer for Answer<aws_sdk_dynamodb::operation::scan::ScanOutput> {
    fn map_count(self) -> Answer<usize> {
        match self {
            Answer::Ok(out) => Answer::Ok(out.count().max(0) as usize),
            Answer::NotFound(m) => Answer::NotFound(m),
            Answer::Denied(m) => Answer::Denied(m),
            Answer::Failed(m) => Answer::Failed(m),
        }
    }
}

fn shape_result(a: Answer<TableShape>) -> Result<TableShape, String> {
    match a {
        Answer::Ok(shape) => Ok(shape),
        Answer::NotFound(_) => Ok(TableShape::Absent),
        Answer::Denied(m) | Answer::Failed(m) => Err(m),
    }
}

/// The steps, from the facts alone.
pub fn steps(config: &ConsumeKinesisConfig, facts: &Facts) -> Vec<Step> {
    let from_service =
        matches!(config.credentials.source, crate::config::consume_kinesis::CredentialSource::Service(_));
    let mut steps = vec![credentials_step(&facts.credentials, from_service)];
    let (Some(stream), Some(lease)) = (&facts.stream, &facts.lease) else {
        let why = "skipped: the AWS credentials did not resolve";
        steps.push(Step::skipped(STREAM_STEP, why));
        steps.push(Step::skipped(lease_census::STEP, why));
        steps.push(Step::skipped(PERMISSIONS_STEP, why));
        return steps;
    };
    steps.push(stream_step(config, stream));
    steps.push(lease_census::step(lease, &config.stream_name));
    steps.push(permissions_step(config, stream, lease, &facts.table_reads));
    steps
}

fn credentials_step(c: &Result<Resolved, String>, from_service: bool) -> Step {
    match c {
        Err(e) if from_service => {
            Step::failed(CREDENTIALS_STEP, format!("no AWS credentials: {e}. Check the credentials service's settings, and that it is enabled"))
        }
        Err(e) => Step::failed(
            CREDENTIALS_STEP,
            format!(
                "no AWS credentials: {e}. Set AWS Access Key ID and AWS Secret Access Key, a Profile Name, or a Web Identity Token \
                 File with an Assume Role ARN, or give NiFi's environment credentials (environment variables, profile, container \
                 or instance role)"
            ),
        ),
        Ok(r) => {
            let source = format!("from {}", r.source);
            let kind = if r.temporary { "temporary credentials" } else { "long-term credentials" };
            let expiry = r.expires.map(|t| format!(", expiring at {}", humantime::format_rfc3339_seconds(t))).unwrap_or_default();
            Step::successful(CREDENTIALS_STEP, format!("resolved {kind} {source}{expiry}; AWS checks them with the first call below"))
        }
    }
}

/// What Verify says of a stream named by its ARN, which may be another account's.
const CROSS_ACCOUNT: &str = "A stream of another AWS account is read only when its resource-based policy allows this \
     reader's role (or account) and this role's own IAM policy allows the same actions on the stream's ARN \
     (docs/setup-aws.md, \"A stream of another account\")";

fn stream_step(config: &ConsumeKinesisConfig, s: &StreamProbe) -> Step {
    let name = config.stream_ref().as_str();
    let arn = config.stream_arn.as_deref().and_then(|a| StreamArn::parse(a).ok());
    let cross_account = if arn.is_some() { format!(". {CROSS_ACCOUNT}") } else { String::new() };
    let facts = match &s.describe {
        Answer::Ok(f) => f,
        Answer::NotFound(m) if arn.is_some() => {
            return Step::failed(
                STREAM_STEP,
                format!("stream '{name}' does not exist ({m}): check its account, region and name"),
            )
        }
        Answer::NotFound(m) => {
            return Step::failed(STREAM_STEP, format!("stream '{name}' does not exist in this region ({m})"))
        }
        Answer::Denied(m) => {
            return Step::failed(STREAM_STEP, format!("DescribeStream of '{name}' was denied: {m}{cross_account}"))
        }
        Answer::Failed(m) => return Step::failed(STREAM_STEP, format!("DescribeStream of '{name}' failed: {m}")),
    };
    let stream = facts;
    let shards = match &s.shards {
        Answer::Ok(shards) => {
            let open = shards.iter().filter(|s| !s.closed).count();
            format!("{} shard(s), {open} open and {} closed", shards.len(), shards.len() - open)
        }
        Answer::NotFound(m) | Answer::Denied(m) | Answer::Failed(m) => {
            return Step::failed(
                STREAM_STEP,
                format!("stream '{name}' exists but ListShards failed: {m}{cross_account}"),
            )
        }
    };
    let Some(arn) = arn else {
        return Step::successful(
            STREAM_STEP,
            format!("stream '{name}' ({}): {shards}; retention {} h", stream.arn, stream.retention_hours),
        );
    };
    if stream.arn != name {
        return Step::failed(
            STREAM_STEP,
            format!("DescribeStream of '{name}' described another stream, '{}'", stream.arn),
        );
    }
    Step::successful(
        STREAM_STEP,
        format!(
            "stream '{}' of account {} in {}, named by its ARN: {shards}; retention {} h. Its lease rows and FlowFiles \
             carry the name '{}'. {CROSS_ACCOUNT}. DescribeStream and ListShards were allowed; the IAM Permissions step \
             names the other actions",
            arn.name, arn.account, arn.region, stream.retention_hours, arn.name
        ),
    )
}

/// Actions the engine needs that only a write could check.
fn unchecked(config: &ConsumeKinesisConfig, lease: &LeaseFacts) -> Vec<&'static str> {
    let mut actions = vec!["dynamodb:PutItem", "dynamodb:UpdateItem"];
    match &lease.main {
        Ok(TableShape::Absent) => actions.insert(0, "dynamodb:CreateTable"),
        Ok(TableShape::Kcl) => actions.extend(["dynamodb:CreateTable", "dynamodb:DeleteTable"]),
        _ => {}
    }
    if config.consumer_type == ConsumerType::EnhancedFanOut {
        actions.extend([
            "kinesis:RegisterStreamConsumer",
            "kinesis:SubscribeToShard",
            "kinesis:DeregisterStreamConsumer",
        ]);
    }
    actions
}

fn permissions_step(
    config: &ConsumeKinesisConfig,
    s: &StreamProbe,
    lease: &LeaseFacts,
    table_reads: &[(&'static str, Permission)],
) -> Step {
    let mut probed: Vec<(&'static str, Permission)> =
        vec![("kinesis:DescribeStream", s.describe.permission()), ("kinesis:ListShards", s.shards.permission())];
    let not_reached = || Permission::Unknown("not probed: the stream has no open shard or was not found".into());
    match config.consumer_type {
        ConsumerType::SharedThroughput => {
            probed.push((
                "kinesis:GetShardIterator",
                s.iterator.as_ref().map(Answer::permission).unwrap_or_else(not_reached),
            ));
            probed.push(("kinesis:GetRecords", s.records.as_ref().map(Answer::permission).unwrap_or_else(not_reached)));
        }
        ConsumerType::EnhancedFanOut => probed.push((
            "kinesis:DescribeStreamConsumer",
            s.consumer.as_ref().map(Answer::permission).unwrap_or_else(not_reached),
        )),
    }
    let describe_table = match (&lease.main, &lease.copy) {
        (Err(m), _) | (_, Err(m)) if is_denial(m) => Permission::Denied(m.clone()),
        (Err(m), _) | (_, Err(m)) => Permission::Unknown(m.clone()),
        _ => Permission::Allowed,
    };
    probed.push(("dynamodb:DescribeTable", describe_table));
    probed.extend(table_reads.iter().cloned());
    let mut step = permission_verdict(&probed, &unchecked(config, lease));
    if step.outcome == super::Outcome::Failed && config.stream_arn.is_some() {
        step.explanation.push_str(&format!(" {CROSS_ACCOUNT}."));
    }
    step
}

fn is_denial(message: &str) -> bool {
    message.contains("AccessDenied") || message.contains("not authorized")
}

/// FAILED when a probe was denied; the explanation names every action and what is known of it.
pub fn permission_verdict(probed: &[(&'static str, Permission)], unchecked: &[&'static str]) -> Step {
    let names =
        |want: fn(&Permission) -> bool| probed.iter().filter(|(_, p)| want(p)).map(|(a, _)| *a).collect::<Vec<_>>();
    let allowed = names(|p| matches!(p, Permission::Allowed));
    let denied: Vec<String> = probed
        .iter()
        .filter_map(|(a, p)| match p {
            Permission::Denied(m) => Some(format!("{a} ({m})")),
            _ => None,
        })
        .collect();
    let unknown: Vec<String> = probed
        .iter()
        .filter_map(|(a, p)| match p {
            Permission::Unknown(m) => Some(format!("{a} ({m})")),
            _ => None,
        })
        .collect();
    let mut text = String::new();
    if !denied.is_empty() {
        text.push_str(&format!("denied: {}. ", denied.join(", ")));
    }
    if !allowed.is_empty() {
        text.push_str(&format!("allowed (read-only probes): {}. ", allowed.join(", ")));
    }
    if !unknown.is_empty() {
        text.push_str(&format!("unknown: {}. ", unknown.join(", ")));
    }
    text.push_str(&format!("Not checked, a probe would have to write: {}.", unchecked.join(", ")));
    if denied.is_empty() {
        Step::successful(PERMISSIONS_STEP, text)
    } else {
        Step::failed(PERMISSIONS_STEP, text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PropertyMap;
    use crate::verify::Outcome;

    fn config(consumer: &str) -> ConsumeKinesisConfig {
        ConsumeKinesisConfig::parse(&PropertyMap::from_pairs([
            ("Stream Name", "orders"),
            ("Application Name", "orders-app"),
            ("Region", "us-east-1"),
            ("Consumer Type", consumer),
        ]))
        .unwrap()
    }

    fn shard(id: &str, closed: bool) -> ShardInfo {
        ShardInfo { shard_id: id.into(), parent_shard_ids: vec![], closed }
    }

    fn good_stream() -> StreamProbe {
        StreamProbe {
            describe: Answer::Ok(StreamFacts {
                arn: "arn:aws:kinesis:us-east-1:1:stream/orders".into(),
                retention_hours: 24,
            }),
            shards: Answer::Ok(vec![shard("shardId-0", true), shard("shardId-1", false), shard("shardId-2", false)]),
            iterator: Some(Answer::Ok(())),
            records: Some(Answer::Ok(())),
            consumer: None,
        }
    }

    fn lease(main: TableShape) -> LeaseFacts {
        LeaseFacts {
            table: "orders-app".into(),
            main: Ok(main),
            copy: Ok(TableShape::Absent),
            rows: None,
            kcl_leases: None,
            now_ms: 0,
        }
    }

    fn facts(stream: StreamProbe, lease: LeaseFacts, reads: Vec<(&'static str, Permission)>) -> Facts {
        Facts {
            credentials: Ok(Resolved {
                source: "AWS Access Key ID and AWS Secret Access Key".into(),
                temporary: false,
                expires: None,
            }),
            stream: Some(stream),
            lease: Some(lease),
            table_reads: reads,
        }
    }

    fn allowed_reads() -> Vec<(&'static str, Permission)> {
        vec![
            ("dynamodb:Query", Permission::Allowed),
            ("dynamodb:Scan", Permission::Allowed),
            ("dynamodb:GetItem", Permission::Allowed),
        ]
    }

    #[test]
    fn a_good_stream_reports_shards_and_retention() {
        let steps =
            steps(&config("SHARED_THROUGHPUT"), &facts(good_stream(), lease(TableShape::Absent), allowed_reads()));
        let names: Vec<&str> = steps.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, [CREDENTIALS_STEP, STREAM_STEP, lease_census::STEP, PERMISSIONS_STEP]);
        assert!(steps.iter().all(|s| s.outcome == Outcome::Successful), "{steps:#?}");
        assert!(
            steps[1].explanation.contains("3 shard(s), 2 open and 1 closed; retention 24 h"),
            "{}",
            steps[1].explanation
        );
        let perms = &steps[3].explanation;
        assert!(perms.contains("kinesis:GetRecords") && perms.contains("dynamodb:Query"), "{perms}");
        assert!(
            perms.contains(
                "Not checked, a probe would have to write: dynamodb:CreateTable, dynamodb:PutItem, dynamodb:UpdateItem"
            ),
            "{perms}"
        );
        assert!(!perms.contains("SubscribeToShard"), "polling needs no fan-out actions: {perms}");
    }

    #[test]
    fn no_credentials_skip_everything_else() {
        let f = Facts {
            credentials: Err("no providers in chain provided credentials".into()),
            stream: None,
            lease: None,
            table_reads: vec![],
        };
        let steps = steps(&config("SHARED_THROUGHPUT"), &f);
        assert_eq!(steps[0].outcome, Outcome::Failed);
        assert!(steps[0].explanation.contains("AWS Access Key ID"));
        assert!(steps[1..].iter().all(|s| s.outcome == Outcome::Skipped));
    }

    #[test]
    fn a_missing_stream_fails_its_step_but_not_the_permissions() {
        let mut s = good_stream();
        s.describe = Answer::NotFound("Stream orders under account 1 not found".into());
        s.shards = Answer::NotFound("not found".into());
        s.iterator = None;
        s.records = None;
        let steps = steps(&config("SHARED_THROUGHPUT"), &facts(s, lease(TableShape::Absent), allowed_reads()));
        assert_eq!(steps[1].outcome, Outcome::Failed);
        assert!(steps[1].explanation.contains("does not exist"));
        assert_eq!(steps[3].outcome, Outcome::Successful, "{}", steps[3].explanation);
        assert!(steps[3].explanation.contains("unknown: kinesis:GetShardIterator"), "{}", steps[3].explanation);
    }

    #[test]
    fn a_denied_action_fails_the_permissions_and_is_named() {
        let mut s = good_stream();
        s.records = Some(Answer::Denied("AccessDeniedException: not authorized to perform kinesis:GetRecords".into()));
        let mut reads = allowed_reads();
        reads[0].1 = Permission::Denied("AccessDeniedException: dynamodb:Query".into());
        let steps = steps(&config("SHARED_THROUGHPUT"), &facts(s, lease(TableShape::StreamAndShard), reads));
        let p = &steps[3];
        assert_eq!(p.outcome, Outcome::Failed);
        assert!(p.explanation.starts_with("denied: kinesis:GetRecords"), "{}", p.explanation);
        assert!(p.explanation.contains("dynamodb:Query (AccessDeniedException"), "{}", p.explanation);
    }

    #[test]
    fn fan_out_lists_its_own_actions() {
        let mut s = good_stream();
        s.iterator = None;
        s.records = None;
        s.consumer = Some(Answer::NotFound("consumer orders-app not found".into()));
        let steps = steps(&config("ENHANCED_FAN_OUT"), &facts(s, lease(TableShape::Kcl), allowed_reads()));
        let p = &steps[3].explanation;
        assert!(p.contains("kinesis:DescribeStreamConsumer"), "{p}");
        assert!(p.contains("kinesis:RegisterStreamConsumer, kinesis:SubscribeToShard"), "{p}");
        assert!(p.contains("dynamodb:DeleteTable"), "a KCL table is migrated: {p}");
    }

    fn by_arn(arn: &str) -> ConsumeKinesisConfig {
        ConsumeKinesisConfig::parse(&PropertyMap::from_pairs([
            ("Stream Name", arn),
            ("Application Name", "orders-app"),
            ("Region", "us-east-1"),
        ]))
        .unwrap()
    }

    const OWNERS_ARN: &str = "arn:aws:kinesis:us-east-1:210987654321:stream/orders";

    #[test]
    fn a_stream_named_by_its_arn_is_reported_with_its_account_and_the_cross_account_rule() {
        let mut s = good_stream();
        s.describe = Answer::Ok(StreamFacts { arn: OWNERS_ARN.into(), retention_hours: 24 });
        let steps = steps(&by_arn(OWNERS_ARN), &facts(s, lease(TableShape::Absent), allowed_reads()));
        let stream = &steps[1];
        assert_eq!(stream.outcome, Outcome::Successful, "{}", stream.explanation);
        for part in [
            "stream 'orders' of account 210987654321 in us-east-1, named by its ARN: 3 shard(s)",
            "carry the name 'orders'",
            "resource-based policy allows this reader's role",
        ] {
            assert!(stream.explanation.contains(part), "{part}: {}", stream.explanation);
        }
    }

    #[test]
    fn a_denied_stream_named_by_its_arn_names_the_resource_policy() {
        let mut s = good_stream();
        let denial = "AccessDeniedException: User: arn:aws:sts::123456789012:assumed-role/reader/nifi is not authorized \
                      to perform: kinesis:DescribeStream because no resource-based policy allows the kinesis:DescribeStream action";
        s.describe = Answer::Denied(denial.into());
        s.shards = Answer::Denied(denial.into());
        s.iterator = None;
        s.records = None;
        let steps = steps(&by_arn(OWNERS_ARN), &facts(s.clone(), lease(TableShape::Absent), allowed_reads()));
        assert_eq!((steps[1].outcome, steps[3].outcome), (Outcome::Failed, Outcome::Failed));
        assert!(steps[1].explanation.contains(&format!("DescribeStream of '{OWNERS_ARN}' was denied")));
        assert!(steps[1].explanation.ends_with(&format!(". {CROSS_ACCOUNT}")), "{}", steps[1].explanation);
        assert!(steps[3].explanation.ends_with(&format!(" {CROSS_ACCOUNT}.")), "{}", steps[3].explanation);
        let by_name = steps_for_name(s);
        assert!(!by_name[1].explanation.contains(CROSS_ACCOUNT), "{}", by_name[1].explanation);
    }

    fn steps_for_name(s: StreamProbe) -> Vec<Step> {
        steps(&config("SHARED_THROUGHPUT"), &facts(s, lease(TableShape::Absent), allowed_reads()))
    }

    #[test]
    fn a_missing_stream_named_by_its_arn_asks_to_check_account_region_and_name() {
        let mut s = good_stream();
        s.describe = Answer::NotFound(format!("Stream arn {OWNERS_ARN} not found"));
        let steps = steps(&by_arn(OWNERS_ARN), &facts(s, lease(TableShape::Absent), allowed_reads()));
        assert!(steps[1].explanation.contains("check its account, region and name"), "{}", steps[1].explanation);
    }

    #[test]
    fn a_denied_describe_table_is_a_denied_permission() {
        let mut l = lease(TableShape::Absent);
        l.main = Err("AccessDeniedException: User is not authorized to perform: dynamodb:DescribeTable".into());
        let steps = steps(&config("SHARED_THROUGHPUT"), &facts(good_stream(), l, allowed_reads()));
        assert_eq!(steps[2].outcome, Outcome::Failed);
        assert_eq!(steps[3].outcome, Outcome::Failed);
        assert!(steps[3].explanation.contains("dynamodb:DescribeTable ("), "{}", steps[3].explanation);
    }
}
