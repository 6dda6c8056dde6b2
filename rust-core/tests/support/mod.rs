//! Local emulators for the engine's integration tests: starts kinesis-local and dynalite on free
//! ports through tests/services/local-services.sh and stops exactly those processes when dropped.

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use kinesnow_core::aws::{AwsClients, AwsSettings};
use kinesnow_core::config::consume_kinesis::{AwsCredentials, InitialPosition};
use std::collections::BTreeMap;

use aws_sdk_kinesis::primitives::Blob;
use kinesnow_core::consumer::{ConsumerEngine, EngineSettings};

pub struct Emulators {
    pub kinesis: String,
    pub dynamodb: String,
    state_dir: PathBuf,
    env: Vec<(String, String)>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/services/local-services.sh")
}

impl Emulators {
    /// Starts both emulators on free ports. A port can be taken between `free_port` and the emulator's bind
    /// (another test's emulator, an outgoing connection's ephemeral port); the script then exits with 4 and
    /// the start is tried again on other ports.
    pub fn start(name: &str) -> Self {
        const ATTEMPTS: usize = 5;
        const PORT_IN_USE: i32 = 4; // local-services.sh's exit code for a port taken before the bind
        let state_dir = std::env::temp_dir().join(format!("kinesnow-{name}-{}", std::process::id()));
        let mut attempt = 0;
        let env = loop {
            attempt += 1;
            let env = vec![
                ("KINESIS_PORT".to_owned(), free_port().to_string()),
                ("KINESIS_TLS_PORT".to_owned(), free_port().to_string()),
                ("DYNAMODB_PORT".to_owned(), free_port().to_string()),
                ("SERVICES_STATE_DIR".to_owned(), state_dir.display().to_string()),
            ];
            let status = Command::new("bash")
                .arg(script())
                .arg("start")
                .envs(env.iter().cloned())
                .status()
                .expect("run local-services.sh");
            if status.success() {
                break env;
            }
            assert!(
                status.code() == Some(PORT_IN_USE) && attempt < ATTEMPTS,
                "the emulators did not start (attempt {attempt}, {status})"
            );
        };
        let port = |k: &str| env.iter().find(|(n, _)| n == k).unwrap().1.clone();
        Self {
            kinesis: format!("http://127.0.0.1:{}", port("KINESIS_PORT")),
            dynamodb: format!("http://127.0.0.1:{}", port("DYNAMODB_PORT")),
            state_dir,
            env,
        }
    }
}

impl Drop for Emulators {
    fn drop(&mut self) {
        let _ = Command::new("bash").arg(script()).arg("stop").envs(self.env.iter().cloned()).status();
        let _ = std::fs::remove_dir_all(&self.state_dir);
    }
}

/// KINESNOW_TEST_LOG=1 prints the engine's events.
pub fn log() {
    if std::env::var("KINESNOW_TEST_LOG").is_ok() {
        let _ = tracing_subscriber::fmt().with_max_level(tracing::Level::DEBUG).with_test_writer().try_init();
    }
}

pub fn aws(e: &Emulators) -> AwsSettings {
    AwsSettings {
        region: "us-east-1".into(),
        credentials: AwsCredentials::fixed("local", "local"),
        endpoint_override: Some(e.kinesis.parse().unwrap()),
        dynamodb_endpoint_override: Some(e.dynamodb.parse().unwrap()),
        proxy: Default::default(),
    }
}

