//! Exactly once from Kinesis into Snowflake while shards move between nodes (ConsumeKinesis'
//! Failover Position SNOWFLAKE_COMMIT): consumer engines on real kinesis-local and dynalite feed
//! PutSnowflake engines on the Snowflake stand-in through simulated NiFi queues (a FlowFile per
//! record, with the attributes ConsumeKinesis' Java writes, acked once queued, kept across a
//! node's kill). The scenarios: a node killed while its PutSnowflake is behind (the checkpoint
//! ahead of Snowflake), its queue loaded later by its own PutSnowflake or offloaded to another
//! node's; a node paused past the failover timeout while its PutSnowflake goes on loading beside
//! the new owner's. After each, every record is in the table exactly once.
//!
//! Both "nodes" run in this one process, so they share `feedback`'s board, which two NiFi JVMs do
//! not: a node's PutSnowflake reports reach the other node's consumer here too. The reports are
//! facts about Snowflake, so this makes a new owner resume later, never wrongly; the per-JVM
//! case (nothing shared) is what the cluster test in tests/e2e runs.

use crate::standin_support::{self, Standin};
use crate::support;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kinesnow_core::aws::{clients, AwsClients};
use kinesnow_core::consumer::engine::FailoverPosition;
use kinesnow_core::consumer::{ConsumerEngine, EngineSettings};
use kinesnow_core::feedback::Loaded;
use kinesnow_core::lease::LeaseStore;
use kinesnow_core::snowflake::{FlowFileIn, Route, SinkEngine, SinkSettings};
use support::{aws, create_stream, settings, Emulators};
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;

pub(crate) const TABLE: &str = "DB.PUBLIC.EVENTS";

/// A NiFi connection: FlowFiles ConsumeKinesis committed, waiting for PutSnowflake.
pub(crate) type Queue = Arc<Mutex<VecDeque<FlowFileIn>>>;

static NEXT_ID: AtomicI64 = AtomicI64::new(1);

pub(crate) fn tracked_settings(stream: &str, app: &str) -> EngineSettings {
    EngineSettings {
        failover_position: FailoverPosition::SnowflakeCommit,
        failover_timeout: Duration::from_secs(3),
        heartbeat_interval: Duration::from_millis(500),
        scan_interval: Duration::from_millis(300),
        ..settings(stream, app)
    }
}

/// ConsumeKinesis on one node: polls, writes FlowFiles into the node's queue (as the Java shim
/// does, attributes included), then acks (NiFi committed the session).
pub(crate) struct Consumer {
    engine: Arc<ConsumerEngine>,
    running: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

impl Consumer {
    pub(crate) async fn start(node: &str, s: EngineSettings, e: &Emulators, queue: Queue) -> Consumer {
        let engine = Arc::new(ConsumerEngine::start(s.clone(), clients(&aws(e)).await).await.unwrap());
        let running = Arc::new(AtomicBool::new(true));
        let task = tokio::spawn(poll_into(
            node.to_owned(),
            s.stream.clone(),
            s.application.clone(),
            engine.clone(),
            running.clone(),
            queue,
        ));
        Consumer { engine, running, task }
    }

    /// Stopped on the canvas (a disconnected node before NiFi offloads it): the last batch is
    /// acked, the leases released.
    pub(crate) async fn stop(self) {
        self.running.store(false, Ordering::SeqCst);
        let _ = self.task.await;
        self.engine.stop().await;
    }

