//! Hunts the reopen race as a class (issue 34, item 12): a client appends batches to a channel while
//! another task reopens the same channel at random moments, with a commit lag short enough that opens
//! keep landing while the committer takes and inserts batches of that channel.
//!
//! Snowflake's semantics, which exactly-once across nodes rests on: an open answers with the channel's
//! latest committed offset token, and every batch appended before it and not committed by then is
//! discarded (never becomes visible). The client here behaves like PutSnowflake: after each reopen it
//! sends again exactly the batches above the token the open reported.
//!
//! Every batch's rows carry the client sequencer of the continuation token it was appended with
//! (`GEN`) and its offset token (`BATCH`). A batch accepted with a token of sequencer g was accepted
//! before the open that moved the channel to sequencer g + 1 (the stand-in checks the sequencer and
//! reopens under one lock), so the open that ended generation g is known exactly, whatever the timing.
//! Checked at the end of each round, once everything has settled:
//! - no visible row of generation g has an offset token above what the open ending g reported;
//! - every row is visible exactly once, and the channel's committed offset token is the last batch's;
//! - the tokens reported by successive opens never go back.
//!
//! Without commit 773cbe6 (the open waiting for the channel's batches being inserted) every round failed
//! both of the first two checks: 36 of 36 rounds over three runs, each round with batches visible above
//! the token an open reported and rows loaded twice. Its other half (the committer takes no batch of a
//! channel being opened) closes a window of microseconds this test does not reach on its own.
//! The 12 rounds cover each commit lag with and without an open latency. `STANDIN_RACE_ROUNDS` overrides
//! the count; `STANDIN_RACE_SEED` fixes the random pauses (not the timing, which is the point).

mod common;

use common::*;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TABLE: &str = "RACE";
/// Batches each round's client has to get committed, rows per batch, and reopens per round at most.
const BATCHES: u64 = 150;
const ROWS: u64 = 3;
const OPENS: usize = 25;
/// Upper bound of the client's random pause after an append.
const PACE_MS: u64 = 4;

/// xorshift64*: enough randomness for timing, no dependency, reproducible from the printed seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The client's view of its channel: the continuation token of the last open (sequencer `gen`) and the
/// next batch to send.
struct Client {
    gen: u64,
    token: String,
    next: u64,
}

/// What one round saw.
#[derive(Default)]
struct Log {
    /// (sequencer of the continuation token, batch) of every append answered 200.
    accepted: BTreeSet<(u64, u64)>,
    /// The sequencer an open moved the channel to -> the committed offset token it reported.
    opens: BTreeMap<u64, Option<u64>>,
}

/// What the round's writer and reopener share.
struct Round {
    e: Arc<Env>,
    round: u64,
    channel: String,
    client: Mutex<Client>,
    log: Mutex<Log>,
    /// The reopener has finished.
    done: AtomicBool,
}

fn sequencer(token: &str) -> u64 {
    token.split_once('_').and_then(|(c, _)| c.parse().ok()).unwrap_or_else(|| panic!("continuation token {token}"))
}

fn offset(v: &Value) -> Option<u64> {
    v.as_str().map(|s| s.parse().unwrap_or_else(|_| panic!("offset token {s}")))
}