pub fn settings(stream: &str, app: &str) -> EngineSettings {
    EngineSettings {
        stream: stream.into(),
        stream_arn: None,
        application: app.into(),
        initial_position: InitialPosition::TrimHorizon,
        consumer_type: kinesnow_core::config::consume_kinesis::ConsumerType::SharedThroughput,
        fan_out_watchdog: Duration::from_secs(35),
        fan_out_subscriptions_per_client: kinesnow_core::kinesis::fan_out::SUBSCRIPTIONS_PER_CLIENT,
        max_records_per_request: 100,
        max_buffer_size: 4 * 1024 * 1024,
        failover_timeout: Duration::from_secs(7),
        heartbeat_interval: Duration::from_secs(3),
        scan_interval: Duration::from_secs(1),
        shard_refresh: Duration::from_secs(30),
        hand_back_timeout: Duration::from_secs(30),
        lag_warning_percent: 50,
        stuck_shard_warning: Duration::from_secs(300),
        migration: Default::default(),
        failover_position: kinesnow_core::consumer::engine::FailoverPosition::NiFiCommit,
        board: kinesnow_core::feedback::BoardHandle::process(),
    }
}
/// The stream's ARN as kinesis-local writes it (its region and account).
pub async fn arn_of(c: &AwsClients, stream: &str) -> String {
    let d = c.kinesis.describe_stream_summary().stream_name(stream).send().await.unwrap();
    d.stream_description_summary().unwrap().stream_arn().to_owned()
}

/// The same stream name under another account.
pub fn of_other_account(arn: &str) -> String {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    assert_ne!(parts[4], "210987654321");
    format!("{}:{}:{}:{}:210987654321:{}", parts[0], parts[1], parts[2], parts[3], parts[5])
}

pub async fn create_stream(c: &AwsClients, stream: &str, shards: i32) {
    c.kinesis.create_stream().stream_name(stream).shard_count(shards).send().await.unwrap();
    wait_active(c, stream).await;
}

/// Waits (up to 20 s) until the stream is ACTIVE: after creating it, or after a split or merge.
pub async fn wait_active(c: &AwsClients, stream: &str) {
    for _ in 0..200 {
        let d = c.kinesis.describe_stream_summary().stream_name(stream).send().await.unwrap();
        if d.stream_description_summary().unwrap().stream_status().as_str() == "ACTIVE" {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("stream {stream} never became ACTIVE");
}

/// Puts `n` records with partition keys spread over the shards; returns (shard, data) in put order.
pub async fn put(c: &AwsClients, stream: &str, from: usize, n: usize) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for i in from..from + n {
        let data = format!("{{\"n\":{i}}}");
        let r = c
            .kinesis
            .put_record()
            .stream_name(stream)
            .partition_key(format!("key-{}", i % 7))
            .data(Blob::new(data.clone()))
            .send()
            .await
            .unwrap();
        out.push((r.shard_id().to_owned(), data));
    }
    out
}

/// Polls and acks until `n` records arrived (or the time is up); returns data per shard in order.
pub async fn drain(engine: &ConsumerEngine, n: usize, ack: bool) -> (BTreeMap<String, Vec<String>>, Vec<i64>) {
    drain_within(engine, n, ack, Duration::from_secs(60)).await
}

/// Polls until `n` records arrived or `limit` passed; returns the records' data per shard and the
/// batch ids, acking each batch when `ack`.
pub async fn drain_within(
    engine: &ConsumerEngine,
    n: usize,
    ack: bool,
    limit: Duration,
) -> (BTreeMap<String, Vec<String>>, Vec<i64>) {
    let mut got: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut batches = Vec::new();
    let deadline = tokio::time::Instant::now() + limit;
    while got.values().map(Vec::len).sum::<usize>() < n && tokio::time::Instant::now() < deadline {
        if let Some(batch) = engine.poll(1024 * 1024, Duration::from_millis(200)).await {
            for s in &batch.shards {
                got.entry(s.shard_id.clone())
                    .or_default()
                    .extend(s.records.iter().map(|r| String::from_utf8(r.data.clone()).unwrap()));
            }
            batches.push(batch.id);
            if ack {
                engine.ack(batch.id).await.unwrap();
            }
        }
    }
    (got, batches)
}

pub fn by_shard(put: &[(String, String)]) -> BTreeMap<String, Vec<String>> {
    let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (shard, data) in put {
        m.entry(shard.clone()).or_default().push(data.clone());
    }
    m
}
