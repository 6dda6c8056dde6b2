//! Helpers for tests that reshard a stream under load: a producer whose data is `<key>#<n>` (n
//! counting per key, so per-key order can be checked from the data alone), a poll loop that records
//! every delivery in global order and acks like ConsumeKinesis, SplitShard and MergeShards on
//! kinesis-local, and the checks (nothing lost, nothing twice, per-key write order). Included with
//! `#[path]` by test crates that also declare `mod support` (whose `wait_active` it uses), once per
//! crate (`tests/integration/main.rs`).

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::wait_active;
use aws_sdk_kinesis::primitives::Blob;
use kinesnow_core::aws::AwsClients;
use kinesnow_core::consumer::ConsumerEngine;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// One record as the engine delivered it, in global delivery order.
#[derive(Debug, Clone)]
pub struct Delivered {
    pub order: u64,
    pub shard: String,
    pub key: String,
    pub data: String,
    pub at: Instant,
}

#[derive(Default)]
pub struct Deliveries {
    list: Mutex<Vec<Delivered>>,
    next: AtomicU64,
}

impl Deliveries {
    pub fn snapshot(&self) -> Vec<Delivered> {
        self.list.lock().unwrap().clone()
    }

    pub fn distinct_data(&self) -> BTreeSet<String> {
        self.list.lock().unwrap().iter().map(|d| d.data.clone()).collect()
    }
}

/// Polls and acks until `running` is cleared, recording every record delivered.
pub fn poll_and_ack(engine: Arc<ConsumerEngine>, out: Arc<Deliveries>) -> (Arc<AtomicBool>, JoinHandle<()>) {
    let running = Arc::new(AtomicBool::new(true));
    let flag = running.clone();
    let task = tokio::spawn(async move {
        while flag.load(Ordering::SeqCst) {
            let Some(batch) = engine.poll(256 * 1024, Duration::from_millis(200)).await else { continue };
            {
                let mut list = out.list.lock().unwrap();
                for s in &batch.shards {
                    for r in &s.records {
                        list.push(Delivered {
                            order: out.next.fetch_add(1, Ordering::SeqCst),
                            shard: s.shard_id.clone(),
                            key: r.partition_key.to_string(),
                            data: String::from_utf8(r.data.clone()).unwrap(),
                            at: Instant::now(),
                        });
                    }
                }
            }
            engine.ack(batch.id).await.unwrap();
        }
    });
    (running, task)
}

/// Writes records with `keys` partition keys until stopped.
pub struct Producer {
    running: Arc<AtomicBool>,
    task: JoinHandle<BTreeMap<String, u64>>,
}

impl Producer {
    pub fn start(c: &AwsClients, stream: &str, keys: usize, every: Duration) -> Producer {
        let running = Arc::new(AtomicBool::new(true));
        let (kinesis, stream, flag) = (c.kinesis.clone(), stream.to_owned(), running.clone());
        let task = tokio::spawn(async move {
            let mut counts: BTreeMap<String, u64> = BTreeMap::new();
            let mut i = 0usize;
            while flag.load(Ordering::SeqCst) {
                let key = format!("key-{:03}", i % keys);
                let n = counts.entry(key.clone()).or_default();
                let data = format!("{key}#{n}");
                if kinesis
                    .put_record()
                    .stream_name(&stream)
                    .partition_key(&key)
                    .data(Blob::new(data))
                    .send()
                    .await
                    .is_ok()
                {
                    *n += 1;
                    i += 1;
                }
                tokio::time::sleep(every).await;
            }
            counts
        });
        Producer { running, task }
    }

    /// Stops and returns every record written, as data strings.
    pub async fn stop(self) -> BTreeSet<String> {
        self.running.store(false, Ordering::SeqCst);
        let counts = self.task.await.unwrap();
        counts.iter().flat_map(|(k, n)| (0..*n).map(move |i| format!("{k}#{i}"))).collect()
    }
}

/// Waits until every record of `expected` was delivered; returns how long that took.
pub async fn wait_for_all(deliveries: &Deliveries, expected: &BTreeSet<String>, limit: Duration) -> Duration {
    let start = Instant::now();
    loop {
        let got = deliveries.distinct_data();
        if expected.is_subset(&got) {
            return start.elapsed();
        }
        if start.elapsed() > limit {
            let missing: Vec<_> = expected.difference(&got).take(10).collect();
            let shards: BTreeSet<String> = deliveries.snapshot().into_iter().map(|d| d.shard).collect();
            panic!(
                "{} of {} records never delivered within {limit:?}, e.g. {missing:?}; shards read: {shards:?}",
                expected.difference(&got).count(),
                expected.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub fn duplicates(deliveries: &[Delivered]) -> usize {
    deliveries.len() - deliveries.iter().map(|d| &d.data).collect::<BTreeSet<_>>().len()
}

/// Per partition key, the records arrived in write order (so a parent's before its children's),
/// counting each record at its first delivery.
pub fn assert_per_key_write_order(deliveries: &[Delivered]) {
    let mut ordered: Vec<&Delivered> = deliveries.iter().collect();
    ordered.sort_by_key(|d| d.order);
    let mut seen = BTreeSet::new();
    let mut per_key: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for d in ordered.into_iter().filter(|d| seen.insert(d.data.clone())) {
        per_key.entry(d.key.as_str()).or_default().push(d.data.rsplit('#').next().unwrap().parse().unwrap());
    }
    for (key, ns) in &per_key {
        assert_eq!(*ns, (0..ns.len() as u64).collect::<Vec<_>>(), "key {key}: delivered in write order, complete");
    }
}

/// Open shards, ordered by their hash key range.
pub async fn open_shards(c: &AwsClients, stream: &str) -> Vec<(String, u128, u128)> {
    let out = c.kinesis.list_shards().stream_name(stream).send().await.unwrap();
    let mut open: Vec<(String, u128, u128)> = out
        .shards()
        .iter()
        .filter(|s| s.sequence_number_range().and_then(|r| r.ending_sequence_number()).is_none())
        .map(|s| {
            let r = s.hash_key_range().unwrap();
            (s.shard_id().to_owned(), r.starting_hash_key().parse().unwrap(), r.ending_hash_key().parse().unwrap())
        })
        .collect();
    open.sort_by_key(|(_, start, _)| *start);
    open
}

/// Splits an open shard in the middle of its hash key range.
pub async fn split(c: &AwsClients, stream: &str, shard: &(String, u128, u128)) {
    let (id, start, end) = shard;
    c.kinesis
        .split_shard()
        .stream_name(stream)
        .shard_to_split(id)
        .new_starting_hash_key((start + (end - start) / 2).to_string())
        .send()
        .await
        .unwrap();
    wait_active(c, stream).await;
}

/// Merges two adjacent open shards.
pub async fn merge(c: &AwsClients, stream: &str, lower: &str, upper: &str) {
    c.kinesis
        .merge_shards()
        .stream_name(stream)
        .shard_to_merge(lower)
        .adjacent_shard_to_merge(upper)
        .send()
        .await
        .unwrap();
    wait_active(c, stream).await;
}
