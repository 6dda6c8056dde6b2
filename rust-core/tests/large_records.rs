//! Records up to 10 MiB (issue 38): Kinesis lets a stream's maximum record size be raised from
//! 1 MiB to 10 MiB (`MaxRecordSizeInKiB`, 1024 to 10240). The engine reads records at each size
//! boundary (exactly 1 MiB, 1 MiB + 1, 10 MiB) exactly once, by polling and by Enhanced Fan-Out,
//! with a 1 MiB Max Buffer Size and a 64 KiB Max Batch Size: a record larger than the whole budget
//! is admitted alone once the budget is free, and handed out alone in a batch of its own. A KPL
//! aggregate of 100,000 small user records (about 8.6 MB, more than a 1 MiB stream allows) is
//! de-aggregated (a full 10 MiB one: the unit tests of `kinesis::deaggregate`).
//!
//! The stream is served by the benchmark Kinesis source (bench/kinesis-source), which serves
//! records of one size up to its `--max-record-size-kib` and refuses larger ones (it has no
//! PutRecord: the stream is generated from its flags). kinesis-local, the emulator of the
//! other tests, has UpdateMaxRecordSize in its API (version 0.6.2), but whether it stores and
//! serves 10 MiB records was not checked. DynamoDB (the lease table) is dynalite, started with
//! kinesis-local by `support::Emulators`.
//!
//! The binary comes from `KINESIS_SOURCE_BIN`, or else is built by bench/kinesis-source/build.sh
//! in the root's target dir (profile `suite`, as tests/run-all.sh builds it). Run with
//! `cargo test --test integration large_records::`.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::support::{log, settings, Emulators};
use kinesnow_core::aws::{clients, AwsSettings};
use kinesnow_core::config::consume_kinesis::{AwsCredentials, ConsumerType};
use kinesnow_core::consumer::{ConsumerEngine, EngineSettings};
use kinesnow_core::kinesis::record::record_cost;

const MIB: usize = 1024 * 1024;
const BUDGET: u64 = MIB as u64;
const MAX_BATCH: u64 = 64 * 1024;
/// The sequence numbers the benchmark source writes (56 digits).
const SEQUENCE_LEN: usize = 56;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn source_binary() -> PathBuf {
    if let Ok(bin) = std::env::var("KINESIS_SOURCE_BIN") {
        return PathBuf::from(bin);
    }
    let target =
        std::env::var("KINESIS_SOURCE_TARGET_DIR").unwrap_or_else(|_| repo().join("target").display().to_string());
    let profile = std::env::var("KINESIS_SOURCE_PROFILE").unwrap_or_else(|_| "suite".into());
    let out = Command::new("bash")
        .arg(repo().join("bench/kinesis-source/build.sh"))
        .env("KINESIS_SOURCE_TARGET_DIR", target)
        .env("KINESIS_SOURCE_PROFILE", profile)
        .env("KINESIS_SOURCE_JOBS", std::env::var("KINESIS_SOURCE_JOBS").unwrap_or_else(|_| "2".into()))
        .stderr(Stdio::inherit())
        .output()
        .expect("bench/kinesis-source/build.sh runs");
    assert!(out.status.success(), "bench/kinesis-source/build.sh failed");
    let text = String::from_utf8(out.stdout).unwrap();
    PathBuf::from(text.lines().last().expect("build.sh prints the binary's path").trim())
}

/// A running benchmark source; killed through its own Child handle when dropped.
struct Source {
    child: Child,
    endpoint: String,
}

