//! The one-time migration from a legacy KCL lease table, against real dynalite (and kinesis-local
//! for the resume tests): hand-built KCL tables with sub-sequence, SHARD_END, sentinel and
//! multi-stream leases; a crash injected at every step followed by a restart; two nodes at once;
//! an unknown schema; DeleteTable denied (through a proxy that refuses it); and the consumer
//! resuming exactly after KCL's checkpoints. Tables written by a real KCL consumer are tested in
//! tests/e2e/test_kcl_migration.py.

use crate::support;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
};
use aws_sdk_dynamodb::Client;
use aws_sdk_kinesis::primitives::Blob;
use kinesnow_core::aws::clients;
use kinesnow_core::config::consume_kinesis::InitialPosition;
use kinesnow_core::consumer::ConsumerEngine;
use kinesnow_core::lease::migration::{items_by_shard, prepare_table, MigrationSettings, Outcome, Step};
use kinesnow_core::lease::{Checkpoint, LeaseError, LeaseStore};
use support::{aws, create_stream, drain, log, settings, Emulators};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

type Item = HashMap<String, AttributeValue>;

fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.into())
}

fn n(v: u64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

/// A KCL lease item as KCL 2.x writes it (owner and counter of a worker that is gone; attribute
/// names and types as a real KCL 2.7.2 consumer wrote them against dynalite).
fn kcl_lease(key: &str, checkpoint: &str, sub: u64, parents: &[&str]) -> Item {
    let mut item = Item::from([
        ("leaseKey".into(), s(key)),
        ("checkpoint".into(), s(checkpoint)),
        ("checkpointSubSequenceNumber".into(), n(sub)),
        ("leaseOwner".into(), s("kcl-worker-7")),
        ("leaseCounter".into(), n(1234)),
        ("ownerSwitchesSinceCheckpoint".into(), n(0)),
    ]);
    if !parents.is_empty() {
        item.insert("parentShardId".into(), AttributeValue::Ss(parents.iter().map(|p| p.to_string()).collect()));
    }
    item
}

async fn create_table(db: &Client, name: &str, keys: &[(&str, KeyType)]) {
    let mut request = db.create_table().table_name(name).billing_mode(BillingMode::PayPerRequest);
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
        let d = db.describe_table().table_name(name).send().await.unwrap();
        if d.table().unwrap().table_status() == Some(&aws_sdk_dynamodb::types::TableStatus::Active) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("table {name} never became ACTIVE");
}

async fn kcl_table(db: &Client, name: &str, items: &[Item]) {
    create_table(db, name, &[("leaseKey", KeyType::Hash)]).await;
    for item in items {
        db.put_item().table_name(name).set_item(Some(item.clone())).send().await.unwrap();
    }
}

/// Whether the table exists and is not being deleted: DeleteTable is asynchronous (dynalite, like
/// DynamoDB, shows the table as DELETING for a moment after the call returned).
async fn exists(db: &Client, table: &str) -> bool {
    match db.describe_table().table_name(table).send().await {
        Ok(out) => out.table().and_then(|t| t.table_status()) != Some(&aws_sdk_dynamodb::types::TableStatus::Deleting),
        Err(_) => false,
    }
}

fn text(item: &Item, name: &str) -> Option<String> {
    item.get(name).and_then(|v| v.as_s().ok()).cloned()
}

/// (stream, shard) -> (sequenceNumber, subSequenceNumber, shardEnd, startPosition, parents) of our table.
type Positions = BTreeMap<(String, String), (Option<String>, Option<String>, bool, Option<String>, Vec<String>)>;

async fn positions(db: &Client, table: &str) -> Positions {
    items_by_shard(db, table)
        .await
        .unwrap()
        .into_iter()
        .filter(|((stream, shard), _)| !stream.starts_with("__") && !shard.starts_with("__"))
        .map(|(key, i)| {
            let parents = match i.get("parentShardIds") {
                Some(AttributeValue::L(l)) => l.iter().map(|v| v.as_s().unwrap().clone()).collect(),
                _ => Vec::new(),
            };
            let end = matches!(i.get("shardEnd"), Some(AttributeValue::Bool(true)));
            let sub = i.get("subSequenceNumber").map(|v| v.as_n().unwrap().clone());
            (key, (text(&i, "sequenceNumber"), sub, end, text(&i, "startPosition"), parents))
        })
        .collect()
}

fn quick() -> MigrationSettings {
    MigrationSettings {
        lock_beat: Duration::from_millis(200),
        lock_timeout: Duration::from_secs(1),
        ..Default::default()
    }
}

/// 60 leases: numbered checkpoints with sub-sequence numbers, SHARD_END parents and their children.
fn many_leases() -> Vec<Item> {
    (0..60)
        .map(|i| match i % 3 {
            0 => kcl_lease(&format!("shardId-{i:012}"), &format!("49{i:040}"), i % 5, &[]),
            1 => kcl_lease(&format!("shardId-{i:012}"), "SHARD_END", 0, &[]),
            _ => kcl_lease(&format!("shardId-{i:012}"), "TRIM_HORIZON", 0, &[&format!("shardId-{:012}", i - 1)]),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_built_kcl_table_is_carried_over_completely() {
    log();
    let emulators = Emulators::start("migrate");
    let db = clients(&aws(&emulators)).await.dynamodb;
    kcl_table(
        &db,
        "legacy",
        &[
            kcl_lease("shardId-000000000000", "49600000000000000000000000000000000000000000000000000001", 3, &[]),
            kcl_lease("shardId-000000000001", "SHARD_END", 0, &[]),
            kcl_lease("shardId-000000000002", "TRIM_HORIZON", 0, &["shardId-000000000001", "shardId-000000000009"]),
            kcl_lease("shardId-000000000003", "LATEST", 0, &[]),
            kcl_lease("000000000000:other-stream:1700000000:shardId-000000000005", "4961", 0, &[]),
        ],
    )
    .await;
    create_table(&db, "legacy-CoordinatorState", &[("key", KeyType::Hash)]).await;

    let report = prepare_table(&db, "legacy", "orders", "node-a", &quick()).await.unwrap();
    assert_eq!(report.outcome, Outcome::Migrated { rows: 6 });
    assert!(exists(&db, "legacy-CoordinatorState").await, "KCL 3's side tables are left alone");
    assert!(!exists(&db, "legacy_migration").await, "the temporary table is deleted last");

    let got = positions(&db, "legacy").await;
    let key = |stream: &str, shard: &str| (stream.to_owned(), shard.to_owned());
    let o = |v: &str| Some(v.to_owned());
    assert_eq!(
        got[&key("orders", "shardId-000000000000")],
        (o("49600000000000000000000000000000000000000000000000000001"), o("3"), false, None, vec![])
    );
    assert_eq!(
        got[&key("orders", "shardId-000000000001")],
        (None, None, true, None, vec![]),
        "SHARD_END becomes the shard-end marker"
    );
    assert_eq!(
        got[&key("orders", "shardId-000000000002")],
        (None, None, false, o("TRIM_HORIZON"), vec!["shardId-000000000001".into(), "shardId-000000000009".into()])
    );
    assert!(got[&key("orders", "shardId-000000000009")].2, "a parent KCL had deleted counts as finished");
    assert_eq!(got[&key("orders", "shardId-000000000003")].3, o("LATEST"));
    assert_eq!(got[&key("other-stream", "shardId-000000000005")].0, o("4961"), "multi-stream keys keep their stream");
    assert_eq!(got.len(), 6);

    // The engine's own view of the rows: free leases with exact checkpoints.
    let rows = LeaseStore::new(db.clone(), "legacy", "orders").scan().await.unwrap().leases;
    let first = rows.iter().find(|r| r.shard_id == "shardId-000000000000").unwrap();
    assert!(first.holder.is_none());
    assert!(matches!(&first.checkpoint, Checkpoint::At(p) if p.sub_sequence_number == Some(3)));

    // A second start finds our table and changes nothing.
    let again = prepare_table(&db, "legacy", "orders", "node-b", &quick()).await.unwrap();
    assert_eq!(again.outcome, Outcome::Ready);
    assert_eq!(positions(&db, "legacy").await, got);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_any_step_loses_no_checkpoint() {
    log();
    let emulators = Emulators::start("migrate-crash");
    let db = clients(&aws(&emulators)).await.dynamodb;
    // What a migration without a crash produces.
    kcl_table(&db, "reference", &many_leases()).await;
    prepare_table(&db, "reference", "s", "node-r", &quick()).await.unwrap();
    let expected = positions(&db, "reference").await;
    assert_eq!(expected.len(), 60);

    let steps = [
        Step::MigrationTableCreated,
        Step::Locked,
        Step::CopyingOut(25),
        Step::CopyingOut(50),
        Step::CopiedOut,
        Step::SourceDeleted,
        Step::TargetCreated,
        Step::CopyingIn(1),
        Step::CopyingIn(40),
    ];
    for (i, step) in steps.into_iter().enumerate() {
        let app = format!("app{i}");
        kcl_table(&db, &app, &many_leases()).await;
        let crashed =
            prepare_table(&db, &app, "s", "node-dies", &MigrationSettings { halt_at: Some(step), ..quick() }).await;
        assert!(
            matches!(&crashed, Err(LeaseError::Table { message, .. }) if message.contains("halted")),
            "{step:?}: {crashed:?}"
        );

        // At every step one complete copy of the checkpoints exists.
        // (A table being deleted counts as gone.)
        let kcl_complete = match db.describe_table().table_name(&app).send().await {
            Ok(d) => {
                let table = d.table().unwrap();
                table.table_status() == Some(&aws_sdk_dynamodb::types::TableStatus::Active)
                    && table.key_schema()[0].attribute_name() == "leaseKey"
                    && db.scan().table_name(&app).consistent_read(true).send().await.is_ok_and(|o| o.count() == 60)
            }
            Err(_) => false,
        };
        let copy = format!("{app}_migration");
        let copy_complete = exists(&db, &copy).await && {
            let items = items_by_shard(&db, &copy).await.unwrap();
            items.contains_key(&("__migration__".to_owned(), "__copied__".to_owned()))
                && positions(&db, &copy).await == expected
        };
        assert!(
            kcl_complete || copy_complete,
            "{step:?}: no complete copy (KCL table {kcl_complete}, migration table {copy_complete})"
        );

        // The next start (another node, or the same one restarted) completes it.
        let report = prepare_table(&db, &app, "s", "node-next", &quick()).await.unwrap();
        assert!(matches!(report.outcome, Outcome::Migrated { rows: 60 }), "{step:?}: {report:?}");
        assert_eq!(positions(&db, &app).await, expected, "{step:?}: every checkpoint intact");
        assert!(!exists(&db, &copy).await, "{step:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_node_migrates_while_another_waits() {
    log();
    let emulators = Emulators::start("migrate-two");
    let db = clients(&aws(&emulators)).await.dynamodb;
    let leases: Vec<Item> = (0..5)
        .flat_map(|_| many_leases())
        .enumerate()
        .map(|(i, mut item)| {
            item.insert("leaseKey".into(), s(&format!("shardId-{i:012}")));
            item
        })
        .collect();
    kcl_table(&db, "shared", &leases).await;
    let settings = MigrationSettings {
        lock_beat: Duration::from_millis(200),
        lock_timeout: Duration::from_secs(10),
        ..Default::default()
    };
    let (a, b) = tokio::join!(
        prepare_table(&db, "shared", "s", "node-a", &settings),
        prepare_table(&db, "shared", "s", "node-b", &settings),
    );
    let mut outcomes = vec![a.unwrap().outcome, b.unwrap().outcome];
    outcomes.sort_by_key(|o| format!("{o:?}"));
    assert_eq!(outcomes, vec![Outcome::Migrated { rows: 300 }, Outcome::Waited]);
    assert_eq!(positions(&db, "shared").await.len(), 300);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_schema_is_refused_and_left_alone() {
    log();
    let emulators = Emulators::start("migrate-unknown");
    let db = clients(&aws(&emulators)).await.dynamodb;
    create_table(&db, "someone-else", &[("id", KeyType::Hash)]).await;
    db.put_item().table_name("someone-else").item("id", s("x")).item("v", n(1)).send().await.unwrap();
    let e = prepare_table(&db, "someone-else", "s", "node-a", &quick()).await.unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("someone-else") && text.contains("Nothing was changed") && text.contains("leaseKey"),
        "{text}"
    );
    assert_eq!(db.scan().table_name("someone-else").send().await.unwrap().count(), 1);
    assert!(!exists(&db, "someone-else_migration").await);
}

/// An HTTP/1.1 proxy to dynalite that answers DeleteTable of `table` with AccessDeniedException.
async fn deny_delete_table(upstream: String, table: &'static str) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    let upstream = upstream.trim_start_matches("http://").to_owned();
    tokio::spawn(async move {
        loop {
            let Ok((mut client, _)) = listener.accept().await else { return };
            let upstream = upstream.clone();
            tokio::spawn(async move {
                while let Some((head, body)) = read_request(&mut client).await {
                    let target = head
                        .lines()
                        .find(|l| l.to_ascii_lowercase().starts_with("x-amz-target:"))
                        .unwrap_or("")
                        .to_owned();
                    let response = if target.ends_with("DeleteTable")
                        && String::from_utf8_lossy(&body).contains(&format!("\"{table}\""))
                    {
                        let body = format!(
                            "{{\"__type\":\"com.amazonaws.dynamodb.v20120810#AccessDeniedException\",\"message\":\"User: \
                             arn:aws:iam::000000000000:user/nifi is not authorized to perform: dynamodb:DeleteTable on resource: {table}\"}}"
                        );
                        format!("HTTP/1.1 400 Bad Request\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: {}\r\n\r\n{body}", body.len())
                            .into_bytes()
                    } else {
                        forward(&upstream, &head, &body).await
                    };
                    if client.write_all(&response).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    address
}

async fn read_request(stream: &mut tokio::net::TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        let read = stream.read(&mut chunk).await.ok().filter(|r| *r > 0)?;
        buf.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let length: usize = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap_or(0)))
        .unwrap_or(0);
    let mut body = buf[end..].to_vec();
    while body.len() < length {
        let read = stream.read(&mut chunk).await.ok().filter(|r| *r > 0)?;
        body.extend_from_slice(&chunk[..read]);
    }
    Some((head, body))
}

/// Sends one request upstream on its own connection ("Connection: close") and returns the reply.
async fn forward(upstream: &str, head: &str, body: &[u8]) -> Vec<u8> {
    let mut lines: Vec<&str> =
        head.trim_end().split("\r\n").filter(|l| !l.to_ascii_lowercase().starts_with("connection:")).collect();
    lines.push("Connection: close");
    let mut request = (lines.join("\r\n") + "\r\n\r\n").into_bytes();
    request.extend_from_slice(body);
    let mut server = tokio::net::TcpStream::connect(upstream).await.unwrap();
    server.write_all(&request).await.unwrap();
    let mut reply = Vec::new();
    server.read_to_end(&mut reply).await.unwrap();
    reply
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denied_delete_table_names_the_permission_and_loses_nothing() {
    log();
    let emulators = Emulators::start("migrate-denied");
    let db = clients(&aws(&emulators)).await.dynamodb;
    kcl_table(&db, "locked-down", &many_leases()).await;
    let mut denied_settings = aws(&emulators);
    denied_settings.dynamodb_endpoint_override =
        Some(deny_delete_table(emulators.dynamodb.clone(), "locked-down").await.parse().unwrap());
    let denied = clients(&denied_settings).await.dynamodb;

    let e = prepare_table(&denied, "locked-down", "s", "node-a", &quick()).await.unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, LeaseError::AccessDenied { .. }), "{e:?}");
    assert!(text.contains("dynamodb:DeleteTable") && text.contains("Nothing was lost"), "{text}");
    assert_eq!(db.scan().table_name("locked-down").send().await.unwrap().count(), 60, "the KCL table is unchanged");
    assert_eq!(positions(&db, "locked-down_migration").await.len(), 60, "and a complete copy exists");

    // Once the permission is granted, the next start completes the migration.
    let report = prepare_table(&db, "locked-down", "s", "node-a", &quick()).await.unwrap();
    assert_eq!(report.outcome, Outcome::Migrated { rows: 60 });
}

async fn put_one(
    c: &kinesnow_core::aws::AwsClients,
    stream: &str,
    data: &str,
    hash_key: Option<&str>,
) -> (String, String) {
    let mut request =
        c.kinesis.put_record().stream_name(stream).partition_key("k").data(Blob::new(data.as_bytes().to_vec()));
    if let Some(h) = hash_key {
        request = request.explicit_hash_key(h);
    }
    let out = request.send().await.unwrap();
    (out.shard_id().to_owned(), out.sequence_number().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_consumer_resumes_exactly_after_the_kcl_checkpoints() {
    log();
    let emulators = Emulators::start("migrate-resume");
    let c = clients(&aws(&emulators)).await;
    create_stream(&c, "payments", 1).await;
    let mut written = Vec::new();
    for i in 0..10 {
        written.push(put_one(&c, "payments", &format!("plain-{i}"), None).await);
    }
    // A KPL aggregate of 5 sub-records; KCL checkpointed its sub-record 2.
    let aggregate = kinesnow_core::kinesis::deaggregate::aggregate(
        &(0..5).map(|i| ("k".to_owned(), format!("sub-{i}").into_bytes())).collect::<Vec<_>>(),
    );
    let agg = c
        .kinesis
        .put_record()
        .stream_name("payments")
        .partition_key("k")
        .data(Blob::new(aggregate))
        .send()
        .await
        .unwrap();
    for i in 10..15 {
        written.push(put_one(&c, "payments", &format!("plain-{i}"), None).await);
    }
    let shard = written[0].0.clone();
    kcl_table(&c.dynamodb, "payments-app", &[kcl_lease(&shard, agg.sequence_number(), 2, &[])]).await;

    let engine =
        ConsumerEngine::start(settings("payments", "payments-app"), clients(&aws(&emulators)).await).await.unwrap();
    let (got, _) = drain(&engine, 7, true).await;
    let expected: Vec<String> =
        ["sub-3", "sub-4"].iter().map(|s| s.to_string()).chain((10..15).map(|i| format!("plain-{i}"))).collect();
    assert_eq!(got.get(&shard), Some(&expected), "nothing KCL committed is read again, nothing after it skipped");
    assert!(engine.poll(1024 * 1024, Duration::from_millis(1500)).await.is_none());
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_parent_is_not_read_again_and_its_children_start_at_their_beginning() {
    log();
    let emulators = Emulators::start("migrate-split");
    let c = clients(&aws(&emulators)).await;
    create_stream(&c, "split", 1).await;
    for i in 0..10 {
        put_one(&c, "split", &format!("parent-{i}"), None).await;
    }
    let parent = c.kinesis.list_shards().stream_name("split").send().await.unwrap().shards()[0].shard_id().to_owned();
    c.kinesis
        .split_shard()
        .stream_name("split")
        .shard_to_split(&parent)
        .new_starting_hash_key("170141183460469231731687303715884105728")
        .send()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let children: Vec<String> = c
        .kinesis
        .list_shards()
        .stream_name("split")
        .send()
        .await
        .unwrap()
        .shards()
        .iter()
        .filter(|s| s.parent_shard_id() == Some(parent.as_str()))
        .map(|s| s.shard_id().to_owned())
        .collect();
    assert_eq!(children.len(), 2);
    let mut expected: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for i in 0..10 {
        let hash = if i % 2 == 0 { "1" } else { "300000000000000000000000000000000000000" };
        let (shard, _) = put_one(&c, "split", &format!("child-{i}"), Some(hash)).await;
        expected.entry(shard).or_default().push(format!("child-{i}"));
    }
    // KCL read the parent to its end; its children got leases at TRIM_HORIZON and nothing more.
    kcl_table(
        &c.dynamodb,
        "split-app",
        &[
            kcl_lease(&parent, "SHARD_END", 0, &[]),
            kcl_lease(&children[0], "TRIM_HORIZON", 0, &[&parent]),
            kcl_lease(&children[1], "TRIM_HORIZON", 0, &[&parent]),
        ],
    )
    .await;
    // LATEST would skip the children's records if their KCL start position were not kept.
    let mut s = settings("split", "split-app");
    s.initial_position = InitialPosition::Latest;
    let engine = ConsumerEngine::start(s, clients(&aws(&emulators)).await).await.unwrap();
    let (got, _) = drain(&engine, 10, true).await;
    assert_eq!(got, expected, "the children from their beginning; the parent not again");
    assert!(engine.poll(1024 * 1024, Duration::from_millis(1500)).await.is_none());
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_table_left_without_its_source_is_adopted() {
    log();
    let emulators = Emulators::start("migrate-adopt");
    let db = clients(&aws(&emulators)).await.dynamodb;
    // What NiFi's own migrator leaves when stopped after deleting the KCL table: rows in the
    // streamName + shardId schema and its `__migration__` marker with status COMPLETE.
    create_table(&db, "orphan_migration", &[("streamName", KeyType::Hash), ("shardId", KeyType::Range)]).await;
    for (shard, seq) in [("shardId-000000000000", "101"), ("shardId-000000000001", "202")] {
        db.put_item()
            .table_name("orphan_migration")
            .item("streamName", s("orders"))
            .item("shardId", s(shard))
            .item("sequenceNumber", s(seq))
            .send()
            .await
            .unwrap();
    }
    db.put_item()
        .table_name("orphan_migration")
        .item("streamName", s("orders"))
        .item("shardId", s("__migration__"))
        .item("migrationStatus", s("COMPLETE"))
        .send()
        .await
        .unwrap();
    let report = prepare_table(&db, "orphan", "orders", "node-a", &quick()).await.unwrap();
    assert_eq!(report.outcome, Outcome::Migrated { rows: 2 });
    assert!(!exists(&db, "orphan_migration").await);
    let got = positions(&db, "orphan").await;
    assert_eq!(got.len(), 2, "the marker is not copied as a shard: {got:?}");
    assert_eq!(got[&("orders".to_owned(), "shardId-000000000001".to_owned())].0.as_deref(), Some("202"));
}
