//! PutSnowflake's engine against the Snowflake stand-in (real HTTP, real DuckDB): exactly-once per
//! shard under replays, re-deliveries while pending, reopened channels, withheld commits,
//! throttling, expired tokens and pipe failover; split FlowFiles at least once; one instance's
//! channels apart from another's; empty FlowFiles; idle writers retired; row errors to invalid;
//! configuration errors to failure; schema evolution; Iceberg; Openflow's managed tokens (session
//! token, service account OIDC token as workload identity, rotation, SNOWFLAKE_HOST, a missing file).

use crate::standin_support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use kinesnow_core::config::{PropertyMap, PutSnowflakeConfig};
use kinesnow_core::snowflake::{FlowFileIn, Outcome, Route, SinkEngine, SinkSettings};
use serde_json::{json, Value};
use standin_support::{query_param, Standin};

const TABLE: &str = "DB.PUBLIC.EVENTS";
/// The instance id Java would pass from the processor's local state.
const INSTANCE: &str = "test";
const CHANNEL_0: &str = "kinesnow_test_orders_shardId-000000000000";

fn config(standin: &Standin, extra: &[(&str, &str)]) -> PutSnowflakeConfig {
    config_of(standin, INSTANCE, extra)
}

use standin_support::sink_config as config_of;

struct Sink {
    rt: tokio::runtime::Runtime,
    engine: Option<SinkEngine>,
    /// What Java holds in its sessions: every FlowFile handed over and without its outcome, whose
    /// content the engine may ask for again (`Route::Resend`).
    held: std::sync::Mutex<HashMap<i64, FlowFileIn>>,
}

impl Sink {
    fn start(config: &PutSnowflakeConfig) -> Self {
        Self::start_trusting(config, None)
    }

    /// With `ca` (PEM) trusted besides the public web roots.
    fn start_trusting(config: &PutSnowflakeConfig, ca: Option<Vec<u8>>) -> Self {
        Self::start_with(config, |s| s.extra_root_ca_pem = ca)
    }

    /// With the settings changed by `adjust` first.
    fn start_with(config: &PutSnowflakeConfig, adjust: impl FnOnce(&mut SinkSettings)) -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let mut settings = SinkSettings::from_config(config);
        settings.status_interval = Duration::from_millis(100);
        adjust(&mut settings);
        let engine = rt.block_on(async { SinkEngine::start(config, settings) }).unwrap();
        Self { rt, engine: Some(engine), held: Default::default() }
    }

    fn engine(&self) -> &SinkEngine {
        self.engine.as_ref().unwrap()
    }

    fn submit(&self, flow_files: Vec<FlowFileIn>) {
        self.held.lock().unwrap().extend(flow_files.iter().map(|f| (f.id, f.clone())));
        let _guard = self.rt.enter();
        self.engine().submit(flow_files);
    }

    /// The outcomes within `wait`, as Java routes them: a request for a held FlowFile's content
    /// again is answered (the FlowFile handed over again) and is not an outcome.
    fn collect(&self, wait: Duration) -> Vec<Outcome> {
        let outcomes = self.rt.block_on(self.engine().outcomes(wait, 10_000));
        let mut held = self.held.lock().unwrap();
        let mut resend = Vec::new();
        let mut settled = Vec::new();
        for o in outcomes {
            if o.route == Route::Resend {
                resend.extend(held.get(&o.flow_file_id).cloned());
            } else {
                held.remove(&o.flow_file_id);
                settled.push(o);
            }
        }
        drop(held);
        if !resend.is_empty() {
            let _guard = self.rt.enter();
            self.engine().submit(resend);
        }
        settled
    }

    /// Outcomes for exactly `n` FlowFiles, or a panic naming what is missing after `timeout`.
    fn outcomes(&self, n: usize, timeout: Duration) -> HashMap<i64, Outcome> {
        let deadline = Instant::now() + timeout;
        let mut got = HashMap::new();
        while got.len() < n {
            assert!(Instant::now() < deadline, "only {} of {n} outcomes after {timeout:?}: {got:?}", got.len());
            for o in self.collect(Duration::from_millis(200)) {
                assert!(got.insert(o.flow_file_id, o).is_none(), "two outcomes for one FlowFile");
            }
        }
        got
    }

    /// Stops the engine as NiFi's @OnStopped does; outcomes not yet read are lost, like rolled-back sessions.
    fn stop(mut self) {
        self.engine.take().unwrap().stop();
    }
}

/// One FlowFile per record, as ConsumeKinesis writes with the FLOW_FILE strategy.
fn record(id: i64, shard: &str, seq: u64, body: Value) -> FlowFileIn {
    let attributes = [
        ("aws.kinesis.stream.name", "orders".to_string()),
        ("aws.kinesis.shard.id", shard.to_string()),
        ("aws.kinesis.partition.key", format!("pk-{seq}")),
        ("aws.kinesis.last.sequence.number", format!("4959{seq:012}")),
        ("aws.kinesis.approximate.arrival.timestamp.ms", "1700000000000".to_string()),
        ("record.count", "1".to_string()),
    ];
    FlowFileIn {
        id,
        attributes: attributes.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        content: body.to_string().into_bytes().into(),
    }
}

/// `shards` × `per_shard` records with ids 1.. and a unique `n` column.
fn records(shards: usize, per_shard: u64, first_id: i64) -> Vec<FlowFileIn> {
    let mut out = Vec::new();
    let mut id = first_id;
    for seq in 1..=per_shard {
        for s in 0..shards {
            let shard = format!("shardId-00000000000{s}");
            out.push(record(id, &shard, seq, json!({"n": id, "shard": shard, "seq": seq})));
            id += 1;
        }
    }
    out
}

fn create_events(standin: &Standin, extra: &str) {
    standin.sql(&format!(
        "CREATE OR REPLACE TABLE {TABLE} (N NUMBER, SHARD VARCHAR, SEQ NUMBER, KINESISMETADATA VARIANT){extra}"
    ));
}

fn assert_exactly_once(standin: &Standin, expected: u64) {
    let rows = standin.query(&format!("SELECT COUNT(*) AS C, COUNT(DISTINCT N) AS D FROM {TABLE}"));
    assert_eq!(rows[0]["D"].as_u64().unwrap(), expected, "every record arrived");
    assert_eq!(rows[0]["C"].as_u64().unwrap(), expected, "no record arrived twice");
}

fn routes(outcomes: &HashMap<i64, Outcome>, route: Route) -> usize {
    outcomes.values().filter(|o| o.route == route).count()
}

#[test]
fn every_record_lands_once_and_a_replay_is_skipped_by_offset_token() {
    let standin = Standin::start("replay", 200);
    create_events(&standin, "");
    let config = config(&standin, &[]);
    let sink = Sink::start(&config);
    sink.submit(records(3, 40, 1));
    let outcomes = sink.outcomes(120, Duration::from_secs(30));
    assert_eq!(routes(&outcomes, Route::Success), 120, "{outcomes:?}");
    assert_exactly_once(&standin, 120);
    let first = &outcomes[&1];
    assert_eq!(first.channel, CHANNEL_0);
    assert_eq!(first.offset_token, "495900000000000100000000000000000000");
    let metadata = &standin.query(&format!("SELECT KINESISMETADATA AS M FROM {TABLE} WHERE N = 1"))[0]["M"];
    assert_eq!(metadata["shardedSequenceNumber"], "495900000000000100000000000000000000");
    assert_eq!(metadata["partitionKey"], "pk-1");
    sink.stop();

    // NiFi restarted before it recorded those outcomes: the same FlowFiles come again, plus new ones.
    let sink = Sink::start(&config);
    let mut again = records(3, 40, 1);
    again.extend(records(3, 50, 1).into_iter().skip(120));
    sink.submit(again);
    let outcomes = sink.outcomes(150, Duration::from_secs(30));
    assert_eq!(routes(&outcomes, Route::Success), 150);
    assert_eq!(outcomes[&1].rows_skipped, 1, "a replayed record is skipped, not sent");
    assert_eq!(outcomes[&121].rows_sent, 1);
    assert_exactly_once(&standin, 150);
}

#[test]
fn faults_never_lose_or_double_a_record() {
    let standin = Standin::start("faults", 200);
    create_events(&standin, "");
    let config = config(&standin, &[("Max Batch Size", "2 KB")]);
    let sink = Sink::start(&config);
    sink.submit(records(2, 10, 1));
    sink.outcomes(20, Duration::from_secs(30));

    let mut next = 21;
    let mut expected = 20;
    for fault in [
        json!({"kind": "stale_token", "count": 1}),
        json!({"kind": "backpressure429", "count": 8}),
        json!({"kind": "retry_request", "count": 3, "bare_string": true}),
        json!({"kind": "expired_token", "count": 1}),
        json!({"kind": "pipe_failover", "count": 1}),
        json!({"kind": "backpressure503", "count": 3, "on": "status"}),
    ] {
        standin.fault(fault.clone());
        // Ids continue; sequence numbers keep growing per shard (above the first batch's 1..=10).
        let batch: Vec<_> = (0..60)
            .map(|i| {
                let n = next + i as i64;
                let shard = if i % 2 == 0 { "shardId-000000000000" } else { "shardId-000000000001" };
                record(n, shard, n as u64 * 10, json!({"n": n, "shard": shard, "seq": n}))
            })
            .collect();
        sink.submit(batch);
        let outcomes = sink.outcomes(60, Duration::from_secs(60));
        assert_eq!(routes(&outcomes, Route::Success), 60, "after {fault}: {outcomes:?}");
        next += 60;
        expected += 60;
        assert_exactly_once(&standin, expected);
        standin.clear_faults();
    }
    let retried: Vec<_> =
        standin.requests("/rows").iter().filter_map(|r| query_param(r, "retryCount")).filter(|c| c != "0").collect();
    assert!(!retried.is_empty(), "some appends were retried with the same requestId");
}

#[test]
fn withheld_commits_time_out_and_are_sent_again_exactly_once() {
    let standin = Standin::start("withheld", 100);
    create_events(&standin, "");
    let config = config(&standin, &[("Commit Timeout", "2 sec")]);
    let sink = Sink::start(&config);
    standin.fault(json!({"kind": "withhold_commits", "count": -1}));
    sink.submit(records(2, 20, 1));
    std::thread::sleep(Duration::from_secs(5));
    assert!(sink.collect(Duration::ZERO).is_empty(), "nothing succeeds before Snowflake commits");
    standin.clear_faults();
    let outcomes = sink.outcomes(40, Duration::from_secs(30));
    assert_eq!(routes(&outcomes, Route::Success), 40);
    assert_exactly_once(&standin, 40);
    let opens = standin.requests(&format!("/channels/{CHANNEL_0}")).iter().filter(|r| r["method"] == "PUT").count();
    assert!(opens >= 2, "the channel was reopened after the commit timeout ({opens} opens)");
}

