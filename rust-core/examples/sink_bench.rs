//! PutSnowflake's engine sending a generated data set to the Snowflake stand-in, for
//! `bench/sink.sh` (which runs Snowflake's official Python SDK on the same rows beside it).
//!
//! Input: `<data>/shard-NNN.ndjson`, one Kinesis record per line with `kinesisMetadata` injected,
//! as ConsumeKinesis writes them with Processing Strategy LINE_DELIMITED and Output Strategy
//! INJECT_METADATA. Every `--records-per-flow-file` lines of a shard make one FlowFile with the
//! attributes ConsumeKinesis sets (only those PutSnowflake passes to Rust: `aws.kinesis.*` and
//! `record.count`). FlowFiles are submitted in round-robin shard order the way PutSnowflake's
//! onTrigger does: one submit per batch, as much content as `capacity()` allows (at least one
//! FlowFile). The table exists already (bench/sink.sh creates it); it is checked (every row once,
//! by EVENTID) and dropped afterwards. The clock runs from `SinkEngine::start` until every FlowFile has its outcome, i.e.
//! until Snowflake reports its last row committed. Prints one JSON line.
//!
//! Usage: sink_bench --url URL --ca CA_PEM --data DIR --table NAME [--records-per-flow-file 500]
//!        [--standin-pid PID] [--key PKCS8_PEM]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kinesnow_core::config::{PropertyMap, PutSnowflakeConfig};
use kinesnow_core::snowflake::{FlowFileIn, Route, SinkEngine, SinkSettings};
use serde_json::{json, Value};

const ACCOUNT: &str = "TESTACCT";
const USER: &str = "LOADER";

struct Args {
    url: String,
    ca: PathBuf,
    data: PathBuf,
    table: String,
    per_flow_file: usize,
    standin_pid: Option<u32>,
    key: Option<PathBuf>,
    /// PutSnowflake's Max In-Flight Size, when not the product's default.
    max_in_flight_size: Option<String>,
}

fn args() -> Args {
    let mut map: HashMap<String, String> = HashMap::new();
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().unwrap_or_else(|| panic!("{k} needs a value"));
        map.insert(k.trim_start_matches("--").to_owned(), v);
    }
    let need = |k: &str| map.get(k).cloned().unwrap_or_else(|| panic!("--{k} is required"));
    Args {
        url: need("url"),
        ca: need("ca").into(),
        data: need("data").into(),
        table: need("table"),
        per_flow_file: map.get("records-per-flow-file").map_or(500, |v| v.parse().expect("a number")),
        standin_pid: map.get("standin-pid").map(|v| v.parse().expect("a PID")),
        key: map.get("key").map(PathBuf::from),
        max_in_flight_size: map.get("max-in-flight-size").cloned(),
    }
}

/// user + system CPU seconds of a process (all its threads, finished ones included).
fn cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc/<pid>/stat");
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')').expect("stat has a command") + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks as f64 / 100.0 // USER_HZ is 100 on Linux
}

fn peak_rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// The shards' FlowFiles, round-robin across shards; and the number of rows and row bytes.
fn flow_files(data: &Path, per_flow_file: usize) -> (Vec<FlowFileIn>, u64, u64) {
    let mut files: Vec<PathBuf> = std::fs::read_dir(data)
        .expect("the data directory")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ndjson"))
        .collect();
    files.sort();
    let mut per_shard: Vec<Vec<FlowFileIn>> = Vec::new();
    let (mut rows, mut bytes) = (0u64, 0u64);
    let mut id = 0i64;
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
        rows += lines.len() as u64;
        bytes += lines.iter().map(|l| l.len() as u64 + 1).sum::<u64>();
        let mut shard = Vec::new();
        for chunk in lines.chunks(per_flow_file) {
            let first: Value = serde_json::from_str(chunk[0]).unwrap();
            let last: Value = serde_json::from_str(chunk[chunk.len() - 1]).unwrap();
            let (fm, lm) = (&first["kinesisMetadata"], &last["kinesisMetadata"]);
            let s = |v: &Value| v.as_str().map(str::to_owned).unwrap_or_else(|| v.to_string());
            let attributes: HashMap<String, String> = [
                ("aws.kinesis.stream.name", s(&fm["stream"])),
                ("aws.kinesis.shard.id", s(&fm["shardId"])),
                ("aws.kinesis.partition.key", s(&fm["partitionKey"])),
                ("aws.kinesis.first.sequence.number", s(&fm["sequenceNumber"])),
                ("aws.kinesis.last.sequence.number", s(&lm["sequenceNumber"])),
                ("aws.kinesis.approximate.arrival.timestamp.ms", s(&fm["approximateArrival"])),
                ("record.count", chunk.len().to_string()),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
            id += 1;
            shard.push(FlowFileIn { id, attributes, content: chunk.join("\n").into_bytes().into() });
        }
        per_shard.push(shard);
    }
    let mut out = Vec::new();
    let mut iters: Vec<_> = per_shard.into_iter().map(|s| s.into_iter()).collect();
    loop {
        let before = out.len();
        for it in &mut iters {
            out.extend(it.next());
        }
        if out.len() == before {
            break;
        }
    }
    (out, rows, bytes)
}

struct Admin {
    url: String,
    http: reqwest::blocking::Client,
}

impl Admin {
    fn call(&self, method: &str, path: &str, body: Value) -> Value {
        let request = self.http.request(method.parse().unwrap(), format!("{}{path}", self.url));
        let request = if body.is_null() { request } else { request.json(&body) };
        let response = request.send().expect("the stand-in answers");
        let status = response.status();
        let text = response.text().unwrap();
        assert!(status.is_success(), "{method} {path}: {status} {text}");
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }
}

