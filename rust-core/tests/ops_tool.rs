//! The operator's tool (`kinesnow_core::ops`, `tools/kinesnow-ctl`) against kinesis-local, dynalite
//! and the Snowflake stand-in: `status` agrees with the lease table before and after a failover,
//! and through the built binary; `audit` finds a duplicated and a missing row planted in a table
//! and calls a complete table clean. Both take the stream's ARN as well as its name: kinesis-local
//! looks a stream up by the ARN a request carries, so an ARN of another account finds nothing.

use crate::{standin_support, support};

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use kinesnow_core::aws::{clients, AwsClients};
use kinesnow_core::consumer::ConsumerEngine;
use kinesnow_core::lease::{LeaseStore, TableView};
use kinesnow_core::ops::audit::{self, AuditReport, Table, Window};
use kinesnow_core::ops::sql::SqlApi;
use kinesnow_core::ops::status::{self, checkpoint_text, loaded_text, StatusReport, Target};
use kinesnow_core::ops::Stream;
use kinesnow_core::snowflake::api::{Destination, SnowflakeApi};
use kinesnow_core::snowflake::auth::{Credentials, KeyPairSigner};
use serde_json::json;
use standin_support::{Standin, ACCOUNT, KEY, USER};
use support::{arn_of, aws, create_stream, log, of_other_account, put, settings, Emulators};

/// What status and the table must agree on, per shard row: (owner, counter, checkpoint, loaded).
type Rows = BTreeMap<String, (Option<String>, Option<u64>, String, Option<String>)>;

fn table_rows(view: &TableView) -> Rows {
    view.leases
        .iter()
        .map(|r| {
            (
                r.shard_id.clone(),
                (
                    r.holder.as_ref().map(|h| h.owner.clone()),
                    r.counter,
                    checkpoint_text(&r.checkpoint),
                    r.loaded.as_ref().map(loaded_text),
                ),
            )
        })
        .collect()
}

fn status_rows(report: &StatusReport) -> Rows {
    report
        .shards
        .iter()
        .filter(|s| s.has_row)
        .map(|s| (s.shard_id.clone(), (s.owner.clone(), s.lease_counter, s.checkpoint.clone(), s.loaded.clone())))
        .collect()
}

/// Reads status between two scans of the table that agree, so engines writing meanwhile cannot
/// make the comparison flaky; asserts status shows exactly the table's rows and nodes.
async fn assert_status_agrees(c: &AwsClients, stream: &str, app: &str) -> StatusReport {
    let store = LeaseStore::new(c.dynamodb.clone(), app, stream);
    let by_name = Stream::by_name(stream);
    let target = Target { kinesis: &c.kinesis, dynamodb: &c.dynamodb, stream: &by_name, application: app };
    for _ in 0..10 {
        let before = store.scan().await.unwrap();
        let report = status::read(&target, true).await.unwrap();
        let after = store.scan().await.unwrap();
        if table_rows(&before) != table_rows(&after) {
            continue;
        }
        assert_eq!(status_rows(&report), table_rows(&before), "status shows the table's shard rows");
        let nodes = |v: &TableView| v.nodes.iter().map(|n| (n.row.clone(), n.owner.clone())).collect::<Vec<_>>();
        let shown: Vec<_> = report.nodes.iter().map(|n| (n.row.clone(), n.owner.clone())).collect();
        assert_eq!(shown, nodes(&before), "status shows the table's node rows");
        for s in report.shards.iter().filter(|s| s.owner.is_some()) {
            let owner = s.owner.as_deref().unwrap();
            let row = before.nodes.iter().find(|n| n.owner == owner).map(|n| n.row.clone());
            assert_eq!(s.owner_node_row, row, "{}: the owner's heartbeat row", s.shard_id);
        }
        return report;
    }
    panic!("the lease table never held still for two scans");
}