#[test]
fn a_child_shards_rows_wait_until_its_parents_rows_are_committed() {
    let standin = Standin::start("lineage", 100);
    create_events(&standin, "");
    let sink = Sink::start(&config(&standin, &[]));
    let (parent, child) = ("shardId-000000000000", "shardId-000000000002");
    // Snowflake is slow to commit the parent's channel; the child's FlowFiles come right after.
    standin
        .fault(json!({"kind": "withhold_commits", "count": -1, "channel": format!("kinesnow_test_orders_{parent}")}));
    sink.submit((1..=10).map(|i| record(i, parent, i as u64, json!({"n": i, "shard": parent}))).collect());
    let children: Vec<FlowFileIn> = (11..=20)
        .map(|i| {
            let mut f = record(i, child, i as u64, json!({"n": i, "shard": child}));
            f.attributes.insert("aws.kinesis.parent.shard.ids".into(), parent.into());
            f
        })
        .collect();
    sink.submit(children);
    std::thread::sleep(Duration::from_secs(3));
    assert!(sink.collect(Duration::ZERO).is_empty());
    assert_eq!(sink.engine().held_for_parents(), 10, "the child's FlowFiles are held");
    let child_rows = standin.requests(&format!("/channels/kinesnow_test_orders_{child}")).len();
    assert_eq!(child_rows, 0, "the child's channel was not even opened while the parent's rows were uncommitted");
    standin.clear_faults();
    let outcomes = sink.outcomes(20, Duration::from_secs(30));
    assert_eq!(routes(&outcomes, Route::Success), 20);
    assert_exactly_once(&standin, 20);
    assert_eq!(sink.engine().held_for_parents(), 0);
}

#[test]
fn rejected_rows_go_to_invalid_and_bad_content_is_never_sent() {
    let standin = Standin::start("invalid", 100);
    create_events(&standin, " ERROR_LOGGING = TRUE");
    let sink = Sink::start(&config(&standin, &[]));
    // Converting 'not a number' into N NUMBER fails in Snowflake, which still answers 200.
    sink.submit(vec![
        record(1, "shardId-000000000000", 1, json!({"n": 1})),
        FlowFileIn { id: 2, attributes: HashMap::new(), content: b"[1,2]".to_vec().into() },
    ]);
    let first = sink.outcomes(2, Duration::from_secs(20));
    assert_eq!(first[&1].route, Route::Success);
    assert_eq!(first[&2].route, Route::Invalid);
    assert!(first[&2].message.starts_with("not sent: array element 1 is a JSON number"), "{}", first[&2].message);
    sink.submit(vec![record(3, "shardId-000000000000", 2, json!({"n": "not a number"}))]);
    let second = sink.outcomes(1, Duration::from_secs(20));
    assert_eq!(second[&3].route, Route::Invalid, "{:?}", second[&3]);
    assert!(second[&3].message.contains("Snowflake rejected 1 row(s)"), "{}", second[&3].message);
    assert_eq!(standin.count(TABLE), 1);
    assert_eq!(standin.count(&format!("ERROR_TABLE({TABLE})")), 1);
}

#[test]
fn a_missing_table_sends_flow_files_to_failure_naming_it() {
    let standin = Standin::start("missing", 100);
    let sink = Sink::start(&config(&standin, &[]));
    sink.submit(records(1, 3, 1));
    let outcomes = sink.outcomes(3, Duration::from_secs(20));
    assert_eq!(routes(&outcomes, Route::Failure), 3);
    let message = &outcomes[&1].message;
    assert!(message.contains("EVENTS"), "{message}");
    assert!(message.contains("404"), "{message}");
}

#[test]
fn a_wrong_key_is_refused_with_a_message_and_without_the_key() {
    let standin = Standin::start("wrongkey", 100);
    create_events(&standin, "");
    let foreign = include_str!("../../tests/snowflake-standin/tests/fixtures/foreign.p8");
    let sink = Sink::start(&config(&standin, &[("Private Key", foreign)]));
    sink.submit(records(1, 1, 1));
    let outcomes = sink.outcomes(1, Duration::from_secs(20));
    let o = &outcomes[&1];
    assert_eq!(o.route, Route::Failure);
    assert!(o.message.contains("refused the credentials"), "{}", o.message);
    assert!(!o.message.contains("PRIVATE KEY") && !o.message.contains("eyJ"), "no key or token in {}", o.message);
}

#[test]
fn a_tls_stand_in_is_reached_only_with_its_ca_trusted() {
    let standin = Standin::start_tls("tls", 100);
    assert!(standin.url.starts_with("https://"), "{}", standin.url);
    create_events(&standin, "");
    let config = config(&standin, &[]);
    // The public web roots alone do not trust the stand-in's CA: nothing reaches it, nothing succeeds.
    let untrusting = Sink::start(&config);
    untrusting.submit(records(1, 1, 100));
    std::thread::sleep(Duration::from_secs(2));
    assert!(untrusting.collect(Duration::ZERO).is_empty());
    assert!(standin.requests("/v2/streaming").is_empty(), "no request got past the TLS handshake");
    untrusting.stop();
    let sink = Sink::start_trusting(&config, standin.ca_pem.clone());
    sink.submit(records(2, 5, 1));
    assert_eq!(routes(&sink.outcomes(10, Duration::from_secs(30)), Route::Success), 10);
    assert_exactly_once(&standin, 10);
}

#[test]
fn schema_evolution_adds_columns_only_when_the_table_allows_it() {
    for (evolution, expect_column) in [(true, true), (false, false)] {
        let standin = Standin::start(if evolution { "evolve" } else { "noevolve" }, 100);
        let clause = if evolution { " ENABLE_SCHEMA_EVOLUTION = TRUE" } else { "" };
        create_events(&standin, clause);
        let sink =
            Sink::start(&config(&standin, &[("Schema Evolution Enabled", if evolution { "true" } else { "false" })]));
        sink.submit(vec![record(1, "shardId-000000000000", 1, json!({"n": 1, "colour": "red"}))]);
        assert_eq!(sink.outcomes(1, Duration::from_secs(20))[&1].route, Route::Success);
        let tables = standin.admin("GET", "/admin/tables", Value::Null);
        let columns: Vec<String> = tables["tables"][0]["columns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(columns.contains(&"COLOUR".to_owned()), expect_column, "evolution {evolution}: {columns:?}");
        assert_eq!(standin.count(TABLE), 1);
    }
}

#[test]
fn iceberg_metadata_is_structured_and_complete_even_for_lines_without_it() {
    let standin = Standin::start("iceberg", 100);
    standin.sql(&format!(
        "CREATE OR REPLACE ICEBERG TABLE {TABLE} (N NUMBER, D DATE, KINESISMETADATA OBJECT(stream STRING, shardId STRING, approximateArrival BIGINT, partitionKey STRING, sequenceNumber STRING, subSequenceNumber INTEGER, shardedSequenceNumber STRING))"
    ));
    let sink = Sink::start(&config(&standin, &[("Iceberg Enabled", "true")]));
    // A LINE_DELIMITED FlowFile of USE_VALUE records: the lines carry no metadata of their own (so
    // their tokens are not exact: they go through the shard's at-least-once channel).
    let mut lines = record(1, "shardId-000000000000", 7, Value::Null);
    lines.content = b"{\"n\":1,\"d\":\"2024-10-15\"}\n{\"n\":2,\"d\":\"2024-10-16\"}\n".to_vec().into();
    lines.attributes.insert("record.count".into(), "2".into());
    sink.submit(vec![lines, record(2, "shardId-000000000001", 1, json!({"n": 3, "d": "2024-10-17"}))]);
    let outcomes = sink.outcomes(2, Duration::from_secs(20));
    assert!(outcomes.values().all(|o| o.route == Route::Success), "{outcomes:?}");
    assert_eq!(outcomes[&1].channel, format!("{CHANNEL_0}_atleastonce"));
    assert_eq!(outcomes[&2].offset_token, "495900000000000100000000000000000000");
    let rows =
        standin.query(&format!("SELECT N, CAST(D AS VARCHAR) AS D, KINESISMETADATA AS M FROM {TABLE} ORDER BY N"));
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0]["D"], "2024-10-15");
    assert_eq!(rows[0]["M"]["shardId"], "shardId-000000000000");
    assert_eq!(rows[0]["M"]["sequenceNumber"], Value::Null);
    assert_eq!(rows[2]["M"]["partitionKey"], "pk-1");
}

#[test]
fn a_flow_file_split_over_appends_resumes_from_its_committed_part() {
    let standin = Standin::start("parts", 100);
    create_events(&standin, "");
    let config = config(&standin, &[("Max Batch Size", "1 KB")]);
    // 60 lines of ~40 bytes: three appends or more; the second is refused as stale once.
    let mut ff = record(1, "shardId-000000000000", 9, Value::Null);
    ff.content = (1..=60)
        .map(|n| format!("{{\"n\":{n},\"shard\":\"s0\",\"seq\":{n}}}\n"))
        .collect::<String>()
        .into_bytes()
        .into();
    standin.fault(json!({"kind": "stale_token", "count": 1}));
    let sink = Sink::start(&config);
    sink.submit(vec![ff.clone()]);
    let outcomes = sink.outcomes(1, Duration::from_secs(30));
    assert_eq!(outcomes[&1].route, Route::Success);
    assert_exactly_once(&standin, 60);
    let tokens: Vec<String> = standin.requests("/rows").iter().filter_map(|r| query_param(r, "offsetToken")).collect();
    assert!(tokens.iter().any(|t| t.contains(':')), "parts carry <token>:<rows done>: {tokens:?}");
    sink.stop();
    let sink = Sink::start(&config);
    sink.submit(vec![ff]);
    assert_eq!(sink.outcomes(1, Duration::from_secs(20))[&1].rows_skipped, 60);
    assert_exactly_once(&standin, 60);
}

#[test]
fn retries_keep_their_request_id() {
    let standin = Standin::start("requestid", 100);
    create_events(&standin, "");
    let sink = Sink::start(&config(&standin, &[]));
    standin.fault(json!({"kind": "backpressure429", "count": 2}));
    sink.submit(records(1, 5, 1));
    assert_eq!(routes(&sink.outcomes(5, Duration::from_secs(30)), Route::Success), 5);
    let appends = standin.requests("/rows");
    let retried =
        appends.iter().find(|r| query_param(r, "retryCount").as_deref() == Some("2")).expect("an append retried twice");
    let id = query_param(retried, "requestId").unwrap();
    let attempts: Vec<_> =
        appends.iter().filter(|r| query_param(r, "requestId").as_deref() == Some(id.as_str())).collect();
    assert_eq!(attempts.len(), 3, "the first try and two retries share one requestId");
}