fn num(v: &Value) -> u64 {
    v.as_u64().or_else(|| v.as_f64().map(|f| f as u64)).unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Opens the channel and returns (continuation token, committed offset token).
async fn open(e: &Env, channel: &str) -> (String, Option<u64>) {
    let r = e.open(TABLE, channel, false).await;
    assert_eq!(r.status, 200, "open {channel}: {}", r.text);
    let v = r.json();
    let token = v["next_continuation_token"].as_str().unwrap().to_string();
    (token, offset(&v["channel_status"]["last_committed_offset_token"]))
}

/// Appends batches 1..=BATCHES, rewinding to what the reopener's opens report, until the reopener is done
/// and every batch has been sent in the current generation.
async fn writer(r: Arc<Round>, pace: Duration, seed: u64) {
    let mut rng = Rng(seed | 1);
    let mut stale = 0u32;
    loop {
        let (gen, token, k) = {
            let c = r.client.lock().unwrap();
            (c.gen, c.token.clone(), c.next)
        };
        if k > BATCHES {
            if r.done.load(Ordering::SeqCst) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
            continue;
        }
        let seq = sequencer(&token);
        let rows: Vec<Value> = (0..ROWS)
            .map(|j| json!({"id": r.round * 1_000_000 + k * ROWS + j, "rnd": r.round, "gen": seq, "batch": k}))
            .collect();
        let resp = r.e.append(TABLE, &r.channel, &token, &k.to_string(), &rows).await;
        if resp.status == 200 {
            stale = 0;
            r.log.lock().unwrap().accepted.insert((seq, k));
            {
                let mut c = r.client.lock().unwrap();
                if c.gen == gen {
                    c.token = resp.json()["next_continuation_token"].as_str().unwrap().to_string();
                    c.next = k + 1;
                }
            }
            // About as fast as the committer inserts, so it keeps taking batches without a backlog building up.
            tokio::time::sleep(Duration::from_micros(rng.below(pace.as_micros() as u64))).await;
        } else {
            // The reopener has moved the channel on (or is opening it): wait for its token.
            assert_eq!(
                resp.code(),
                "STALE_CONTINUATION_TOKEN_SEQUENCER",
                "append {} batch {k}: {}",
                r.channel,
                resp.text
            );
            stale += 1;
            assert!(stale < 20_000, "the reopener never handed over a fresh token");
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
    }
}

/// Reopens the channel at random moments, `OPENS` times or until an open reports the last batch committed;
/// after each open the client goes on from the batch above the reported committed offset token.
async fn reopener(r: Arc<Round>, max_gap: Duration, seed: u64) {
    let mut rng = Rng(seed | 1);
    for _ in 0..OPENS {
        tokio::time::sleep(Duration::from_micros(rng.below(max_gap.as_micros() as u64))).await;
        let (token, committed) = open(&r.e, &r.channel).await;
        let gen = sequencer(&token);
        r.log.lock().unwrap().opens.insert(gen, committed);
        *r.client.lock().unwrap() = Client { gen, token, next: committed.map_or(1, |t| t + 1) };
        if committed == Some(BATCHES) {
            break;
        }
    }
    r.done.store(true, Ordering::SeqCst);
}

/// Until the channel has no batch waiting or being inserted and has committed `want`.
async fn settled(e: &Env, channel: &str, want: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let all = e.admin("GET", "/admin/channels", Value::Null).await;
        let ch = all["channels"].as_array().unwrap().iter().find(|c| c["channel_name"] == channel).cloned();
        let ch = ch.unwrap_or_else(|| panic!("no channel {channel}: {all}"));
        if ch["pending_batches"] == 0 && offset(&ch["last_committed_offset_token"]) == Some(want) {
            return;
        }
        assert!(Instant::now() < deadline, "{channel} did not settle at {want}: {ch}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[derive(Default)]
struct Tally {
    opens: usize,
    /// Opens that discarded at least one accepted batch (the case the race is about).
    discarding_opens: usize,
    rows_checked: u64,
    violations: Vec<String>,
    failed_rounds: Vec<String>,
}

/// Checks one round's invariants; returns the violations found.
async fn check_round(e: &Env, round: u64, log: &Log) -> Vec<String> {
    let mut bad = vec![];
    let mut last: Option<u64> = None;
    for (gen, t) in &log.opens {
        if t < &last {
            bad.push(format!("the open to sequencer {gen} reported {t:?}, an earlier one {last:?}"));
        }
        last = *t;
    }
    let visible = e
        .query(&format!(
            "SELECT GEN, BATCH, count(*) AS N FROM DB.PUBLIC.{TABLE} WHERE RND = {round} GROUP BY GEN, BATCH ORDER BY GEN, BATCH"
        ))
        .await;
    // Per generation, the visible batches the open that ended it should have discarded.
    let mut resurrected: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for row in &visible {
        let (gen, batch, n) = (num(&row["GEN"]), num(&row["BATCH"]), num(&row["N"]));
        if !log.accepted.contains(&(gen, batch)) {
            bad.push(format!("batch {batch} of sequencer {gen} is visible but was never accepted"));
        }
        if n != ROWS {
            bad.push(format!("batch {batch} of sequencer {gen} has {n} visible rows, not {ROWS}"));
        }
        if let Some(reported) = log.opens.get(&(gen + 1)) {
            if reported.is_none_or(|t| batch > t) {
                resurrected.entry(gen).or_default().push(batch);
            }
        }
    }
    for (gen, batches) in resurrected {
        bad.push(format!(
            "batches {batches:?} of sequencer {gen} are visible, but the open that ended sequencer {gen} reported \
             committed offset token {:?}: Snowflake discards them",
            log.opens[&(gen + 1)]
        ));
    }
    let ids = e
        .query(&format!(
            "SELECT count(*) AS N, count(DISTINCT ID) AS D, min(ID) AS LO, max(ID) AS HI FROM DB.PUBLIC.{TABLE} WHERE RND = {round}"
        ))
        .await;
    let r = &ids[0];
    let base = round * 1_000_000;
    let want =
        json!({"N": BATCHES * ROWS, "D": BATCHES * ROWS, "LO": base + ROWS, "HI": base + BATCHES * ROWS + ROWS - 1});
    let got = json!({"N": num(&r["N"]), "D": num(&r["D"]), "LO": num(&r["LO"]), "HI": num(&r["HI"])});
    if got != want {
        bad.push(format!("rows (count, distinct ids, lowest, highest) {got}, want each row exactly once: {want}"));
    }
    bad
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reopen_discards_every_batch_it_does_not_report_as_committed() {
    let rounds: u64 = std::env::var("STANDIN_RACE_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(12);
    let seed: u64 = std::env::var("STANDIN_RACE_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    let started = Instant::now();
    let e = Arc::new(env(0).await);
    e.sql(&format!(
        "CREATE OR REPLACE TABLE DB.PUBLIC.{TABLE} (ID NUMBER(38,0) NOT NULL, RND NUMBER(38,0), GEN NUMBER(38,0), BATCH NUMBER(38,0))"
    ))
    .await;
    let mut rng = Rng(seed | 1);
    let mut tally = Tally::default();
    for round in 0..rounds {
        // Commit lags around the committer's 5 ms tick, and sometimes an open that takes a while (so batches
        // fall due while the channel is being opened).
        let lag = [0, 2, 5, 10][(round % 4) as usize];
        let open_latency = if round % 3 == 2 { 1 + rng.below(4) } else { 0 };
        // Appends race as fast as they can: Snowflake's per-channel limits (10 requests and 20 MB a second) are
        // off here, this test is about reopens.
        e.admin(
            "POST",
            "/admin/settings",
            json!({"commit_lag_ms": lag, "open_latency_ms": open_latency, "rate_limit_per_channel": 0}),
        )
        .await;
        let channel = format!("RACE_{round}");
        let (token, committed) = open(&e, &channel).await;
        assert_eq!(committed, None);
        let gen = sequencer(&token);
        let r = Arc::new(Round {
            e: e.clone(),
            round,
            channel: channel.clone(),
            client: Mutex::new(Client { gen, token, next: 1 }),
            log: Mutex::new(Log { opens: BTreeMap::from([(gen, None)]), ..Log::default() }),
            done: AtomicBool::new(false),
        });
        let w = tokio::spawn(writer(r.clone(), Duration::from_millis(PACE_MS), rng.next()));
        let o = tokio::spawn(reopener(r.clone(), Duration::from_millis(lag + 8), rng.next()));
        tokio::time::timeout(Duration::from_secs(60), async {
            w.await.unwrap();
            o.await.unwrap();
        })
        .await
        .unwrap_or_else(|_| panic!("round {round} did not finish"));
        settled(&e, &channel, BATCHES).await;

        let log = std::mem::take(&mut *r.log.lock().unwrap());
        let opens = log.opens.len() - 1;
        let discarding = log
            .opens
            .iter()
            .filter(|(gen, t)| log.accepted.range((**gen - 1, t.map_or(1, |t| t + 1))..(**gen, 0)).next().is_some())
            .count();
        let bad = check_round(&e, round, &log).await;
        let what = format!("round {round} (commit lag {lag} ms, open latency {open_latency} ms)");
        println!("{what}: {opens} reopens, {discarding} discarding accepted batches, {} violations", bad.len());
        tally.opens += opens;
        tally.discarding_opens += discarding;
        tally.rows_checked += BATCHES * ROWS;
        if !bad.is_empty() {
            tally.violations.extend(bad.iter().map(|b| format!("{what}: {b}")));
            tally.failed_rounds.push(what);
        }
    }
    println!(
        "reopen race hunt: seed {seed}, {rounds} rounds, {} reopens ({} of them discarding accepted batches), \
         {} rows checked, {} rounds failed, {:.1} s",
        tally.opens,
        tally.discarding_opens,
        tally.rows_checked,
        tally.failed_rounds.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(tally.discarding_opens > rounds as usize, "the hunt hardly ever reopened over uncommitted batches");
    assert!(
        tally.violations.is_empty(),
        "{} of {rounds} rounds failed (seed {seed}): {:#?}; {} violations, the first: {:#?}",
        tally.failed_rounds.len(),
        tally.failed_rounds,
        tally.violations.len(),
        &tally.violations[..tally.violations.len().min(6)]
    );
}

/// An open whose client gave up while it waited (NiFi stopping PutSnowflake mid-open) left the
/// channel marked as opening for ever: every later open got 409 ERR_OPEN_CHANNEL_IN_PROGRESS and its
/// batches never committed. Snowflake has no such state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_the_client_gave_up_on_leaves_the_channel_usable() {
    let e = env(10).await;
    e.sql(&format!("CREATE OR REPLACE TABLE DB.PUBLIC.{TABLE} (ID NUMBER)")).await;
    e.admin("POST", "/admin/settings", json!({"open_latency_ms": 1000})).await;
    let impatient = reqwest::Client::builder().timeout(Duration::from_millis(100)).build().unwrap();
    let gave_up = impatient
        .put(format!("{}{}/channels/JAM", e.base, Env::pipe_path(TABLE)))
        .header("Accept", "application/json")
        .header("Authorization", format!("Bearer {}", e.scoped))
        .header("X-Snowflake-Authorization-Token-Type", "OAUTH")
        .json(&json!({}))
        .send()
        .await;
    assert!(gave_up.is_err(), "the client gives up before the open answers: {:?}", gave_up.map(|r| r.status()));
    tokio::time::sleep(Duration::from_millis(1200)).await; // the server sees the request dropped
    e.admin("POST", "/admin/settings", json!({"open_latency_ms": 0})).await;
    let r = e.open(TABLE, "JAM", false).await;
    assert_eq!(r.status, 200, "the channel opens again: {}", r.text);
}
