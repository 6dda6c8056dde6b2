//! Commit-lag load of the stand-in in bench mode: many channels, many small appends, as a live stream through
//! PutSnowflake makes them (bench/pipeline.sh at 64 to 256 shards), and how long each append waited for its commit.
//! Each channel appends `--rows` rows of about 1 KiB (zstd NDJSON) at an even pace, `--appends-per-s` over all
//! channels, for `--seconds`; a poller asks `:bulk-channel-status` of every channel every `--status-ms`, as the
//! processor does while it waits for commits. At the end every commit record of `GET /admin/bench-commits` gives
//! its append-to-commit time (committed_ms - accepted_ms); printed: p50, p99, max, how many took longer than the
//! commit lag plus the check interval plus 100 ms, the stand-in's CPU (when it is a process of its own) and whether
//! every channel's commits came in append order and covered every append.
//!
//! ```text
//! cargo run --profile suite -p snowflake-standin --no-default-features --example commit_lag -- \
//!     [--bin target/suite/snowflake-standin] [--channels 64] [--appends-per-s 400] [--rows 20] [--seconds 20] \
//!     [--commit-lag-ms 1000] [--status-ms 500] [--state-dir DIR] [--json]
//! ```
//! Without `--bin` the stand-in runs in this process (its CPU is then not reported). Without `--state-dir` it keeps
//! everything in memory (as bench/pipeline.sh runs it by default; with one, as `--standin-on-disk`).

use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

struct Args {
    bin: Option<String>,
    state_dir: Option<String>,
    channels: usize,
    appends_per_s: f64,
    rows: usize,
    seconds: u64,
    commit_lag_ms: u64,
    status_ms: u64,
    json: bool,
}

fn args() -> Args {
    let mut a = Args {
        bin: None,
        state_dir: None,
        channels: 64,
        appends_per_s: 400.0,
        rows: 20,
        seconds: 20,
        commit_lag_ms: 1000,
        status_ms: 500,
        json: false,
    };
    let v: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < v.len() {
        let val = || v.get(i + 1).cloned().unwrap_or_else(|| panic!("{} needs a value", v[i]));
        match v[i].as_str() {
            "--bin" => a.bin = Some(val()),
            "--state-dir" => a.state_dir = Some(val()),
            "--channels" => a.channels = val().parse().unwrap(),
            "--appends-per-s" => a.appends_per_s = val().parse().unwrap(),
            "--rows" => a.rows = val().parse().unwrap(),
            "--seconds" => a.seconds = val().parse().unwrap(),
            "--commit-lag-ms" => a.commit_lag_ms = val().parse().unwrap(),
            "--status-ms" => a.status_ms = val().parse().unwrap(),
            "--json" => {
                a.json = true;
                i -= 1;
            }
            other => panic!("unknown argument {other}"),
        }
        i += 2;
    }
    // The stand-in keeps Snowflake's 10 requests a second per channel, as a client must.
    let per_channel = a.appends_per_s / a.channels as f64;
    assert!(
        per_channel <= 10.0,
        "--appends-per-s {} over {} channels is {per_channel} a channel: above Snowflake's 10",
        a.appends_per_s,
        a.channels
    );
    a
}

/// utime + stime of a process, seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|s| s.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

fn percentile(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() - 1) as f64 * p / 100.0).round() as usize]
}

struct Standin {
    url: String,
    child: Option<Child>,
    inproc: Option<snowflake_standin::Running>,
}

async fn start_standin(a: &Args) -> Standin {
    match &a.bin {
        Some(bin) => {
            let mut cmd = Command::new(bin);
            cmd.args(["--plain", "--bench-mode", "--commit-lag-ms", &a.commit_lag_ms.to_string()]);
            if let Some(dir) = &a.state_dir {
                cmd.args(["--state-dir", dir]);
            }
            let mut child = cmd.stdout(Stdio::piped()).spawn().expect("start the stand-in");
            let mut line = String::new();
            BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
            let url = line
                .split_whitespace()
                .find_map(|w| w.strip_prefix("url="))
                .unwrap_or_else(|| panic!("no ready line: {line}"))
                .to_string();
            Standin { url, child: Some(child), inproc: None }
        }
        None => {
            let run = snowflake_standin::start(snowflake_standin::Options {
                settings: snowflake_standin::Settings {
                    commit_lag_ms: a.commit_lag_ms,
                    bench_mode: true,
                    ..Default::default()
                },
                state_dir: a.state_dir.as_ref().map(Into::into),
                ..Default::default()
            })
            .await
            .unwrap();
            Standin { url: run.url.clone(), child: None, inproc: Some(run) }
        }
    }
}

