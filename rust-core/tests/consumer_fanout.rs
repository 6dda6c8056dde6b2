//! The consumer engine with Enhanced Fan-Out against real kinesis-local (SubscribeToShard over
//! plain HTTP) and dynalite: registration, every record once in shard order, exact resume after a
//! restart (KPL sub-records too), rewind on nack, ResourceInUse retried, renewal across the
//! 5-minute subscription limit.
//!
//! What kinesis-local cannot do: end a fan-out subscription at a shard's end with ChildShards (its
//! subscriptions on a closed parent never end, see shared/reference/local-emulators.md §2), so the
//! shard-end path is tested on synthetic events in `consumer::subscriber`'s unit tests; its HTTP
//! is HTTP/1.1 over plain http, so the client pool's effect on HTTP/2 connections is not visible.

mod support;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use aws_sdk_kinesis::primitives::Blob;
use aws_sdk_kinesis::types::{ShardIteratorType, StartingPosition};
use kinesnow_core::aws::clients;
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
    assert!(committed >= 2 && committed < 30, "the batch ends inside the aggregate: {committed}");
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
                    got.entry(s.shard_id.clone()).or_default().extend(s.records.iter().map(|r| String::from_utf8(r.data.clone()).unwrap()));
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
