//! ConsumeKinesis as the JNI layer drives it (a `Component`: start, status, poll of encoded
//! batches, ack, stop), against real kinesis-local and dynalite: a start that waits for another
//! node's KCL migration returns at once and can be cancelled without leaving anything behind, and
//! a partition key beyond 64 KiB (from a KPL aggregate's key table) reaches Java intact while the
//! shard keeps flowing.

use crate::support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
};
use aws_sdk_kinesis::primitives::Blob;
use kinesnow_core::aws::{clients, AwsClients};
use kinesnow_core::component::Component;
use kinesnow_core::config::{ComponentType, PropertyMap};
use kinesnow_core::consumer::output::ShardFlowFiles;
use kinesnow_core::ffi::batch;
use kinesnow_core::lease::LeaseStore;
use support::{aws, create_stream, log, Emulators};
use tokio::runtime::Runtime;

fn consumer(e: &Emulators, stream: &str, app: &str) -> Component {
    let props = PropertyMap::from_pairs([
        ("Stream Name", stream),
        ("Application Name", app),
        ("Region", "us-east-1"),
        ("AWS Access Key ID", "local"),
        ("AWS Secret Access Key", "local"),
        ("Endpoint Override URL", e.kinesis.as_str()),
        ("DynamoDB Endpoint Override URL", e.dynamodb.as_str()),
        ("Max Batch Duration", "200 ms"),
    ]);
    Component::open(ComponentType::ConsumeKinesis, &props).unwrap()
}

fn wait_until(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Polls (acking each batch) until `n` FlowFiles arrived; returns them as Java would decode them.
fn poll_flow_files(c: &Component, n: usize) -> Vec<ShardFlowFiles> {
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while got.iter().map(|s: &ShardFlowFiles| s.flow_files.len()).sum::<usize>() < n {
        assert!(Instant::now() < deadline, "only {got:?} arrived");
        if let Some(bytes) = c.poll_batch().unwrap().map(|b| batch::outgoing_bytes(b).unwrap()) {
            let (id, shards) = batch::decode(&bytes).expect("a well-formed batch");
            got.extend(shards);
            c.ack(id).unwrap();
        }
    }
    got
}

async fn put(c: &AwsClients, stream: &str, key: &str, data: Vec<u8>) {
    c.kinesis.put_record().stream_name(stream).partition_key(key).data(Blob::new(data)).send().await.unwrap();
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
        let d = c.dynamodb.describe_table().table_name(name).send().await.unwrap();
        if d.table().unwrap().table_status() == Some(&aws_sdk_dynamodb::types::TableStatus::Active) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("table {name} never became ACTIVE");
}

async fn key_schema(c: &AwsClients, table: &str) -> Option<Vec<String>> {
    let d = c.dynamodb.describe_table().table_name(table).send().await.ok()?;
    Some(d.table()?.key_schema().iter().map(|k| k.attribute_name().to_owned()).collect())
}

fn lock_key() -> HashMap<String, AttributeValue> {
    HashMap::from([
        ("streamName".to_owned(), AttributeValue::S("__migration__".into())),
        ("shardId".to_owned(), AttributeValue::S("__lock__".into())),
    ])
}

/// Another node migrating the KCL table `app`: the `<app>_migration` table with its lock row, whose
/// counter it bumps every 500 ms while `alive`.
async fn another_node_migrates(c: &AwsClients, app: &str, alive: Arc<AtomicBool>) -> tokio::task::JoinHandle<()> {
    create_table(c, app, &[("leaseKey", KeyType::Hash)]).await;
    let lease = HashMap::from([
        ("leaseKey".to_owned(), AttributeValue::S("shardId-000000000000".into())),
        ("checkpoint".to_owned(), AttributeValue::S("TRIM_HORIZON".into())),
        ("checkpointSubSequenceNumber".to_owned(), AttributeValue::N("0".into())),
        ("leaseOwner".to_owned(), AttributeValue::S("kcl-worker-gone".into())),
        ("leaseCounter".to_owned(), AttributeValue::N("7".into())),
    ]);
    c.dynamodb.put_item().table_name(app).set_item(Some(lease)).send().await.unwrap();
    let copy = format!("{app}_migration");
    create_table(c, &copy, &[("streamName", KeyType::Hash), ("shardId", KeyType::Range)]).await;
    let mut lock = lock_key();
    lock.insert("owner".into(), AttributeValue::S("kinesnow-other-node".into()));
    lock.insert("beat".into(), AttributeValue::N("0".into()));
    c.dynamodb.put_item().table_name(&copy).set_item(Some(lock)).send().await.unwrap();
    let db = c.dynamodb.clone();
    tokio::spawn(async move {
        while alive.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let _ = db
                .update_item()
                .table_name(&copy)
                .set_key(Some(lock_key()))
                .update_expression("ADD beat :one")
                .expression_attribute_values(":one", AttributeValue::N("1".into()))
                .send()
                .await;
        }
        // The other node gave up: it releases the lock.
        db.delete_item().table_name(&copy).set_key(Some(lock_key())).send().await.unwrap();
    })
}