/// One append's body: `rows` JSON objects of about 1 KiB, zstd-compressed.
fn body(channel: usize, rows: usize) -> Vec<u8> {
    let pad = "x".repeat(1000);
    let text: String =
        (0..rows).map(|i| format!("{{\"ID\":{},\"PAD\":\"{pad}\"}}\n", channel * 1_000_000 + i)).collect();
    zstd::encode_all(text.as_bytes(), 1).unwrap()
}

#[tokio::main]
async fn main() {
    let a = args();
    let standin = start_standin(&a).await;
    let base = standin.url.clone();
    let http = reqwest::Client::builder().pool_max_idle_per_host(a.channels + 8).build().unwrap();
    let scoped = common::bench_session(&http, &base, "CREATE OR REPLACE TABLE DB.PUBLIC.B (ID NUMBER)").await;
    let auth = format!("Bearer {scoped}");
    let pipe = format!("{base}/v2/streaming/databases/DB/schemas/PUBLIC/pipes/B-STREAMING");
    let data = pipe.replace("/v2/streaming/databases", "/v2/streaming/data/databases");

    // Open every channel first.
    let mut tokens = vec![];
    for c in 0..a.channels {
        let open: Value = http
            .put(format!("{pipe}/channels/ch-{c}"))
            .header("Accept", "application/json")
            .header("Authorization", &auth)
            .json(&json!({}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        tokens.push(open["next_continuation_token"].as_str().unwrap().to_string());
    }

    let pid = standin.child.as_ref().map(|c| c.id());
    let cpu0 = pid.map(cpu_seconds);
    let started = Instant::now();
    let deadline = started + Duration::from_secs(a.seconds);
    let period = Duration::from_secs_f64(a.channels as f64 / a.appends_per_s);
    let mut tasks = vec![];
    for (c, token) in tokens.into_iter().enumerate() {
        let (http, data, auth) = (http.clone(), data.clone(), auth.clone());
        let payload = body(c, a.rows);
        // Channels start spread over one period, so the appends arrive evenly.
        let first = started + period.mul_f64(c as f64 / a.channels as f64);
        tasks.push(tokio::spawn(async move {
            let mut ticks = tokio::time::interval_at(first.into(), period);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut token = token;
            let mut n = 0u64;
            let mut slowest = Duration::ZERO;
            loop {
                ticks.tick().await;
                if Instant::now() >= deadline {
                    break;
                }
                n += 1;
                let t0 = Instant::now();
                let r = http
                    .post(format!(
                        "{data}/channels/ch-{c}/rows?continuationToken={token}&offsetToken={n}&requestId=r{c}-{n}"
                    ))
                    .header("Accept", "application/json")
                    .header("Authorization", &auth)
                    .header("Content-Type", "application/x-ndjson")
                    .header("Content-Encoding", "zstd")
                    .body(payload.clone())
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), 200);
                let v: Value = r.json().await.unwrap();
                slowest = slowest.max(t0.elapsed());
                token = v["next_continuation_token"].as_str().unwrap().to_string();
            }
            (n, slowest)
        }));
    }
    // The status poller: every channel's status, one bulk request, every status_ms.
    let poller = {
        let (http, pipe, auth) = (http.clone(), pipe.clone(), auth.clone());
        let names: Vec<String> = (0..a.channels).map(|c| format!("ch-{c}")).collect();
        let every = Duration::from_millis(a.status_ms.max(1));
        tokio::spawn(async move {
            let mut polls = 0u64;
            while Instant::now() < deadline {
                let r = http
                    .post(format!("{pipe}:bulk-channel-status"))
                    .header("Accept", "application/json")
                    .header("Authorization", &auth)
                    .json(&json!({ "channel_names": names }))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), 200);
                let _ = r.bytes().await;
                polls += 1;
                tokio::time::sleep(every).await;
            }
            polls
        })
    };
    let mut appends = vec![];
    let mut slowest_append = Duration::ZERO;
    for t in tasks {
        let (n, s) = t.await.unwrap();
        appends.push(n);
        slowest_append = slowest_append.max(s);
    }
    let polls = poller.await.unwrap();
    let sent_secs = started.elapsed().as_secs_f64();
    // Wait until every append is committed.
    let drain_deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let v: Value = http.get(format!("{base}/admin/channels")).send().await.unwrap().json().await.unwrap();
        if v["uncommitted_batches"] == 0 {
            break;
        }
        assert!(Instant::now() < drain_deadline, "not drained: {} uncommitted", v["uncommitted_batches"]);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let cpu = pid.map(|p| cpu_seconds(p) - cpu0.unwrap());
    let commits: Value = http.get(format!("{base}/admin/bench-commits")).send().await.unwrap().json().await.unwrap();
    let list = commits["commits"].as_array().cloned().unwrap_or_default();
    let mut lat: Vec<i64> = vec![];
    let mut per_channel: HashMap<String, Vec<u64>> = HashMap::new();
    for c in &list {
        lat.push(c["committed_ms"].as_i64().unwrap() - c["accepted_ms"].as_i64().unwrap());
        let token: u64 = c["offset_token"].as_str().unwrap().parse().unwrap();
        per_channel.entry(c["channel"].as_str().unwrap().to_string()).or_default().push(token);
    }
    let in_order = (0..a.channels).all(|c| {
        let got = per_channel.get(&format!("ch-{c}")).cloned().unwrap_or_default();
        got == (1..=appends[c]).collect::<Vec<u64>>()
    });
    lat.sort_unstable();
    let total: u64 = appends.iter().sum();
    let check_ms = (a.commit_lag_ms / 4).clamp(5, 100) as i64;
    let late = lat.iter().filter(|&&l| l > a.commit_lag_ms as i64 + check_ms + 100).count();
    let result = json!({
        "channels": a.channels,
        "appends": total,
        "appends_per_s": total as f64 / sent_secs,
        "rows_per_append": a.rows,
        "commits": list.len(),
        "commit_lag_ms": a.commit_lag_ms,
        "p50_ms": percentile(&lat, 50.0),
        "p99_ms": percentile(&lat, 99.0),
        "max_ms": lat.last().copied().unwrap_or(0),
        "late": late,
        "in_order": in_order,
        "status_polls": polls,
        "slowest_append_ms": slowest_append.as_millis() as u64,
        "standin_cpu_s": cpu,
        "standin_cores": cpu.map(|c| c / sent_secs),
    });
    if a.json {
        println!("{result}");
    } else {
        println!(
            "{} channels, {} appends ({:.0}/s) of {} rows, {} commits: append-to-commit p50 {} ms, p99 {} ms, max {} ms \
             (commit lag {} ms); {} later than lag + {} ms + 100 ms; in append order and complete: {}; slowest append \
             answer {} ms; {} status polls; stand-in CPU {}",
            a.channels,
            total,
            total as f64 / sent_secs,
            a.rows,
            list.len(),
            result["p50_ms"],
            result["p99_ms"],
            result["max_ms"],
            a.commit_lag_ms,
            late,
            check_ms,
            in_order,
            result["slowest_append_ms"],
            polls,
            cpu.map(|c| format!("{c:.2} s ({:.2} cores)", c / sent_secs)).unwrap_or_else(|| "-".into()),
        );
    }
    if let Some(mut child) = standin.child {
        let _ = child.kill();
        let _ = child.wait();
    }
    if let Some(run) = standin.inproc {
        run.shutdown().await;
    }
}