#[test]
fn a_channel_never_exceeds_ten_appends_a_second() {
    let standin = Standin::start("ratelimit", 100);
    create_events(&standin, "");
    standin.admin("POST", "/admin/settings", json!({"rate_limit_per_channel": 10}));
    // 1 KB batches of ~60-byte rows: far more appends than fit in a second.
    let sink = Sink::start(&config(&standin, &[("Max Batch Size", "1 KB"), ("Max Latency", "10 ms")]));
    sink.submit(records(1, 400, 1));
    assert_eq!(routes(&sink.outcomes(400, Duration::from_secs(60)), Route::Success), 400);
    let appends = standin.requests("/rows");
    assert!(appends.len() >= 20, "{} appends", appends.len());
    let throttled: Vec<_> = appends.iter().filter(|r| r["status"] == 429).collect();
    assert!(throttled.is_empty(), "{} appends were over Snowflake's 10/s", throttled.len());
    assert_exactly_once(&standin, 400);
}

/// The stand-in refuses (429) appends past Snowflake's 20 MB of rows a second per channel, by default: 60 MB of
/// rows that compress to little would go in four 16 MB appends well within a second if the channel did not wait.
#[test]
fn a_channel_never_exceeds_twenty_megabytes_a_second() {
    let standin = Standin::start("throughput", 100);
    create_events(&standin, "");
    standin.sql(&format!("ALTER TABLE {TABLE} SET ENABLE_SCHEMA_EVOLUTION = TRUE"));
    let sink = Sink::start(&config(&standin, &[("Max Batch Size", "16 MB")]));
    let blob = "x".repeat(1_500_000);
    let flow_files: Vec<_> =
        (1..=40).map(|n| record(n, "shardId-000000000000", n as u64, json!({"n": n, "blob": blob}))).collect();
    let started = std::time::Instant::now();
    sink.submit(flow_files);
    assert_eq!(routes(&sink.outcomes(40, Duration::from_secs(60)), Route::Success), 40);
    let took = started.elapsed();
    assert_exactly_once(&standin, 40);
    let appends = standin.requests("/rows");
    let throttled: Vec<_> = appends.iter().filter(|r| r["status"] == 429).collect();
    assert!(throttled.is_empty(), "{} of {} appends were over 20 MB/s: {throttled:?}", throttled.len(), appends.len());
    assert!(took >= Duration::from_secs(2), "60 MB cannot pass one channel's 20 MB/s in {took:?}");
}

#[test]
fn large_incompressible_batches_are_split_under_four_megabytes() {
    let standin = Standin::start("split", 100);
    create_events(&standin, "");
    standin.sql(&format!("ALTER TABLE {TABLE} SET ENABLE_SCHEMA_EVOLUTION = TRUE"));
    let sink = Sink::start(&config(&standin, &[("Max Batch Size", "16 MB")]));
    // Rows of random hex: zstd cannot shrink them below half, so 12 MB of rows would be ~6 MB in one request.
    let mut state = 0x2545F4914F6CDD1Du64;
    let mut noise = |n: usize| -> String {
        (0..n)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                char::from_digit((state % 16) as u32, 16).unwrap()
            })
            .collect()
    };
    let flow_files: Vec<_> = (1..=12)
        .map(|n| record(n, "shardId-000000000000", n as u64, json!({"n": n, "blob": noise(1_000_000)})))
        .collect();
    sink.submit(flow_files);
    assert_eq!(routes(&sink.outcomes(12, Duration::from_secs(60)), Route::Success), 12);
    assert_exactly_once(&standin, 12);
    let appends = standin.requests("/rows");
    assert!(appends.iter().all(|r| r["status"] == 200), "no append was refused as too large");
    let sent: Vec<u64> =
        appends.iter().map(|r| r["headers"]["content-length"].as_str().unwrap().parse().unwrap()).collect();
    assert!(sent.len() >= 2, "one request cannot carry them: {sent:?}");
    assert!(sent.iter().all(|&n| n <= 4_000_000), "every request is at most 4 MB compressed: {sent:?}");
    assert!(sent.iter().sum::<u64>() > 4_000_000, "the rows really did not fit one request: {sent:?}");
}

/// Token files of one test: the service account's (absent until written) and the session's.
struct TokenFiles {
    dir: std::path::PathBuf,
}

impl TokenFiles {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("kinesnow-tokens-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self { dir }
    }
    fn service_account(&self) -> String {
        self.dir.join("serviceaccount-token").to_str().unwrap().to_owned()
    }
    fn session(&self) -> String {
        self.dir.join("session-token").to_str().unwrap().to_owned()
    }
    /// Written whole and renamed into place, as a platform rotating a mounted token does.
    fn write(path: &str, token: &str) {
        let tmp = format!("{path}.new");
        std::fs::write(&tmp, format!("{token}\n")).unwrap();
        std::fs::rename(tmp, path).unwrap();
    }
}

impl Drop for TokenFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Settings as on Openflow: SNOWFLAKE_MANAGED, no account, user or key; `host` is SNOWFLAKE_HOST.
fn managed_config(
    files: &TokenFiles,
    instance: &str,
    host: Option<&str>,
    extra: &[(&str, &str)],
) -> PutSnowflakeConfig {
    let (sa, session) = (files.service_account(), files.session());
    let mut pairs: Vec<(&str, &str)> = vec![
        ("PutSnowflake Instance", instance),
        ("Authentication Strategy", "SNOWFLAKE_MANAGED"),
        ("Service Account Token File", &sa),
        ("Session Token File", &session),
        ("Database", "DB"),
        ("Schema", "PUBLIC"),
        ("Table", "EVENTS"),
        ("Max Latency", "20 ms"),
        ("Commit Timeout", "20 sec"),
    ];
    pairs.extend_from_slice(extra);
    let host = host.map(str::to_owned);
    PutSnowflakeConfig::parse_with_env(&PropertyMap::from_pairs(pairs), |_| host.clone()).expect("valid settings")
}

/// The stand-in accepts exactly these managed tokens (kind, value); the label is the value.
fn valid_tokens(standin: &Standin, tokens: &[(&str, &str)]) {
    let tokens: Vec<Value> = tokens.iter().map(|(kind, t)| json!({"kind": kind, "token": t, "label": t})).collect();
    standin.admin("PUT", "/admin/managed-tokens", json!({ "tokens": tokens }));
}

/// (kind, label) of every logged request, and whether any was refused or declared a token type.
fn credentials_seen(standin: &Standin) -> (Vec<(String, String)>, usize, usize) {
    let requests = standin.requests("");
    let seen = requests
        .iter()
        .map(|r| {
            (r["auth"]["kind"].as_str().unwrap_or("").to_owned(), r["auth"]["label"].as_str().unwrap_or("").to_owned())
        })
        .collect();
    let refused = requests.iter().filter(|r| r["status"] == 401).count();
    let typed = requests.iter().filter(|r| r["headers"].get("x-snowflake-authorization-token-type").is_some()).count();
    (seen, refused, typed)
}

/// `n` single-record FlowFiles of shard 0 with sequence numbers (and ids) from `first`.
fn shard0(first: u64, n: u64) -> Vec<FlowFileIn> {
    (first..first + n)
        .map(|seq| record(seq as i64, "shardId-000000000000", seq, json!({"n": seq, "seq": seq})))
        .collect()
}

fn only(seen: &[(String, String)], kind: &str, label: &str) -> bool {
    !seen.is_empty() && seen.iter().all(|(k, l)| k == kind && l == label)
}

/// Openflow's session token, rotated between two appends: every call reads the file again, so the
/// second append carries the new token and nothing is refused, even after the old one expired.
#[test]
fn a_session_token_is_sent_as_openflow_sends_it_and_read_again_after_rotation() {
    let standin = Standin::start("managed-session", 50);
    create_events(&standin, "");
    let files = TokenFiles::new("session");
    valid_tokens(&standin, &[("session", "session-1")]);
    TokenFiles::write(&files.session(), "session-1");
    let sink = Sink::start(&managed_config(&files, INSTANCE, None, &[("Snowflake URL Override", &standin.url)]));
    sink.submit(shard0(1, 3));
    assert_eq!(routes(&sink.outcomes(3, Duration::from_secs(20)), Route::Success), 3);
    let (seen, refused, typed) = credentials_seen(&standin);
    assert!(only(&seen, "session", "session-1"), "the session token on every call: {seen:?}");
    assert_eq!((refused, typed), (0, 0), "nothing refused, no token type declared (Openflow declares none)");
    assert!(standin.requests("/oauth/token").is_empty(), "a managed token is used as it is, never exchanged");

    // The platform rotates the token: both valid for a moment, then only the new one.
    valid_tokens(&standin, &[("session", "session-1"), ("session", "session-2")]);
    TokenFiles::write(&files.session(), "session-2");
    std::thread::sleep(Duration::from_millis(300));
    valid_tokens(&standin, &[("session", "session-2")]);
    standin.admin("DELETE", "/admin/requests", Value::Null);
    sink.submit(shard0(4, 3));
    assert_eq!(routes(&sink.outcomes(3, Duration::from_secs(20)), Route::Success), 3);
    let (seen, refused, _) = credentials_seen(&standin);
    assert!(seen.iter().any(|(_, l)| l == "session-2") && !standin.requests("/rows").is_empty(), "{seen:?}");
    assert!(only(&seen, "session", "session-2"), "after the rotation only the new token is sent: {seen:?}");
    assert_eq!(refused, 0, "the expired token was never sent (a cached token would have been refused first)");
    assert_exactly_once(&standin, 6);
    sink.stop();
}

/// With the service account's OIDC token readable it wins, sent as `WIF.OIDC.<token>`; rotated, the
/// new one is used; once it is gone, the session token takes over.
#[test]
fn the_service_account_token_wins_as_workload_identity_and_the_session_token_backs_it_up() {
    let standin = Standin::start("managed-oidc", 50);
    create_events(&standin, "");
    let files = TokenFiles::new("oidc");
    valid_tokens(&standin, &[("session", "session-1"), ("workload_identity", "oidc-1")]);
    TokenFiles::write(&files.session(), "session-1");
    TokenFiles::write(&files.service_account(), "oidc-1");
    let sink = Sink::start(&managed_config(&files, INSTANCE, None, &[("Snowflake URL Override", &standin.url)]));
    sink.submit(shard0(1, 2));
    assert_eq!(routes(&sink.outcomes(2, Duration::from_secs(20)), Route::Success), 2);
    let (seen, refused, typed) = credentials_seen(&standin);
    assert!(only(&seen, "workload_identity", "oidc-1"), "the OIDC token wins on every call: {seen:?}");
    assert_eq!((refused, typed), (0, 0));

    valid_tokens(
        &standin,
        &[("session", "session-1"), ("workload_identity", "oidc-1"), ("workload_identity", "oidc-2")],
    );
    TokenFiles::write(&files.service_account(), "oidc-2");
    std::thread::sleep(Duration::from_millis(300));
    valid_tokens(&standin, &[("session", "session-1"), ("workload_identity", "oidc-2")]);
    standin.admin("DELETE", "/admin/requests", Value::Null);
    sink.submit(shard0(3, 2));
    assert_eq!(routes(&sink.outcomes(2, Duration::from_secs(20)), Route::Success), 2);
    let (seen, refused, _) = credentials_seen(&standin);
    assert!(only(&seen, "workload_identity", "oidc-2"), "the rotated OIDC token: {seen:?}");
    assert_eq!(refused, 0);

    std::fs::remove_file(files.service_account()).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    standin.admin("DELETE", "/admin/requests", Value::Null);
    sink.submit(shard0(5, 2));
    assert_eq!(routes(&sink.outcomes(2, Duration::from_secs(20)), Route::Success), 2);
    let (seen, refused, _) = credentials_seen(&standin);
    assert!(only(&seen, "session", "session-1"), "without the OIDC token, the session token: {seen:?}");
    assert_eq!(refused, 0);
    assert_exactly_once(&standin, 6);
    sink.stop();
}