impl Source {
    fn start(args: &[&str]) -> Source {
        let mut child = Command::new(source_binary())
            .args(["--stream", "large", "--threads", "2"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the kinesis-source binary starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port: u16 = line
            .trim()
            .strip_prefix("listening on 127.0.0.1:")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        Source { child, endpoint: format!("http://127.0.0.1:{port}") }
    }
}

impl Drop for Source {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn aws(source: &Source, e: &Emulators) -> AwsSettings {
    AwsSettings {
        region: "us-east-1".into(),
        credentials: AwsCredentials::fixed("local", "local"),
        endpoint_override: Some(source.endpoint.parse().unwrap()),
        dynamodb_endpoint_override: Some(e.dynamodb.parse().unwrap()),
        proxy: Default::default(),
    }
}

fn small_budget(app: &str, consumer_type: ConsumerType) -> EngineSettings {
    let mut s = settings("large", app);
    s.max_buffer_size = BUDGET;
    s.consumer_type = consumer_type;
    s
}

/// What a test saw: every record as (shard, sequence number, sub-sequence number, data length),
/// the data's first bytes, the most the engine held, and each batch's records and bytes.
#[derive(Default)]
struct Seen {
    records: Vec<(String, String, Option<u64>, usize)>,
    heads: Vec<Vec<u8>>,
    max_held: u64,
    batches: Vec<(usize, u64)>,
}

/// Polls with a 64 KiB Max Batch Size until `expected` records arrived (or two minutes passed),
/// acknowledging each batch, while a sampler records the most the engine held. With `pause`
/// `(bytes, wait)`, NiFi stops taking records for `wait` once it has acknowledged `bytes` (the
/// sampler goes on), as a NiFi busy elsewhere would.
async fn drain(engine: Arc<ConsumerEngine>, expected: usize, pause: Option<(u64, Duration)>) -> Seen {
    let stop = Arc::new(AtomicBool::new(false));
    let max_held = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (engine, stop, max_held) = (engine.clone(), stop.clone(), max_held.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                max_held.fetch_max(engine.held_bytes(), Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
    };
    let mut seen = Seen::default();
    let mut pause = pause;
    let mut acked_bytes = 0u64;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while seen.records.len() < expected && tokio::time::Instant::now() < deadline {
        if let Some(batch) = engine.poll(MAX_BATCH, Duration::from_millis(500)).await {
            max_held.fetch_max(engine.held_bytes(), Ordering::SeqCst);
            let mut count = 0;
            let mut bytes = 0;
            for shard in &batch.shards {
                for r in &shard.records {
                    count += 1;
                    bytes += r.cost();
                    seen.records.push((
                        shard.shard_id.clone(),
                        r.sequence_number.clone(),
                        r.sub_sequence_number,
                        r.data.len(),
                    ));
                    seen.heads.push(r.data[..r.data.len().min(32)].to_vec());
                }
            }
            seen.batches.push((count, bytes));
            engine.ack(batch.id).await.unwrap();
            acked_bytes += bytes;
            if let Some((_, wait)) = pause.take_if(|(after, _)| acked_bytes >= *after) {
                tokio::time::sleep(wait).await;
            }
        }
    }
    stop.store(true, Ordering::SeqCst);
    sampler.await.unwrap();
    seen.max_held = max_held.load(Ordering::SeqCst);
    seen
}

/// Reads a stream of `shards` x `per_shard` plain records of `size` bytes each and checks the rule:
/// each record once, in shard order, alone in its batch when larger than Max Batch Size, and the
/// engine holding at most the larger of the budget and one record (with fan-out, plus one received
/// event per subscribed shard).
async fn reads_records_of(size: usize, max_kib: u32, consumer_type: ConsumerType, name: &str) {
    log();
    let (shards, per_shard) = (2usize, 3usize);
    let source = Source::start(&[
        "--shards",
        &shards.to_string(),
        "--records-per-shard",
        &per_shard.to_string(),
        "--record-size",
        &size.to_string(),
        "--max-record-size-kib",
        &max_kib.to_string(),
        "--keys",
        "unique",
    ]);
    let e = Emulators::start(name);
    let c = clients(&aws(&source, &e)).await;
    let summary = c.kinesis.describe_stream_summary().stream_name("large").send().await.unwrap();
    assert_eq!(summary.stream_description_summary().unwrap().max_record_size_in_kib(), Some(max_kib as i32));

    let engine = Arc::new(ConsumerEngine::start(small_budget(&format!("{name}-app"), consumer_type), c).await.unwrap());
    let seen = drain(engine.clone(), shards * per_shard, None).await;
    let settled_budget = engine.budget_available();
    assert!(engine.poll(MAX_BATCH, Duration::from_millis(1500)).await.is_none(), "nothing more");
    engine.stop().await;

    let largest = record_cost(size, SEQUENCE_LEN, "pk-1-2-0".len());
    eprintln!(
        "{name}: {} records of {size} bytes; the engine held at most {} bytes (budget {BUDGET}, one record {largest})",
        seen.records.len(),
        seen.max_held
    );
    assert_eq!(seen.records.len(), shards * per_shard, "every record arrives");
    let distinct: BTreeSet<_> = seen.records.iter().map(|(s, q, _, _)| (s.clone(), q.clone())).collect();
    assert_eq!(distinct.len(), seen.records.len(), "each once");
    assert!(seen.records.iter().all(|(_, _, sub, len)| *len == size && sub.is_none()), "whole, plain records");
    for shard in 0..shards {
        let id = format!("shardId-{shard:012}");
        let heads: Vec<String> = seen
            .records
            .iter()
            .zip(&seen.heads)
            .filter(|((s, ..), _)| *s == id)
            .map(|(_, h)| String::from_utf8_lossy(h).split(':').next().unwrap().to_owned())
            .collect();
        let expected: Vec<String> = (0..per_shard).map(|i| format!("{shard}.{i}.0")).collect();
        assert_eq!(heads, expected, "shard {id} in order");
    }
    assert!(seen.batches.iter().all(|&(count, _)| count == 1), "each record alone in its batch: {:?}", seen.batches);
    // With Enhanced Fan-Out each subscription may also hold one received event waiting for budget
    // (the documented bound); an event is at most 2 MiB of data, or one larger record alone, so here
    // one record per shard.
    let waiting_events = match consumer_type {
        ConsumerType::EnhancedFanOut => shards as u64 * largest,
        _ => 0,
    };
    assert!(
        seen.max_held <= BUDGET.max(largest) + waiting_events,
        "held {} bytes: more than the larger of the budget ({BUDGET}) and one record ({largest}), plus {waiting_events} \
         of received fan-out events",
        seen.max_held
    );
    assert_eq!(settled_budget, BUDGET, "every byte of the budget is back once all is acknowledged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_reads_a_record_of_exactly_1_mib_with_a_1_mib_budget() {
    reads_records_of(MIB, 1024, ConsumerType::SharedThroughput, "large-1mib").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_reads_records_of_1_mib_plus_one_byte() {
    reads_records_of(MIB + 1, 1025, ConsumerType::SharedThroughput, "large-1mib1").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_reads_10_mib_records_with_a_1_mib_budget() {
    reads_records_of(10 * MIB, 10240, ConsumerType::SharedThroughput, "large-10mib").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fan_out_reads_records_of_1_mib_plus_one_byte() {
    reads_records_of(MIB + 1, 10240, ConsumerType::EnhancedFanOut, "large-efo-1mib1").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fan_out_reads_10_mib_records_with_a_1_mib_budget() {
    reads_records_of(10 * MIB, 10240, ConsumerType::EnhancedFanOut, "large-efo-10mib").await;
}

/// The source refuses a stream whose records exceed its maximum record size, as Kinesis refuses
/// to write them: 1 MiB + 1 byte in a stream of 1024 KiB, 10 MiB + 1 in one of 10240 KiB.
#[test]
fn the_source_refuses_records_over_the_streams_maximum() {
    for (size, max_kib) in [(MIB + 1, 1024u32), (10 * MIB + 1, 10240)] {
        let out = Command::new(source_binary())
            .args(["--record-size", &size.to_string(), "--max-record-size-kib", &max_kib.to_string()])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{size} bytes in a stream of {max_kib} KiB: {stderr}");
        assert!(stderr.contains("record size"), "{stderr}");
    }
    let out = Command::new(source_binary()).args(["--max-record-size-kib", "10241"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "MaxRecordSizeInKiB is 1024 to 10240");
}

/// One KPL aggregate per Kinesis record, each of 100,000 user records of 80 bytes (about 8.6 MB,
/// in a stream of 10 MiB records): each expands to about 28 MB of budget bytes, more than the
/// 16 MiB a 1 MiB aggregate may, and is de-aggregated, not passed through whole. With a 1 MiB
/// budget the expansion is admitted alone, and its user records still go out in batches of at
/// most Max Batch Size.
///
/// The engine must hold at most one expansion even when NiFi is slow to take the first (issue 50:
/// it once held 40.4 MB in a busy suite). So NiFi pauses for 7 s once it has committed twice the
/// budget's worth of user records: long enough for the reader's next GetRecords (the shard's
/// limiter lets it call again about 4.1 s after the first 8.6 MB response) to bring the second
/// aggregate while most of the first is still buffered. The second must wait until the first is
/// all committed; before the fix it was admitted then, and the engine held both (about 52 MB).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_10_mib_kpl_aggregate_of_small_records_is_de_aggregated_within_max_batch_size() {
    log();
    let (users, size) = (100_000usize, 80usize);
    let source = Source::start(&[
        "--shards",
        "1",
        "--records-per-shard",
        "2",
        "--record-size",
        &size.to_string(),
        "--aggregate-share",
        "1",
        "--records-per-aggregate",
        &users.to_string(),
        "--max-record-size-kib",
        "10240",
    ]);
    let e = Emulators::start("large-kpl");
    let c = clients(&aws(&source, &e)).await;
    let engine = Arc::new(
        ConsumerEngine::start(small_budget("large-kpl-app", ConsumerType::SharedThroughput), c).await.unwrap(),
    );
    let seen = drain(engine.clone(), 2 * users, Some((2 * BUDGET, Duration::from_secs(7)))).await;
    assert!(engine.poll(MAX_BATCH, Duration::from_millis(1500)).await.is_none(), "nothing more");
    let settled_budget = engine.budget_available();
    engine.stop().await;

    eprintln!(
        "{} user records in {} batches; the engine held at most {} bytes",
        seen.records.len(),
        seen.batches.len(),
        seen.max_held
    );
    assert_eq!(seen.records.len(), 2 * users, "every user record arrives, de-aggregated");
    let expected: Vec<Option<u64>> = (0..2).flat_map(|_| (0..users as u64).map(Some)).collect();
    let subs: Vec<Option<u64>> = seen.records.iter().map(|r| r.2).collect();
    assert!(subs == expected, "in order, each once");
    assert!(seen.records.iter().all(|r| r.3 == size));
    let too_big: Vec<_> = seen.batches.iter().filter(|&&(count, bytes)| count > 1 && bytes > MAX_BATCH).collect();
    assert!(too_big.is_empty(), "batches of more than one record beyond Max Batch Size: {too_big:?}");
    let one_expansion = users as u64 * 400; // 80 + key + 56 + 128 + 16 bytes a sub-record, with room
    assert!(seen.max_held <= one_expansion, "held {} bytes: more than one aggregate's expansion", seen.max_held);
    assert_eq!(settled_budget, BUDGET);
}
