//! The engine with exactly the IAM policy of Snowflake's set-up page for the Kinesis connector
//! (`tests/iam/snowflake-kinesis-policy.json`, verbatim), enforced by `tests/iam/policy_proxy.py`
//! between the engine and kinesis-local/dynalite: polling, a stop and a start, two engines at
//! once, Enhanced Fan-Out (over kinesis-local's plain HTTP/1.1 port, which the proxy relays; its
//! HTTP/2 TLS port is not proxied), the consumer's deregistration, a KCL table's migration, and the
//! tombstones that stand for removed rows coming back. Each ends with 0 denials at the proxy. With
//! one action taken out of the policy, the start fails with an error that names it.
//!
//! The test itself creates streams, puts records and writes KCL tables directly on the emulators.

use crate::support;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
};
use aws_sdk_kinesis::primitives::Blob;
use kinesnow_core::aws::{clients, AwsClients, AwsSettings};
use kinesnow_core::config::consume_kinesis::ConsumerType;
use kinesnow_core::consumer::ConsumerEngine;
use kinesnow_core::lease::migration_lock::{self, Attempt, LockWatch};
use kinesnow_core::lease::{table, Checkpoint, LeaseStore, LoadedOnTake};
use support::{aws, by_shard, create_stream, drain, log, put, settings, Emulators};

type Item = HashMap<String, AttributeValue>;

/// tests/iam/policy_proxy.py on a free port, for one stream and one Application Name.
pub(crate) struct PolicyProxy {
    child: Child,
    url: String,
}

impl PolicyProxy {
    /// `without`: actions taken out of the policy.
    pub(crate) async fn start(e: &Emulators, stream: &str, application: &str, without: &[&str]) -> Self {
        // Region and account as kinesis-local writes them into its ARNs (the policy's ARNs must match).
        let direct = clients(&aws(e)).await;
        let arn = direct
            .kinesis
            .describe_stream()
            .stream_name(stream)
            .send()
            .await
            .unwrap()
            .stream_description()
            .unwrap()
            .stream_arn()
            .to_owned();
        let parts: Vec<&str> = arn.split(':').collect();
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/iam/policy_proxy.py");
        let mut command = Command::new("python3");
        command.arg(script).args([
            "--kinesis",
            &e.kinesis,
            "--dynamodb",
            &e.dynamodb,
            "--region",
            parts[3],
            "--account-id",
            parts[4],
        ]);
        command.args(["--stream-name", stream, "--application-name", application]);
        for action in without {
            command.args(["--without", action]);
        }
        let mut child = command.stdout(Stdio::piped()).spawn().expect("run policy_proxy.py");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let url = line.trim().strip_prefix("listening on ").unwrap_or_else(|| panic!("proxy said {line:?}")).to_owned();
        Self { child, url }
    }

    /// The engine's settings with both endpoints pointing at the proxy.
    pub(crate) fn aws(&self, e: &Emulators) -> AwsSettings {
        AwsSettings {
            endpoint_override: Some(self.url.parse().unwrap()),
            dynamodb_endpoint_override: Some(self.url.parse().unwrap()),
            ..aws(e)
        }
    }

    async fn clients(&self, e: &Emulators) -> AwsClients {
        clients(&self.aws(e)).await
    }

    /// (allowed, denied) requests per action so far, and the denials' resources.
    pub(crate) fn stats(&self) -> (BTreeMap<String, u64>, BTreeMap<String, u64>, String) {
        let address = self.url.trim_start_matches("http://");
        let mut stream = std::net::TcpStream::connect(address).unwrap();
        write!(stream, "GET /__stats HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n").unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let body = &response[response.find("\r\n\r\n").unwrap() + 4..];
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        let counts =
            |k: &str| v[k].as_object().unwrap().iter().map(|(a, n)| (a.clone(), n.as_u64().unwrap())).collect();
        (counts("allowed"), counts("denied"), v["denials"].to_string())
    }

    /// Asserts that nothing was denied and that each of `actions` was allowed at least once.
    pub(crate) fn assert_only_allowed(&self, actions: &[&str]) {
        let (allowed, denied, denials) = self.stats();
        eprintln!("allowed by the policy: {allowed:?}; denied: {denials}");
        assert!(denied.is_empty(), "denied: {denials}");
        let missing: Vec<_> = actions.iter().filter(|a| !allowed.contains_key(**a)).collect();
        assert!(missing.is_empty(), "never called: {missing:?}; called: {allowed:?}");
    }
}