    /// kill -9: nothing more is delivered or acked, nothing released.
    fn kill(self) {
        self.running.store(false, Ordering::SeqCst);
        self.task.abort();
        drop(self.engine);
    }
}

async fn poll_into(
    node: String,
    stream: String,
    application: String,
    engine: Arc<ConsumerEngine>,
    running: Arc<AtomicBool>,
    queue: Queue,
) {
    let link = engine.link().map(|k| k.stream.clone());
    while running.load(Ordering::SeqCst) {
        let Some(batch) = engine.poll(256 * 1024, Duration::from_millis(100)).await else { continue };
        let mut written = Vec::new();
        for s in &batch.shards {
            // As ConsumeKinesis does: each FlowFile names the record its lease read before it.
            let mut previous = s.previous.clone();
            for r in &s.records {
                let mut attributes: HashMap<String, String> = [
                    ("aws.kinesis.stream.name", stream.clone()),
                    ("aws.kinesis.region", "us-east-1".to_owned()),
                    ("aws.kinesis.shard.id", s.shard_id.clone()),
                    ("aws.kinesis.partition.key", r.partition_key.to_string()),
                    ("aws.kinesis.first.sequence.number", r.sequence_number.clone()),
                    ("aws.kinesis.last.sequence.number", r.sequence_number.clone()),
                    ("aws.kinesis.approximate.arrival.timestamp.ms", r.approximate_arrival_ms.to_string()),
                    ("record.count", "1".to_owned()),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect();
                if let (Some(arn), Some(tenure)) = (&link, s.tenure) {
                    attributes.insert("kinesnow.stream.arn".into(), arn.clone());
                    attributes.insert("kinesnow.application.name".into(), application.clone());
                    attributes.insert("kinesnow.node".into(), node.clone());
                    attributes.insert("kinesnow.lease.counter".into(), tenure.to_string());
                    if let Some(p) = &previous {
                        attributes.insert("kinesnow.previous.sequence.number".into(), p.sequence_number.clone());
                        if let Some(sub) = p.sub_sequence_number {
                            attributes.insert("kinesnow.previous.subsequence.number".into(), sub.to_string());
                        }
                    }
                }
                previous = Some(kinesnow_core::kinesis::position::Position::new(
                    r.sequence_number.clone(),
                    r.sub_sequence_number,
                ));
                written.push(FlowFileIn {
                    id: NEXT_ID.fetch_add(1, Ordering::SeqCst),
                    attributes,
                    content: r.data.clone().into(),
                });
            }
        }
        queue.lock().unwrap().extend(written);
        if engine.ack(batch.id).await.is_err() {
            return;
        }
    }
}

/// PutSnowflake on one node, pumped by the test: takes what waits in a queue, routes outcomes as
/// the Java shim does (success leaves, retry and failure go back to the queue).
pub(crate) struct Loader {
    engine: SinkEngine,
    taken: HashMap<i64, FlowFileIn>,
    superseded: usize,
}

impl Loader {
    pub(crate) fn start(rt: &Runtime, standin: &Standin, node: &str, instance: &str) -> Loader {
        let config = standin_support::sink_config(standin, instance, &[("Node Identity", node)]);
        let mut settings = SinkSettings::from_config(&config);
        settings.status_interval = Duration::from_millis(100);
        settings.retry_limit = Duration::from_secs(60);
        settings.warm_up = Duration::from_secs(5);
        let engine = rt.block_on(async { SinkEngine::start(&config, settings) }).unwrap();
        Loader { engine, taken: HashMap::new(), superseded: 0 }
    }

    /// Hands over up to `max` queued FlowFiles and routes the outcomes that come within `wait`.
    fn pump(&mut self, rt: &Runtime, queue: &Queue, max: usize, wait: Duration) {
        let batch: Vec<FlowFileIn> = {
            let mut q = queue.lock().unwrap();
            let n = max.min(q.len());
            q.drain(..n).collect()
        };
        if !batch.is_empty() {
            for f in &batch {
                self.taken.insert(f.id, f.clone());
            }
            let _guard = rt.enter();
            self.engine.submit(batch);
        }
        let mut resend = Vec::new();
        for outcome in rt.block_on(self.engine.outcomes(wait, 100_000)) {
            if outcome.route == Route::Resend {
                // As Java does: the FlowFile stays held and its content is handed over again.
                resend.extend(self.taken.get(&outcome.flow_file_id).cloned());
                continue;
            }
            let Some(flow_file) = self.taken.remove(&outcome.flow_file_id) else { continue };
            match outcome.route {
                Route::Success => {
                    if outcome.message.starts_with("superseded") {
                        self.superseded += 1;
                    }
                }
                Route::Failure => queue.lock().unwrap().push_back(flow_file),
                other => panic!("unexpected route {other:?}: {}", outcome.message),
            }
        }
        if !resend.is_empty() {
            let _guard = rt.enter();
            self.engine.submit(resend);
        }
    }

    /// Pumps until the queue and the FlowFiles in flight are empty.
    pub(crate) fn drain(&mut self, rt: &Runtime, queue: &Queue, limit: Duration) {
        let deadline = std::time::Instant::now() + limit;
        while !(queue.lock().unwrap().is_empty() && self.taken.is_empty()) {
            assert!(
                std::time::Instant::now() < deadline,
                "{} queued, {} in flight after {limit:?}",
                queue.lock().unwrap().len(),
                self.taken.len()
            );
            self.pump(rt, queue, 500, Duration::from_millis(100));
        }
    }

    /// Stopped (or its NiFi killed): FlowFiles in flight go back to the queue (rolled back).
    pub(crate) fn stop(self, queue: &Queue) {
        self.engine.stop();
        let mut q = queue.lock().unwrap();
        let mut back: Vec<FlowFileIn> = self.taken.into_values().collect();
        back.sort_by_key(|f| f.id);
        for f in back.into_iter().rev() {
            q.push_front(f);
        }
    }
}

pub(crate) fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// Every `n` in the table with how often it is there.
pub(crate) fn loaded(standin: &Standin) -> BTreeMap<i64, usize> {
    let mut counts = BTreeMap::new();
    for row in standin.query(&format!("SELECT N FROM {TABLE}")) {
        *counts.entry(row["N"].as_i64().expect("N")).or_insert(0) += 1;
    }
    counts
}

/// Duplicates and losses of records `0..n`, printed.
pub(crate) fn check_once(standin: &Standin, n: usize, what: &str) {
    let counts = loaded(standin);
    let duplicates: usize = counts.values().map(|c| c - 1).sum();
    let lost = (0..n as i64).filter(|i| !counts.contains_key(i)).count();
    eprintln!("{what}: {} rows, {duplicates} duplicates, {lost} lost", counts.values().sum::<usize>());
    assert_eq!((duplicates, lost), (0, 0), "{what}");
}

async fn loaded_positions(c: &AwsClients, app: &str, stream: &str) -> Vec<Option<Loaded>> {
    LeaseStore::new(c.dynamodb.clone(), app, stream)
        .scan()
        .await
        .unwrap()
        .leases
        .into_iter()
        .map(|r| r.loaded)
        .collect()
}

async fn checkpoints_cover(c: &AwsClients, app: &str, stream: &str, put: &[(String, String)]) -> bool {
    let rows = LeaseStore::new(c.dynamodb.clone(), app, stream).rows().await.unwrap();
    let shards: std::collections::BTreeSet<&String> = put.iter().map(|(s, _)| s).collect();
    shards
        .iter()
        .all(|s| rows.iter().any(|(id, cp, _)| &id == s && matches!(cp, kinesnow_core::lease::Checkpoint::At(_))))
}

pub(crate) fn create_table(standin: &Standin) {
    standin.sql(&format!("CREATE OR REPLACE TABLE {TABLE} (N NUMBER, KINESISMETADATA VARIANT)"));
}

/// Waits on the test thread (never inside the runtime: the stand-in's admin client blocks).
pub(crate) fn wait_until(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + limit;
    while !check() {
        assert!(std::time::Instant::now() < deadline, "{what} not within {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A killed node's PutSnowflake had loaded only part of what NiFi committed (the checkpoint ran
/// ahead of Snowflake). The new owner resumes from what Snowflake had and loads the rest; the
/// killed node's queue, loaded later by its restarted PutSnowflake, adds nothing; a second kill,
/// its queue offloaded to the other node, adds nothing either.
#[test]
fn a_node_killed_while_snowflake_is_behind_loses_nothing_and_loads_nothing_twice() {
    support::log();
    let rt = runtime();
    let e = Emulators::start("sf-failover");
    let standin = Standin::start("sf-failover", 50);
    create_table(&standin);
    let (stream, app) = ("sf-failover", "sf-failover-app");
    let c = rt.block_on(clients(&aws(&e)));
    rt.block_on(create_stream(&c, stream, 2));
    let first = rt.block_on(support::put(&c, stream, 0, 120));

    let (queue_a, queue_b): (Queue, Queue) = Default::default();
    let a = rt.block_on(Consumer::start("node-a", tracked_settings(stream, app), &e, queue_a.clone()));
    wait_until("node A's queue holds every record", Duration::from_secs(60), || queue_a.lock().unwrap().len() == 120);
    wait_until("node A's checkpoints", Duration::from_secs(20), || {
        rt.block_on(checkpoints_cover(&c, app, stream, &first))
    });
    let mut loader_a = Loader::start(&rt, &standin, "node-a", "aaaa");
    loader_a.pump(&rt, &queue_a, 40, Duration::from_millis(500));
    wait_until("node A's first loads", Duration::from_secs(20), || {
        loader_a.pump(&rt, &queue_a, 0, Duration::from_millis(100));
        loader_a.taken.is_empty()
    });
    wait_until("the loaded position in the lease rows", Duration::from_secs(20), || {
        rt.block_on(loaded_positions(&c, app, stream)).iter().any(|l| matches!(l, Some(Loaded::Through(_))))
    });
    let loaded_before_kill = loaded(&standin).len();
    assert!(loaded_before_kill < 120, "only part loaded before the kill: {loaded_before_kill}");

    // kill -9 of node A: its consumer and PutSnowflake die, its queue stays on disk.
    a.kill();
    loader_a.stop(&queue_a);
    let b = rt.block_on(Consumer::start("node-b", tracked_settings(stream, app), &e, queue_b.clone()));
    let mut loader_b = Loader::start(&rt, &standin, "node-b", "bbbb");
    wait_until("node B loads every record", Duration::from_secs(60), || {
        loader_b.pump(&rt, &queue_b, 500, Duration::from_millis(100));
        loaded(&standin).len() == 120
    });
    check_once(&standin, 120, "after the failover");

    // Node A comes back: its PutSnowflake loads what waited in its queue.
    let mut loader_a = Loader::start(&rt, &standin, "node-a", "aaaa");
    loader_a.drain(&rt, &queue_a, Duration::from_secs(60));
    check_once(&standin, 120, "after node A's queue");

    // More records, node B disconnected and offloaded with part of them queued: its processors
    // stop (its leases are released), its queue moves to node A, whose consumer takes over.
    let more = rt.block_on(support::put(&c, stream, 120, 80));
    wait_until("node B's queue", Duration::from_secs(60), || {
        queue_b.lock().unwrap().len() + loaded(&standin).len() >= 200
    });
    wait_until("node B's checkpoints", Duration::from_secs(20), || {
        rt.block_on(checkpoints_cover(&c, app, stream, &more))
    });
    loader_b.stop(&queue_b);
    rt.block_on(b.stop());
    let a2 = rt.block_on(Consumer::start("node-a", tracked_settings(stream, app), &e, queue_a.clone()));
    let offloaded = queue_b.lock().unwrap().len();
    wait_until("every record loaded after the offload", Duration::from_secs(60), || {
        loader_a.pump(&rt, &queue_b, 500, Duration::from_millis(50));
        loader_a.pump(&rt, &queue_a, 500, Duration::from_millis(50));
        loaded(&standin).len() == 200 && queue_b.lock().unwrap().is_empty()
    });
    loader_a.drain(&rt, &queue_b, Duration::from_secs(60));
    check_once(&standin, 200, "after the offload");
    eprintln!("offloaded {offloaded} FlowFiles, {} superseded", loader_a.superseded);
    a2.kill();
}

/// A node paused past the failover timeout keeps loading its queue while the new owner loads the
/// same shards into the same channels; a producer writes throughout.
#[test]
fn a_paused_node_and_the_new_owner_load_side_by_side_and_nothing_is_twice() {
    support::log();
    let rt = runtime();
    let e = Emulators::start("sf-paused");
    let standin = Standin::start("sf-paused", 200);
    create_table(&standin);
    let (stream, app) = ("sf-paused", "sf-paused-app");
    let c = rt.block_on(clients(&aws(&e)));
    rt.block_on(create_stream(&c, stream, 2));
    let (queue_a, queue_b): (Queue, Queue) = Default::default();
    let a = rt.block_on(Consumer::start("node-a", tracked_settings(stream, app), &e, queue_a.clone()));
    let mut loader_a = Loader::start(&rt, &standin, "node-a", "aaaa");
    rt.block_on(support::put(&c, stream, 0, 100));
    wait_until("node A's first loads", Duration::from_secs(60), || {
        loader_a.pump(&rt, &queue_a, 20, Duration::from_millis(100));
        loaded(&standin).len() >= 20
    });
    // Node A freezes its lease keeping (a long GC pause) with a queue left; node B takes over.
    a.engine.suspend_lease_keeping(Duration::from_secs(30));
    let b = rt.block_on(Consumer::start("node-b", tracked_settings(stream, app), &e, queue_b.clone()));
    let mut loader_b = Loader::start(&rt, &standin, "node-b", "bbbb");
    rt.block_on(support::put(&c, stream, 100, 100));
    wait_until("every record loaded by both nodes' PutSnowflakes", Duration::from_secs(90), || {
        loader_a.pump(&rt, &queue_a, 10, Duration::from_millis(50));
        loader_b.pump(&rt, &queue_b, 50, Duration::from_millis(50));
        loaded(&standin).len() == 200
    });
    loader_a.drain(&rt, &queue_a, Duration::from_secs(60));
    loader_b.drain(&rt, &queue_b, Duration::from_secs(60));
    check_once(&standin, 200, "after the pause");
    a.kill();
    b.kill();
}