/// Openflow's account URL is `https://<SNOWFLAKE_HOST>`; Snowflake URL Override wins over it.
#[test]
fn snowflake_host_gives_the_account_url_unless_the_url_override_is_set() {
    let standin = Standin::start_tls("managed-host", 50);
    create_events(&standin, "");
    let files = TokenFiles::new("host");
    valid_tokens(&standin, &[("session", "session-1")]);
    TokenFiles::write(&files.session(), "session-1");
    let host = standin.url.trim_start_matches("https://").trim_end_matches('/').to_owned();
    let config = managed_config(&files, "fromhost", Some(&host), &[]);
    assert_eq!(config.control.as_str().trim_end_matches('/'), standin.url.trim_end_matches('/'));
    let sink = Sink::start_trusting(&config, standin.ca_pem.clone());
    sink.submit(shard0(1, 2));
    assert_eq!(routes(&sink.outcomes(2, Duration::from_secs(20)), Route::Success), 2);
    sink.stop();
    // SNOWFLAKE_HOST names a closed port here: only the override can reach the stand-in.
    let config = managed_config(&files, "override", Some("127.0.0.1:1"), &[("Snowflake URL Override", &standin.url)]);
    let sink = Sink::start_trusting(&config, standin.ca_pem.clone());
    sink.submit(shard0(1, 2));
    assert_eq!(routes(&sink.outcomes(2, Duration::from_secs(20)), Route::Success), 2);
    sink.stop();
    assert_eq!(standin.count(TABLE), 4, "each instance has its own channel and loads its two records");
}

/// Neither token file: the FlowFiles go to failure with an error naming both paths; a wrong
/// token: refused, and the token appears in no message.
#[test]
fn a_missing_token_file_is_named_and_a_wrong_token_is_refused_without_showing_it() {
    let standin = Standin::start("managed-missing", 50);
    create_events(&standin, "");
    let files = TokenFiles::new("missing");
    valid_tokens(&standin, &[("session", "session-1")]);
    let sink = Sink::start(&managed_config(&files, INSTANCE, None, &[("Snowflake URL Override", &standin.url)]));
    sink.submit(shard0(1, 2));
    let outcomes = sink.outcomes(2, Duration::from_secs(20));
    for o in outcomes.values() {
        assert_eq!(o.route, Route::Failure, "{}", o.message);
        assert!(
            o.message.contains(&files.session()) && o.message.contains(&files.service_account()),
            "both paths named: {}",
            o.message
        );
    }
    assert!(standin.requests("").is_empty(), "nothing was sent without a token");
    // Then a wrong token appears: refused (401 twice: the file is read again once), no token shown.
    TokenFiles::write(&files.session(), "wrong-secret-token");
    sink.submit(shard0(1, 2));
    let outcomes = sink.outcomes(2, Duration::from_secs(20));
    for o in outcomes.values() {
        assert_eq!(o.route, Route::Failure);
        assert!(o.message.contains("refused the credentials") && o.message.contains("390303"), "{}", o.message);
        assert!(!o.message.contains("wrong-secret-token"), "no token in {}", o.message);
    }
    // Once the platform mounts the right one, the same FlowFiles load.
    TokenFiles::write(&files.session(), "session-1");
    sink.submit(shard0(1, 2));
    assert_eq!(routes(&sink.outcomes(2, Duration::from_secs(20)), Route::Success), 2);
    assert_exactly_once(&standin, 2);
    sink.stop();
}

#[test]
fn scoped_tokens_are_renewed_before_they_expire() {
    // Tokens living 61 s are renewed a minute early, so each lives about a second for the client.
    let standin = Standin::start_with("tokens", 100, &["--scoped-token-ttl-s", "61"]);
    create_events(&standin, "");
    let sink = Sink::start(&config(&standin, &[]));
    for round in 0..4 {
        sink.submit(
            records(1, 2, 1 + 2 * round)
                .into_iter()
                .map(|mut ff| {
                    let n = ff.id as u64;
                    ff.attributes.insert("aws.kinesis.last.sequence.number".into(), format!("4959{:012}", n));
                    ff
                })
                .collect(),
        );
        assert_eq!(routes(&sink.outcomes(2, Duration::from_secs(20)), Route::Success), 2);
        std::thread::sleep(Duration::from_millis(1200));
    }
    let unauthorized = standin.requests("").iter().filter(|r| r["status"] == 401).count();
    assert_eq!(unauthorized, 0, "no call was made with an expired token");
    assert!(standin.requests("/oauth/token").len() >= 3, "the scoped token was renewed");
    assert_exactly_once(&standin, 8);
}

#[test]
fn a_named_pipe_is_used_when_destination_type_is_pipe() {
    let standin = Standin::start("namedpipe", 100);
    create_events(&standin, "");
    standin.sql(&format!("CREATE OR REPLACE PIPE DB.PUBLIC.EVENTS_PIPE AS COPY INTO {TABLE} FROM TABLE(DATA_SOURCE(TYPE => 'STREAMING')) MATCH_BY_COLUMN_NAME = CASE_INSENSITIVE"));
    let sink = Sink::start(&config(&standin, &[("Destination Type", "PIPE"), ("Pipe", "EVENTS_PIPE")]));
    sink.submit(records(1, 3, 1));
    assert_eq!(routes(&sink.outcomes(3, Duration::from_secs(20)), Route::Success), 3);
    assert_exactly_once(&standin, 3);
    let appends = standin.requests("/rows");
    assert!(
        !appends.is_empty() && appends.iter().all(|r| r["path"].as_str().unwrap().contains("/pipes/EVENTS_PIPE/")),
        "{appends:?}"
    );
}

/// `[]` with a shard's attributes, as a filter or a JSON transform can leave it.
fn empty_array(id: i64, shard: &str, seq: u64) -> FlowFileIn {
    FlowFileIn { content: b"[]".to_vec().into(), ..record(id, shard, seq, Value::Null) }
}

/// Issue 15, defect 4. Before: the `[]` FlowFile reached the channel writer with no rows, and the
/// writer panicked once the first FlowFile committed (`Pending::last_token`): 1 of 3 outcomes
/// after 20 s, and the next submit for the shard panicked ("writers live as long as the engine").
#[test]
fn an_empty_flow_file_goes_to_empty_and_its_channel_keeps_working() {
    let standin = Standin::start("empty", 100);
    create_events(&standin, "");
    let sink = Sink::start(&config(&standin, &[]));
    let shard = "shardId-000000000000";
    sink.submit(vec![
        record(1, shard, 1, json!({"n": 1})),
        empty_array(2, shard, 2),
        record(3, shard, 3, json!({"n": 3})),
    ]);
    let outcomes = sink.outcomes(3, Duration::from_secs(20));
    assert_eq!(outcomes[&2].route, Route::Empty, "{:?}", outcomes[&2]);
    assert_eq!((outcomes[&2].rows_sent, outcomes[&2].rows_skipped), (0, 0));
    assert_eq!(routes(&outcomes, Route::Success), 2);
    sink.submit(vec![record(4, shard, 4, json!({"n": 4})), empty_array(5, shard, 5)]);
    let later = sink.outcomes(2, Duration::from_secs(20));
    assert_eq!((later[&4].route, later[&5].route), (Route::Success, Route::Empty));
    assert_exactly_once(&standin, 3);
}

/// Issue 15, defect 5. Before: two standalone NiFis with the same Channel Name Prefix shared the
/// shard's channel; B loaded the shard's later records, then A's queued earlier ones were skipped
/// as already committed (10 of 20 rows in the table).
#[test]
fn two_instances_never_share_a_channel_so_a_moved_shard_loses_nothing() {
    let standin = Standin::start("instances", 100);
    create_events(&standin, "");
    let a = Sink::start(&config_of(&standin, "aaaa11112222", &[]));
    let b = Sink::start(&config_of(&standin, "bbbb33334444", &[]));
    let shard = "shardId-000000000000";
    // The shard moved from A to B: B reads on from A's checkpoint while A still has FlowFiles queued.
    b.submit((11..=20).map(|i| record(i, shard, i as u64, json!({"n": i, "shard": shard, "seq": i}))).collect());
    let b_outcomes = b.outcomes(10, Duration::from_secs(20));
    assert_eq!(routes(&b_outcomes, Route::Success), 10);
    a.submit((1..=10).map(|i| record(i, shard, i as u64, json!({"n": i, "shard": shard, "seq": i}))).collect());
    let outcomes = a.outcomes(10, Duration::from_secs(20));
    assert_eq!(outcomes.values().map(|o| o.rows_skipped).sum::<u32>(), 0, "nothing of A's was skipped");
    assert_exactly_once(&standin, 20);
    assert_eq!(outcomes[&1].channel, "kinesnow_aaaa11112222_orders_shardId-000000000000");
    assert_eq!(b_outcomes[&11].channel, "kinesnow_bbbb33334444_orders_shardId-000000000000");
}

/// A PutSnowflake started without an instance id would share its channels: it is refused.
#[test]
fn an_engine_without_an_instance_id_is_refused() {
    let standin = Standin::start("noinstance", 100);
    let mut config = config(&standin, &[]);
    config.instance = None;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let err =
        rt.block_on(async { SinkEngine::start(&config, SinkSettings::from_config(&config)) }).err().expect("refused");
    assert!(err.to_string().contains("instance id"), "{err}");
}