impl Drop for PolicyProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls every engine in turn and acks until `n` distinct records arrived (or 60 s passed).
async fn drain_all(engines: &[&ConsumerEngine], n: usize) -> BTreeMap<String, BTreeSet<String>> {
    let mut got: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while got.values().map(BTreeSet::len).sum::<usize>() < n && tokio::time::Instant::now() < deadline {
        for engine in engines {
            if let Some(batch) = engine.poll(1 << 20, Duration::from_millis(200)).await {
                for s in &batch.shards {
                    got.entry(s.shard_id.clone())
                        .or_default()
                        .extend(s.records.iter().map(|r| String::from_utf8(r.data.clone()).unwrap()));
                }
                engine.ack(batch.id).await.unwrap();
            }
        }
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_restarts_two_engines_and_fan_out_need_only_snowflakes_policy() {
    log();
    let e = Emulators::start("iam-paths");
    let direct = clients(&aws(&e)).await;
    create_stream(&direct, "iam", 2).await;
    let proxy = PolicyProxy::start(&e, "iam", "iam-app", &[]).await;

    let first = put(&direct, "iam", 0, 20).await;
    let engine = ConsumerEngine::start(settings("iam", "iam-app"), proxy.clients(&e).await).await.unwrap();
    let (got, _) = drain(&engine, first.len(), true).await;
    assert_eq!(got, by_shard(&first), "polling");
    engine.stop().await;

    // Started again, as two engines: each writes a heartbeat row of its own, the leases are
    // shared, and reading resumes at the checkpoints.
    let second = put(&direct, "iam", 20, 20).await;
    let a = ConsumerEngine::start(settings("iam", "iam-app"), proxy.clients(&e).await).await.unwrap();
    let b = ConsumerEngine::start(settings("iam", "iam-app"), proxy.clients(&e).await).await.unwrap();
    let got = drain_all(&[&a, &b], second.len()).await;
    let expected: BTreeMap<String, BTreeSet<String>> =
        by_shard(&second).into_iter().map(|(s, v)| (s, v.into_iter().collect())).collect();
    assert_eq!(got, expected, "two engines read what came after the checkpoints");
    a.stop().await;
    b.stop().await;

    let mut efo = settings("iam", "iam-app");
    efo.consumer_type = ConsumerType::EnhancedFanOut;
    let third = put(&direct, "iam", 40, 10).await;
    let engine = ConsumerEngine::start(efo, proxy.clients(&e).await).await.unwrap();
    let (got, _) = drain(&engine, third.len(), true).await;
    assert_eq!(got, by_shard(&third), "Enhanced Fan-Out");
    engine.stop().await;
    // The processor is removed from the canvas: its consumer is deregistered.
    kinesnow_core::kinesis::fan_out::deregister(
        &proxy.clients(&e).await.kinesis,
        kinesnow_core::kinesis::address::StreamRef::Name("iam"),
        "iam-app",
    )
    .await
    .unwrap();

    let view = LeaseStore::new(direct.dynamodb.clone(), "iam-app", "iam").scan().await.unwrap();
    assert!(view.nodes.is_empty(), "stopped engines leave no heartbeat row: {:?}", view.nodes);
    proxy.assert_only_allowed(&[
        "kinesis:DescribeStream",
        "kinesis:ListShards",
        "kinesis:GetShardIterator",
        "kinesis:GetRecords",
        "kinesis:RegisterStreamConsumer",
        "kinesis:DescribeStreamConsumer",
        "kinesis:SubscribeToShard",
        "kinesis:DeregisterStreamConsumer",
        "dynamodb:DescribeTable",
        "dynamodb:CreateTable",
        "dynamodb:Query",
        "dynamodb:UpdateItem",
        "dynamodb:PutItem",
    ]);
}

async fn create_kcl_table(db: &aws_sdk_dynamodb::Client, name: &str, items: &[Item]) {
    db.create_table()
        .table_name(name)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name("leaseKey")
                .attribute_type(ScalarAttributeType::S)
                .build()
                .unwrap(),
        )
        .key_schema(KeySchemaElement::builder().attribute_name("leaseKey").key_type(KeyType::Hash).build().unwrap())
        .send()
        .await
        .unwrap();
    for _ in 0..200 {
        let d = db.describe_table().table_name(name).send().await.unwrap();
        if d.table().unwrap().table_status() == Some(&aws_sdk_dynamodb::types::TableStatus::Active) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for item in items {
        db.put_item().table_name(name).set_item(Some(item.clone())).send().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kcl_migration_needs_only_snowflakes_policy() {
    log();
    let e = Emulators::start("iam-kcl");
    let direct = clients(&aws(&e)).await;
    create_stream(&direct, "kcl", 1).await;
    let mut sequences = Vec::new();
    for i in 0..10 {
        let r = direct
            .kinesis
            .put_record()
            .stream_name("kcl")
            .partition_key("k")
            .data(Blob::new(format!("{{\"n\":{i}}}")))
            .send()
            .await
            .unwrap();
        sequences.push((r.shard_id().to_owned(), r.sequence_number().to_owned()));
    }
    // A KCL 2.x lease checkpointed at the fifth record.
    let s = |v: &str| AttributeValue::S(v.into());
    let n = |v: u64| AttributeValue::N(v.to_string());
    let lease = Item::from([
        ("leaseKey".into(), s(&sequences[4].0)),
        ("checkpoint".into(), s(&sequences[4].1)),
        ("checkpointSubSequenceNumber".into(), n(0)),
        ("leaseOwner".into(), s("kcl-worker-7")),
        ("leaseCounter".into(), n(99)),
        ("ownerSwitchesSinceCheckpoint".into(), n(0)),
    ]);
    create_kcl_table(&direct.dynamodb, "kcl-app", &[lease]).await;
    let proxy = PolicyProxy::start(&e, "kcl", "kcl-app", &[]).await;

    let engine = ConsumerEngine::start(settings("kcl", "kcl-app"), proxy.clients(&e).await).await.unwrap();
    let (got, _) = drain(&engine, 5, true).await;
    let after: Vec<String> = (5..10).map(|i| format!("{{\"n\":{i}}}")).collect();
    assert_eq!(got, BTreeMap::from([(sequences[0].0.clone(), after)]), "resumed after the KCL checkpoint");
    engine.stop().await;
    assert!(
        direct.dynamodb.describe_table().table_name("kcl-app_migration").send().await.is_err(),
        "the copy table is deleted"
    );
    // KCL 3's side tables are named in a warning, not probed (Snowflake's policy grants no
    // DescribeTable on them): a migration makes no refused call.
    proxy.assert_only_allowed(&[
        "dynamodb:Scan",
        "dynamodb:PutItem",
        "dynamodb:GetItem",
        "dynamodb:DeleteTable",
        "dynamodb:CreateTable",
    ]);
}

fn raw_key(stream: &str, shard: &str) -> Item {
    Item::from([
        ("streamName".into(), AttributeValue::S(stream.into())),
        ("shardId".into(), AttributeValue::S(shard.into())),
    ])
}

async fn raw(db: &aws_sdk_dynamodb::Client, table: &str, key: Item) -> Option<Item> {
    db.get_item().table_name(table).set_key(Some(key)).consistent_read(true).send().await.unwrap().item().cloned()
}

/// Removed rows are tombstones (no DeleteItem in the policy): absent to every reader, and the row
/// comes back as a delete would have left it when it is written again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tombstones_read_as_absent_and_rows_come_back_over_them() {
    log();
    let e = Emulators::start("iam-tombstones");
    let direct = clients(&aws(&e)).await;
    create_stream(&direct, "tomb", 1).await;
    let proxy = PolicyProxy::start(&e, "tomb", "tomb", &[]).await;
    let via = proxy.clients(&e).await;
    table::ensure_table(&via.dynamodb, "tomb", Duration::from_secs(30)).await.unwrap();
    let store = LeaseStore::new(via.dynamodb.clone(), "tomb", "tomb");

    // A heartbeat slot removed (a stopped node), then taken again by a new node.
    assert!(store.claim_node_row("slot0", "n1").await.unwrap());
    assert!(store.heartbeat("slot0", "n1").await.unwrap());
    assert!(!store.claim_node_row("slot0", "n2").await.unwrap(), "a live slot is not taken");
    assert!(!store.heartbeat("slot0", "n2").await.unwrap(), "nor beaten on by another node");
    store.remove_node("slot0", "n2", None).await.unwrap();
    assert_eq!(store.scan().await.unwrap().nodes.len(), 1, "another node's removal leaves the row");
    store.remove_node("slot0", "n1", None).await.unwrap();
    assert!(store.scan().await.unwrap().nodes.is_empty(), "a removed heartbeat row is absent");
    assert!(raw(&direct.dynamodb, "tomb", raw_key("tomb", "__node__slot0")).await.unwrap().contains_key("removedAt"));
    assert!(!store.heartbeat("slot0", "n1").await.unwrap(), "a removed node does not beat its tombstone back");
    assert!(store.claim_node_row("slot0", "n3").await.unwrap(), "a tombstone's slot is taken by the next start");
    let nodes = store.scan().await.unwrap().nodes;
    assert_eq!(nodes.len(), 1);
    assert_eq!((nodes[0].owner.as_str(), nodes[0].row.as_str(), nodes[0].beat), ("n3", "slot0", 1), "counted anew");
    assert!(!raw(&direct.dynamodb, "tomb", raw_key("tomb", "__node__slot0")).await.unwrap().contains_key("removedAt"));
    store.remove_node("slot0", "n3", Some(7)).await.unwrap();
    assert_eq!(store.scan().await.unwrap().nodes.len(), 1, "a long-dead removal of a row that beat since is left");
    store.remove_node("slot0", "n3", Some(1)).await.unwrap();
    let gone = raw(&direct.dynamodb, "tomb", raw_key("tomb", "__node__slot0")).await.unwrap();
    assert!(gone.contains_key("removedAt") && gone.contains_key("expiresAt"), "a tombstone for Time to Live: {gone:?}");

    // A heartbeat row written before slots (named after its owner, no nodeOwner) reads and is removed.
    let mut legacy = raw_key("tomb", "__node__kinesnow-old");
    legacy.insert("heartbeat".into(), AttributeValue::N("5".into()));
    direct.dynamodb.put_item().table_name("tomb").set_item(Some(legacy)).send().await.unwrap();
    let nodes = store.scan().await.unwrap().nodes;
    assert_eq!((nodes[0].owner.as_str(), nodes[0].row.as_str(), nodes[0].beat), ("kinesnow-old", "kinesnow-old", 5));
    store.remove_node("kinesnow-old", "kinesnow-old", Some(5)).await.unwrap();
    assert!(store.scan().await.unwrap().nodes.is_empty(), "a long-dead row of before slots is removed");

    // A finished shard's row removed, then written again as a child: no trace of the old row.
    let lease = store.acquire("shard-x", "me", None, LoadedOnTake::Keep).await.unwrap().unwrap();
    store.mark_shard_end(&lease).await.unwrap();
    store.remove_finished("shard-x").await.unwrap();
    assert!(store.scan().await.unwrap().leases.is_empty(), "a removed shard row is absent");
    assert!(raw(&direct.dynamodb, "tomb", raw_key("tomb", "shard-x")).await.unwrap().contains_key("expiresAt"));
    assert!(store.release(&lease).await.is_err(), "a write fenced on the old lease is refused on the tombstone");
    store.add_child("shard-x", &["p".to_owned()]).await.unwrap();
    let rows = store.scan().await.unwrap().leases;
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (&rows[0].checkpoint, &rows[0].holder, &rows[0].parents),
        (&Checkpoint::None, &None, &vec!["p".to_owned()])
    );
    let taken = store.acquire("shard-x", "me", None, LoadedOnTake::Keep).await.unwrap().expect("a free row");
    assert_eq!(taken.counter, 1, "the counter starts anew");

    // The migration lock released (a tombstone), then taken at once by another node.
    table::ensure_table(&via.dynamodb, "tomb_migration", Duration::from_secs(30)).await.unwrap();
    let (beat, timeout) = (Duration::from_millis(200), Duration::from_secs(60));
    let Attempt::Taken(lock) =
        migration_lock::try_take(&via.dynamodb, "tomb_migration", "a", &mut LockWatch::default(), timeout, beat)
            .await
            .unwrap()
    else {
        panic!("the lock is free")
    };
    lock.release().await;
    let lock_key = raw_key("__migration__", "__lock__");
    assert!(raw(&direct.dynamodb, "tomb_migration", lock_key.clone()).await.unwrap().contains_key("removedAt"));
    match migration_lock::try_take(&via.dynamodb, "tomb_migration", "b", &mut LockWatch::default(), timeout, beat)
        .await
        .unwrap()
    {
        Attempt::Taken(lock) => drop(lock),
        Attempt::Held { owner } => panic!("a released lock is held by {owner}"),
        Attempt::Gone => panic!("the table is there"),
    }
    let item = raw(&direct.dynamodb, "tomb_migration", lock_key).await.unwrap();
    assert_eq!(item.get("owner"), Some(&AttributeValue::S("b".into())));
    assert!(!item.contains_key("removedAt"));
    proxy.assert_only_allowed(&["dynamodb:UpdateItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:GetItem"]);
}

/// With one action taken out of the policy, the start fails and its error (the bulletin's text)
/// names the action.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_permission_fails_the_start_naming_it() {
    log();
    let e = Emulators::start("iam-denied");
    let direct = clients(&aws(&e)).await;
    create_stream(&direct, "deny", 1).await;
    for (i, missing) in
        ["dynamodb:UpdateItem", "kinesis:DescribeStream", "dynamodb:CreateTable"].into_iter().enumerate()
    {
        let app = format!("deny-app-{i}");
        let proxy = PolicyProxy::start(&e, "deny", &app, &[missing]).await;
        let error = match ConsumerEngine::start(settings("deny", &app), proxy.clients(&e).await).await {
            Ok(engine) => {
                engine.stop().await;
                panic!("started without {missing}")
            }
            Err(error) => error.to_string(),
        };
        eprintln!("without {missing}: {error}");
        assert!(error.contains(&format!("not authorized to perform: {missing}")), "without {missing}: {error}");
        assert!(error.contains("denied"), "{error}");
        let (_, denied, _) = proxy.stats();
        assert_eq!(denied.keys().collect::<Vec<_>>(), vec![missing], "only the missing action is refused");
    }
}
