//! "Verify Properties" against the real emulators and the Snowflake stand-in: one passing and one
//! failing case per step of each processor. ConsumeKinesis's probes also run through the
//! policy-enforcing proxy with Snowflake's IAM policy (every probe allowed, 0 denials), and with
//! actions taken out of it (the permissions step names them).

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
};
use kinesnow_core::aws::{clients, AwsClients, AwsSettings};
use kinesnow_core::config::{ConsumeKinesisConfig, PropertyMap, PutSnowflakeConfig};
use kinesnow_core::verify::{self, Outcome, Step};
use serde_json::json;

use crate::iam_policy::PolicyProxy;
use crate::standin_support::{sink_config, Standin};
use crate::support::{self, create_stream, Emulators};

fn kinesis_config(settings: &AwsSettings, stream: &str, app: &str, extra: &[(&str, &str)]) -> ConsumeKinesisConfig {
    let kinesis = settings.endpoint_override.as_ref().unwrap().to_string();
    let dynamodb = settings.dynamodb_endpoint_override.as_ref().unwrap().to_string();
    let mut pairs: Vec<(&str, &str)> = vec![
        ("Stream Name", stream),
        ("Application Name", app),
        ("Region", "us-east-1"),
        ("AWS Access Key ID", "local"),
        ("AWS Secret Access Key", "local"),
        ("Endpoint Override URL", &kinesis),
        ("DynamoDB Endpoint Override URL", &dynamodb),
    ];
    pairs.extend_from_slice(extra);
    ConsumeKinesisConfig::parse(&PropertyMap::from_pairs(pairs)).expect("valid settings")
}

fn step<'a>(steps: &'a [Step], name: &str) -> &'a Step {
    steps.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no step {name}: {steps:#?}"))
}

async fn create_table(c: &AwsClients, name: &str, keys: &[(&str, KeyType)]) {
    let mut request = c.dynamodb.create_table().table_name(name).billing_mode(BillingMode::PayPerRequest);
    for (key, kind) in keys {
        request = request
            .attribute_definitions(
                AttributeDefinition::builder()
                    .attribute_name(*key)
                    .attribute_type(ScalarAttributeType::S)
                    .build()
                    .unwrap(),
            )
            .key_schema(KeySchemaElement::builder().attribute_name(*key).key_type(kind.clone()).build().unwrap());
    }
    request.send().await.unwrap();
    for _ in 0..100 {
        let status =
            c.dynamodb.describe_table().table_name(name).send().await.unwrap().table().unwrap().table_status().cloned();
        if status == Some(aws_sdk_dynamodb::types::TableStatus::Active) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn put_item(c: &AwsClients, table: &str, pairs: &[(&str, AttributeValue)]) {
    let item: HashMap<String, AttributeValue> = pairs.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect();
    c.dynamodb.put_item().table_name(table).set_item(Some(item)).send().await.unwrap();
}

fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.into())
}