async fn wait_until(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + limit;
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn status_agrees_with_the_lease_table_through_a_failover() {
    log();
    let e = Emulators::start("ops-status");
    let c = clients(&aws(&e)).await;
    create_stream(&c, "ops", 2).await;
    put(&c, "ops", 0, 20).await;
    let a = ConsumerEngine::start(settings("ops", "ops-app"), clients(&aws(&e)).await).await.unwrap();
    let b = ConsumerEngine::start(settings("ops", "ops-app"), clients(&aws(&e)).await).await.unwrap();
    wait_until("one shard each", Duration::from_secs(30), || {
        a.leased_shards().len() == 1 && b.leased_shards().len() == 1
    })
    .await;
    // a checkpoints what it read; b reads nothing, so its shard has no checkpoint.
    let (got, _) = support::drain_within(&a, 1, true, Duration::from_secs(20)).await;
    assert!(!got.is_empty(), "a read records");
    tokio::time::sleep(Duration::from_millis(500)).await;

    let before = assert_status_agrees(&c, "ops", "ops-app").await;
    assert_eq!(before.shards.len(), 2);
    assert_eq!(before.nodes.len(), 2, "two heartbeat rows");
    let b_shard = b.leased_shards()[0].clone();
    let shown = before.shards.iter().find(|s| s.shard_id == b_shard).unwrap();
    assert_eq!(shown.owner.as_deref(), Some(b.owner()));
    assert!(shown.millis_behind_latest.is_some(), "lag is measured for an open shard");
    assert!(before.other.tombstones.is_empty());

    // b stops: it hands its lease back and removes its heartbeat row (a tombstone); a takes over.
    b.stop().await;
    wait_until("a holds both shards", Duration::from_secs(30), || a.leased_shards().len() == 2).await;
    let after = assert_status_agrees(&c, "ops", "ops-app").await;
    assert!(after.shards.iter().all(|s| s.owner.as_deref() == Some(a.owner())), "a owns every shard");
    let taken = after.shards.iter().find(|s| s.shard_id == b_shard).unwrap();
    assert!(taken.lease_counter > shown.lease_counter, "a take bumps the lease counter");
    assert_eq!(after.nodes.len(), 1, "one heartbeat row");
    assert_eq!(after.other.tombstones.len(), 1, "b's heartbeat row is a tombstone: {:?}", after.other);
    assert!(after.other.tombstones[0].shard_id.starts_with("__node__"));

    // The built tool says the same, as JSON.
    let out = ctl(&[
        "status",
        "--stream",
        "ops",
        "--application",
        "ops-app",
        "--region",
        "us-east-1",
        "--endpoint-url",
        &e.kinesis,
        "--dynamodb-endpoint-url",
        &e.dynamodb,
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let owners: Vec<&str> = json["shards"].as_array().unwrap().iter().map(|s| s["owner"].as_str().unwrap()).collect();
    assert_eq!(owners, [a.owner(), a.owner()]);
    assert_eq!(json["tombstones"].as_array().unwrap().len(), 1);
    assert!(json.get("stream_arn").is_none(), "no ARN for a stream named by its name");

    // Named by its ARN, the region taken from it: the same shards and owners, by the stream's name
    // in the lease table; an ARN of another account reaches no stream.
    let arn = arn_of(&c, "ops").await;
    let by_arn = |arn: &str| {
        ctl(&[
            "status",
            "--stream",
            arn,
            "--application",
            "ops-app",
            "--endpoint-url",
            &e.kinesis,
            "--dynamodb-endpoint-url",
            &e.dynamodb,
            "--json",
        ])
    };
    let out = by_arn(&arn);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((json["stream"].as_str(), json["stream_arn"].as_str()), (Some("ops"), Some(arn.as_str())));
    let owners: Vec<&str> = json["shards"].as_array().unwrap().iter().map(|s| s["owner"].as_str().unwrap()).collect();
    assert_eq!(owners, [a.owner(), a.owner()], "the lease rows of the stream's name");
    let out = by_arn(&of_other_account(&arn));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "another account's ARN reached a stream: {stderr}");
    assert!(stderr.contains(&of_other_account(&arn)), "{stderr}");
    a.stop().await;
}

/// The built `kinesnow-ctl` (built first, in this test binary's profile), run with local
/// credentials.
fn ctl(args: &[&str]) -> std::process::Output {
    Command::new(ctl_binary())
        .args(args)
        .env("AWS_ACCESS_KEY_ID", "local")
        .env("AWS_SECRET_ACCESS_KEY", "local")
        .env_remove("AWS_PROFILE")
        .output()
        .expect("run kinesnow-ctl")
}

fn ctl_binary() -> PathBuf {
    if let Ok(bin) = std::env::var("KINESNOW_CTL_BIN") {
        return bin.into();
    }
    // target/<profile>/deps/integration-<hash>
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(|d| d.parent()).unwrap().to_path_buf();
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev".to_owned(),
        Some(other) => other.to_owned(),
        None => panic!("no profile directory above {}", exe.display()),
    };
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "--quiet", "--profile", &profile, "-p", "kinesnow-ctl"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("run cargo build");
    assert!(status.success(), "kinesnow-ctl did not build");
    profile_dir.join("kinesnow-ctl")
}

#[test]
fn the_tool_refuses_wrong_usage_with_exit_code_2() {
    let out = ctl(&["status", "--stream", "s"]);
    assert_eq!(out.status.code(), Some(2), "missing --application");
    let out = ctl(&[
        "audit",
        "--stream",
        "s",
        "--region",
        "us-east-1",
        "--account",
        "a",
        "--user",
        "u",
        "--private-key-file",
        "/nonexistent/key.p8",
        "--database",
        "d",
        "--schema",
        "s",
        "--table",
        "t",
        "--since",
        "1h",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("/nonexistent/key.p8"), "{stderr}");
}

/// One record as Kinesis holds it: (shard, sequence number, arrival ms).
type Held = (String, String, i64);

/// Every record of the stream, shard by shard from TRIM_HORIZON.
async fn read_all(c: &AwsClients, stream: &str) -> Vec<Held> {
    let mut out = Vec::new();
    for shard in kinesnow_core::kinesis::shards::list_shards(
        &c.kinesis,
        kinesnow_core::kinesis::address::StreamRef::Name(stream),
    )
    .await
    .unwrap()
    {
        let mut iterator = c
            .kinesis
            .get_shard_iterator()
            .stream_name(stream)
            .shard_id(&shard.shard_id)
            .shard_iterator_type(aws_sdk_kinesis::types::ShardIteratorType::TrimHorizon)
            .send()
            .await
            .unwrap()
            .shard_iterator()
            .map(str::to_owned);
        while let Some(it) = iterator {
            let page = c.kinesis.get_records().shard_iterator(it).send().await.unwrap();
            for r in page.records() {
                let arrival = r.approximate_arrival_timestamp().unwrap().to_millis().unwrap();
                out.push((shard.shard_id.clone(), r.sequence_number().to_owned(), arrival));
            }
            if page.records().is_empty() && page.millis_behind_latest().unwrap_or(0) == 0 {
                break;
            }
            iterator = page.next_shard_iterator().map(str::to_owned);
        }
    }
    out
}

fn signer() -> KeyPairSigner {
    KeyPairSigner::new(ACCOUNT, USER, None, KEY, None).unwrap()
}

/// Loads one row per record into `table` through the Snowpipe Streaming REST API, as PutSnowflake
/// does, and waits until they are committed.
async fn plant(standin_url: &str, table: &str, stream: &str, rows: &[&Held]) {
    let api = SnowflakeApi::new(
        Destination {
            control: standin_url.parse().unwrap(),
            database: "DB".into(),
            schema: "PUBLIC".into(),
            pipe: format!("{table}-STREAMING"),
        },
        Credentials::KeyPair(signer()),
        Duration::from_secs(10),
        &Default::default(),
        None,
    )
    .unwrap();
    let opened = api.open_channel("audit").await.unwrap();
    let mut body = String::new();
    for (n, (shard, sequence, arrival)) in rows.iter().enumerate() {
        let line = json!({
            "N": n,
            "kinesisMetadata": {
                "stream": stream,
                "shardId": shard,
                "sequenceNumber": sequence,
                "subSequenceNumber": 0,
                "shardedSequenceNumber": kinesnow_core::contract::exactly_once::sharded_sequence_number(sequence, 0),
                "partitionKey": "k",
                "approximateArrival": arrival,
            }
        });
        body.push_str(&format!("{line}\n"));
    }
    let zstd = zstd::encode_all(body.as_bytes(), 3).unwrap();
    api.append_rows("audit", &opened.continuation_token, "1", zstd, body.len()).await.unwrap();
}

fn totals(report: &AuditReport) -> (u64, u64, u64, u64, u64) {
    report.shards.iter().fold((0, 0, 0, 0, 0), |t, s| {
        (t.0 + s.rows, t.1 + s.in_kinesis, t.2 + s.duplicates, t.3 + s.missing, t.4 + s.unexpected)
    })
}

#[test]
fn audit_finds_a_planted_duplicate_and_missing_row_and_calls_a_complete_table_clean() {
    log();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let e = Emulators::start("ops-audit");
    let standin = Standin::start("ops-audit", 0);
    for table in ["CLEAN", "DIRTY"] {
        standin.sql(&format!("CREATE OR REPLACE TABLE DB.PUBLIC.{table} (N NUMBER, KINESISMETADATA VARIANT)"));
    }
    // 250 records on two shards: each table's result comes in several partitions of 100 rows.
    const RECORDS: usize = 250;
    let c = rt.block_on(clients(&aws(&e)));
    let held = rt.block_on(async {
        create_stream(&c, "audited", 2).await;
        put(&c, "audited", 0, RECORDS).await;
        read_all(&c, "audited").await
    });
    assert_eq!(held.len(), RECORDS);
    let (twice, skipped) = (&held[3], &held[RECORDS - 10]);
    let dirty: Vec<&Held> = held
        .iter()
        .flat_map(|h| match h {
            h if h == twice => vec![h, h],
            h if h == skipped => vec![],
            h => vec![h],
        })
        .collect();
    rt.block_on(async {
        plant(&standin.url, "CLEAN", "audited", &held.iter().collect::<Vec<_>>()).await;
        plant(&standin.url, "DIRTY", "audited", &dirty).await;
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while standin.count("DB.PUBLIC.CLEAN") < RECORDS as u64 || standin.count("DB.PUBLIC.DIRTY") < RECORDS as u64 {
        assert!(std::time::Instant::now() < deadline, "the planted rows were never committed");
        std::thread::sleep(Duration::from_millis(100));
    }
    let from_ms = held.iter().map(|h| h.2).min().unwrap();
    let to_ms = held.iter().map(|h| h.2).max().unwrap() + 1;
    let window = Window::Time { from_ms, to_ms };
    let sql = SqlApi::new(standin.url.parse().unwrap(), signer(), None, None, None, &Default::default()).unwrap();
    let table = |name: &str| Table { database: "DB".into(), schema: "PUBLIC".into(), name: name.into() };

    let audited = Stream::by_name("audited");
    let clean = rt.block_on(audit::run(&c.kinesis, &audited, &sql, &table("CLEAN"), &window)).unwrap();
    assert!(clean.clean, "{}", audit::render(&clean));
    assert_eq!(clean.shards.len(), 2);
    assert_eq!(totals(&clean), (RECORDS as u64, RECORDS as u64, 0, 0, 0));

    let found = rt.block_on(audit::run(&c.kinesis, &audited, &sql, &table("DIRTY"), &window)).unwrap();
    assert!(!found.clean);
    assert_eq!(totals(&found), (RECORDS as u64, RECORDS as u64, 1, 1, 0), "{}", audit::render(&found));
    let key = |h: &Held| kinesnow_core::contract::exactly_once::sharded_sequence_number(&h.1, 0);
    let shard = |id: &str| found.shards.iter().find(|s| s.shard_id == id).unwrap();
    assert_eq!(shard(&twice.0).duplicate_examples, [key(twice)]);
    assert_eq!(shard(&skipped.0).missing_examples, [key(skipped)]);

    // A sequence window of one shard sees the same duplicate.
    let of_shard: Vec<&Held> = held.iter().filter(|h| h.0 == twice.0).collect();
    let window = Window::Sequence {
        shard: twice.0.clone(),
        from: of_shard.first().unwrap().1.clone(),
        to: of_shard.last().unwrap().1.clone(),
    };
    let one = rt.block_on(audit::run(&c.kinesis, &audited, &sql, &table("DIRTY"), &window)).unwrap();
    assert_eq!(one.shards.len(), 1);
    assert_eq!(one.shards[0].duplicate_examples, [key(twice)]);
    assert_eq!(one.shards[0].in_kinesis, of_shard.len() as u64);

    // Named by its ARN: the same records read by the ARN, the same rows of the stream's name.
    let arn = rt.block_on(arn_of(&c, "audited"));
    let by_arn = Stream::parse(&arn).unwrap();
    let found_by_arn = rt.block_on(audit::run(&c.kinesis, &by_arn, &sql, &table("DIRTY"), &window)).unwrap();
    assert_eq!((found_by_arn.stream.as_str(), found_by_arn.stream_arn.as_deref()), ("audited", Some(arn.as_str())));
    assert_eq!(found_by_arn.shards, one.shards);

    // The built tool: exit code 1 and the problems named, 0 for the clean table.
    let key_file = std::env::temp_dir().join(format!("kinesnow-ctl-key-{}.p8", std::process::id()));
    std::fs::write(&key_file, KEY).unwrap();
    let run_on = |stream: &str, name: &str| {
        let (since, until) = (from_ms.to_string(), to_ms.to_string());
        ctl(&[
            "audit",
            "--stream",
            stream,
            "--region",
            "us-east-1",
            "--endpoint-url",
            &e.kinesis,
            "--account",
            ACCOUNT,
            "--account-url",
            &standin.url,
            "--user",
            USER,
            "--private-key-file",
            key_file.to_str().unwrap(),
            "--database",
            "DB",
            "--schema",
            "PUBLIC",
            "--table",
            name,
            "--since",
            &since,
            "--until",
            &until,
        ])
    };
    let run = |name: &str| run_on("audited", name);
    let out = run("DIRTY");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains(&format!("duplicate shardedSequenceNumber {}", key(twice))), "{text}");
    assert!(text.contains(&format!("missing shardedSequenceNumber {}", key(skipped))), "{text}");
    let out = run("CLEAN");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    let out = run_on(&arn, "DIRTY");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.starts_with(&format!("STREAM audited ({arn})")), "{text}");
    assert!(text.contains(&format!("missing shardedSequenceNumber {}", key(skipped))), "{text}");
    let out = run_on(&of_other_account(&arn), "CLEAN");
    assert_eq!(
        out.status.code(),
        Some(2),
        "another account's ARN reached a stream: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let _ = std::fs::remove_file(&key_file);
}
