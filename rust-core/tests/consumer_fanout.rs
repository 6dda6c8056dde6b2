//! The consumer engine with Enhanced Fan-Out against real kinesis-local (SubscribeToShard over
//! plain HTTP) and dynalite: registration, every record once in shard order, exact resume after a
//! restart (KPL sub-records too), rewind on nack, ResourceInUse retried, renewal across the
//! 5-minute subscription limit, the watchdog, the client pool over HTTP/2, and memory held while
//! nothing is taken (back-pressure).
//!
//! What kinesis-local cannot do: end a fan-out subscription at a shard's end with ChildShards (its
//! subscriptions on a closed parent never end, see the resharding test below), so that path (the
//! one AWS takes) is tested on synthetic events in `consumer::subscriber`'s unit tests, and the
//! resharding test here shows the second signal (the listing says closed, a GetRecords probe
//! confirms the end). Its plain
//! port speaks HTTP/1.1 to the SDK (one connection per subscription, whatever the pool); the
//! client pool is shown over real HTTP/2 through a TLS terminator (`support/h2_tls_proxy.rs`).

use crate::{resharding, support};
#[path = "support/h2_tls_proxy.rs"]
mod h2_tls_proxy;
#[path = "support/tinyproxy.rs"]
pub(crate) mod tinyproxy;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use aws_sdk_kinesis::primitives::Blob;
use aws_sdk_kinesis::types::{ShardIteratorType, StartingPosition};
use kinesnow_core::aws::{clients, clients_trusting};
use kinesnow_core::config::consume_kinesis::ConsumerType;
use kinesnow_core::consumer::{ConsumerEngine, EngineSettings};
use support::{aws, by_shard, create_stream, drain, log, put, settings, Emulators};