/// Issue 15, defect 6. Before: SplitJson's children all carried the parent's last sequence number
/// and got the same token, so after the first child committed the others were skipped (1 of 3
/// rows loaded).
#[test]
fn split_children_are_loaded_at_least_once_and_leave_the_shards_token_alone() {
    let standin = Standin::start("split-children", 100);
    create_events(&standin, "");
    let sink = Sink::start(&config(&standin, &[]));
    let shard = "shardId-000000000000";
    sink.submit(vec![record(1, shard, 10, json!({"n": 1}))]);
    assert_eq!(sink.outcomes(1, Duration::from_secs(20))[&1].route, Route::Success);
    // Children of an older record (sequence 5), one at a time, each after the previous committed.
    for i in 2..=4 {
        let mut child = record(i, shard, 5, json!({"n": i}));
        child.attributes.extend([
            ("fragment.identifier".to_string(), "f".to_string()),
            ("fragment.index".to_string(), (i - 2).to_string()),
            ("fragment.count".to_string(), "3".to_string()),
        ]);
        sink.submit(vec![child]);
        let o = &sink.outcomes(1, Duration::from_secs(20))[&i];
        assert_eq!((o.route, o.rows_sent), (Route::Success, 1), "{o:?}");
        assert_eq!(o.channel, format!("{CHANNEL_0}_atleastonce"));
    }
    assert_exactly_once(&standin, 4);
    // The shard's exact channel still holds record 10's token: record 11 loads, a replay of 10 does not.
    sink.submit(vec![record(5, shard, 11, json!({"n": 5})), record(6, shard, 10, json!({"n": 1}))]);
    let outcomes = sink.outcomes(2, Duration::from_secs(20));
    assert_eq!((outcomes[&5].rows_sent, outcomes[&6].rows_skipped), (1, 1));
    assert_exactly_once(&standin, 5);
}

/// Issue 15, defect 6. Before: the stream's name alone named the channel, so a same-named stream
/// in another region shared it and its record was skipped (1 of 2 rows).
#[test]
fn same_named_streams_of_two_regions_have_their_own_channels() {
    let standin = Standin::start("regions", 100);
    create_events(&standin, "");
    let sink = Sink::start(&config(&standin, &[]));
    for (i, region) in [(1, "us-east-1"), (2, "eu-west-1")] {
        let mut ff = record(i, "shardId-000000000000", 5, json!({"n": i}));
        ff.attributes.insert("aws.kinesis.region".into(), region.into());
        sink.submit(vec![ff]);
        let o = &sink.outcomes(1, Duration::from_secs(20))[&i];
        assert_eq!(o.channel, format!("kinesnow_test_{region}_orders_shardId-000000000000"));
    }
    assert_exactly_once(&standin, 2);
}

/// Issue 15, defect 9. Before: a re-delivery that arrived while the original waited for its commit
/// was compared with the committed token only and sent again (10 rows for 5 records).
#[test]
fn a_redelivery_while_the_original_waits_is_not_loaded_again() {
    let standin = Standin::start("redelivery", 100);
    create_events(&standin, "");
    let sink = Sink::start(&config(&standin, &[]));
    standin.fault(json!({"kind": "withhold_commits", "count": -1}));
    let shard = "shardId-000000000000";
    sink.submit((1..=5).map(|i| record(i, shard, i as u64, json!({"n": i, "shard": shard, "seq": i}))).collect());
    std::thread::sleep(Duration::from_millis(1500));
    // NiFi rolled the session back and hands the same records over again under new ids.
    sink.submit((1..=5).map(|i| record(i + 5, shard, i as u64, json!({"n": i, "shard": shard, "seq": i}))).collect());
    std::thread::sleep(Duration::from_millis(1500));
    standin.clear_faults();
    let outcomes = sink.outcomes(10, Duration::from_secs(30));
    assert_eq!(routes(&outcomes, Route::Success), 10);
    assert_eq!((6..=10).map(|i| outcomes[&i].rows_skipped).sum::<u32>(), 5, "the re-delivery sent nothing");
    assert_exactly_once(&standin, 5);
    let tokens: Vec<String> = standin.requests("/rows").iter().filter_map(|r| query_param(r, "offsetToken")).collect();
    let mut sorted = tokens.clone();
    sorted.sort_by_key(|t| (t.len(), t.clone()));
    assert_eq!(tokens, sorted, "append tokens only grow");
}

/// Issue 15, defect 13. Before: a writer task and a status entry stayed for every channel ever
/// used. Now idle writers retire, and a retired channel starts again with its next FlowFile.
#[test]
fn idle_writers_retire_with_their_status_entries_and_come_back() {
    let standin = Standin::start("retire", 100);
    create_events(&standin, "");
    let sink = Sink::start_with(&config(&standin, &[]), |s| s.channel.idle_retire = Duration::from_millis(300));
    sink.submit(records(4, 2, 1));
    assert_eq!(routes(&sink.outcomes(8, Duration::from_secs(20)), Route::Success), 8);
    let deadline = Instant::now() + Duration::from_secs(10);
    while sink.engine().channels_running() != (0, 0) {
        assert!(Instant::now() < deadline, "writers still running: {:?}", sink.engine().channels_running());
        std::thread::sleep(Duration::from_millis(50));
    }
    // Back: the channel reopens and its committed token still skips a replay.
    let mut again = records(4, 3, 1);
    again.iter_mut().take(8).for_each(|ff| ff.id += 100);
    sink.submit(again);
    let outcomes = sink.outcomes(12, Duration::from_secs(20));
    assert_eq!(outcomes.values().map(|o| o.rows_skipped).sum::<u32>(), 8);
    assert_exactly_once(&standin, 12);
}

/// A record bound for `table`, as Java passes it when Table holds Expression Language (the
/// resolved names travel as `kinesnow.snowflake.*` attributes).
fn routed(table: &str, id: i64, shard: &str, seq: u64) -> FlowFileIn {
    let mut f = record(id, shard, seq, json!({"n": id, "shard": shard, "seq": seq}));
    for (k, v) in [
        ("kinesnow.snowflake.database", "DB"),
        ("kinesnow.snowflake.schema", "PUBLIC"),
        ("kinesnow.snowflake.table", table),
    ] {
        f.attributes.insert(k.into(), v.into());
    }
    f
}

/// Ids 1..=2n over two shards, odd ids to ORDERS and even ids to REFUNDS; both tables get rows of
/// both shards, so each table's channels hold their own offset tokens for the same shard.
fn two_tables(first_seq: u64, n: u64, first_id: i64) -> Vec<FlowFileIn> {
    (0..n * 2)
        .map(|i| {
            let id = first_id + i as i64;
            let table = if id % 2 == 1 { "ORDERS" } else { "REFUNDS" };
            let shard = if (i / 2) % 2 == 0 { "shardId-000000000000" } else { "shardId-000000000001" };
            routed(table, id, shard, first_seq + i)
        })
        .collect()
}

fn counts(standin: &Standin, table: &str) -> (u64, u64, i64) {
    let rows = standin.query(&format!(
        "SELECT COUNT(*) AS C, COUNT(DISTINCT N) AS D, COALESCE(SUM(N % 2), -1) AS ODD FROM DB.PUBLIC.{table}"
    ));
    (rows[0]["C"].as_u64().unwrap(), rows[0]["D"].as_u64().unwrap(), rows[0]["ODD"].as_i64().unwrap())
}

#[test]
fn flow_files_naming_two_tables_load_each_row_once_into_its_table_across_restarts() {
    let standin = Standin::start("twotables", 200);
    for t in ["ORDERS", "REFUNDS"] {
        standin.sql(&format!(
            "CREATE OR REPLACE TABLE DB.PUBLIC.{t} (N NUMBER, SHARD VARCHAR, SEQ NUMBER, KINESISMETADATA VARIANT)"
        ));
    }
    // The configured Table is an EL expression Java evaluated per FlowFile; nothing is sent to it.
    let config = config(&standin, &[("Table", "${snowflake.table}")]);
    let sink = Sink::start(&config);
    sink.submit(two_tables(1, 30, 1));
    let outcomes = sink.outcomes(60, Duration::from_secs(30));
    assert_eq!(routes(&outcomes, Route::Success), 60, "{outcomes:?}");
    assert_eq!(counts(&standin, "ORDERS"), (30, 30, 30), "only odd ids, each once");
    assert_eq!(counts(&standin, "REFUNDS"), (30, 30, 0), "only even ids, each once");
    assert_eq!(outcomes[&1].channel, outcomes[&2].channel, "one shard's channel name is the same in both pipes");
    assert!(sink.engine().destinations_open() <= 2);
    let paths: Vec<String> = standin.requests("/rows").iter().map(|r| r["path"].as_str().unwrap().to_owned()).collect();
    assert!(
        paths.iter().any(|p| p.contains("/pipes/ORDERS-STREAMING/"))
            && paths.iter().any(|p| p.contains("/pipes/REFUNDS-STREAMING/")),
        "{paths:?}"
    );
    assert!(
        !paths.iter().any(|p| p.contains("snowflake.table")),
        "the unevaluated expression is never a pipe: {paths:?}"
    );
    sink.stop();

    // Restarted before NiFi recorded those outcomes: all 60 again plus 40 new. Each table's
    // channel skips exactly what it committed, by its own token.
    let sink = Sink::start(&config);
    sink.submit(two_tables(1, 50, 1));
    let outcomes = sink.outcomes(100, Duration::from_secs(30));
    assert_eq!(routes(&outcomes, Route::Success), 100, "{outcomes:?}");
    let skipped: u32 = outcomes.values().map(|o| o.rows_skipped).sum();
    let sent: u32 = outcomes.values().map(|o| o.rows_sent).sum();
    assert_eq!((skipped, sent), (60, 40), "replays skipped per table, new rows sent");
    assert_eq!(counts(&standin, "ORDERS"), (50, 50, 50));
    assert_eq!(counts(&standin, "REFUNDS"), (50, 50, 0));
    sink.stop();

    // Only REFUNDS rows come again after another restart: its channels skip them, ORDERS' tokens
    // are not moved by them.
    let sink = Sink::start(&config);
    let mut mixed: Vec<_> = two_tables(1, 50, 1).into_iter().filter(|f| f.id % 2 == 0).collect();
    mixed.extend(two_tables(101, 5, 101));
    sink.submit(mixed);
    let outcomes = sink.outcomes(60, Duration::from_secs(30));
    assert_eq!(routes(&outcomes, Route::Success), 60, "{outcomes:?}");
    assert_eq!(outcomes.values().map(|o| o.rows_skipped).sum::<u32>(), 50);
    assert_eq!(counts(&standin, "ORDERS"), (55, 55, 55));
    assert_eq!(counts(&standin, "REFUNDS"), (55, 55, 0));
}

