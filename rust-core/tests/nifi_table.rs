//! Switching between NiFi's own ConsumeKinesis (2.9+, `nifi-aws-kinesis`) and ours on one
//! Application Name, against real kinesis-local and dynalite.
//!
//! NiFi's NAR cannot run here, so its side is a small model that sends the very DynamoDB and
//! Kinesis requests NiFi's code sends (same update and condition expressions, same attribute
//! names and types), each helper naming the method of NiFi's code it follows:
//! `KinesisShardManager` (leases, heartbeats, checkpoints), `CheckpointTableUtils` (table, row
//! prefixes) and `PollingKinesisClient.getShardIterator` (where reading resumes). DynamoDB itself
//! evaluates NiFi's conditions on our rows, so a row ours writes that NiFi could not take shows up
//! as a refused request, not as a guess.
//!
//! - NiFi -> ours: ours resumes at NiFi's checkpoints, never counts NiFi's `__node__#<uuid>` rows as
//!   nodes (nor removes them), never takes a NiFi lease before its `leaseExpiry`, takes it after,
//!   and never takes a lease NiFi renewed after ours read the row.
//! - ours -> NiFi: after a clean stop, and after a crash once the `leaseExpiry` ours wrote has
//!   passed, NiFi's conditional take succeeds and NiFi resumes right after our last checkpoint;
//!   while ours runs, NiFi's take of our leases is refused and NiFi counts none of our nodes.

use crate::support;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType, TableStatus,
};
use aws_sdk_kinesis::primitives::Blob;
use aws_sdk_kinesis::types::ShardIteratorType;
use kinesnow_core::aws::{clients, AwsClients};
use kinesnow_core::consumer::{ConsumerEngine, EngineSettings};
use kinesnow_core::lease::{now_ms, Checkpoint, LeaseStore, LoadedOnTake};
use support::{aws, create_stream, log, settings, Emulators};

type Item = HashMap<String, AttributeValue>;

/// `KinesisShardManager.DEFAULT_LEASE_DURATION_MILLIS`.
const NIFI_LEASE_MS: i64 = 30_000;

fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_owned())
}

fn n(v: i64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

/// NiFi's side of one table: the requests of its code, with NiFi's clock passed in (`now`, ms).
struct Nifi<'a> {
    c: &'a AwsClients,
    table: &'a str,
    stream: &'a str,
}