fn main() {
    let args = args();
    let ca = std::fs::read(&args.ca).expect("the stand-in's CA");
    let admin = Admin {
        url: args.url.clone(),
        http: reqwest::blocking::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap())
            .timeout(Duration::from_secs(120))
            .build()
            .unwrap(),
    };
    let (flow_files, rows, bytes) = flow_files(&args.data, args.per_flow_file);
    let n = flow_files.len();
    let table = format!("DB.PUBLIC.{}", args.table);

    let key = match &args.key {
        Some(p) => std::fs::read_to_string(p).unwrap(),
        None => include_str!("../tests/fixtures/user.p8").to_owned(),
    };
    // Product defaults otherwise: Max Batch Size 8 MB, Max Latency 250 ms, Max In-Flight Size
    // 64 MB, Commit Timeout 90 s, status polled every 250 ms.
    let mut properties = vec![
        ("PutSnowflake Instance", "bench"),
        ("Account Identifier", ACCOUNT),
        ("Snowflake URL Override", args.url.as_str()),
        ("User", USER),
        ("Private Key", key.as_str()),
        ("Database", "DB"),
        ("Schema", "PUBLIC"),
        ("Table", args.table.as_str()),
    ];
    if let Some(size) = &args.max_in_flight_size {
        properties.push(("Max In-Flight Size", size.as_str()));
    }
    let config = PutSnowflakeConfig::parse(&PropertyMap::from_pairs(properties)).expect("valid settings");
    let rt = kinesnow_core::runtime::get();
    let standin_pid = args.standin_pid.map(|p| p.to_string());
    let standin_cpu0 = standin_pid.as_deref().map(cpu_seconds);
    let cpu0 = cpu_seconds("self");
    let t0 = Instant::now();

    let mut settings = SinkSettings::from_config(&config);
    settings.extra_root_ca_pem = Some(ca);
    let engine = {
        let _guard = rt.enter();
        SinkEngine::start(&config, settings).expect("the engine starts")
    };
    let mut queue = flow_files.into_iter().peekable();
    let mut done = 0usize;
    let mut not_success = Vec::new();
    let mut submits = 0u32;
    // What Java's sessions hold: each FlowFile handed over, until its outcome.
    let mut held: HashMap<i64, FlowFileIn> = HashMap::new();
    while done < n {
        // PutSnowflake.onTrigger: take FlowFiles up to capacity (at least one) and submit them in one call.
        let capacity = engine.capacity();
        let mut batch = Vec::new();
        let mut taken = 0u64;
        if capacity > 0 {
            while let Some(next) = queue.peek() {
                let size = next.content.len() as u64;
                if !batch.is_empty() && taken + size > capacity {
                    break;
                }
                taken += size;
                batch.push(queue.next().unwrap());
            }
        }
        let submitted = !batch.is_empty();
        if submitted {
            held.extend(batch.iter().map(|f| (f.id, f.clone())));
            let _guard = rt.enter();
            engine.submit(batch);
            submits += 1;
        }
        let wait = if submitted { Duration::ZERO } else { Duration::from_millis(100) };
        let mut resend = Vec::new();
        for o in rt.block_on(engine.outcomes(wait, 10_000)) {
            if o.route == Route::Resend {
                // As Java does: the FlowFile stays held and its content is handed over again.
                resend.extend(held.get(&o.flow_file_id).cloned());
                continue;
            }
            held.remove(&o.flow_file_id);
            done += 1;
            if o.route != Route::Success {
                not_success.push(format!("{} {:?}: {}", o.flow_file_id, o.route, o.message));
            }
        }
        if !resend.is_empty() {
            let _guard = rt.enter();
            engine.submit(resend);
        }
    }
    let seconds = t0.elapsed().as_secs_f64();
    let cpu = cpu_seconds("self") - cpu0;
    let standin_cpu = match (standin_pid.as_deref(), standin_cpu0) {
        (Some(pid), Some(c0)) => Some(cpu_seconds(pid) - c0),
        _ => None,
    };
    engine.stop();
    assert!(not_success.is_empty(), "{} FlowFile(s) did not succeed, e.g. {}", not_success.len(), not_success[0]);

    let bench = admin.call("GET", "/admin/bench-counts", Value::Null);
    if bench["bench_mode"] == json!(true) {
        // The stand-in counted rows without storing them: exactly the rows sent, none twice (no distinct check).
        assert_eq!(bench["tables"][&table].as_u64(), Some(rows), "every row committed once: {bench}");
    } else {
        let counted = &admin.call(
            "POST",
            "/admin/query",
            json!({ "sql": format!("SELECT COUNT(*) AS C, COUNT(DISTINCT EVENTID) AS D FROM {table}") }),
        )["rows"][0];
        assert_eq!((counted["C"].as_u64(), counted["D"].as_u64()), (Some(rows), Some(rows)), "every row exactly once");
    }
    admin.call("POST", "/admin/sql", json!({ "sql": format!("DROP TABLE {table}") }));

    let report = json!({
        "client": "kinesnow",
        "channels": std::fs::read_dir(&args.data).unwrap().filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "ndjson")).count(),
        "rows": rows,
        "bytes": bytes,
        "flow_files": n,
        "submits": submits,
        "seconds": seconds,
        "cpu_s": cpu,
        "standin_cpu_s": standin_cpu,
        "peak_rss_mb": peak_rss_mb(),
        "rows_per_s": rows as f64 / seconds,
        "mb_per_s": bytes as f64 / 1e6 / seconds,
        "cpu_s_per_million_rows": cpu / (rows as f64 / 1e6),
        "verified_rows": rows,
    });
    println!("{report}");
}