#[test]
fn an_empty_resolved_table_fails_only_its_flow_file_and_open_destinations_are_bounded() {
    let standin = Standin::start("badtable", 200);
    for t in ["ORDERS", "REFUNDS", "RETURNS"] {
        standin.sql(&format!(
            "CREATE OR REPLACE TABLE DB.PUBLIC.{t} (N NUMBER, SHARD VARCHAR, SEQ NUMBER, KINESISMETADATA VARIANT)"
        ));
    }
    let config = config(&standin, &[("Table", "${snowflake.table}")]);
    let sink = Sink::start_with(&config, |s| {
        s.max_destinations = 2;
        s.channel.idle_retire = Duration::from_secs(2);
    });
    sink.submit(vec![
        routed("ORDERS", 1, "shardId-000000000000", 1),
        routed("", 2, "shardId-000000000000", 2),
        routed("REFUNDS", 3, "shardId-000000000001", 3),
        routed("ORDERS", 4, "shardId-000000000000", 4),
    ]);
    let outcomes = sink.outcomes(4, Duration::from_secs(30));
    assert_eq!([1, 3, 4].map(|id| outcomes[&id].route), [Route::Success; 3], "{outcomes:?}");
    assert_eq!(outcomes[&2].route, Route::Failure);
    assert!(outcomes[&2].message.contains("Table evaluated to an empty value"), "{}", outcomes[&2].message);

    // ORDERS' and REFUNDS' writers still run: a third table has no room, and says so.
    sink.submit(vec![routed("RETURNS", 5, "shardId-000000000001", 5)]);
    let third = sink.outcomes(1, Duration::from_secs(30));
    assert_eq!(third[&5].route, Route::Failure, "{third:?}");
    assert!(third[&5].message.contains("already writes to 2 destinations"), "{}", third[&5].message);
    assert_eq!(sink.engine().destinations_open(), 2);

    // Once their writers retire, the idle destinations close and the third one opens.
    let deadline = Instant::now() + Duration::from_secs(20);
    while sink.engine().channels_running() != (0, 0) {
        assert!(Instant::now() < deadline, "writers still running: {:?}", sink.engine().channels_running());
        std::thread::sleep(Duration::from_millis(100));
    }
    sink.collect(Duration::ZERO);
    assert_eq!(sink.engine().destinations_open(), 0, "idle destinations retire");
    sink.submit(vec![routed("RETURNS", 5, "shardId-000000000001", 5)]);
    assert_eq!(sink.outcomes(1, Duration::from_secs(30))[&5].route, Route::Success);
    assert_eq!(counts(&standin, "ORDERS"), (2, 2, 1));
    assert_eq!(counts(&standin, "REFUNDS"), (1, 1, 1));
    assert_eq!(counts(&standin, "RETURNS"), (1, 1, 1));
}

/// Issue 34, item 10: two nodes writing one channel (two NiFis sharing a shard's shared channel, as
/// here two engines sharing an instance id and so every channel) with a backlog and small appends.
/// Each append on a channel the other reopened found its continuation token stale and reopened at
/// once, discarding the other's uncommitted rows: the committed token never moved. Both writers
/// now back off before reopening, so one of them commits and the other skips what it committed.
#[test]
fn two_writers_on_one_channel_converge_and_load_every_record_once() {
    let standin = Standin::start("reopen-war", 1000);
    create_events(&standin, "");
    let config = config(&standin, &[("Max Batch Size", "1 KB")]);
    let (a, b) = (Sink::start(&config), Sink::start(&config));
    let started = Instant::now();
    a.submit(records(1, 300, 1));
    b.submit(records(1, 300, 1));
    let (outcomes_a, outcomes_b) = std::thread::scope(|s| {
        let from_a = s.spawn(|| a.outcomes(300, Duration::from_secs(120)));
        let from_b = s.spawn(|| b.outcomes(300, Duration::from_secs(120)));
        (from_a.join().unwrap(), from_b.join().unwrap())
    });
    assert_eq!(routes(&outcomes_a, Route::Success) + routes(&outcomes_b, Route::Success), 600);
    assert_exactly_once(&standin, 300);
    eprintln!("two writers on one channel loaded 300 records in {:?}", started.elapsed());
    a.stop();
    b.stop();
}

// ---------------------------------------------------------------- rows up to Kinesis' 10 MiB (issue 38)

/// `n` characters zstd cannot shrink much (~6 of 8 bits each), JSON-safe: xorshift noise over 64 letters.
fn noise(n: usize, seed: u64) -> String {
    const LETTERS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut state = seed | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            LETTERS[(state % 64) as usize] as char
        })
        .collect()
}

/// `record`, naming the record its lease read before it as ConsumeKinesis does (`kinesnow.previous.*`);
/// of a stream of its own, since records passed over are noted for the whole process.
fn record_after(id: i64, seq: u64, previous: Option<u64>, body: Value) -> FlowFileIn {
    let mut flow_file = record(id, "shardId-000000000000", seq, body);
    flow_file.attributes.insert("aws.kinesis.stream.name".into(), "oversized".into());
    let previous = previous.map(|p| format!("4959{p:012}")).unwrap_or_default();
    flow_file.attributes.insert("kinesnow.previous.sequence.number".into(), previous);
    flow_file
}

/// A FlowFile of no Kinesis record (loaded at least once): its one row is `content` as it is.
fn plain(id: i64, content: String) -> FlowFileIn {
    FlowFileIn { id, attributes: HashMap::new(), content: content.into_bytes().into() }
}

/// The rows' `N` column, in load order.
fn loaded_ns(standin: &Standin) -> Vec<u64> {
    let rows = standin.query(&format!("SELECT N FROM {TABLE} ORDER BY SEQ"));
    rows.iter().map(|r| r["N"].as_u64().unwrap()).collect()
}

fn sent_sizes(standin: &Standin, header: &str) -> Vec<u64> {
    standin
        .requests("/rows")
        .iter()
        .filter_map(|r| r["headers"][header].as_str().and_then(|v| v.parse().ok()))
        .collect()
}

#[test]
fn a_row_too_large_for_any_request_fails_alone_and_the_rows_around_it_load_once_in_order() {
    let standin = Standin::start("oversized", 200);
    create_events(&standin, "");
    let sink = Sink::start(&config(&standin, &[("Max Batch Size", "16 MB"), ("Max Latency", "500 ms")]));
    // 6 MB of noise is ~4.5 MB after zstd: over Snowflake's 4 MB per request even alone.
    let big = noise(6_000_000, 3);
    sink.submit(vec![
        record(1, "shardId-000000000000", 1, json!({"n": 1, "seq": 1})),
        record(2, "shardId-000000000000", 2, json!({"n": 2, "seq": 2})),
        record(3, "shardId-000000000000", 3, json!({"n": 3, "seq": 3, "blob": big})),
        record(4, "shardId-000000000000", 4, json!({"n": 4, "seq": 4})),
        record(5, "shardId-000000000000", 5, json!({"n": 5, "seq": 5})),
    ]);
    let outcomes = sink.outcomes(5, Duration::from_secs(60));
    for id in [1, 2, 4, 5] {
        assert_eq!(outcomes[&id].route, Route::Success, "FlowFile {id}: {outcomes:?}");
    }
    let refused = &outcomes[&3];
    assert_eq!(refused.route, Route::Failure, "{refused:?}");
    for part in ["after zstd", "4,000,000 bytes", "Split the record", "none of its 1 row"] {
        assert!(refused.message.contains(part), "'{part}' in: {}", refused.message);
    }
    assert_eq!(refused.rows_sent, 0);
    assert_eq!(loaded_ns(&standin), vec![1, 2, 4, 5], "the others loaded once, in order");
    let appends = standin.requests("/rows");
    assert!(appends.iter().all(|r| r["status"] == 200), "nothing was sent that Snowflake refuses as too large");
    assert!(sent_sizes(&standin, "content-length").iter().all(|&n| n <= 4_000_000));
}

#[test]
fn the_flow_files_after_a_refused_record_follow_on_without_waiting_for_it() {
    let standin = Standin::start("oversized-order", 200);
    create_events(&standin, "");
    // Order Wait as long as the test: a FlowFile that waited for the refused one would time out.
    let sink = Sink::start(&config(&standin, &[("Order Wait", "10 min"), ("Max Latency", "100 ms")]));
    sink.submit(vec![record_after(1, 1, None, json!({"n": 1, "seq": 1}))]);
    assert_eq!(sink.outcomes(1, Duration::from_secs(30))[&1].route, Route::Success);
    sink.submit(vec![
        record_after(2, 2, Some(1), json!({"n": 2, "seq": 2, "blob": noise(6_000_000, 5)})),
        record_after(3, 3, Some(2), json!({"n": 3, "seq": 3})),
        record_after(4, 4, Some(3), json!({"n": 4, "seq": 4})),
    ]);
    let outcomes = sink.outcomes(3, Duration::from_secs(30));
    assert_eq!(outcomes[&2].route, Route::Failure, "{outcomes:?}");
    assert_eq!((outcomes[&3].route, outcomes[&4].route), (Route::Success, Route::Success), "{outcomes:?}");
    assert_eq!(outcomes[&4].rows_skipped, 0);
    assert_eq!(loaded_ns(&standin), vec![1, 3, 4]);
    // Sent back from failure, it is refused again and never counted as loaded.
    sink.submit(vec![record_after(5, 2, Some(1), json!({"n": 2, "seq": 2, "blob": noise(6_000_000, 5)}))]);
    assert_eq!(sink.outcomes(1, Duration::from_secs(30))[&5].route, Route::Failure);
    assert_eq!(loaded_ns(&standin), vec![1, 3, 4]);
}

#[test]
fn a_ten_mebibyte_compressible_row_loads_in_one_request_and_large_rows_in_several() {
    let standin = Standin::start("large-rows", 200);
    create_events(&standin, "");
    let sink = Sink::start(&config(&standin, &[("Max Batch Size", "16 MB"), ("Max Latency", "500 ms")]));
    let text = "the same words again and again; ".repeat(10 * 1024 * 1024 / 32);
    let flow_files: Vec<_> =
        (1..=4).map(|n| record(n, "shardId-000000000000", n as u64, json!({"n": n, "seq": n, "text": text}))).collect();
    sink.submit(flow_files);
    let outcomes = sink.outcomes(4, Duration::from_secs(90));
    assert_eq!(routes(&outcomes, Route::Success), 4, "{outcomes:?}");
    assert_eq!(loaded_ns(&standin), vec![1, 2, 3, 4]);
    let raw = sent_sizes(&standin, "x-snowflake-uncompressed-content-length");
    assert!(raw.len() >= 3, "16 MB at most before compression: 40 MiB in several requests: {raw:?}");
    assert!(raw.iter().all(|&n| n <= 16_000_000), "{raw:?}");
    assert!(raw.iter().all(|&n| n > 10 * 1024 * 1024), "each row of 10 MiB went whole in one request: {raw:?}");
    assert!(sent_sizes(&standin, "content-length").iter().all(|&n| n <= 4_000_000));
    let stored = standin.query(&format!("SELECT N FROM {TABLE} WHERE N = 1"));
    assert_eq!(stored.len(), 1);
}

/// The first length of noise whose plain row is more than `cap` bytes as `measure` counts it.
fn first_over(cap: u64, low: usize, high: usize, seed: u64, measure: impl Fn(&str) -> u64) -> usize {
    let (mut low, mut high) = (low, high);
    let size = |n: usize| measure(&format!("{{\"N\":1,\"SEQ\":1,\"blob\":\"{}\"}}", noise(n, seed)));
    assert!(size(low) <= cap && size(high) > cap);
    while high - low > 1 {
        let mid = (low + high) / 2;
        if size(mid) > cap {
            high = mid;
        } else {
            low = mid;
        }
    }
    high
}