impl Nifi<'_> {
    fn key(&self, shard: &str) -> Item {
        HashMap::from([("streamName".to_owned(), s(self.stream)), ("shardId".to_owned(), s(shard))])
    }

    /// `CheckpointTableUtils.createNewSchemaTable`: `streamName` (HASH, S) + `shardId` (RANGE, S),
    /// on-demand; then `waitForTableActive`.
    async fn create_table(&self) {
        let attr = |name: &str| {
            AttributeDefinition::builder().attribute_name(name).attribute_type(ScalarAttributeType::S).build().unwrap()
        };
        let key = |name: &str, kind| KeySchemaElement::builder().attribute_name(name).key_type(kind).build().unwrap();
        self.c
            .dynamodb
            .create_table()
            .table_name(self.table)
            .key_schema(key("streamName", KeyType::Hash))
            .key_schema(key("shardId", KeyType::Range))
            .attribute_definitions(attr("streamName"))
            .attribute_definitions(attr("shardId"))
            .billing_mode(BillingMode::PayPerRequest)
            .send()
            .await
            .unwrap();
        for _ in 0..100 {
            let d = self.c.dynamodb.describe_table().table_name(self.table).send().await.unwrap();
            if d.table().and_then(|t| t.table_status()) == Some(&TableStatus::Active) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("table {} never became ACTIVE", self.table);
    }

    /// `KinesisShardManager.tryAcquireLease`: true when DynamoDB accepted the take.
    async fn take(&self, shard: &str, node: &str, now: i64) -> bool {
        let result = self
            .c
            .dynamodb
            .update_item()
            .table_name(self.table)
            .set_key(Some(self.key(shard)))
            .update_expression("SET leaseOwner = :owner, leaseExpiry = :exp, lastUpdateTimestamp = :ts")
            .condition_expression("attribute_not_exists(leaseOwner) OR leaseOwner = :owner OR leaseExpiry < :now")
            .expression_attribute_values(":owner", s(node))
            .expression_attribute_values(":exp", n(now + NIFI_LEASE_MS))
            .expression_attribute_values(":now", n(now))
            .expression_attribute_values(":ts", n(now))
            .send()
            .await;
        match result {
            Ok(_) => true,
            Err(e) if e.as_service_error().is_some_and(|e| e.is_conditional_check_failed_exception()) => false,
            Err(e) => panic!("NiFi's take of {shard}: {e:?}"),
        }
    }

    /// `KinesisShardManager.persistIfHigher`: the checkpoint, a string of digits, also pushes the
    /// lease's expiry on.
    async fn checkpoint(&self, shard: &str, node: &str, sequence: &str, now: i64) {
        self.c
            .dynamodb
            .update_item()
            .table_name(self.table)
            .set_key(Some(self.key(shard)))
            .update_expression("SET sequenceNumber = :seq, lastUpdateTimestamp = :ts, leaseExpiry = :exp")
            .condition_expression("leaseOwner = :owner")
            .expression_attribute_values(":seq", s(sequence))
            .expression_attribute_values(":ts", n(now))
            .expression_attribute_values(":exp", n(now + NIFI_LEASE_MS))
            .expression_attribute_values(":owner", s(node))
            .send()
            .await
            .unwrap();
    }

    /// `KinesisShardManager.releaseLease`.
    async fn release(&self, shard: &str, node: &str) {
        self.c
            .dynamodb
            .update_item()
            .table_name(self.table)
            .set_key(Some(self.key(shard)))
            .update_expression("REMOVE leaseOwner, leaseExpiry")
            .condition_expression("leaseOwner = :owner")
            .expression_attribute_values(":owner", s(node))
            .send()
            .await
            .unwrap();
    }

    /// `KinesisShardManager.updateNodeHeartbeat`: row `__node__#<nodeId>`.
    async fn heartbeat(&self, node: &str, now: i64) {
        self.c
            .dynamodb
            .update_item()
            .table_name(self.table)
            .set_key(Some(self.key(&format!("__node__#{node}"))))
            .update_expression("SET nodeHeartbeat = :heartbeat, lastUpdateTimestamp = :ts")
            .expression_attribute_values(":heartbeat", n(now))
            .expression_attribute_values(":ts", n(now))
            .send()
            .await
            .unwrap();
    }

    /// `KinesisShardManager.releaseAllLeases`, its last step: the node row keeps only its key.
    async fn clear_heartbeat(&self, node: &str) {
        self.c
            .dynamodb
            .update_item()
            .table_name(self.table)
            .set_key(Some(self.key(&format!("__node__#{node}"))))
            .update_expression("REMOVE nodeHeartbeat, lastUpdateTimestamp")
            .send()
            .await
            .unwrap();
    }

    /// `KinesisShardManager.queryAllLeaseItems`: shard rows by shard id, NiFi's node rows and the
    /// migration marker left out (and nothing else).
    async fn lease_items(&self) -> BTreeMap<String, Item> {
        self.query()
            .await
            .into_iter()
            .filter_map(|item| {
                let id = item.get("shardId")?.as_s().ok()?.clone();
                (!id.starts_with("__node__#") && id != "__migration__").then_some((id, item))
            })
            .collect()
    }

    /// `KinesisShardManager.countActiveNodes`: rows beginning `__node__#` whose `nodeHeartbeat`
    /// is within lease duration + refresh interval (40 s) of now; at least 1.
    async fn active_nodes(&self, now: i64) -> usize {
        let live = self
            .query()
            .await
            .iter()
            .filter(|i| i.get("shardId").and_then(|v| v.as_s().ok()).is_some_and(|id| id.starts_with("__node__#")))
            .filter_map(|i| i.get("nodeHeartbeat").and_then(|v| v.as_n().ok()).and_then(|v| v.parse::<i64>().ok()))
            .filter(|beat| now <= beat + 40_000)
            .count();
        live.max(1)
    }

    /// `refreshLeasesIfNecessary`: a listed shard is available when its row has no `leaseOwner`,
    /// or a `leaseExpiry` (0 when absent) below now.
    async fn available(&self, shard: &str, now: i64) -> bool {
        let items = self.lease_items().await;
        match items.get(shard) {
            Some(item) if item.contains_key("leaseOwner") => {
                let expiry = item.get("leaseExpiry").map_or(0, |v| v.as_n().unwrap().parse::<i64>().unwrap());
                expiry < now
            }
            _ => true,
        }
    }

    /// `KinesisShardManager.readCheckpoint`: `sequenceNumber` (S), used only if all digits.
    async fn read_checkpoint(&self, shard: &str) -> Option<String> {
        let out = self
            .c
            .dynamodb
            .get_item()
            .table_name(self.table)
            .set_key(Some(self.key(shard)))
            .consistent_read(true)
            .send()
            .await
            .unwrap();
        let value = out.item()?.get("sequenceNumber")?.as_s().ok()?.clone();
        (!value.is_empty() && value.chars().all(|c| c.is_ascii_digit())).then_some(value)
    }

    /// `PollingKinesisClient.getShardIterator` (and `EnhancedFanOutClient`'s starting position):
    /// AFTER_SEQUENCE_NUMBER the checkpoint, else TRIM_HORIZON (the Initial Stream Position used
    /// here); then the records a GetRecords returns.
    async fn records_from(&self, shard: &str) -> Vec<String> {
        let mut request = self.c.kinesis.get_shard_iterator().stream_name(self.stream).shard_id(shard);
        request = match self.read_checkpoint(shard).await {
            Some(seq) => {
                request.shard_iterator_type(ShardIteratorType::AfterSequenceNumber).starting_sequence_number(seq)
            }
            None => request.shard_iterator_type(ShardIteratorType::TrimHorizon),
        };
        let iterator = request.send().await.unwrap().shard_iterator().unwrap().to_owned();
        let out = self.c.kinesis.get_records().shard_iterator(iterator).send().await.unwrap();
        out.records().iter().map(|r| String::from_utf8(r.data().as_ref().to_vec()).unwrap()).collect()
    }

    async fn query(&self) -> Vec<Item> {
        let out = self
            .c
            .dynamodb
            .query()
            .table_name(self.table)
            .consistent_read(true)
            .key_condition_expression("streamName = :streamName")
            .expression_attribute_values(":streamName", s(self.stream))
            .send()
            .await
            .unwrap();
        out.items().to_vec()
    }

    async fn row(&self, shard: &str) -> Option<Item> {
        let out = self
            .c
            .dynamodb
            .get_item()
            .table_name(self.table)
            .set_key(Some(self.key(shard)))
            .consistent_read(true)
            .send()
            .await
            .unwrap();
        out.item().cloned()
    }
}

