//! Throughput benchmark of the stand-in: sustained rows/s and MB/s accepted on
//! one channel and on eight concurrent channels (zstd NDJSON appends of 2,000
//! rows, as the SDK and Openflow send them), plus how long the committer takes
//! to make everything visible in DuckDB. Median of several runs; writes a
//! Markdown report.
//!
//! `cargo run --release -p snowflake-standin --example bench -- [--runs 3] [--seconds 5] [--out BENCH.md] [--tls]`

use serde_json::json;
use snowflake_standin::{start, Options, Settings};
use std::time::{Duration, Instant};

mod common;

const ROWS_PER_REQUEST: usize = 2000;

struct Args {
    runs: usize,
    seconds: u64,
    out: Option<String>,
    tls: bool,
}

fn args() -> Args {
    let mut a = Args { runs: 3, seconds: 5, out: None, tls: false };
    let v: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < v.len() {
        match v[i].as_str() {
            "--runs" => {
                a.runs = v[i + 1].parse().unwrap();
                i += 1;
            }
            "--seconds" => {
                a.seconds = v[i + 1].parse().unwrap();
                i += 1;
            }
            "--out" => {
                a.out = Some(v[i + 1].clone());
                i += 1;
            }
            "--tls" => a.tls = true,
            other => panic!("unknown argument {other}"),
        }
        i += 1;
    }
    a
}

/// One request body: realistic Kinesis-shaped rows, NDJSON, zstd-compressed.
fn payload(seed: usize) -> (Vec<u8>, usize) {
    let mut body = String::new();
    for i in 0..ROWS_PER_REQUEST {
        let row = json!({
            "id": seed * ROWS_PER_REQUEST + i,
            "name": format!("event-{i}-lorem-ipsum"),
            "value": i as f64 * 1.5,
            "kinesisMetadata": {"stream": "bench", "shardId": "shardId-000000000000", "partitionKey": format!("pk-{}", i % 97),
                "sequenceNumber": "49590338271490256608559692538361571095921575989136588898", "subSequenceNumber": 0, "approximateArrival": 1700000000000i64 + i as i64},
        });
        body.push_str(&row.to_string());
        body.push('\n');
    }
    let raw = body.into_bytes();
    (zstd::encode_all(&raw[..], 3).unwrap(), raw.len())
}

struct RunResult {
    rows: usize,
    raw_bytes: usize,
    wire_bytes: usize,
    secs: f64,
    drain_secs: f64,
}

async fn run_once(channels: usize, seconds: u64, tls: bool) -> RunResult {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Every channel appends as fast as it can: this measures what the stand-in takes, so Snowflake's per-channel
    // limits (10 requests and 20 MB a second) are off.
    let settings = Settings {
        commit_lag_ms: 1000,
        rate_limit_per_channel: 0,
        throughput_limit_per_channel: 0,
        ..Default::default()
    };
    let run = start(Options { tls, settings, ..Default::default() }).await.unwrap();
    let mut builder = reqwest::Client::builder().pool_max_idle_per_host(16);
    if let Some(ca) = &run.ca_pem {
        builder = builder.add_root_certificate(reqwest::Certificate::from_pem(ca.as_bytes()).unwrap());
    }
    let http = builder.build().unwrap();
    let base = run.url.clone();
    let scoped = common::bench_session(
        &http,
        &base,
        "CREATE OR REPLACE TABLE DB.PUBLIC.B (id NUMBER, name VARCHAR, value FLOAT, kinesisMetadata VARIANT)",
    )
    .await;

    let admin = |path: &str, body: serde_json::Value| http.post(format!("{base}{path}")).json(&body).send();
    let (body, raw_len) = payload(0);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let mut tasks = vec![];
    for c in 0..channels {
        let (http, base, scoped, body) = (http.clone(), base.clone(), scoped.clone(), body.clone());
        tasks.push(tokio::spawn(async move {
            let pipe = format!("{base}/v2/streaming/databases/DB/schemas/PUBLIC/pipes/B-STREAMING");
            let auth = format!("Bearer {scoped}");
            let open: serde_json::Value = http
                .put(format!("{pipe}/channels/ch-{c}"))
                .header("Accept", "application/json")
                .header("Authorization", &auth)
                .json(&json!({"fail_on_uncommitted_rows": false}))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let mut token = open["next_continuation_token"].as_str().unwrap().to_string();
            let data = pipe.replace("/v2/streaming/databases", "/v2/streaming/data/databases");
            let mut n = 0usize;
            while Instant::now() < deadline {
                n += 1;
                let r = http
                    .post(format!("{data}/channels/ch-{c}/rows?continuationToken={token}&offsetToken={n}"))
                    .header("Accept", "application/json")
                    .header("Authorization", &auth)
                    .header("Content-Type", "application/x-ndjson")
                    .header("Content-Encoding", "zstd")
                    .body(body.clone())
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), 200);
                let v: serde_json::Value = r.json().await.unwrap();
                token = v["next_continuation_token"].as_str().unwrap().to_string();
            }
            n
        }));
    }
    let mut requests = 0;
    for t in tasks {
        requests += t.await.unwrap();
    }
    let secs = started.elapsed().as_secs_f64();
    // Drain: wait until every appended row is committed and visible.
    let drain_start = Instant::now();
    loop {
        let v: serde_json::Value =
            http.get(format!("{base}/admin/channels")).send().await.unwrap().json().await.unwrap();
        if v["uncommitted_batches"] == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let drain_secs = drain_start.elapsed().as_secs_f64();
    let count: serde_json::Value = admin("/admin/query", json!({"sql": "SELECT count(*) AS n FROM DB.PUBLIC.B"}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let rows = requests * ROWS_PER_REQUEST;
    assert_eq!(count["rows"][0]["n"].as_u64().unwrap() as usize, rows, "all accepted rows committed");
    run.shutdown().await;
    RunResult { rows, raw_bytes: requests * raw_len, wire_bytes: requests * body.len(), secs, drain_secs }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .next()
                .map(|l| l.split_whitespace().nth(1).unwrap_or("0").parse::<u64>().unwrap_or(0) / 1024 / 1024)
        })
        .unwrap_or(0);
    format!("{cpu}, {cores} cores, {mem} GiB RAM")
}