fn fan_out(stream: &str, app: &str) -> EngineSettings {
    let mut s = settings(stream, app);
    s.consumer_type = ConsumerType::EnhancedFanOut;
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fan_out_delivers_every_record_once_in_shard_order_and_resumes_exactly() {
    log();
    let e = Emulators::start("efo-resume");
    let c = clients(&aws(&e)).await;
    create_stream(&c, "efo", 3).await;
    let first = put(&c, "efo", 0, 90).await;

    let engine = ConsumerEngine::start(fan_out("efo", "efo-app"), clients(&aws(&e)).await).await.unwrap();
    let arn = engine.consumer_arn().expect("a registered consumer").to_owned();
    assert!(arn.contains("consumer/efo-app"), "{arn}");
    let (got, _) = drain(&engine, first.len(), true).await;
    assert_eq!(got, by_shard(&first), "every record, once, in shard order");
    assert!(engine.fan_out_stats().subscriptions.load(Ordering::Relaxed) >= 3);
    engine.stop().await;

    // Restarted at once, while the old subscriptions may still be alive (ResourceInUse is retried).
    let second = put(&c, "efo", 90, 30).await;
    let engine = ConsumerEngine::start(fan_out("efo", "efo-app"), clients(&aws(&e)).await).await.unwrap();
    assert_eq!(engine.consumer_arn(), Some(arn.as_str()), "the existing consumer is reused");
    let (got, batches) = drain(&engine, second.len(), false).await;
    assert_eq!(got, by_shard(&second), "only what came after the checkpoints");
    // NiFi's commit fails: the shards rewind and the same records come again.
    for id in batches {
        engine.nack(id).unwrap();
    }
    let (again, _) = drain(&engine, second.len(), true).await;
    assert_eq!(again, by_shard(&second));
    assert!(engine.poll(1 << 20, Duration::from_millis(2500)).await.is_none(), "nothing more");
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_still_in_use_is_retried_not_escalated() {
    log();
    let e = Emulators::start("efo-in-use");
    let c = clients(&aws(&e)).await;
    create_stream(&c, "busy", 1).await;
    let written = put(&c, "busy", 0, 20).await;
    let shard = written[0].0.clone();

    // Register the consumer; then a subscription to the shard is closed just before the engine
    // subscribes, as when a shard moves between nodes: kinesis-local, like Kinesis, refuses a new
    // subscription within a few seconds of the last one with ResourceInUseException.
    let engine = ConsumerEngine::start(fan_out("busy", "busy-app"), clients(&aws(&e)).await).await.unwrap();
    let arn = engine.consumer_arn().unwrap().to_owned();
    engine.stop().await;
    let subscribe = || {
        c.kinesis
            .subscribe_to_shard()
            .consumer_arn(&arn)
            .shard_id(&shard)
            .starting_position(StartingPosition::builder().r#type(ShardIteratorType::Latest).build().unwrap())
            .send()
    };
    // The engine's own subscription was just closed: retry until this one gets an event.
    loop {
        if let Ok(mut held) = subscribe().await {
            if matches!(held.event_stream.recv().await, Ok(Some(_))) {
                break; // dropped here: closed just now
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }

    let engine = ConsumerEngine::start(fan_out("busy", "busy-app"), clients(&aws(&e)).await).await.unwrap();
    let (got, _) = drain(&engine, 20, true).await;
    assert_eq!(got, by_shard(&written));
    let in_use = engine.fan_out_stats().resource_in_use.load(Ordering::Relaxed);
    eprintln!("ResourceInUse retries: {in_use}");
    assert!(in_use >= 1, "the early subscription was refused with ResourceInUse and retried");
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fan_out_resumes_inside_a_kpl_aggregate() {
    log();
    let e = Emulators::start("efo-kpl");
    let c = clients(&aws(&e)).await;
    create_stream(&c, "agg", 1).await;
    let users: Vec<(String, String)> = (0..30).map(|i| (format!("pk-{}", i % 4), format!("u{i}"))).collect();
    let blob = kinesnow_core::kinesis::deaggregate::aggregate(&users);
    c.kinesis.put_record().stream_name("agg").partition_key("agg").data(Blob::new(blob)).send().await.unwrap();

    let engine = ConsumerEngine::start(fan_out("agg", "agg-app"), clients(&aws(&e)).await).await.unwrap();
    let first = engine.poll(10 * 120, Duration::from_secs(15)).await.expect("a batch");
    let committed = first.shards[0].records.len();
    assert!((2..30).contains(&committed), "the batch ends inside the aggregate: {committed}");
    engine.ack(first.id).await.unwrap();
    engine.stop().await;

    let engine = ConsumerEngine::start(fan_out("agg", "agg-app"), clients(&aws(&e)).await).await.unwrap();
    let (got, _) = drain(&engine, 30 - committed, true).await;
    let rest: Vec<String> = got.into_values().flatten().collect();
    let expected: Vec<String> = users[committed..].iter().map(|(_, d)| d.clone()).collect();
    assert_eq!(rest, expected, "resumed right after the committed sub-record");
    engine.stop().await;
}

/// kinesis-local ends every subscription after 300 s, like AWS; the renewal continues from the last
/// continuation sequence number. Takes a little over five minutes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_are_renewed_across_the_five_minute_limit_without_gaps_or_repeats() {
    log();
    let e = Emulators::start("efo-renew");
    let c = clients(&aws(&e)).await;
    create_stream(&c, "long", 2).await;
    let engine = ConsumerEngine::start(fan_out("long", "long-app"), clients(&aws(&e)).await).await.unwrap();
    let mut written = Vec::new();
    let mut got: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let started = tokio::time::Instant::now();
    let mut n = 0;
    while started.elapsed() < Duration::from_secs(320) {
        written.extend(put(&c, "long", n, 4).await);
        n += 4;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while tokio::time::Instant::now() < deadline {
            if let Some(batch) = engine.poll(1 << 20, Duration::from_millis(500)).await {
                for s in &batch.shards {
                    got.entry(s.shard_id.clone())
                        .or_default()
                        .extend(s.records.iter().map(|r| String::from_utf8(r.data.clone()).unwrap()));
                }
                engine.ack(batch.id).await.unwrap();
            }
        }
    }
    let (rest, _) = drain(&engine, written.len() - got.values().map(Vec::len).sum::<usize>(), true).await;
    for (shard, data) in rest {
        got.entry(shard).or_default().extend(data);
    }
    assert_eq!(got, by_shard(&written), "every record once, in order, across the renewal");
    let subscriptions = engine.fan_out_stats().subscriptions.load(Ordering::Relaxed);
    assert!(subscriptions >= 4, "each of the 2 shards was subscribed again after 300 s: {subscriptions}");
    engine.stop().await;
}

/// Enhanced Fan-Out across a split and a merge under load: records written before, during and
/// after both; every record arrives, none twice, and per partition key in write order (a parent's
/// records before its children's), within a bounded time.
///
/// What kinesis-local 0.6.2 does at a shard's end (checked by hand with raw SubscribeToShard calls
/// before this test was written): a live subscription on a parent that was split is not ended; it
/// keeps sending empty events about once a second, with `"ChildShards": null` and the parent's last
/// record's sequence number as the continuation, until its 5-minute limit. A new SubscribeToShard
/// on the closed parent is accepted and does the same. It never sends ChildShards. GetRecords on
/// the closed parent from AFTER_SEQUENCE_NUMBER of its last record returns no records, no
/// NextShardIterator, and the ChildShards; its listing entry has an EndingSequenceNumber (always
/// 9223372036854775807). So here a shard's end can only be found by the engine's second signal:
/// the listing shows the shard closed, its subscription brought nothing new for a while, and one
/// GetShardIterator + GetRecords confirms the end (`consumer::end_probe`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fan_out_reads_every_record_in_key_order_across_a_split_and_a_merge() {
    use resharding::{
        assert_per_key_write_order, duplicates, merge, open_shards, poll_and_ack, split, wait_for_all, Deliveries,
        Producer,
    };
    log();
    let e = Emulators::start("efo-reshard");
    let c = clients(&aws(&e)).await;
    create_stream(&c, "efo-reshard", 2).await;
    let producer = Producer::start(&c, "efo-reshard", 40, Duration::from_millis(5));
    tokio::time::sleep(Duration::from_secs(2)).await; // records before the engine starts

    let engine = std::sync::Arc::new(
        ConsumerEngine::start(fan_out("efo-reshard", "efo-reshard-app"), clients(&aws(&e)).await).await.unwrap(),
    );
    let deliveries = std::sync::Arc::new(Deliveries::default());
    let (polling, poller) = poll_and_ack(engine.clone(), deliveries.clone());
    tokio::time::sleep(Duration::from_secs(3)).await;

    let before = open_shards(&c, "efo-reshard").await;
    split(&c, "efo-reshard", &before[0]).await;
    let split_at = tokio::time::Instant::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    // Merge the split's upper child with the other original shard.
    let after_split = open_shards(&c, "efo-reshard").await;
    assert_eq!(after_split.len(), 3, "{after_split:?}");
    merge(&c, "efo-reshard", &after_split[1].0, &after_split[2].0).await;
    tokio::time::sleep(Duration::from_secs(3)).await; // records after, into the merged shard too
    let written = producer.stop().await;
    let stopped = split_at.elapsed();
    let waited = wait_for_all(&deliveries, &written, Duration::from_secs(60)).await;
    eprintln!(
        "fan-out resharding: {} records written, all delivered {:?} after the last write ({:?} after the split)",
        written.len(),
        waited,
        stopped + waited
    );
    polling.store(false, Ordering::SeqCst);
    poller.await.unwrap();

    let all = deliveries.snapshot();
    assert_eq!(duplicates(&all), 0, "nothing delivered twice (nothing was nacked or lost)");
    assert_per_key_write_order(&all);
    let shards: std::collections::BTreeSet<&str> = all.iter().map(|d| d.shard.as_str()).collect();
    assert_eq!(shards.len(), 5, "the two originals, two children and the merged shard were read: {shards:?}");
    let first = |shard: &str| all.iter().filter(|d| d.shard == shard).map(|d| d.at).min().unwrap();
    let last = |shard: &str| all.iter().filter(|d| d.shard == shard).map(|d| d.at).max().unwrap();
    let final_open = open_shards(&c, "efo-reshard").await;
    let merged = &final_open.iter().find(|(id, _, _)| !after_split.iter().any(|(o, _, _)| o == id)).unwrap().0;
    let split_gap =
        first(&after_split[0].0).min(first(&after_split[1].0)).saturating_duration_since(last(&before[0].0));
    let merge_gap = first(merged).saturating_duration_since(last(&after_split[1].0).max(last(&after_split[2].0)));
    eprintln!("parent's last record to a child's first: split {split_gap:?}, merge {merge_gap:?}");
    let probes = engine.fan_out_stats().end_probes.load(Ordering::Relaxed);
    assert_eq!(
        probes, 3,
        "the ends of the three parents (kinesis-local sends no ChildShards) were confirmed by GetRecords"
    );
    engine.stop().await;
}

/// User + system CPU seconds of this process so far.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split_whitespace().collect();
    (fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()) as f64 / 100.0
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

async fn put_many(c: &kinesnow_core::aws::AwsClients, stream: &str, n: usize) {
    use aws_sdk_kinesis::types::PutRecordsRequestEntry;
    for chunk in (0..n).collect::<Vec<_>>().chunks(250) {
        let entries: Vec<PutRecordsRequestEntry> = chunk
            .iter()
            .map(|i| {
                PutRecordsRequestEntry::builder()
                    .partition_key(format!("k{}", i % 97))
                    .data(Blob::new(format!("{{\"n\":{i},\"pad\":\"{}\"}}", "x".repeat(200))))
                    .build()
                    .unwrap()
            })
            .collect();
        c.kinesis.put_records().stream_name(stream).set_records(Some(entries)).send().await.unwrap();
    }
}

/// Polls and acks until `stop`, recording put-to-poll latency (the data is the put time in ms).
async fn latencies(engine: std::sync::Arc<ConsumerEngine>, until: tokio::time::Instant) -> Vec<i64> {
    let mut out = Vec::new();
    while tokio::time::Instant::now() < until {
        if let Some(batch) = engine.poll(1 << 20, Duration::from_millis(100)).await {
            let now = now_ms();
            for s in &batch.shards {
                out.extend(s.records.iter().map(|r| now - String::from_utf8_lossy(&r.data).parse::<i64>().unwrap()));
            }
            engine.ack(batch.id).await.unwrap();
        }
    }
    out
}

fn percentile(v: &mut [i64], p: usize) -> i64 {
    v.sort();
    v[(v.len() * p / 100).min(v.len() - 1)]
}

/// Fan-out against polling on the same stream, run by bench/fan-out.sh (not by the test suite):
/// records/s and CPU seconds per million records draining a backlog (one consumer at a time), and
/// put-to-poll latency with both consumers reading the same live stream at once.
#[ignore = "benchmark: run by bench/fan-out.sh"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_fan_out_against_polling() {
    let rounds: usize = std::env::var("KINESNOW_BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    let records = 20_000;
    let e = Emulators::start("efo-bench");
    let c = clients(&aws(&e)).await;
    create_stream(&c, "backlog", 4).await;
    put_many(&c, "backlog", records).await;
    let mut rows: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
    for round in 0..rounds {
        for (mode, efo) in [("polling", false), ("fan-out", true)] {
            let mut s = if efo {
                fan_out("backlog", &format!("b{round}-efo"))
            } else {
                settings("backlog", &format!("b{round}-poll"))
            };
            s.max_buffer_size = 64 << 20;
            s.max_records_per_request = 10_000; // polling at its most (the processor's default is 1000)
            let engine = ConsumerEngine::start(s, clients(&aws(&e)).await).await.unwrap();
            let (t0, cpu0) = (tokio::time::Instant::now(), cpu_seconds());
            let (got, _) = drain(&engine, records, true).await;
            let (elapsed, cpu) = (t0.elapsed().as_secs_f64(), cpu_seconds() - cpu0);
            assert_eq!(got.values().map(Vec::len).sum::<usize>(), records);
            rows.entry(mode).or_default().push((records as f64 / elapsed, cpu * 1e6 / records as f64));
            engine.stop().await;
        }
    }
    for (mode, v) in &rows {
        let mut rate: Vec<f64> = v.iter().map(|r| r.0).collect();
        let mut cpu: Vec<f64> = v.iter().map(|r| r.1).collect();
        rate.sort_by(f64::total_cmp);
        cpu.sort_by(f64::total_cmp);
        println!("| {mode}: drain {records} x ~210 B over 4 shards | {:.0} records/s | {:.0} CPU-s per million records | runs {:?} |", rate[rate.len() / 2], cpu[cpu.len() / 2], v);
    }

    // Latency: both consumers on one live stream, a record every 20 ms for 30 s.
    create_stream(&c, "live", 2).await;
    let polling = std::sync::Arc::new(
        ConsumerEngine::start(settings("live", "live-poll"), clients(&aws(&e)).await).await.unwrap(),
    );
    let efo =
        std::sync::Arc::new(ConsumerEngine::start(fan_out("live", "live-efo"), clients(&aws(&e)).await).await.unwrap());
    tokio::time::sleep(Duration::from_secs(3)).await;
    let until = tokio::time::Instant::now() + Duration::from_secs(33);
    let (p, f) = (tokio::spawn(latencies(polling.clone(), until)), tokio::spawn(latencies(efo.clone(), until)));
    for i in 0..1500 {
        c.kinesis
            .put_record()
            .stream_name("live")
            .partition_key(format!("k{i}"))
            .data(Blob::new(now_ms().to_string()))
            .send()
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (mut p, mut f) = (p.await.unwrap(), f.await.unwrap());
    println!(
        "| polling: put to poll latency, live stream | median {} ms | p95 {} ms | {} records |",
        percentile(&mut p, 50),
        percentile(&mut p, 95),
        p.len()
    );
    println!(
        "| fan-out: put to poll latency, live stream | median {} ms | p95 {} ms | {} records |",
        percentile(&mut f, 50),
        percentile(&mut f, 95),
        f.len()
    );
    polling.stop().await;
    efo.stop().await;
}

/// A TCP proxy in front of kinesis-local that can freeze the connections open so far (all, or only
/// those carrying a SubscribeToShard): their server-to-client bytes stop flowing while the
/// connections stay open, as a stalled subscription would. Connections made afterwards flow normally.
struct FreezingProxy {
    url: String,
    opened: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    frozen_below: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// Freeze only connections that carried a SubscribeToShard request.
    subscriptions_only: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Bytes passed from kinesis-local to the engine so far.
    delivered: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl FreezingProxy {
    async fn start(upstream: &str) -> Self {
        use std::sync::atomic::{AtomicBool, AtomicUsize};
        use std::sync::Arc;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let upstream = upstream.trim_start_matches("http://").to_owned();
        let (opened, frozen_below) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let subscriptions_only = Arc::new(AtomicBool::new(false));
        let delivered = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (o, f, only, d) = (opened.clone(), frozen_below.clone(), subscriptions_only.clone(), delivered.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let id = o.fetch_add(1, Ordering::SeqCst);
                let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else { continue };
                let (f, only, d) = (f.clone(), only.clone(), d.clone());
                let subscription = Arc::new(AtomicBool::new(false));
                let carries_subscription = subscription.clone();
                tokio::spawn(async move {
                    use tokio::io::{AsyncReadExt, AsyncWriteExt};
                    let (mut cr, mut cw) = client.into_split();
                    let (mut sr, mut sw) = server.into_split();
                    let down = tokio::spawn(async move {
                        let mut buf = vec![0u8; 64 * 1024];
                        loop {
                            let n = match sr.read(&mut buf).await {
                                Ok(0) | Err(_) => break,
                                Ok(n) => n,
                            };
                            let frozen = || {
                                id < f.load(Ordering::SeqCst)
                                    && (!only.load(Ordering::SeqCst) || carries_subscription.load(Ordering::SeqCst))
                            };
                            while frozen() {
                                tokio::time::sleep(Duration::from_millis(50)).await;
                                // frozen: hold the bytes
                            }
                            if cw.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                            d.fetch_add(n as u64, Ordering::SeqCst);
                        }
                    });
                    let mut buf = vec![0u8; 64 * 1024];
                    loop {
                        let n = match cr.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        if buf[..n].windows(16).any(|w| w == b"SubscribeToShard") {
                            subscription.store(true, Ordering::SeqCst);
                        }
                        if sw.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                    // The client hung up: close the server side completely, as a dropped TCP
                    // connection would, so the server ends the stalled subscription.
                    down.abort();
                });
            }
        });
        Self { url, opened, frozen_below, subscriptions_only, delivered }
    }

    fn freeze_open_connections(&self) {
        self.frozen_below.store(self.opened.load(Ordering::SeqCst), Ordering::SeqCst);
    }

    /// Freezes the subscriptions open so far; other calls (ListShards, GetRecords) go on.
    fn freeze_open_subscriptions(&self) {
        self.subscriptions_only.store(true, Ordering::SeqCst);
        self.freeze_open_connections();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_subscription_is_replaced_by_the_watchdog_without_gaps_or_repeats() {
    log();
    let e = Emulators::start("efo-watchdog");
    let c = clients(&aws(&e)).await;
    create_stream(&c, "quiet", 1).await;
    let proxy = FreezingProxy::start(&e.kinesis).await;
    let mut through_proxy = aws(&e);
    through_proxy.endpoint_override = Some(proxy.url.parse().unwrap());
    through_proxy.dynamodb_endpoint_override = Some(e.dynamodb.parse().unwrap());
    let mut s = fan_out("quiet", "quiet-app");
    s.fan_out_watchdog = Duration::from_secs(3);
    let engine = ConsumerEngine::start(s, clients(&through_proxy).await).await.unwrap();
    let first = put(&c, "quiet", 0, 10).await;
    let (got, _) = drain(&engine, 10, true).await;
    assert_eq!(got, by_shard(&first));

    proxy.freeze_open_connections(); // the subscription goes silent, its connection stays open
    let frozen = tokio::time::Instant::now();
    let second = put(&c, "quiet", 10, 10).await;
    let (got, _) = drain(&engine, 10, true).await;
    eprintln!("records after a frozen subscription arrived {:?} after the freeze", frozen.elapsed());
    assert_eq!(got, by_shard(&second), "the replacement resumes right after the last record: no gap, no repeat");
    assert!(engine.fan_out_stats().watchdog_replacements.load(Ordering::Relaxed) >= 1);
    assert!(frozen.elapsed() >= Duration::from_secs(3), "nothing arrived before the watchdog fired");
    assert!(engine.poll(1 << 20, Duration::from_millis(2500)).await.is_none(), "nothing more");
    engine.stop().await;
}

/// A subscription that lags behind its closed shard's end: the records it has not delivered come
/// by the GetRecords that confirm the end, once each and before the children's. The parent's
/// subscription is frozen (its connection stays open, its bytes held), ten more records are
/// written and the shard is split; the listing shows it closed and the subscription is quiet, so
/// the engine drops it, reads the ten with GetRecords to the end and goes on with the children.
/// The watchdog is longer than the test, so it cannot be what recovers them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_a_lagging_subscription_missed_before_the_shard_end_come_by_get_records_once() {
    log();
    let e = Emulators::start("efo-lag");
    let c = clients(&aws(&e)).await;
    create_stream(&c, "lag", 1).await;
    let proxy = FreezingProxy::start(&e.kinesis).await;
    let mut through_proxy = aws(&e);
    through_proxy.endpoint_override = Some(proxy.url.parse().unwrap());
    let mut s = fan_out("lag", "lag-app");
    s.fan_out_watchdog = Duration::from_secs(120);
    let engine = ConsumerEngine::start(s, clients(&through_proxy).await).await.unwrap();
    let first = put(&c, "lag", 0, 10).await;
    let (got, _) = drain(&engine, 10, true).await;
    assert_eq!(got, by_shard(&first));

    proxy.freeze_open_subscriptions();
    let missed = put(&c, "lag", 10, 10).await;
    let parent = missed[0].0.clone();
    let started = tokio::time::Instant::now();
    let open = resharding::open_shards(&c, "lag").await;
    resharding::split(&c, "lag", &open[0]).await;
    let children = put(&c, "lag", 20, 10).await;
    let (got, _) = drain(&engine, 20, true).await;
    eprintln!("a lagging subscription's records and the children's arrived {:?} after the split", started.elapsed());
    let mut expected = by_shard(&missed);
    expected.extend(by_shard(&children));
    assert_eq!(got, expected, "the parent's missed records once, in order, and the children's");
    assert_eq!(
        engine.fan_out_stats().end_probes.load(Ordering::Relaxed),
        1,
        "the parent's end was confirmed by GetRecords"
    );
    assert_eq!(engine.fan_out_stats().watchdog_replacements.load(Ordering::Relaxed), 0);
    assert!(!engine.leased_shards().contains(&parent), "the parent is finished");
    assert!(engine.poll(1 << 20, Duration::from_millis(2500)).await.is_none(), "nothing more");
    engine.stop().await;
}

/// Puts `per_shard` records on every shard of the stream (an explicit hash key inside each shard's
/// range); returns (shard, data) in put order.
async fn put_on_every_shard(
    c: &kinesnow_core::aws::AwsClients,
    stream: &str,
    per_shard: usize,
    pad: usize,
) -> Vec<(String, String)> {
    use aws_sdk_kinesis::types::PutRecordsRequestEntry;
    let shards = c.kinesis.list_shards().stream_name(stream).send().await.unwrap();
    let keys: Vec<(String, String)> = shards
        .shards()
        .iter()
        .map(|s| (s.shard_id().to_owned(), s.hash_key_range().unwrap().starting_hash_key().to_owned()))
        .collect();
    let mut out = Vec::new();
    let mut pending: Vec<(String, String, String)> = Vec::new();
    for i in 0..per_shard {
        for (shard, key) in &keys {
            pending.push((
                shard.clone(),
                key.clone(),
                format!("{{\"n\":{i},\"shard\":\"{shard}\",\"pad\":\"{}\"}}", "x".repeat(pad)),
            ));
        }
    }
    for chunk in pending.chunks(100) {
        let entries = chunk
            .iter()
            .map(|(_, key, data)| {
                PutRecordsRequestEntry::builder()
                    .partition_key("p")
                    .explicit_hash_key(key)
                    .data(Blob::new(data.clone()))
                    .build()
                    .unwrap()
            })
            .collect::<Vec<_>>();
        let r = c.kinesis.put_records().stream_name(stream).set_records(Some(entries)).send().await.unwrap();
        assert_eq!(r.failed_record_count(), Some(0));
        for ((shard, _, data), result) in chunk.iter().zip(r.records()) {
            assert_eq!(result.shard_id(), Some(shard.as_str()), "the explicit hash key picks the shard");
            out.push((shard.clone(), data.clone()));
        }
    }
    out
}

/// The client pool over real HTTP/2. The engine's Kinesis clients reach kinesis-local through a
/// TLS terminator that negotiates ALPN "h2" and forwards each HTTP/2 request to kinesis-local's
/// h2c port, noting which connection carried it. Eight shards are read with Enhanced Fan-Out twice:
/// with 8 subscriptions per client (a pool of 1) all eight SubscribeToShard streams are multiplexed
/// on ONE HTTP/2 connection, open at the same time, sharing its stream limit and flow-control
/// window (and TCP's head-of-line blocking); with 2 per client (a pool of 4, as with 32 shards at
/// the default of 8) they are spread over 4 connections, 2 each. Every record arrives once, in
/// order, either way. The terminator holds every TLS handshake back 300 ms, so that a pooled
/// client's subscriptions, started together, would all wait for its connection at once: no pooled
/// client may open a second connection (hyper's pool shares a connection only once it knows it is
/// HTTP/2, so requests that start together over ALPN each open their own, and under CPU load one of
/// them now and then carried its subscription on it). Each pooled client opens its connection with
/// one ListShards before its subscriptions start, so they find it in its pool. Time to the first record of all shards and the
/// drain time are printed, not asserted: on one machine with kinesis-local (about one event a second
/// per subscription) the shared connection is not the bottleneck, so they show no difference worth
/// a claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_pool_spreads_subscriptions_over_http2_connections() {
    log();
    let e = Emulators::start("efo-h2");
    let c = clients(&aws(&e)).await;
    create_stream(&c, "wide", 8).await;
    let written = put_on_every_shard(&c, "wide", 30, 100).await;
    let expected = by_shard(&written);
    assert_eq!(expected.len(), 8, "records on every shard");
    let proxy = h2_tls_proxy::H2TlsProxy::start_with_handshake_delay(&e.kinesis, Duration::from_millis(300)).await;
    let mut through_proxy = aws(&e);
    through_proxy.endpoint_override = Some(proxy.url.parse().unwrap());

    for (per_client, pool) in [(8, 1), (2, 4)] {
        let before = proxy.connections().len();
        let mut s = fan_out("wide", &format!("wide-{per_client}"));
        s.fan_out_subscriptions_per_client = per_client;
        let started = tokio::time::Instant::now();
        let engine =
            ConsumerEngine::start(s, clients_trusting(&through_proxy, &proxy.ca_pem).await.unwrap()).await.unwrap();
        let mut got: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut first: BTreeMap<String, Duration> = BTreeMap::new();
        let deadline = started + Duration::from_secs(60);
        while got.values().map(Vec::len).sum::<usize>() < written.len() && tokio::time::Instant::now() < deadline {
            if let Some(batch) = engine.poll(1 << 20, Duration::from_millis(500)).await {
                for s in &batch.shards {
                    first.entry(s.shard_id.clone()).or_insert_with(|| started.elapsed());
                    got.entry(s.shard_id.clone())
                        .or_default()
                        .extend(s.records.iter().map(|r| String::from_utf8(r.data.clone()).unwrap()));
                }
                engine.ack(batch.id).await.unwrap();
            }
        }
        let drained = started.elapsed();
        // Every subscription is still open here: its SubscribeToShard stream is counted by the proxy.
        let connections: Vec<_> = proxy.connections()[before..].to_vec();
        engine.stop().await;
        assert_eq!(got, expected, "pool of {pool}: every record once, in shard order");

        assert!(
            connections.iter().all(|c| c.alpn.as_deref() == Some("h2")),
            "HTTP/2 negotiated by ALPN: {connections:?}"
        );
        let carrying: Vec<_> = connections.iter().filter(|c| !c.subscribed_shards().is_empty()).collect();
        let spread: Vec<_> = carrying.iter().map(|c| (c.subscribed_shards().len(), c.max_open_subscriptions)).collect();
        eprintln!(
            "pool of {pool} ({per_client} subscriptions per client): {} TLS connections (all h2), {} carried SubscribeToShard \
             as (shards, most open at once) {spread:?}; first record of all 8 shards after {:?}, {} records drained in {drained:?}",
            connections.len(),
            carrying.len(),
            first.values().max().unwrap(),
            written.len(),
        );
        assert_eq!(carrying.len(), pool, "one HTTP/2 connection per pooled client: {spread:?}");
        assert_eq!(
            connections.len(),
            pool + 1,
            "the engine's own client and each pooled client opened one connection, none beside it: {connections:?}"
        );
        let mut all = std::collections::BTreeSet::new();
        for c in &carrying {
            let shards = c.subscribed_shards();
            assert_eq!(shards.len(), per_client, "each pooled client carries its share of the shards: {spread:?}");
            assert!(
                c.max_open_subscriptions >= per_client,
                "its subscriptions were open at once on the one connection: {spread:?}"
            );
            let operations: Vec<_> = c.requests.iter().map(|r| r.operation.as_str()).collect();
            assert_eq!(operations[0], "ListShards", "the pooled client opened its connection first: {operations:?}");
            assert!(operations[1..].iter().all(|&o| o == "SubscribeToShard"), "then only subscribed: {operations:?}");
            all.extend(shards);
        }
        assert_eq!(all.len(), 8, "no shard on two connections, none missing");
    }
}

/// Back-pressure with Enhanced Fan-Out. Max Buffer Size is 64 KiB; a producer writes about 10 MB to
/// 4 shards while nothing is taken for at least 12 s. A subscription's next event is read only once
/// the budget has taken the previous one's records, so what the engine holds (buffered records plus
/// the received events waiting for budget, at most one per subscription) must stay within the
/// documented bound, sampled every 100 ms: Max Buffer Size (or one event, when an event is larger:
/// it is admitted alone once the whole budget is free) plus one event per subscription. kinesis-local
/// sends about one event a second per subscription with everything new on the shard, so its events
/// are larger than this budget and the bound is computed from the largest event seen. The bytes
/// that flowed from kinesis-local towards the engine during the stall are printed, not asserted:
/// with nothing read they park in the kernel's socket buffers (loopback autotuning allows MBs per
/// socket), outside the engine. Then everything is taken: every record once, in shard order, over
/// the same subscriptions (the stall did not end them and the watchdog did not fire).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fan_out_reads_events_no_faster_than_the_buffer_budget_allows() {
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    log();
    let e = Emulators::start("efo-budget");
    let c = clients(&aws(&e)).await;
    create_stream(&c, "flood", 4).await;
    let proxy = FreezingProxy::start(&e.kinesis).await; // never frozen here: it counts the bytes delivered
    let mut through_proxy = aws(&e);
    through_proxy.endpoint_override = Some(proxy.url.parse().unwrap());
    let budget = 64 * 1024;
    let mut s = fan_out("flood", "flood-app");
    s.max_buffer_size = budget;
    let engine = Arc::new(ConsumerEngine::start(s, clients(&through_proxy).await).await.unwrap());
    let shards = engine.leased_shards().len() as u64;
    assert_eq!(shards, 4);

    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (engine, stop) = (engine.clone(), stop.clone());
        tokio::spawn(async move {
            let (mut max, mut max_waiting, mut samples) = (0u64, 0u64, 0u32);
            while !stop.load(Ordering::SeqCst) {
                max = max.max(engine.held_bytes());
                max_waiting = max_waiting.max(engine.fan_out_stats().waiting_events.load(Ordering::SeqCst));
                samples += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            (max, max_waiting, samples)
        })
    };
    let stalled = tokio::time::Instant::now();
    let delivered_before = proxy.delivered.load(Ordering::SeqCst);
    // 4,000 records of ~4 KB (16 MB): far more than the bound even when a loaded machine lets kinesis-local pack
    // its events fuller (a 2,500-record run on a loaded machine saw 521 KB events, a bound of 2.6 MB, 10.1 MB written)
    let written = put_on_every_shard(&c, "flood", 1000, 4000).await;
    let written_bytes: usize = written.iter().map(|(_, d)| d.len()).sum();
    let produced = stalled.elapsed();
    tokio::time::sleep(Duration::from_secs(12).saturating_sub(produced).max(Duration::from_secs(3))).await;
    let stall = stalled.elapsed();
    let delivered_in_stall = proxy.delivered.load(Ordering::SeqCst) - delivered_before;
    let proxy_port: u16 = proxy.url.rsplit(':').next().unwrap().parse().unwrap();
    let kinesis_port: u16 = e.kinesis.rsplit(':').next().unwrap().parse().unwrap();
    let parked = socket_queues(proxy_port, kinesis_port);
    let subscriptions_in_stall = engine.fan_out_stats().subscriptions.load(Ordering::Relaxed);
    let held_at_end_of_stall = engine.held_bytes();
    let waiting_at_end_of_stall = engine.fan_out_stats().waiting_event_bytes.load(Ordering::SeqCst);

    let (got, _) = drain(&engine, written.len(), true).await;
    stop.store(true, Ordering::SeqCst);
    let (max_held, max_waiting, samples) = sampler.await.unwrap();
    let stats = engine.fan_out_stats();
    let largest = stats.largest_event_bytes.load(Ordering::Relaxed);
    let bound = budget.max(largest) + shards * largest;
    eprintln!(
        "wrote {} records, {written_bytes} bytes of data in {produced:?}; not taken for {stall:?}. Engine held at most {max_held} bytes \
         ({samples} samples; at the end of the stall {held_at_end_of_stall}, of which {waiting_at_end_of_stall} in events waiting \
         for budget; at most {max_waiting} events waiting) against a bound of {bound} = max({budget}, largest event {largest}) + \
         {shards} x {largest}; {delivered_in_stall} bytes flowed from kinesis-local \
         to the engine during the stall ({parked}); subscriptions {subscriptions_in_stall} after the stall, {} at the end; watchdog {}",
        written.len(),
        stats.subscriptions.load(Ordering::Relaxed),
        stats.watchdog_replacements.load(Ordering::Relaxed),
    );
    assert_eq!(got, by_shard(&written), "every record once, in shard order, after the stall");
    assert!(
        max_held <= bound,
        "held {max_held} bytes, more than max(Max Buffer Size, one event) + one event per subscription ({bound})"
    );
    assert!(max_waiting <= shards, "at most one event per subscription waits for budget: {max_waiting}");
    assert!(
        held_at_end_of_stall >= budget / 2,
        "the budget was full during the stall (the test stalled reading): {held_at_end_of_stall}"
    );
    assert!((written_bytes as u64) > 4 * bound, "the producer wrote far more than the bound");
    assert_eq!(
        stats.watchdog_replacements.load(Ordering::Relaxed),
        0,
        "the stall is not mistaken for a silent subscription"
    );
    assert!(engine.poll(1 << 20, Duration::from_millis(2500)).await.is_none(), "nothing more");
    engine.stop().await;
}

/// Bytes waiting in loopback TCP queues (from /proc/net/tcp): unread in the engine's sockets to the
/// proxy, unsent in the proxy's sockets to the engine, unsent in kinesis-local's sockets.
fn socket_queues(proxy_port: u16, kinesis_port: u16) -> String {
    let Ok(table) = std::fs::read_to_string("/proc/net/tcp") else { return "no /proc/net/tcp".into() };
    let port = |addr: &str| u16::from_str_radix(addr.rsplit(':').next().unwrap_or(""), 16).unwrap_or(0);
    let (mut engine_rx, mut proxy_tx, mut kinesis_tx) = (0u64, 0u64, 0u64);
    for line in table.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (local, remote) = (port(f[1]), port(f[2]));
        let (tx, rx) = f[4].split_once(':').unwrap();
        let (tx, rx) = (u64::from_str_radix(tx, 16).unwrap(), u64::from_str_radix(rx, 16).unwrap());
        if remote == proxy_port {
            engine_rx += rx;
        } else if local == proxy_port {
            proxy_tx += tx;
        } else if local == kinesis_port {
            kinesis_tx += tx;
        }
    }
    format!("at its end {engine_rx} bytes unread in the engine's sockets, {proxy_tx} unsent in the proxy's, {kinesis_tx} unsent in kinesis-local's")
}

/// Enhanced Fan-Out over HTTP/2 through an authenticating HTTP proxy (Proxy Configuration Service):
/// the Kinesis endpoint is HTTPS (the TLS terminator in front of kinesis-local, ALPN "h2"), so the
/// engine's Kinesis clients open CONNECT tunnels through tinyproxy, with basic credentials, and
/// speak HTTP/2 inside them; DynamoDB (plain HTTP) goes through the same proxy as absolute-form
/// requests. Every record arrives once, in shard order; tinyproxy logged the CONNECTs to the
/// terminator and the DynamoDB requests, and the terminator saw only h2 connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fan_out_over_http2_goes_through_an_authenticating_proxys_connect_tunnels() {
    use kinesnow_core::config::proxy::{HttpProxy, Proxy, ProxyCredentials};
    use kinesnow_core::config::Secret;
    log();
    let e = Emulators::start("efo-proxy");
    let c = clients(&aws(&e)).await;
    create_stream(&c, "proxied", 2).await;
    let written = put(&c, "proxied", 0, 60).await;
    let terminator = h2_tls_proxy::H2TlsProxy::start(&e.kinesis).await;
    let tinyproxy = tinyproxy::Tinyproxy::start("nifi", "proxy-pw");
    let mut settings = aws(&e);
    settings.endpoint_override = Some(terminator.url.parse().unwrap());
    settings.proxy = Proxy::Http(HttpProxy {
        host: "127.0.0.1".into(),
        port: tinyproxy.port,
        credentials: Some(ProxyCredentials { user: "nifi".into(), password: Secret::new("proxy-pw") }),
    });

    let engine = ConsumerEngine::start(
        fan_out("proxied", "proxied-app"),
        clients_trusting(&settings, &terminator.ca_pem).await.unwrap(),
    )
    .await
    .unwrap();
    let (got, _) = drain(&engine, written.len(), true).await;
    let subscriptions = engine.fan_out_stats().subscriptions.load(Ordering::Relaxed);
    engine.stop().await;
    assert_eq!(got, by_shard(&written), "every record once, in shard order, through the proxy");
    assert!(subscriptions >= 2, "read by SubscribeToShard: {subscriptions}");

    let requests = tinyproxy.requests();
    let terminator_port = terminator.url.trim_end_matches('/').rsplit(':').next().unwrap().to_owned();
    let connects =
        requests.iter().filter(|(m, t)| m == "CONNECT" && t.ends_with(&format!(":{terminator_port}"))).count();
    assert!(connects >= 1, "Kinesis through CONNECT tunnels: {requests:?}");
    let dynamodb_port = e.dynamodb.trim_end_matches('/').rsplit(':').next().unwrap();
    assert!(
        requests.iter().any(|(m, t)| m == "POST" && t.contains(&format!("127.0.0.1:{dynamodb_port}"))),
        "DynamoDB through the proxy: {requests:?}"
    );
    let connections = terminator.connections();
    assert!(
        !connections.is_empty() && connections.iter().all(|c| c.alpn.as_deref() == Some("h2")),
        "HTTP/2 inside the tunnels: {connections:?}"
    );
    assert!(connections.iter().any(|c| !c.subscribed_shards().is_empty()), "SubscribeToShard inside a tunnel");
}