/// Shard ids in listing order, with a hash key inside each.
async fn shards(c: &AwsClients, stream: &str) -> Vec<(String, String)> {
    let out = c.kinesis.list_shards().stream_name(stream).send().await.unwrap();
    out.shards()
        .iter()
        .map(|sh| (sh.shard_id().to_owned(), sh.hash_key_range().unwrap().starting_hash_key().to_owned()))
        .collect()
}

/// Puts `n` records `<tag>-<i>` at `hash`; their sequence numbers.
async fn put(c: &AwsClients, stream: &str, hash: &str, tag: &str, from: usize, n: usize) -> Vec<String> {
    let mut seqs = Vec::new();
    for i in from..from + n {
        let r = c
            .kinesis
            .put_record()
            .stream_name(stream)
            .partition_key("k")
            .explicit_hash_key(hash)
            .data(Blob::new(format!("{tag}-{i}")))
            .send()
            .await
            .unwrap();
        seqs.push(r.sequence_number().to_owned());
    }
    seqs
}

fn names(tag: &str, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("{tag}-{i}")).collect()
}

fn quick(stream: &str, app: &str) -> EngineSettings {
    let mut s = settings(stream, app);
    s.failover_timeout = Duration::from_secs(1);
    s.heartbeat_interval = Duration::from_millis(250);
    s.scan_interval = Duration::from_millis(100);
    s
}