#[test]
fn each_request_cap_is_a_boundary_a_row_may_reach_but_not_pass() {
    use kinesnow_core::snowflake::request_size::compressed_len;
    let standin = Standin::start("row-caps", 200);
    create_events(&standin, "");
    let sink = Sink::start(&config(&standin, &[("Max Latency", "100 ms")]));
    let row = |n: usize, seed: u64| format!("{{\"N\":1,\"SEQ\":1,\"blob\":\"{}\"}}", noise(n, seed));
    let zstd = |json: &str| compressed_len(format!("{json}\n").as_bytes()).unwrap() as u64;
    // Compressed: the longest row at most 4,000,000 bytes after zstd loads, one character more fails.
    let over = first_over(4_000_000, 4_000_000, 6_000_000, 9, zstd);
    sink.submit(vec![plain(1, row(over - 1, 9))]);
    assert_eq!(sink.outcomes(1, Duration::from_secs(60))[&1].route, Route::Success);
    let sent = sent_sizes(&standin, "content-length");
    assert_eq!(sent, vec![zstd(&row(over - 1, 9))], "sent as measured");
    assert!(sent[0] > 3_999_900 && sent[0] <= 4_000_000, "{sent:?}");
    sink.submit(vec![plain(2, row(over, 9))]);
    let failed = &sink.outcomes(1, Duration::from_secs(60))[&2];
    assert_eq!(failed.route, Route::Failure, "{failed:?}");
    assert!(failed.message.contains("after zstd"), "{}", failed.message);
    // Uncompressed: 16,000,000 bytes of NDJSON (newline included) load, one more fails unsent.
    let text = |len: usize| {
        let (head, tail) = (r#"{"N":3,"SEQ":3,"blob":""#, r#""}"#);
        format!("{head}{}{tail}", "z".repeat(len - head.len() - tail.len()))
    };
    assert_eq!(text(15_999_999).len(), 15_999_999);
    sink.submit(vec![plain(3, text(15_999_999))]);
    assert_eq!(sink.outcomes(1, Duration::from_secs(60))[&3].route, Route::Success);
    sink.submit(vec![plain(4, text(16_000_000))]);
    let failed = &sink.outcomes(1, Duration::from_secs(60))[&4];
    assert_eq!(failed.route, Route::Failure, "{failed:?}");
    assert!(failed.message.contains("16,000,000 bytes"), "{}", failed.message);
    let raw = sent_sizes(&standin, "x-snowflake-uncompressed-content-length");
    assert_eq!(raw, vec![row(over - 1, 9).len() as u64 + 1, 16_000_000], "only the rows that fit were sent");
    assert!(standin.requests("/rows").iter().all(|r| r["status"] == 200));
}

// ---------------------------------------------------------------- one channel's appends pipelined (issue 38)

/// The successful appends of the stand-in's log, in order, as (offset token, the channel was
/// opened just before it): a reopen restarts the line from the committed token.
fn appends_and_opens(standin: &Standin) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut opened = false;
    for r in standin.requests("/channels/") {
        let path = r["path"].as_str().unwrap_or_default();
        if r["method"] == "PUT" && !path.ends_with("/rows") {
            opened = true;
        } else if path.ends_with("/rows") && r["status"] == 200 {
            out.push((query_param(&r, "offsetToken").unwrap(), opened));
            opened = false;
        }
    }
    out
}

/// Tokens of whole records are decimal numbers: compared by length, then text.
fn token_key(token: &str) -> (usize, &str) {
    let digits = token.trim_start_matches('0');
    (digits.len(), digits)
}

/// Issue 38: while one append of a channel is in flight its writer prepares the next (a backlog
/// of many requests waits here). An append that fails meanwhile is handled as before: throttling
/// and server errors are retried with the same body, a stale token or a pipe failover reopens the
/// channel and the uncommitted rows go again, a refused append sends the FlowFiles with unsent rows
/// to failure (sent back, they load once). Nothing is lost or loaded twice, and between two opens
/// each append's offset token is above the one before.
#[test]
fn an_append_failing_while_the_next_is_prepared_loses_and_doubles_nothing_and_keeps_token_order() {
    let standin = Standin::start("pipeline", 50);
    create_events(&standin, "");
    // ~250-byte rows, 4 KB requests: 300 records are about 19 appends, two seconds at ten a second.
    let sink = Sink::start(&config(&standin, &[("Max Batch Size", "4 KB"), ("Max Latency", "10 ms")]));
    let appended = || standin.requests("/rows").iter().filter(|r| r["status"] == 200).count();
    let mut next = 1i64;
    let mut expected = 0u64;
    for fault in [
        json!({"kind": "stale_token", "count": 1}),
        json!({"kind": "backpressure429", "count": 3}),
        json!({"kind": "pipe_failover", "count": 1}),
        json!({"kind": "retry_request", "count": 2}),
        json!({"kind": "retry_request", "count": 1, "status": 400, "code": "ERR_BAD_REQUEST", "message": "refused"}),
    ] {
        let before = appended();
        let batch: Vec<_> = (next..next + 300)
            .map(|n| {
                record(n, "shardId-000000000000", n as u64, json!({"n": n, "shard": "shardId-000000000000", "seq": n}))
            })
            .collect();
        sink.submit(batch.clone());
        // A few appends of this batch went through; the next one, with a body prepared behind it, fails.
        let deadline = Instant::now() + Duration::from_secs(30);
        while appended() < before + 3 {
            assert!(Instant::now() < deadline, "no appends of the batch");
            std::thread::sleep(Duration::from_millis(10));
        }
        standin.fault(fault.clone());
        let mut outcomes = sink.outcomes(300, Duration::from_secs(60));
        let failed: Vec<FlowFileIn> =
            batch.iter().filter(|f| outcomes[&f.id].route == Route::Failure).cloned().collect();
        if fault["status"] == 400 {
            assert!(!failed.is_empty() && failed.len() < 300, "only FlowFiles with unsent rows fail: {}", failed.len());
            assert!(outcomes[&failed[0].id].message.contains("refused"), "{:?}", outcomes[&failed[0].id]);
            standin.clear_faults();
            // NiFi sends them back: they load once, after what was committed.
            sink.submit(failed.clone());
            outcomes.extend(sink.outcomes(failed.len(), Duration::from_secs(60)));
        } else {
            assert!(failed.is_empty(), "after {fault}: {} FlowFiles failed", failed.len());
        }
        assert!(batch.iter().all(|f| outcomes[&f.id].route == Route::Success), "after {fault}");
        standin.clear_faults();
        next += 300;
        expected += 300;
        assert_exactly_once(&standin, expected);
    }
    let appends = appends_and_opens(&standin);
    assert!(appends.len() >= 5 * 19, "{} appends", appends.len());
    let reopens = appends.iter().filter(|(_, opened)| *opened).count();
    assert!(reopens >= 3, "the first open, the stale token, the failover (and the refusal): {reopens}");
    for pair in appends.windows(2) {
        let ((before, _), (after, opened)) = (&pair[0], &pair[1]);
        assert!(
            *opened || token_key(after) > token_key(before),
            "appends {before} then {after} without an open between"
        );
    }
    let retried: Vec<_> =
        standin.requests("/rows").iter().filter_map(|r| query_param(r, "retryCount")).filter(|c| c != "0").collect();
    assert!(retried.len() >= 3, "throttled and failed appends were retried: {retried:?}");
}

/// A record as ConsumeKinesis' FLOW_FILE strategy writes it, naming the record its lease read just
/// before it (`previous`: `None` for the shard's first), with `content` as it is.
fn kinesis_record(id: i64, shard: &str, seq: u64, previous: Option<u64>, content: &[u8]) -> FlowFileIn {
    let mut flow_file = record(id, shard, seq, Value::Null);
    flow_file.content = content.to_vec().into();
    let previous = previous.map(|p| format!("4959{p:012}")).unwrap_or_default();
    flow_file.attributes.insert("kinesnow.previous.sequence.number".into(), previous);
    flow_file.attributes.insert("aws.kinesis.region".into(), "us-east-1".into());
    flow_file.attributes.insert("kinesnow.application.name".into(), "orders-app".into());
    flow_file
}

/// One shard's records 1..=6 with three that can never load between them (`oops`, `[]`, `42`),
/// each naming the record before it, as ConsumeKinesis' defaults write them.
fn malformed_among_good(shard: &str) -> Vec<FlowFileIn> {
    let good = |seq: u64| format!("{{\"n\": {seq}, \"seq\": {seq}}}").into_bytes();
    vec![
        kinesis_record(1, shard, 1, None, &good(1)),
        kinesis_record(2, shard, 2, Some(1), b"oops"),
        kinesis_record(3, shard, 3, Some(2), b"[]"),
        kinesis_record(4, shard, 4, Some(3), &good(4)),
        kinesis_record(5, shard, 5, Some(4), b"42"),
        kinesis_record(6, shard, 6, Some(5), &good(6)),
    ]
}

/// Issue 51, the stall. Before: each record that went to `invalid` or `empty` was not noted as
/// passed, so the shard's next FlowFile waited the whole Order Wait for it (here 600 s: only 3 of 6
/// outcomes after 30 s). A FlowFile that can never load passes its records at once.
#[test]
fn records_that_can_never_load_let_the_next_ones_of_their_shard_through_at_once() {
    let standin = Standin::start("never-load", 100);
    create_events(&standin, "");
    let sink = Sink::start(&config(&standin, &[("Order Wait", "600 sec")]));
    sink.submit(malformed_among_good("shardId-000000000000"));
    let outcomes = sink.outcomes(6, Duration::from_secs(30));
    let route = |id: i64| outcomes[&id].route;
    assert_eq!([route(1), route(4), route(6)], [Route::Success; 3], "{outcomes:?}");
    assert_eq!([route(2), route(3), route(5)], [Route::Invalid, Route::Empty, Route::Invalid], "{outcomes:?}");
    assert_exactly_once(&standin, 3);
}

/// The same when NiFi's queue hands the records over out of order (several tasks, no
/// prioritizer): a good record that came before the malformed one it follows goes on once that
/// one is seen. Before: it waited the whole Order Wait.
#[test]
fn a_good_record_taken_before_the_malformed_one_it_follows_goes_on_once_that_one_is_seen() {
    let standin = Standin::start("never-load-reordered", 100);
    create_events(&standin, "");
    let sink = Sink::start(&config(&standin, &[("Order Wait", "600 sec")]));
    let mut flow_files = malformed_among_good("shardId-000000000000");
    let (last_good, rest) = (flow_files.pop().unwrap(), flow_files);
    sink.submit(vec![last_good]);
    assert!(sink.collect(Duration::from_secs(1)).is_empty(), "record 6 waits for the records before it");
    sink.submit(rest);
    let outcomes = sink.outcomes(6, Duration::from_secs(30));
    assert_eq!(routes(&outcomes, Route::Success), 3, "{outcomes:?}");
    assert_exactly_once(&standin, 3);
}

