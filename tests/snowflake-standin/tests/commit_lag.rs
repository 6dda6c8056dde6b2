//! The commit lag holds under many small appends: a live stream through PutSnowflake at 64 to 256 shards makes
//! hundreds of small appends a second over as many channels (bench/pipeline.sh), and each must be committed after
//! the configured commit lag, not seconds later because the committer fell behind. A behaviour test with a
//! generous bound (lag + 1 s) and a modest load, not a timing benchmark (that is `examples/commit_lag.rs`).

mod common;

use common::*;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

const CHANNELS: usize = 256;
/// Each channel appends every APPEND_EVERY for SECONDS: 512 appends/s over all channels.
const APPEND_EVERY: Duration = Duration::from_millis(500);
const SECONDS: u64 = 6;
const ROWS: usize = 5;
const LAG_MS: i64 = 1000;
/// How much later than its commit lag an append may be committed here (the check interval is 100 ms).
const BOUND_MS: i64 = 1000;

/// Status polled while appending: each channel's committed offset token, as the processor sees it.
async fn committed_tokens(e: &Env) -> HashMap<String, Option<u64>> {
    let names: Vec<String> = (0..CHANNELS).map(|c| format!("c{c}")).collect();
    let r = e
        .call("POST", &format!("{}:bulk-channel-status", Env::pipe_path("T")), Some(json!({"channel_names": names})))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.json();
    names
        .iter()
        .map(|n| {
            let token = v["channel_statuses"][n]["last_committed_offset_token"].as_str().map(|t| t.parse().unwrap());
            (n.clone(), token)
        })
        .collect()
}