fn n(v: i64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

/// Each ConsumeKinesis step passes on a good set-up and fails (or says what it found) on a bad one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consume_kinesis_steps_pass_and_fail_against_the_emulators() {
    support::log();
    let e = Emulators::start("verify-kinesis");
    let direct = clients(&support::aws(&e)).await;
    create_stream(&direct, "orders", 2).await;
    let settings = support::aws(&e);

    // All good: the stream with its shards and retention, no table yet.
    let steps = verify::consume_kinesis::verify(&kinesis_config(&settings, "orders", "orders-app", &[])).await;
    assert!(steps.iter().all(|s| s.outcome == Outcome::Successful), "{steps:#?}");
    assert!(
        step(&steps, "Kinesis Stream").explanation.contains("2 shard(s), 2 open and 0 closed; retention 24 h"),
        "{steps:#?}"
    );
    assert!(step(&steps, "Lease Table").explanation.contains("is absent"), "{steps:#?}");
    let tables = direct.dynamodb.list_tables().send().await.unwrap();
    assert!(tables.table_names().is_empty(), "verification creates nothing: {:?}", tables.table_names());

    // A missing stream.
    let steps = verify::consume_kinesis::verify(&kinesis_config(&settings, "no-such-stream", "orders-app", &[])).await;
    assert_eq!(step(&steps, "Kinesis Stream").outcome, Outcome::Failed);
    assert!(step(&steps, "Kinesis Stream").explanation.contains("does not exist"), "{steps:#?}");

    // A table NiFi's ConsumeKinesis wrote: shard rows with leaseOwner/leaseExpiry and no counter, a node row.
    create_table(&direct, "nifi-app", &[("streamName", KeyType::Hash), ("shardId", KeyType::Range)]).await;
    let now = kinesnow_core::lease::now_ms();
    put_item(
        &direct,
        "nifi-app",
        &[
            ("streamName", s("orders")),
            ("shardId", s("shardId-000000000000")),
            ("leaseOwner", s("nifi-node-1")),
            ("leaseExpiry", n(now + 60_000)),
            ("sequenceNumber", s("49600000000000000000000000000000000000000000000000000001")),
            ("lastUpdateTimestamp", n(now)),
        ],
    )
    .await;
    put_item(
        &direct,
        "nifi-app",
        &[
            ("streamName", s("orders")),
            ("shardId", s("__node__#4f1c2a7e-1111-2222-3333-444455556666")),
            ("nodeHeartbeat", n(now)),
            ("lastUpdateTimestamp", n(now)),
        ],
    )
    .await;
    let steps = verify::consume_kinesis::verify(&kinesis_config(&settings, "orders", "nifi-app", &[])).await;
    let lease = step(&steps, "Lease Table");
    assert_eq!(lease.outcome, Outcome::Successful);
    assert!(
        lease.explanation.contains("NiFi's own ConsumeKinesis") && lease.explanation.contains("1 with a checkpoint"),
        "{lease:?}"
    );
    assert!(lease.explanation.contains("Warning: 1 of NiFi's leases"), "{lease:?}");

    // A KCL table (migrated at the first start) and a foreign one (refused).
    create_table(&direct, "kcl-app", &[("leaseKey", KeyType::Hash)]).await;
    put_item(
        &direct,
        "kcl-app",
        &[("leaseKey", s("shardId-000000000000")), ("checkpoint", s("TRIM_HORIZON")), ("leaseCounter", n(3))],
    )
    .await;
    let steps = verify::consume_kinesis::verify(&kinesis_config(&settings, "orders", "kcl-app", &[])).await;
    assert!(step(&steps, "Lease Table").explanation.contains("KCL lease table with 1 lease(s)"), "{steps:#?}");
    create_table(&direct, "foreign-app", &[("id", KeyType::Hash)]).await;
    let steps = verify::consume_kinesis::verify(&kinesis_config(&settings, "orders", "foreign-app", &[])).await;
    assert_eq!(step(&steps, "Lease Table").outcome, Outcome::Failed, "{steps:#?}");
    assert!(
        !step(&steps, "IAM Permissions").explanation.contains("unknown"),
        "a foreign key schema is not probed by key: {steps:#?}"
    );

    // Credentials: the default chain with nothing to find (no environment keys, no profile, no
    // instance metadata) fails, and the other steps are skipped. Only this test's process sees it.
    let default_chain = ConsumeKinesisConfig::parse(&PropertyMap::from_pairs([
        ("Stream Name", "orders"),
        ("Application Name", "orders-app"),
        ("Region", "us-east-1"),
        ("Endpoint Override URL", e.kinesis.as_str()),
    ]))
    .unwrap();
    std::env::set_var("AWS_CONFIG_FILE", "/nonexistent/aws-config");
    std::env::set_var("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials");
    std::env::set_var("AWS_EC2_METADATA_DISABLED", "true");
    for var in [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    ] {
        std::env::remove_var(var);
    }
    let steps = verify::consume_kinesis::verify(&default_chain).await;
    assert_eq!(steps[0].outcome, Outcome::Failed, "{steps:#?}");
    assert!(steps[1..].iter().all(|s| s.outcome == Outcome::Skipped), "{steps:#?}");
}

/// Through the proxy enforcing Snowflake's IAM policy: every probe is allowed (0 denials); with
/// GetRecords and Query taken out, the permissions step fails and names both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consume_kinesis_probes_stay_within_snowflakes_policy() {
    let e = Emulators::start("verify-iam");
    let direct = clients(&support::aws(&e)).await;
    create_stream(&direct, "orders", 1).await;
    let proxy = PolicyProxy::start(&e, "orders", "orders-app", &[]).await;
    let steps = verify::consume_kinesis::verify(&kinesis_config(&proxy.aws(&e), "orders", "orders-app", &[])).await;
    assert!(steps.iter().all(|s| s.outcome == Outcome::Successful), "{steps:#?}");
    let (allowed, denied, denials) = proxy.stats();
    assert!(denied.is_empty(), "the policy denied a probe: {denials}");
    for action in [
        "kinesis:DescribeStream",
        "kinesis:ListShards",
        "kinesis:GetShardIterator",
        "kinesis:GetRecords",
        "dynamodb:DescribeTable",
        "dynamodb:Query",
        "dynamodb:Scan",
        "dynamodb:GetItem",
    ] {
        assert!(allowed.contains_key(action), "{action} was not probed: {allowed:?}");
    }
    let writes: Vec<&String> = allowed
        .keys()
        .filter(|a| ["PutItem", "UpdateItem", "CreateTable", "DeleteTable", "Register"].iter().any(|w| a.contains(w)))
        .collect();
    assert!(writes.is_empty(), "verification wrote: {writes:?}");
    drop(proxy);

    let proxy = PolicyProxy::start(&e, "orders", "orders-app", &["kinesis:GetRecords", "dynamodb:Query"]).await;
    let steps = verify::consume_kinesis::verify(&kinesis_config(&proxy.aws(&e), "orders", "orders-app", &[])).await;
    let permissions = step(&steps, "IAM Permissions");
    assert_eq!(permissions.outcome, Outcome::Failed, "{steps:#?}");
    assert!(permissions.explanation.starts_with("denied: kinesis:GetRecords"), "{permissions:?}");
    assert!(permissions.explanation.contains("dynamodb:Query ("), "{permissions:?}");
    assert!(
        permissions.explanation.contains("Not checked, a probe would have to write: dynamodb:CreateTable"),
        "{permissions:?}"
    );
}

