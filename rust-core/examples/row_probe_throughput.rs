//! The row fast path's throughput (`snowflake::row_probe::passthrough`, issue 38): NDJSON rows as
//! ConsumeKinesis writes them (LINE_DELIMITED with Inject Metadata), cut into FlowFiles the way
//! `bench/sink.sh` cuts them, checked again and again in one thread. Every FlowFile must take the
//! fast path. Prints one JSON line: the median, fastest and slowest pass over all rows.
//!
//! Data: `python3 bench/sink_bench.py gen --out DIR --rows 100000 --channels 1` (DIR/shard-000.ndjson).
//!
//! Usage: row_probe_throughput --data FILE [--records-per-flow-file 500] [--passes 21]
//! (pin it to one core, e.g. `taskset -c 1`, and alternate builds of different commits)

use std::collections::HashMap;
use std::time::Instant;

use kinesnow_core::snowflake::row_probe::passthrough;

fn main() {
    let mut map: HashMap<String, String> = HashMap::new();
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().unwrap_or_else(|| panic!("{k} needs a value"));
        map.insert(k.trim_start_matches("--").to_owned(), v);
    }
    let data = map.get("data").expect("--data FILE is required");
    let per_flow_file: usize = map.get("records-per-flow-file").map_or(500, |v| v.parse().expect("a number"));
    let passes: usize = map.get("passes").map_or(21, |v| v.parse().expect("a number"));

    let text = std::fs::read_to_string(data).expect("read --data");
    let lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
    let first: serde_json::Value = serde_json::from_str(lines[0]).expect("a JSON row");
    let metadata = &first["kinesisMetadata"];
    let (stream, shard) =
        (metadata["stream"].as_str().expect("stream"), metadata["shardId"].as_str().expect("shardId"));
    // Each FlowFile's content as the engine holds it (`FlowFileIn::content`): one buffer its rows slice.
    let flow_files: Vec<bytes::Bytes> =
        lines.chunks(per_flow_file).map(|c| bytes::Bytes::from(c.join("\n") + "\n")).collect();
    let bytes: usize = flow_files.iter().map(|c| c.len()).sum();

    let pass = || {
        let start = Instant::now();
        let mut rows = 0;
        for content in &flow_files {
            let text = std::str::from_utf8(content).expect("UTF-8");
            rows += passthrough(content, text, stream, shard).expect("every FlowFile takes the fast path").len();
        }
        assert_eq!(rows, lines.len());
        start.elapsed().as_secs_f64() * 1e3
    };
    pass();
    let mut ms: Vec<f64> = (0..passes).map(|_| pass()).collect();
    ms.sort_by(f64::total_cmp);
    let median = ms[ms.len() / 2];
    println!(
        "{{\"rows\":{},\"mb\":{:.1},\"passes\":{passes},\"median_ms\":{median:.1},\"min_ms\":{:.1},\"max_ms\":{:.1},\"mb_per_s\":{:.0}}}",
        lines.len(),
        bytes as f64 / 1e6,
        ms[0],
        ms[ms.len() - 1],
        bytes as f64 / 1e3 / median,
    );
}