#[tokio::main]
async fn main() {
    let a = args();
    let mut lines = vec![];
    for channels in [1usize, 8] {
        let mut results = vec![];
        for r in 0..a.runs {
            let res = run_once(channels, a.seconds, a.tls).await;
            eprintln!(
                "channels={channels} run={r}: {} rows in {:.2}s ({:.0} rows/s, {:.1} MB/s raw), drain {:.2}s",
                res.rows,
                res.secs,
                res.rows as f64 / res.secs,
                res.raw_bytes as f64 / res.secs / 1e6,
                res.drain_secs
            );
            results.push(res);
        }
        let rows_s = median(results.iter().map(|r| r.rows as f64 / r.secs).collect());
        let raw_mb = median(results.iter().map(|r| r.raw_bytes as f64 / r.secs / 1e6).collect());
        let wire_mb = median(results.iter().map(|r| r.wire_bytes as f64 / r.secs / 1e6).collect());
        let committed = median(results.iter().map(|r| r.rows as f64 / (r.secs + r.drain_secs)).collect());
        let drain = median(results.iter().map(|r| r.drain_secs).collect());
        lines
            .push(format!("| {channels} | {:.0} | {raw_mb:.1} | {wire_mb:.2} | {committed:.0} | {drain:.2} |", rows_s));
    }
    let (body, raw) = payload(0);
    let date = std::process::Command::new("date")
        .arg("-u")
        .arg("+%Y-%m-%d %H:%M UTC")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let report = format!(
        "# snowflake-standin throughput\n\n\
         Measured {date} on {machine} (shared with other work), release build, {transport}, in-memory DuckDB, commit lag 1000 ms.\n\
         Each request: {ROWS_PER_REQUEST} Kinesis-shaped JSON rows, {raw} bytes NDJSON, zstd to {wire} bytes; client and server in one process.\n\
         Median of {runs} runs of {secs} s each (`bench.sh`).\n\n\
         | channels | accepted rows/s | accepted MB/s (uncompressed) | accepted MB/s (wire, zstd) | committed rows/s (incl. drain) | drain after last append (s) |\n\
         |---|---|---|---|---|---|\n{rows}\n\n\
         \"Accepted\" is what append requests got 200 for while sending flat out; \"committed\" divides the same rows by the time until\n\
         all of them were converted and inserted into DuckDB (visible to queries, offset tokens advanced). For scale: Snowflake documents\n\
         12-20 MB/s per channel for the SDK and 1 MB/s / 10 requests/s per channel for REST.\n",
        machine = machine(),
        transport = if a.tls { "HTTPS" } else { "plain HTTP" },
        wire = body.len(),
        runs = a.runs,
        secs = a.seconds,
        rows = lines.join("\n"),
    );
    println!("{report}");
    if let Some(out) = a.out {
        std::fs::write(out, report).unwrap();
    }
}
