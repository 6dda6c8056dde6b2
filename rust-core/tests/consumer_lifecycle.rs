//! The consumer engine's shard lifecycle against real kinesis-local and dynalite, with faults
//! injected into the SDK clients (`support/faults.rs`): a shard rewound or left with an unwritten
//! checkpoint after its end is finished and its children read; a lease lost and taken back has one
//! reader; a failed start leaves no reader; concurrent acks never move a checkpoint backwards; rows
//! written by NiFi's own ConsumeKinesis (no lease counter) are taken; a malformed row is skipped;
//! rows of finished shards gone from the stream are removed.

use crate::support;
#[path = "support/faults.rs"]
mod faults;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_kinesis::primitives::Blob;
use faults::Faults;
use kinesnow_core::aws::{clients, AwsClients};
use kinesnow_core::consumer::{ConsumerEngine, EngineSettings};
use kinesnow_core::kinesis::position::Position;
use kinesnow_core::lease::{Checkpoint, LeaseStore};
use support::{aws, create_stream, log, settings, Emulators};

/// In the upper half of the hash key space: the second child of the first split.
const UPPER: &str = "200000000000000000000000000000000000000";

/// Puts `n` records (`<tag>-<i>`) at `hash`; returns (shard, data, sequence number) in put order.
async fn put_at(c: &AwsClients, stream: &str, tag: &str, hash: &str, n: usize) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for i in 0..n {
        let data = format!("{tag}-{i}");
        let r = c
            .kinesis
            .put_record()
            .stream_name(stream)
            .partition_key("k")
            .explicit_hash_key(hash)
            .data(Blob::new(data.clone()))
            .send()
            .await
            .unwrap();
        out.push((r.shard_id().to_owned(), data, r.sequence_number().to_owned()));
    }
    out
}

fn per_shard(put: &[(String, String, String)]) -> BTreeMap<String, Vec<String>> {
    let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (shard, data, _) in put {
        m.entry(shard.clone()).or_default().push(data.clone());
    }
    m
}

/// Splits `shard` in the middle of its hash key range; returns its two children (lower first).
async fn split_in_two(c: &AwsClients, stream: &str, shard: &str) -> (String, String) {
    let listed = c.kinesis.list_shards().stream_name(stream).send().await.unwrap();
    let range = listed.shards().iter().find(|s| s.shard_id() == shard).unwrap().hash_key_range().unwrap().clone();
    let (start, end): (u128, u128) =
        (range.starting_hash_key().parse().unwrap(), range.ending_hash_key().parse().unwrap());
    let middle = start + (end - start) / 2 + 1;
    c.kinesis
        .split_shard()
        .stream_name(stream)
        .shard_to_split(shard)
        .new_starting_hash_key(middle.to_string())
        .send()
        .await
        .unwrap();
    wait_active(c, stream).await;
    let listed = c.kinesis.list_shards().stream_name(stream).send().await.unwrap();
    let mut children: Vec<(u128, String)> = listed
        .shards()
        .iter()
        .filter(|s| s.parent_shard_id() == Some(shard))
        .map(|s| (s.hash_key_range().unwrap().starting_hash_key().parse().unwrap(), s.shard_id().to_owned()))
        .collect();
    children.sort();
    assert_eq!(children.len(), 2, "{children:?}");
    (children[0].1.clone(), children[1].1.clone())
}

async fn wait_active(c: &AwsClients, stream: &str) {
    for _ in 0..200 {
        let d = c.kinesis.describe_stream_summary().stream_name(stream).send().await.unwrap();
        if d.stream_description_summary().unwrap().stream_status().as_str() == "ACTIVE" {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("stream {stream} stayed busy");
}

async fn wait_until<F: std::future::Future<Output = bool>>(what: &str, limit: Duration, mut check: impl FnMut() -> F) {
    let deadline = tokio::time::Instant::now() + limit;
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "timed out after {limit:?} waiting until {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn rows(c: &AwsClients, app: &str, stream: &str) -> BTreeMap<String, (Checkpoint, Option<String>)> {
    let store = LeaseStore::new(c.dynamodb.clone(), app, stream);
    store.rows().await.unwrap().into_iter().map(|(id, cp, owner)| (id, (cp, owner))).collect()
}

async fn put_row(c: &AwsClients, table: &str, item: &[(&str, AttributeValue)]) {
    let item: HashMap<String, AttributeValue> = item.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    c.dynamodb.put_item().table_name(table).set_item(Some(item)).send().await.unwrap();
}

fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_owned())
}