/// A PutSnowflake of the shared test settings, with schema evolution on and `extra` added (later pairs win).
fn snowflake_config(standin: &Standin, extra: &[(&str, &str)]) -> PutSnowflakeConfig {
    let mut pairs = vec![("Schema Evolution Enabled", "true")];
    pairs.extend_from_slice(extra);
    sink_config(standin, "verify", &pairs)
}

fn run(config: &PutSnowflakeConfig) -> Vec<Step> {
    tokio::runtime::Runtime::new().unwrap().block_on(verify::put_snowflake::verify(config, None))
}

/// Each PutSnowflake step passes on a good table and fails on a bad set-up; ERROR_LOGGING off is
/// a warning on a successful step. Verification opens no channel.
#[test]
fn put_snowflake_steps_pass_and_fail_against_the_standin() {
    let standin = Standin::start("verify", 50);
    standin.sql("CREATE TABLE DB.PUBLIC.EVENTS (ID NUMBER(38,0) NOT NULL, PAYLOAD VARIANT) ENABLE_SCHEMA_EVOLUTION = TRUE ERROR_LOGGING = TRUE");
    let steps = run(&snowflake_config(&standin, &[]));
    assert!(steps.iter().all(|s| s.outcome == Outcome::Successful), "{steps:#?}");
    assert!(
        step(&steps, "Table Columns").explanation.contains("ID NUMBER(38,0) NOT NULL, PAYLOAD VARIANT"),
        "{steps:#?}"
    );
    assert!(step(&steps, "Table Settings").explanation.contains("ERROR_LOGGING is on"), "{steps:#?}");
    let channels = standin.admin("GET", "/admin/channels", serde_json::Value::Null);
    assert_eq!(channels["channels"].as_array().map(Vec::len).unwrap_or(0), 0, "no channel opened: {channels}");

    // ERROR_LOGGING off: still successful, with a warning.
    standin.sql("ALTER TABLE DB.PUBLIC.EVENTS SET ERROR_LOGGING = FALSE");
    let settings = run(&snowflake_config(&standin, &[])).into_iter().find(|s| s.name == "Table Settings").unwrap();
    assert_eq!(settings.outcome, Outcome::Successful);
    assert!(settings.explanation.contains("Warning: ERROR_LOGGING is off"), "{settings:?}");
    // Schema evolution off while the property says on: failed.
    standin.sql("ALTER TABLE DB.PUBLIC.EVENTS SET ENABLE_SCHEMA_EVOLUTION = FALSE");
    let settings = run(&snowflake_config(&standin, &[])).into_iter().find(|s| s.name == "Table Settings").unwrap();
    assert_eq!(settings.outcome, Outcome::Failed, "{settings:?}");

    // A missing table: the pipe, its columns and settings fail.
    let steps = run(&snowflake_config(&standin, &[("Table", "MISSING")]));
    for name in ["Destination Pipe", "Table Columns", "Table Settings"] {
        assert_eq!(step(&steps, name).outcome, Outcome::Failed, "{steps:#?}");
    }
    assert!(step(&steps, "Table Columns").explanation.contains("does not exist"), "{steps:#?}");

    // The scoped token refused by the control host.
    standin.fault(json!({"kind": "expired_token", "on": "oauth", "count": 2}));
    let steps = run(&snowflake_config(&standin, &[]));
    assert_eq!(step(&steps, "Snowflake Authentication").outcome, Outcome::Successful, "{steps:#?}");
    assert_eq!(step(&steps, "Scoped Token").outcome, Outcome::Failed, "{steps:#?}");
    assert_eq!(step(&steps, "Destination Pipe").outcome, Outcome::Skipped, "{steps:#?}");
    standin.clear_faults();

    // A user Snowflake does not know: authentication fails, the rest is skipped.
    let steps = run(&snowflake_config(&standin, &[("User", "NOBODY")]));
    assert_eq!(steps[0].outcome, Outcome::Failed, "{steps:#?}");
    assert!(steps[0].explanation.contains("refused"), "{steps:#?}");
    assert!(steps[1..].iter().all(|s| s.outcome == Outcome::Skipped), "{steps:#?}");
}