/// Issue 51, hole 3. A malformed record repaired downstream (ReplaceText, Jolt) and sent to
/// PutSnowflake again keeps its attributes; once the shard's later records are in, it cannot go into
/// the exactly-once channel below its token, and it must not be skipped as a replay either: it goes
/// back for the at-least-once channel and loads. Before: success with 1 row skipped, not loaded.
#[test]
fn a_repaired_record_is_loaded_not_skipped_as_a_replay() {
    let standin = Standin::start("repaired", 100);
    create_events(&standin, "");
    let sink = Sink::start(&config(&standin, &[("Order Wait", "600 sec")]));
    let shard = "shardId-000000000000";
    sink.submit(malformed_among_good(shard));
    sink.outcomes(6, Duration::from_secs(30));
    let repaired = kinesis_record(20, shard, 2, Some(1), b"{\"n\": 2, \"seq\": 2}");
    sink.submit(vec![repaired.clone()]);
    let first = sink.outcomes(1, Duration::from_secs(30));
    let outcome = &first[&20];
    let outcome = if outcome.route == Route::Reload {
        // As Java does: back to the queue marked for the at-least-once channel, then taken again.
        let mut again = repaired;
        again.attributes.insert("kinesnow.delivery".into(), "at-least-once".into());
        sink.submit(vec![again]);
        sink.outcomes(1, Duration::from_secs(30)).remove(&20).unwrap()
    } else {
        outcome.clone()
    };
    assert_eq!((outcome.route, outcome.rows_skipped), (Route::Success, 0), "{outcome:?}");
    assert_exactly_once(&standin, 4);
}

/// Issue 51, hole 2. A FlowFile that failed and came back after Order Wait (its session held, then
/// `failure` looped back and penalized) finds its records passed over as a gap: it loads at least
/// once. The gaps lived only in the writer's memory, so a stop and start of PutSnowflake in
/// between (any property change) made the late FlowFile a "replay" below the committed token:
/// success with its row skipped, not in the table. Now the gaps are kept in the processor's local
/// state (the engine's status entry `passed.gaps`, given back as a fact at the next start).
#[test]
fn a_gap_passed_before_a_restart_still_sends_its_late_flow_file_to_the_at_least_once_channel() {
    let standin = Standin::start("gap-restart", 100);
    create_events(&standin, "");
    let shard = "shardId-000000000000";
    let good = |seq: u64| format!("{{\"n\": {seq}, \"seq\": {seq}}}").into_bytes();
    let config = config(&standin, &[("Order Wait", "2 sec")]);
    let sink = Sink::start(&config);
    sink.submit(vec![
        kinesis_record(1, shard, 1, None, &good(1)),
        kinesis_record(3, shard, 3, Some(2), &good(3)),
        kinesis_record(4, shard, 4, Some(3), &good(4)),
    ]);
    let outcomes = sink.outcomes(3, Duration::from_secs(30));
    assert_eq!(routes(&outcomes, Route::Success), 3, "record 2 never came within Order Wait: {outcomes:?}");
    let status = sink.engine().status_map();
    let kept = status.iter().find(|(k, _)| k == "passed.gaps").map(|(_, v)| v.clone()).unwrap_or_default();
    sink.stop();

    let again = config_of(&standin, INSTANCE, &[("Order Wait", "2 sec"), ("PutSnowflake Passed Gaps", &kept)]);
    let sink = Sink::start(&again);
    let late = kinesis_record(2, shard, 2, Some(1), &good(2));
    sink.submit(vec![late.clone()]);
    let first = sink.outcomes(1, Duration::from_secs(30)).remove(&2).unwrap();
    assert_eq!(first.route, Route::Reload, "not skipped as a replay: {first:?}");
    let mut at_least_once = late;
    at_least_once.attributes.insert("kinesnow.delivery".into(), "at-least-once".into());
    sink.submit(vec![at_least_once]);
    let loaded = sink.outcomes(1, Duration::from_secs(30)).remove(&2).unwrap();
    assert_eq!((loaded.route, loaded.rows_skipped), (Route::Success, 0), "{loaded:?}");
    assert_exactly_once(&standin, 4);
}

/// A FlowFile of a tracking consumer (`SNOWFLAKE_COMMIT`) read on node `n1` by lease 1 of shard 0.
fn tracked_record(id: i64, seq: u64, previous: Option<u64>) -> FlowFileIn {
    let shard = "shardId-000000000000";
    let mut flow_file = kinesis_record(id, shard, seq, previous, &format!("{{\"n\": {seq}}}").into_bytes());
    flow_file.attributes.insert("kinesnow.stream.arn".into(), "arn:aws:kinesis:us-east-1:1:stream/orders".into());
    flow_file.attributes.insert("kinesnow.node".into(), "n1".into());
    flow_file.attributes.insert("kinesnow.lease.counter".into(), "1".into());
    if previous.is_none() {
        flow_file.attributes.remove("kinesnow.previous.sequence.number");
    }
    flow_file
}

/// Issue 51, hole 4. FlowFiles 2 and 3 of a lease come before FlowFile 1 (NiFi's queue keeps no
/// order) and wait for it in the engine, filling Max In-Flight Size: Java asks `capacity()` before
/// it takes FlowFiles, so FlowFile 1 could never come in, and after Order Wait the lease went per
/// node (at least once). Now the waiting ones go back to the queue (`retry`, penalized) when the
/// budget is full, FlowFile 1 comes in, and all three load once through the shared channel.
#[test]
fn flow_files_waiting_for_an_earlier_one_give_the_budget_back_for_it() {
    let standin = Standin::start("parked-budget", 100);
    create_events(&standin, "");
    let board = kinesnow_core::feedback::BoardHandle::new();
    let key = kinesnow_core::feedback::LinkKey {
        stream: "arn:aws:kinesis:us-east-1:1:stream/orders".into(),
        application: "orders-app".into(),
    };
    board.lock().took_here(&key, "engine", "shardId-000000000000", 1, None);
    let (one, two, three) = (tracked_record(1, 1, None), tracked_record(2, 2, Some(1)), tracked_record(3, 3, Some(2)));
    let budget = (two.content.len() + three.content.len()) as u64;
    let sink = Sink::start_with(&config(&standin, &[("Order Wait", "600 sec"), ("Node Identity", "n1")]), |s| {
        s.board = board.clone();
        s.max_in_flight_bytes = budget;
    });
    sink.submit(vec![two.clone(), three.clone()]);
    assert_eq!(sink.engine().capacity(), 0, "FlowFiles 2 and 3 wait for FlowFile 1 and fill the budget");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut given_back = HashMap::new();
    while given_back.len() < 2 {
        assert!(Instant::now() < deadline, "the waiting FlowFiles still hold the budget: {given_back:?}");
        given_back.extend(sink.collect(Duration::from_millis(200)).into_iter().map(|o| (o.flow_file_id, o)));
    }
    assert!(given_back.values().all(|o| o.route == Route::Retry), "{given_back:?}");
    assert_eq!(sink.engine().capacity(), budget, "the budget is free for FlowFile 1");
    sink.submit(vec![one]);
    sink.submit(vec![two, three]);
    let outcomes = sink.outcomes(3, Duration::from_secs(30));
    assert_eq!(routes(&outcomes, Route::Success), 3, "{outcomes:?}");
    assert!(outcomes.values().all(|o| o.rows_skipped == 0), "{outcomes:?}");
    assert_exactly_once(&standin, 3);
    assert!(board.lock().loaded(&key, "shardId-000000000000").is_some(), "the lease's position was reported");
}

/// A FlowFile's outcome as Java routes it: a FlowFile sent back for the at-least-once channel
/// ([`Route::Reload`]) is marked so and taken again.
fn outcome_after_reload(sink: &Sink, flow_file: FlowFileIn) -> Outcome {
    let id = flow_file.id;
    sink.submit(vec![flow_file.clone()]);
    let outcome = sink.outcomes(1, Duration::from_secs(30)).remove(&id).unwrap();
    if outcome.route != Route::Reload {
        return outcome;
    }
    let mut again = flow_file;
    again.attributes.insert("kinesnow.delivery".into(), "at-least-once".into());
    sink.submit(vec![again]);
    sink.outcomes(1, Duration::from_secs(30)).remove(&id).unwrap()
}

/// Issue 51, hole 3 for `parse.failure`: ConsumeKinesis' LINE_DELIMITED + INJECT_METADATA writes a
/// malformed record to `parse.failure` (noted as never arriving, `feedback::parse_failures`) and the
/// good records around it into one FlowFile, whose tokens span it. Repaired (ReplaceText, Jolt) and
/// sent to PutSnowflake with its attributes, it must load at least once. Before: success with 1 row
/// skipped (below the token the FlowFile around it committed), not loaded.
#[test]
fn a_record_repaired_from_parse_failure_is_loaded_not_skipped_as_a_replay() {
    use kinesnow_core::feedback::{parse_failures::Scope, BoardHandle};
    use kinesnow_core::kinesis::position::Position;
    use kinesnow_core::snowflake::offset::sharded_sequence_number;
    let standin = Standin::start("repaired-parse-failure", 100);
    create_events(&standin, "");
    let board = BoardHandle::new();
    let sink = Sink::start_with(&config(&standin, &[("Order Wait", "600 sec")]), |s| s.board = board.clone());
    let shard = "shardId-000000000000";
    let seq = |n: u64| format!("4959{n:012}");
    // As ConsumeKinesis notes it before it commits the batch: record 2 follows record 1 and never comes.
    let scope = Scope::new("orders-app", "us-east-1", "orders");
    board.parse_failures().note(&scope, shard, Some(Position::new(seq(1), None)), &Position::new(seq(2), None));
    let line = |n: u64| {
        let metadata = json!({"stream": "orders", "shardId": shard, "sequenceNumber": seq(n), "subSequenceNumber": 0,
            "shardedSequenceNumber": sharded_sequence_number(&seq(n), 0)});
        json!({"n": n, "seq": n, "kinesisMetadata": metadata}).to_string()
    };
    let mut around = kinesis_record(1, shard, 3, None, format!("{}\n{}\n", line(1), line(3)).as_bytes());
    around.attributes.insert("aws.kinesis.first.sequence.number".into(), seq(1));
    around.attributes.insert("record.count".into(), "2".into());
    sink.submit(vec![around]);
    let first = sink.outcomes(1, Duration::from_secs(30));
    assert_eq!((first[&1].route, first[&1].rows_sent), (Route::Success, 2), "{first:?}");
    let repaired = kinesis_record(2, shard, 2, Some(1), line(2).as_bytes());
    let outcome = outcome_after_reload(&sink, repaired);
    assert_eq!((outcome.route, outcome.rows_skipped), (Route::Success, 0), "{outcome:?}");
    assert_exactly_once(&standin, 3);
}