/// Polls and acks until `n` records arrived or `limit` passed: per shard the data, with the wall
/// time (ms) of each shard's first delivery.
async fn drain(
    engine: &ConsumerEngine,
    n: usize,
    limit: Duration,
) -> (BTreeMap<String, Vec<String>>, BTreeMap<String, i64>) {
    let mut got: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut first: BTreeMap<String, i64> = BTreeMap::new();
    let deadline = tokio::time::Instant::now() + limit;
    while got.values().map(Vec::len).sum::<usize>() < n && tokio::time::Instant::now() < deadline {
        if let Some(batch) = engine.poll(1024 * 1024, Duration::from_millis(100)).await {
            for sh in &batch.shards {
                first.entry(sh.shard_id.clone()).or_insert_with(now_ms);
                got.entry(sh.shard_id.clone())
                    .or_default()
                    .extend(sh.records.iter().map(|r| String::from_utf8(r.data.clone()).unwrap()));
            }
            engine.ack(batch.id).await.unwrap();
        }
    }
    (got, first)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ours_on_a_table_nifi_wrote_resumes_at_its_checkpoints_and_waits_for_its_live_leases() {
    log();
    let emulators = Emulators::start("nifi-to-ours");
    let c = clients(&aws(&emulators)).await;
    create_stream(&c, "nifi", 4).await;
    let listed = shards(&c, "nifi").await;
    let mut seqs = Vec::new();
    for (i, (_, hash)) in listed.iter().enumerate() {
        seqs.push(put(&c, "nifi", hash, &format!("s{i}"), 0, 10).await);
    }
    let id = |i: usize| listed[i].0.as_str();
    let nifi = Nifi { c: &c, table: "nifi-app", stream: "nifi" };
    nifi.create_table().await;
    let t0 = now_ms();
    // Node A crashed 2 min ago: shard 0 checkpointed at s0-4, its lease expired a minute ago.
    nifi.heartbeat("a0a0a0a0-0000-4000-8000-00000000000a", t0 - 120_000).await;
    assert!(nifi.take(id(0), "a0a0a0a0-0000-4000-8000-00000000000a", t0 - 90_000).await);
    nifi.checkpoint(id(0), "a0a0a0a0-0000-4000-8000-00000000000a", &seqs[0][4], t0 - 90_000).await;
    // Node B stopped cleanly: shard 1 checkpointed at s1-2 and released, its heartbeat cleared.
    nifi.heartbeat("b0b0b0b0-0000-4000-8000-00000000000b", t0 - 5_000).await;
    assert!(nifi.take(id(1), "b0b0b0b0-0000-4000-8000-00000000000b", t0 - 5_000).await);
    nifi.checkpoint(id(1), "b0b0b0b0-0000-4000-8000-00000000000b", &seqs[1][2], t0 - 5_000).await;
    nifi.release(id(1), "b0b0b0b0-0000-4000-8000-00000000000b").await;
    nifi.clear_heartbeat("b0b0b0b0-0000-4000-8000-00000000000b").await;
    // Node C is alive (beats now) but stops renewing: shard 2, at s2-3, is its lease for 8 s more.
    let c_expiry = t0 + 8_000;
    nifi.heartbeat("c0c0c0c0-0000-4000-8000-00000000000c", t0).await;
    assert!(nifi.take(id(2), "c0c0c0c0-0000-4000-8000-00000000000c", c_expiry - NIFI_LEASE_MS).await);
    nifi.checkpoint(id(2), "c0c0c0c0-0000-4000-8000-00000000000c", &seqs[2][3], c_expiry - NIFI_LEASE_MS).await;
    // Shard 3 has no row. NiFi writes its migration marker into `<app>_migration` and
    // `copyCheckpointItems` leaves it out of the main table; it is put here too, to show that ours
    // leaves such a row alone.
    let marker: Item = HashMap::from([
        ("streamName".to_owned(), s("nifi")),
        ("shardId".to_owned(), s("__migration__")),
        ("migrationStatus".to_owned(), s("COMPLETE")),
        ("migrationCompletedAt".to_owned(), n(t0 - 200_000)),
        ("lastUpdateTimestamp".to_owned(), n(t0 - 200_000)),
    ]);
    c.dynamodb.put_item().table_name("nifi-app").set_item(Some(marker.clone())).send().await.unwrap();
    let nifi_rows: Vec<(String, Option<Item>)> = {
        let mut v = Vec::new();
        for node in [
            "a0a0a0a0-0000-4000-8000-00000000000a",
            "b0b0b0b0-0000-4000-8000-00000000000b",
            "c0c0c0c0-0000-4000-8000-00000000000c",
        ] {
            let key = format!("__node__#{node}");
            v.push((key.clone(), nifi.row(&key).await));
        }
        v
    };

    let engine = ConsumerEngine::start(quick("nifi", "nifi-app"), clients(&aws(&emulators)).await).await.unwrap();
    let mut first_pass = engine.leased_shards();
    first_pass.sort();
    assert_eq!(
        first_pass,
        vec![id(1).to_owned(), id(3).to_owned()],
        "alone (NiFi's node rows are not nodes of ours), the first pass takes every free shard"
    );
    let store = LeaseStore::new(c.dynamodb.clone(), "nifi-app", "nifi");
    let view = store.scan().await.unwrap();
    assert_eq!(
        view.nodes.iter().map(|b| b.owner.as_str()).collect::<Vec<_>>(),
        vec![engine.owner()],
        "only our node rows are nodes"
    );

    let (got, first) = drain(&engine, 5 + 7 + 6 + 10, Duration::from_secs(25)).await;
    let expected: BTreeMap<String, Vec<String>> = BTreeMap::from([
        (id(0).to_owned(), names("s0", 5..10)),
        (id(1).to_owned(), names("s1", 3..10)),
        (id(2).to_owned(), names("s2", 4..10)),
        (id(3).to_owned(), names("s3", 0..10)),
    ]);
    assert_eq!(
        got, expected,
        "each shard resumes right after NiFi's checkpoint (or at the Initial Stream Position without one)"
    );
    let taken_at = first[id(2)];
    assert!(
        taken_at >= c_expiry,
        "NiFi's live lease on {} was taken {} ms before its leaseExpiry",
        id(2),
        c_expiry - taken_at
    );

    // NiFi's view of the mixed table while ours runs: ours's leases are not available to NiFi,
    // and NiFi counts none of our nodes.
    let now = now_ms();
    for i in 0..4 {
        assert!(!nifi.available(id(i), now).await, "NiFi must see shard {} as held by ours", id(i));
        assert!(
            !nifi.take(id(i), "d0d0d0d0-0000-4000-8000-00000000000d", now).await,
            "NiFi's take of {} must be refused",
            id(i)
        );
    }
    assert_eq!(
        nifi.active_nodes(now).await,
        1,
        "NiFi counts only its own node rows (C's, which beats no more, is still in its window)"
    );

    // Over ten failover timeouts have passed: NiFi's node rows and its marker are untouched.
    tokio::time::sleep(Duration::from_secs(13).saturating_sub(Duration::from_millis((now_ms() - t0).max(0) as u64)))
        .await;
    for (key, before) in &nifi_rows {
        assert_eq!(&nifi.row(key).await, before, "NiFi's row {key} is left as NiFi wrote it");
    }
    assert_eq!(nifi.row("__migration__").await.as_ref(), Some(&marker), "the marker row is left alone");
    assert!(store.scan().await.unwrap().leases.iter().all(|r| r.shard_id != "__migration__"));
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nifi_lease_renewed_after_ours_read_the_row_is_not_taken() {
    log();
    let emulators = Emulators::start("nifi-renew");
    let c = clients(&aws(&emulators)).await;
    let nifi = Nifi { c: &c, table: "renew-app", stream: "renew" };
    nifi.create_table().await;
    let t0 = now_ms();
    assert!(
        nifi.take("shardId-000000000000", "e0e0e0e0-0000-4000-8000-00000000000e", t0 - NIFI_LEASE_MS - 1_000).await
    );
    let store = LeaseStore::new(c.dynamodb.clone(), "renew-app", "renew");
    let seen = store.scan().await.unwrap().leases[0].holder.clone().expect("NiFi's lease");
    // NiFi's node renews its lease (its own refresh) before ours's conditional take arrives.
    assert!(nifi.take("shardId-000000000000", "e0e0e0e0-0000-4000-8000-00000000000e", t0).await);
    let taken = store.acquire("shardId-000000000000", "kinesnow-me", Some(&seen), LoadedOnTake::Keep).await.unwrap();
    assert!(taken.is_none(), "ours took a lease NiFi renewed after ours read it: {taken:?}");
    let owner = nifi.row("shardId-000000000000").await.unwrap()["leaseOwner"].clone();
    assert_eq!(owner, s("e0e0e0e0-0000-4000-8000-00000000000e"));
}

/// Ours reads 6 records of each of 2 shards and commits them; 4 more follow. Returns the
/// emulators, clients, engine and the shards.
async fn ours_read_six(name: &str) -> (Emulators, AwsClients, ConsumerEngine, Vec<(String, String)>) {
    let emulators = Emulators::start(name);
    let c = clients(&aws(&emulators)).await;
    create_stream(&c, name, 2).await;
    let listed = shards(&c, name).await;
    for (i, (_, hash)) in listed.iter().enumerate() {
        put(&c, name, hash, &format!("s{i}"), 0, 6).await;
    }
    let engine =
        ConsumerEngine::start(quick(name, &format!("{name}-app")), clients(&aws(&emulators)).await).await.unwrap();
    let (got, _) = drain(&engine, 12, Duration::from_secs(15)).await;
    assert_eq!(got.values().map(Vec::len).sum::<usize>(), 12, "{got:?}");
    let store = LeaseStore::new(c.dynamodb.clone(), format!("{name}-app"), name);
    for _ in 0..100 {
        let rows = store.rows().await.unwrap();
        if rows.iter().filter(|(_, cp, _)| matches!(cp, Checkpoint::At(_))).count() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for (i, (_, hash)) in listed.iter().enumerate() {
        put(&c, name, hash, &format!("s{i}"), 6, 4).await;
    }
    (emulators, c, engine, listed)
}

/// What NiFi's processor does with each shard on the table ours left: takes the lease at NiFi's
/// clock `now`, reads the checkpoint, and reads on from it.
async fn nifi_resumes(nifi: &Nifi<'_>, listed: &[(String, String)], now: i64) {
    for (i, (shard, _)) in listed.iter().enumerate() {
        assert!(nifi.available(shard, now).await, "NiFi sees {shard} as available");
        assert!(
            nifi.take(shard, "f0f0f0f0-0000-4000-8000-00000000000f", now).await,
            "NiFi's conditional take of {shard} is accepted"
        );
        assert!(
            nifi.read_checkpoint(shard).await.is_some(),
            "NiFi reads our checkpoint of {shard} as a sequence number"
        );
        assert_eq!(
            nifi.records_from(shard).await,
            names(&format!("s{i}"), 6..10),
            "NiFi resumes {shard} right after our checkpoint"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nifi_on_a_table_ours_left_resumes_at_our_checkpoints_after_a_stop_and_after_a_crash() {
    log();
    // A clean stop releases every lease: NiFi takes them at once.
    let (_emulators, c, engine, listed) = ours_read_six("stopped").await;
    engine.stop().await;
    nifi_resumes(&Nifi { c: &c, table: "stopped-app", stream: "stopped" }, &listed, now_ms()).await;
    drop(_emulators);

    // A crash (the engine's tasks end, its leases stay in the table).
    let (_emulators, c, engine, listed) = ours_read_six("crashed").await;
    drop(engine);
    let nifi = Nifi { c: &c, table: "crashed-app", stream: "crashed" };
    let now = now_ms();
    for (shard, _) in &listed {
        assert!(
            !nifi.take(shard, "f0f0f0f0-0000-4000-8000-00000000000f", now).await,
            "right after the crash our lease of {shard} holds"
        );
    }
    // NiFi's refresh half a minute later (its clock): the leases ours left have expired.
    nifi_resumes(&nifi, &listed, now + NIFI_LEASE_MS + 1_000).await;
}