/// 256 channels each appending 5 rows every 500 ms for 6 s, in bench mode with a commit lag of 1 s: every append
/// is committed no sooner than its commit lag and no later than the lag plus one second; each channel's commits
/// come in append order (the bench record and the committed offset token in status, which never goes back) and
/// cover every append exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_channels_of_small_appends_commit_within_the_commit_lag() {
    let e = Arc::new(
        env_with(snowflake_standin::Settings { commit_lag_ms: LAG_MS as u64, bench_mode: true, ..Default::default() })
            .await,
    );
    e.sql("CREATE OR REPLACE TABLE DB.PUBLIC.T (ID NUMBER)").await;
    let mut tokens = vec![];
    for c in 0..CHANNELS {
        tokens.push(e.open_ok("T", &format!("c{c}")).await);
    }
    let body: String = (0..ROWS).map(|i| format!("{{\"ID\":{i}}}\n")).collect();

    let started = Instant::now();
    let deadline = started + Duration::from_secs(SECONDS);
    let mut appenders = vec![];
    for (c, token) in tokens.into_iter().enumerate() {
        let (e, body) = (e.clone(), body.clone());
        // Channels start spread over one period, so the appends arrive evenly.
        let first = started + APPEND_EVERY.mul_f64(c as f64 / CHANNELS as f64);
        appenders.push(tokio::spawn(async move {
            let mut ticks = tokio::time::interval_at(first.into(), APPEND_EVERY);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let (mut token, mut n) = (token, 0u64);
            loop {
                ticks.tick().await;
                if Instant::now() >= deadline {
                    return n;
                }
                n += 1;
                let q = format!("continuationToken={token}&offsetToken={n}&requestId=c{c}-{n}");
                let r = e.append_raw("T", &format!("c{c}"), &q, body.clone().into_bytes(), None).await;
                assert_eq!(r.status, 200, "{}", r.text);
                token = r.json()["next_continuation_token"].as_str().unwrap().to_string();
            }
        }));
    }
    // Meanwhile the committed offset tokens, polled as the processor does: never going back.
    let poller = {
        let e = e.clone();
        tokio::spawn(async move {
            let mut last: HashMap<String, Option<u64>> = HashMap::new();
            let mut polls = 0;
            while Instant::now() < deadline + Duration::from_millis(LAG_MS as u64) {
                for (name, token) in committed_tokens(&e).await {
                    let before = last.insert(name.clone(), token).flatten();
                    assert!(token >= before, "{name}: committed offset token went back from {before:?} to {token:?}");
                }
                polls += 1;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            polls
        })
    };
    let mut appended = vec![];
    for a in appenders {
        appended.push(a.await.unwrap());
    }
    assert!(poller.await.unwrap() > 0);
    let total: u64 = appended.iter().sum();
    assert!(total >= (CHANNELS as u64) * 4, "the load was not made: {total} appends");

    // Everything is committed within the lag (plus the bound) of the last append.
    let drain = Instant::now() + Duration::from_millis((LAG_MS + BOUND_MS) as u64 + 5000);
    loop {
        let v = e.admin("GET", "/admin/channels", json!(null)).await;
        if v["uncommitted_batches"] == 0 {
            break;
        }
        assert!(Instant::now() < drain, "{} batches still uncommitted", v["uncommitted_batches"]);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let commits = e.admin("GET", "/admin/bench-commits", json!(null)).await;
    assert_eq!(commits["dropped"], 0);
    let list = commits["commits"].as_array().unwrap();
    assert_eq!(list.len() as u64, total, "one commit record per append");
    let mut per_channel: HashMap<&str, Vec<u64>> = HashMap::new();
    let mut late: Vec<&Value> = vec![];
    for c in list {
        let waited = c["committed_ms"].as_i64().unwrap() - c["accepted_ms"].as_i64().unwrap();
        assert!(waited >= LAG_MS, "committed before its commit lag: {c}");
        if waited > LAG_MS + BOUND_MS {
            late.push(c);
        }
        assert_eq!(c["rows"], ROWS, "{c}");
        let token = c["offset_token"].as_str().unwrap().parse().unwrap();
        per_channel.entry(c["channel"].as_str().unwrap()).or_default().push(token);
    }
    assert!(
        late.is_empty(),
        "{} of {total} appends committed more than {BOUND_MS} ms after their commit lag of {LAG_MS} ms, e.g. {}",
        late.len(),
        late[0]
    );
    for (c, n) in appended.iter().enumerate() {
        let got = per_channel.remove(format!("c{c}").as_str()).unwrap_or_default();
        assert_eq!(got, (1..=*n).collect::<Vec<_>>(), "channel c{c}: commits out of append order or missing");
    }
    let finals = committed_tokens(&e).await;
    for (c, n) in appended.iter().enumerate() {
        assert_eq!(finals[&format!("c{c}")], Some(*n), "channel c{c}'s committed offset token");
    }
    let counts = e.admin("GET", "/admin/bench-counts", json!(null)).await;
    assert_eq!(counts["tables"]["DB.PUBLIC.T"], total * ROWS as u64);
}

/// A commit lag drawn from a range, set through `/admin/settings` as Snowflake-like tests do: 8 channels each append
/// every 100 ms for 3 s with lags drawn from 300-1500 ms. Every append is committed no sooner than the range's low
/// end and no later than its high end (plus the bound), each channel's commits come in append order although
/// later appends often drew shorter lags, and the lags spread over the range (a fixed lag would fail each check
/// that the waits differ).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lags_drawn_from_a_range_commit_in_append_order_per_channel() {
    const LOW: i64 = 300;
    const HIGH: i64 = 1500;
    const CH: usize = 8;
    let e = Arc::new(
        env_with(snowflake_standin::Settings { commit_lag_ms: 50, bench_mode: true, ..Default::default() }).await,
    );
    let set = e.admin("POST", "/admin/settings", json!({"commit_lag_ms": format!("{LOW}-{HIGH}")})).await;
    assert_eq!((set["commit_lag_ms"].as_i64(), set["commit_lag_max_ms"].as_i64()), (Some(LOW), Some(HIGH)));
    e.sql("CREATE OR REPLACE TABLE DB.PUBLIC.T (ID NUMBER)").await;
    let mut appenders = vec![];
    for c in 0..CH {
        let e = e.clone();
        let mut token = e.open_ok("T", &format!("r{c}")).await;
        appenders.push(tokio::spawn(async move {
            let mut n = 0u64;
            let until = Instant::now() + Duration::from_secs(3);
            while Instant::now() < until {
                n += 1;
                let q = format!("continuationToken={token}&offsetToken={n}&requestId=r{c}-{n}");
                let r = e.append_raw("T", &format!("r{c}"), &q, b"{\"ID\":1}\n".to_vec(), None).await;
                assert_eq!(r.status, 200, "{}", r.text);
                r.advance(&mut token);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            n
        }));
    }
    let mut appended = vec![];
    for a in appenders {
        appended.push(a.await.unwrap());
    }
    let drain = Instant::now() + Duration::from_millis(HIGH as u64 + BOUND_MS as u64 + 3000);
    while e.admin("GET", "/admin/channels", json!(null)).await["uncommitted_batches"] != 0 {
        assert!(Instant::now() < drain, "batches still uncommitted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let commits = e.admin("GET", "/admin/bench-commits", json!(null)).await;
    let mut per_channel: HashMap<String, Vec<(u64, i64)>> = HashMap::new();
    for c in commits["commits"].as_array().unwrap() {
        let waited = c["committed_ms"].as_i64().unwrap() - c["accepted_ms"].as_i64().unwrap();
        assert!(waited >= LOW, "committed {waited} ms after its append, before the range's low end: {c}");
        assert!(waited <= HIGH + BOUND_MS, "committed {waited} ms after its append, after the range's high end: {c}");
        let token = c["offset_token"].as_str().unwrap().parse().unwrap();
        per_channel.entry(c["channel"].as_str().unwrap().to_string()).or_default().push((token, waited));
    }
    let mut waits = vec![];
    for (c, n) in appended.iter().enumerate() {
        let got = per_channel.remove(&format!("r{c}")).unwrap_or_default();
        let tokens: Vec<u64> = got.iter().map(|(t, _)| *t).collect();
        assert_eq!(tokens, (1..=*n).collect::<Vec<_>>(), "channel r{c}: commits out of append order or missing");
        waits.extend(got.iter().map(|(_, w)| *w));
    }
    // Drawn lags, not one: the waits spread over most of the range (a fixed lag gives waits within one check).
    let (min, max) = (waits.iter().min().unwrap(), waits.iter().max().unwrap());
    assert!(max - min > (HIGH - LOW) / 2, "waits from {min} to {max} ms: the lag was not drawn from {LOW}-{HIGH}");
    // Setting a number alone goes back to a fixed lag.
    let set = e.admin("POST", "/admin/settings", json!({"commit_lag_ms": 200})).await;
    assert_eq!((set["commit_lag_ms"].as_i64(), set["commit_lag_max_ms"].as_i64()), (Some(200), Some(0)));
}