#[test]
fn a_start_waiting_for_another_nodes_migration_returns_at_once_is_cancelled_cleanly_then_reads() {
    log();
    let rt = Runtime::new().unwrap();
    let emulators = Emulators::start("component-start");
    let c = rt.block_on(clients(&aws(&emulators)));
    rt.block_on(create_stream(&c, "slow", 1));
    for i in 0..3 {
        rt.block_on(put(&c, "slow", "k", format!("{{\"n\":{i}}}").into_bytes()));
    }
    let alive = Arc::new(AtomicBool::new(true));
    let other = rt.block_on(another_node_migrates(&c, "slow-app", alive.clone()));

    // Scheduled: returns at once although the start waits for the lock.
    let first = consumer(&emulators, "slow", "slow-app");
    let t = Instant::now();
    first.start().unwrap();
    assert!(t.elapsed() < Duration::from_millis(500), "start took {:?}", t.elapsed());
    std::thread::sleep(Duration::from_secs(3));
    let status = first.startup_status().expect("still starting: the other node holds the lock");
    assert!(status.starts_with("the engine is starting"), "{status}");
    assert!(first.poll_batch().unwrap().is_none());

    // Stopped during the start: returns at once and nothing of this node is left, nor comes later.
    let t = Instant::now();
    first.stop();
    assert!(t.elapsed() < Duration::from_secs(1), "stop took {:?}", t.elapsed());
    drop(first);
    alive.store(false, Ordering::SeqCst);
    rt.block_on(other).unwrap();
    std::thread::sleep(Duration::from_secs(3)); // an orphan start would take the free lock and migrate now
    assert_eq!(
        rt.block_on(key_schema(&c, "slow-app")),
        Some(vec!["leaseKey".to_owned()]),
        "the KCL table is untouched"
    );
    let copy = rt.block_on(c.dynamodb.scan().table_name("slow-app_migration").send()).unwrap();
    assert_eq!(copy.count(), 0, "no lock taken, nothing copied: {:?}", copy.items());

    // Started again with the lock free: it migrates, runs and reads.
    let second = consumer(&emulators, "slow", "slow-app");
    second.start().unwrap();
    wait_until("the engine to run", Duration::from_secs(60), || second.startup_status().is_none());
    let got = poll_flow_files(&second, 3);
    let data: Vec<String> =
        got.iter().flat_map(|s| &s.flow_files).map(|f| String::from_utf8(f.content.clone()).unwrap()).collect();
    assert_eq!(data, vec![r#"{"n":0}"#, r#"{"n":1}"#, r#"{"n":2}"#]);
    let store = LeaseStore::new(c.dynamodb.clone(), "slow-app", "slow");
    assert_eq!(rt.block_on(store.scan()).unwrap().nodes.len(), 1, "this node's heartbeat while it runs");
    second.stop();
    let view = rt.block_on(store.scan()).unwrap();
    assert!(view.nodes.is_empty(), "no heartbeat row after stop: {:?}", view.nodes);
    assert!(view.leases.iter().all(|l| l.holder.is_none()), "no lease kept: {:?}", view.leases);
}

#[test]
fn a_seventy_kilobyte_partition_key_reaches_java_intact_and_the_shard_keeps_flowing() {
    log();
    let rt = Runtime::new().unwrap();
    let emulators = Emulators::start("component-long-key");
    let c = rt.block_on(clients(&aws(&emulators)));
    rt.block_on(create_stream(&c, "keys", 1));
    let long_key = batch::long_partition_key(70_000);
    let aggregate = kinesnow_core::kinesis::deaggregate::aggregate(&[
        ("before", &b"{\"n\":0}"[..]),
        (long_key.as_str(), b"{\"n\":1}"),
        ("after", b"{\"n\":2}"),
    ]);
    rt.block_on(put(&c, "keys", "outer", aggregate));
    rt.block_on(put(&c, "keys", "plain", b"{\"n\":3}".to_vec()));

    let consumer = consumer(&emulators, "keys", "keys-app");
    consumer.start().unwrap();
    wait_until("the engine to run", Duration::from_secs(60), || consumer.startup_status().is_none());
    let got: Vec<_> = poll_flow_files(&consumer, 4).into_iter().flat_map(|s| s.flow_files).collect();
    let keys: Vec<&str> = got.iter().map(|f| &*f.partition_key).collect();
    assert_eq!(
        keys,
        vec!["before", long_key.as_str(), "after", "plain"],
        "every record, the long key intact, in order"
    );
    assert_eq!(got[1].content, b"{\"n\":1}");
    assert_eq!(got[1].first_sub, Some(1));

    // The shard keeps flowing: later records arrive, and the checkpoint passed the long key.
    rt.block_on(put(&c, "keys", "later", b"{\"n\":4}".to_vec()));
    let later: Vec<_> = poll_flow_files(&consumer, 1).into_iter().flat_map(|s| s.flow_files).collect();
    assert_eq!(later[0].content, b"{\"n\":4}");
    consumer.stop();
}