/// A parent read to its end, all its records in flight: the fixtures of the two shard-end tests.
struct EndedParent {
    _emulators: Emulators,
    c: AwsClients,
    faults: Faults,
    engine: ConsumerEngine,
    parent: Vec<(String, String, String)>,
    children: Vec<(String, String, String)>,
    batches: Vec<i64>,
}

async fn ended_parent(name: &str) -> EndedParent {
    let emulators = Emulators::start(name);
    let c = clients(&aws(&emulators)).await;
    create_stream(&c, name, 1).await;
    let parent = put_at(&c, name, "parent", "1", 20).await;
    let (low, high) = split_in_two(&c, name, &parent[0].0).await;
    let mut children = put_at(&c, name, "low", "1", 5).await;
    children.extend(put_at(&c, name, "high", UPPER, 5).await);
    assert_eq!((children[0].0.as_str(), children[9].0.as_str()), (low.as_str(), high.as_str()));
    let faults = Faults::default();
    let mut engine_clients = clients(&aws(&emulators)).await;
    faults.install(&mut engine_clients);
    let engine = ConsumerEngine::start(settings(name, &format!("{name}-app")), engine_clients).await.unwrap();
    let (got, batches) = support::drain_within(&engine, 20, false, Duration::from_secs(15)).await;
    assert_eq!(got, per_shard(&parent), "the parent's records, children not yet readable");
    // The reader reaches the parent's end (GetRecords without a next iterator) and returns.
    tokio::time::sleep(Duration::from_secs(2)).await;
    EndedParent { _emulators: emulators, c, faults, engine, parent, children, batches }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nack_after_the_shard_end_reads_the_shard_again_then_its_children() {
    log();
    let f = ended_parent("nack-end").await;
    for id in &f.batches {
        f.engine.nack(*id).unwrap();
    }
    let (again, _) = support::drain_within(&f.engine, 30, true, Duration::from_secs(15)).await;
    let mut expected = per_shard(&f.parent);
    expected.extend(per_shard(&f.children));
    assert_eq!(again, expected, "the rewound parent is read again from its checkpoint, then its children");
    f.engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_final_checkpoint_is_retried_then_the_children_are_read() {
    log();
    let f = ended_parent("final-checkpoint").await;
    f.faults.fail("UpdateItem", &["sequenceNumber = :seq"]);
    for id in &f.batches {
        f.engine.ack(*id).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(f.faults.failed("UpdateItem") >= 1, "the final checkpoint write failed");
    f.faults.clear();
    let (got, _) = support::drain_within(&f.engine, 10, true, Duration::from_secs(15)).await;
    assert_eq!(
        got,
        per_shard(&f.children),
        "once the checkpoint is written the parent finishes and its children are read"
    );
    let parent_id = &f.parent[0].0;
    let last = Position::new(f.parent.last().unwrap().2.clone(), None);
    assert_eq!(
        rows(&f.c, "final-checkpoint-app", "final-checkpoint").await[parent_id].0,
        Checkpoint::ShardEnd(Some(last))
    );
    f.engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_lost_and_taken_back_by_the_same_engine_has_one_reader() {
    log();
    let emulators = Emulators::start("retake");
    let c = clients(&aws(&emulators)).await;
    create_stream(&c, "retake", 1).await;
    let engine =
        ConsumerEngine::start(settings("retake", "retake-app"), clients(&aws(&emulators)).await).await.unwrap();
    let shard = engine.leased_shards().into_iter().next().expect("the shard is leased");
    let store = LeaseStore::new(c.dynamodb.clone(), "retake-app", "retake");
    let counter = || async {
        let view = store.scan().await.unwrap();
        view.leases[0].holder.as_ref().filter(|h| h.owner == engine.owner()).map(|h| h.counter)
    };
    for _ in 0..3 {
        let before = counter().await.expect("held");
        // Another node took the lease and gave it back between two of this engine's scans.
        c.dynamodb
            .update_item()
            .table_name("retake-app")
            .key("streamName", s("retake"))
            .key("shardId", s(&shard))
            .update_expression("ADD leaseCounter :one REMOVE leaseOwner")
            .expression_attribute_values(":one", AttributeValue::N("1".into()))
            .send()
            .await
            .unwrap();
        wait_until("the engine takes the lease back", Duration::from_secs(10), || async {
            counter().await.is_some_and(|c| c > before + 1)
        })
        .await;
    }
    let put = put_at(&c, "retake", "r", "1", 30).await;
    let (got, _) = support::drain_within(&engine, 30, true, Duration::from_secs(10)).await;
    let (more, _) = support::drain_within(&engine, 1, true, Duration::from_millis(1500)).await;
    assert_eq!(got, per_shard(&put), "every record once, in order: one reader fills the buffer");
    assert!(more.is_empty(), "nothing delivered twice: {more:?}");
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_start_leaves_no_reader_running_and_no_lease_held() {
    log();
    let emulators = Emulators::start("failed-start");
    let c = clients(&aws(&emulators)).await;
    create_stream(&c, "failed-start", 2).await;
    let faults = Faults::default();
    let mut engine_clients = clients(&aws(&emulators)).await;
    faults.install(&mut engine_clients);
    // The first lease is taken (its reader starts), the second take fails: the start fails.
    faults.fail_after("UpdateItem", &["attribute_not_exists(leaseOwner)"], 1);
    let started = ConsumerEngine::start(settings("failed-start", "failed-start-app"), engine_clients).await;
    assert!(started.is_err(), "the start fails");
    faults.clear();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let calls = faults.calls("GetRecords") + faults.calls("GetShardIterator");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        faults.calls("GetRecords") + faults.calls("GetShardIterator"),
        calls,
        "no reader runs after the failed start"
    );
    for (shard, (_, owner)) in rows(&c, "failed-start-app", "failed-start").await {
        assert_eq!(owner, None, "the lease of {shard} taken during the failed start is given back");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_acks_of_one_shard_never_move_its_checkpoint_backwards() {
    log();
    let emulators = Emulators::start("concurrent-acks");
    let c = clients(&aws(&emulators)).await;
    create_stream(&c, "acks", 1).await;
    let put = put_at(&c, "acks", "a", "1", 20).await;
    let faults = Faults::default();
    let mut engine_clients = clients(&aws(&emulators)).await;
    faults.install(&mut engine_clients);
    let engine = Arc::new(ConsumerEngine::start(settings("acks", "acks-app"), engine_clients).await.unwrap());
    tokio::time::sleep(Duration::from_secs(1)).await; // every record is buffered
    let first = engine.poll(700, Duration::from_secs(5)).await.unwrap();
    let second = engine.poll(700, Duration::from_secs(5)).await.unwrap();
    let last = second.shards[0].records.last().unwrap().sequence_number.clone();
    assert!(first.shards[0].records.len() < 20 && !second.shards[0].records.is_empty());
    // The first batch's checkpoint is slow to reach DynamoDB; the second is acked meanwhile.
    faults.delay_next("UpdateItem", &["sequenceNumber = :seq"], Duration::from_millis(800));
    let e = engine.clone();
    let a = tokio::spawn(async move { e.ack(first.id).await.unwrap() });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let e = engine.clone();
    let b = tokio::spawn(async move { e.ack(second.id).await.unwrap() });
    a.await.unwrap();
    b.await.unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await; // both writes have landed
    let row = rows(&c, "acks-app", "acks").await.into_values().next().unwrap().0;
    assert_eq!(
        row,
        Checkpoint::At(Position::new(last.clone(), None)),
        "the checkpoint is the later batch's last record"
    );
    assert_eq!(put.len(), 20);
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_written_by_nifis_own_consume_kinesis_without_lease_counter_is_taken_over() {
    log();
    let emulators = Emulators::start("no-counter");
    let c = clients(&aws(&emulators)).await;
    create_stream(&c, "legacy", 1).await;
    let put = put_at(&c, "legacy", "l", "1", 20).await;
    kinesnow_core::lease::table::ensure_table(&c.dynamodb, "legacy-app", Duration::from_secs(30)).await.unwrap();
    // NiFi's ConsumeKinesis: owner and position, no lease counter; its node is gone.
    put_row(
        &c,
        "legacy-app",
        &[
            ("streamName", s("legacy")),
            ("shardId", s(&put[0].0)),
            ("leaseOwner", s("nifi-node-1")),
            ("sequenceNumber", s(&put[9].2)),
            ("lastUpdateTimestamp", AttributeValue::N("1700000000000".into())),
        ],
    )
    .await;
    let mut settings: EngineSettings = settings("legacy", "legacy-app");
    settings.failover_timeout = Duration::from_secs(2);
    settings.heartbeat_interval = Duration::from_millis(500);
    settings.scan_interval = Duration::from_millis(200);
    let engine = ConsumerEngine::start(settings, clients(&aws(&emulators)).await).await.unwrap();
    let (got, _) = support::drain_within(&engine, 10, true, Duration::from_secs(15)).await;
    assert_eq!(got, per_shard(&put[10..]), "taken from the silent owner, read from its checkpoint on");
    engine.stop().await;
}

/// WARN and ERROR events of every test of this binary.
static WARNINGS: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Capture;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        struct Message(String);
        impl tracing::field::Visit for Message {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.0 = format!("{value:?}");
                }
            }
        }
        if *event.metadata().level() <= tracing::Level::WARN {
            let mut m = Message(String::new());
            event.record(&mut m);
            WARNINGS.lock().unwrap().push(m.0);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_row_is_skipped_with_a_warning_and_the_other_shards_are_read() {
    use tracing_subscriber::layer::SubscriberExt;
    let _ = tracing::subscriber::set_global_default(tracing_subscriber::registry().with(Capture));
    let emulators = Emulators::start("malformed");
    let c = clients(&aws(&emulators)).await;
    create_stream(&c, "malformed", 2).await;
    let low = put_at(&c, "malformed", "low", "1", 10).await;
    let high = put_at(&c, "malformed", "high", UPPER, 10).await;
    kinesnow_core::lease::table::ensure_table(&c.dynamodb, "malformed-app", Duration::from_secs(30)).await.unwrap();
    put_row(
        &c,
        "malformed-app",
        &[("streamName", s("malformed")), ("shardId", s(&low[0].0)), ("sequenceNumber", s("not-a-number"))],
    )
    .await;
    let engine = ConsumerEngine::start(settings("malformed", "malformed-app"), clients(&aws(&emulators)).await)
        .await
        .expect("one malformed row does not stop the engine");
    let (got, _) = support::drain_within(&engine, 10, true, Duration::from_secs(15)).await;
    let (more, _) = support::drain_within(&engine, 1, true, Duration::from_secs(1)).await;
    assert_eq!(got, per_shard(&high), "the well-formed shard is read");
    assert!(more.is_empty(), "the malformed row's shard is not read from a guessed position: {more:?}");
    let warnings = WARNINGS.lock().unwrap().clone();
    assert!(
        warnings.iter().any(|w| w.contains(&low[0].0) && w.contains("not-a-number")),
        "a warning names the row and what is wrong with it: {warnings:?}"
    );
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_of_finished_shards_gone_from_the_stream_are_removed() {
    log();
    let emulators = Emulators::start("row-growth");
    let c = clients(&aws(&emulators)).await;
    create_stream(&c, "growth", 1).await;
    let faults = Faults::default();
    let mut engine_clients = clients(&aws(&emulators)).await;
    faults.install(&mut engine_clients);
    let mut growth = settings("growth", "growth-app");
    growth.shard_refresh = Duration::from_millis(500);
    let engine = ConsumerEngine::start(growth, engine_clients).await.unwrap();
    let mut parent = engine.leased_shards().into_iter().next().unwrap();
    for round in 0..3 {
        put_at(&c, "growth", "p", "1", 5).await;
        let (low, upper) = split_in_two(&c, "growth", &parent).await;
        // Only the lower child gets records (and so a checkpoint); the upper one stays empty.
        assert_eq!(put_at(&c, "growth", "c", "1", 5).await[0].0, low);
        let (got, _) = support::drain_within(&engine, 10, true, Duration::from_secs(15)).await;
        assert_eq!(got.values().map(Vec::len).sum::<usize>(), 10, "round {round}: {got:?}");
        let before = rows(&c, "growth-app", "growth").await;
        assert!(matches!(before[&parent].0, Checkpoint::ShardEnd(_)), "round {round}: {before:?}");
        // The stream's retention passes: the finished parent leaves the listing.
        faults.hide_shards(&[&parent]);
        wait_until("the parent's row is removed", Duration::from_secs(10), || async {
            !rows(&c, "growth-app", "growth").await.contains_key(&parent)
        })
        .await;
        let after = rows(&c, "growth-app", "growth").await;
        assert_eq!(after.len(), round + 2, "round {round}: only the open shards' rows are left: {after:?}");
        assert!(after.values().all(|(cp, _)| !matches!(cp, Checkpoint::ShardEnd(_))), "round {round}: {after:?}");
        // The empty child keeps where it must start: its parent was read to the end.
        let item = c
            .dynamodb
            .get_item()
            .table_name("growth-app")
            .key("streamName", s("growth"))
            .key("shardId", s(&upper))
            .consistent_read(true)
            .send()
            .await
            .unwrap();
        assert_eq!(item.item().and_then(|i| i.get("startPosition")), Some(&s("TRIM_HORIZON")), "round {round}");
        parent = low;
    }
    engine.stop().await;
}

/// Issue 20 §3: a caught-up consumer polls each shard about once a second (KCL's default idle time),
/// not four times a second: over 6 s, 4 caught-up shards make at most 4 × (6 + 1) GetRecords calls.
/// With the earlier 250 ms idle delay they made about 4 × 24 (the test failed: 96 > 28).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caught_up_consumer_polls_each_shard_about_once_a_second() {
    log();
    let emulators = Emulators::start("idle-cadence");
    let c = clients(&aws(&emulators)).await;
    create_stream(&c, "idle-cadence", 4).await;
    let faults = Faults::default();
    let mut engine_clients = clients(&aws(&emulators)).await;
    faults.install(&mut engine_clients);
    let engine =
        ConsumerEngine::start(settings("idle-cadence", "idle-cadence-app"), engine_clients).await.expect("starts");
    wait_until("all four shards are leased", Duration::from_secs(20), || async { engine.leased_shards().len() == 4 })
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await; // every reader has made its first, empty, read
    let before = faults.calls("GetRecords");
    tokio::time::sleep(Duration::from_secs(6)).await;
    let calls = faults.calls("GetRecords") - before;
    assert!(calls >= 4 * 4, "every shard is still polled while idle: {calls} calls in 6 s");
    assert!(calls <= 4 * 7, "a caught-up shard is polled about once a second: {calls} calls in 6 s over 4 shards");
    engine.stop().await;
}

/// Issue 34, item 5: a lease table deleted and made again while NiFi runs (a reset) is told apart
/// by its creation time, which the engine gives the feedback board at its start (so the old
/// table's higher lease counters supersede nothing of the new table's leases).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_table_made_anew_is_told_apart_by_its_creation_time() {
    log();
    let emulators = Emulators::start("table-epoch");
    let c = clients(&aws(&emulators)).await;
    create_stream(&c, "epoch", 1).await;
    let tracked = EngineSettings {
        failover_position: kinesnow_core::consumer::resume::FailoverPosition::SnowflakeCommit,
        ..settings("epoch", "epoch-app")
    };
    let board = tracked.board.clone();
    let engine = ConsumerEngine::start(tracked.clone(), clients(&aws(&emulators)).await).await.unwrap();
    let key = engine.link().cloned().expect("SNOWFLAKE_COMMIT links the engine to the board");
    engine.stop().await;
    let first = kinesnow_core::lease::table::created_at(&c.dynamodb, "epoch-app").await.unwrap().expect("a time");
    assert!(!board.lock().table_created(&key, first), "the engine gave the board this table's time");

    tokio::time::sleep(Duration::from_millis(1100)).await; // creation times are whole seconds in dynalite
    c.dynamodb.delete_table().table_name("epoch-app").send().await.unwrap();
    wait_until("the table is gone", Duration::from_secs(20), || async {
        c.dynamodb.describe_table().table_name("epoch-app").send().await.is_err()
    })
    .await;
    let engine = ConsumerEngine::start(tracked, clients(&aws(&emulators)).await).await.unwrap();
    engine.stop().await;
    let second = kinesnow_core::lease::table::created_at(&c.dynamodb, "epoch-app").await.unwrap().expect("a time");
    assert!(second > first, "a new table, a new time: {first} then {second}");
    assert!(!board.lock().table_created(&key, second), "the engine gave the board the new time");
}

/// Issue 34, item 7: every start took a new heartbeat row (`__node__<owner>`) and every stop left it
/// as a tombstone (no DeleteItem in Snowflake's policy), so the lease table, and every node's
/// once-a-second scan, grew with each restart. Heartbeat rows are slots now: a start takes the
/// lowest slot no live row holds, and the owner id (with its PID) stays new on every start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarts_take_over_free_heartbeat_slots_so_the_table_does_not_grow() {
    log();
    let emulators = Emulators::start("node-slots");
    let c = clients(&aws(&emulators)).await;
    create_stream(&c, "restarts", 2).await;
    let node_rows = || async {
        let out = c
            .dynamodb
            .query()
            .table_name("restarts-app")
            .consistent_read(true)
            .key_condition_expression("streamName = :s AND begins_with(shardId, :n)")
            .expression_attribute_values(":s", AttributeValue::S("restarts".into()))
            .expression_attribute_values(":n", AttributeValue::S("__node__".into()))
            .send()
            .await
            .unwrap();
        out.items().to_vec()
    };
    let mut owners = Vec::new();
    for _ in 0..4 {
        let engine =
            ConsumerEngine::start(settings("restarts", "restarts-app"), clients(&aws(&emulators)).await).await.unwrap();
        owners.push(engine.owner().to_owned());
        engine.stop().await;
    }
    let rows = node_rows().await;
    assert_eq!(rows.len(), 1, "one heartbeat row (a tombstone now) after four starts and stops: {rows:?}");
    assert!(rows[0].contains_key("removedAt"), "a stopped node's row is a tombstone: {rows:?}");
    owners.sort();
    owners.dedup();
    assert_eq!(owners.len(), 4, "every start is a new owner, as operators and tests read a JVM from it");
    // Two nodes at once need two rows; restarts after that take those two over.
    let a = ConsumerEngine::start(settings("restarts", "restarts-app"), clients(&aws(&emulators)).await).await.unwrap();
    let b = ConsumerEngine::start(settings("restarts", "restarts-app"), clients(&aws(&emulators)).await).await.unwrap();
    let live = node_rows().await;
    assert_eq!(live.iter().filter(|r| !r.contains_key("removedAt")).count(), 2, "two live rows: {live:?}");
    a.stop().await;
    b.stop().await;
    for _ in 0..3 {
        let engine =
            ConsumerEngine::start(settings("restarts", "restarts-app"), clients(&aws(&emulators)).await).await.unwrap();
        engine.stop().await;
    }
    assert_eq!(node_rows().await.len(), 2, "two nodes ran at once: two rows, whatever the restarts");
}
