//! Starting the server binary on a free port for a test, and the stream the tests serve.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use kinesis_source::generate::{ExpectedRecord, Generator};
use kinesis_source::spec::{KeyScheme, Payload, RecordCount, StreamSpec};

/// A running kinesis-source; killed (by its own PID, through the Child handle) when dropped.
pub struct ServerProcess {
    child: Child,
    pub port: u16,
}

impl ServerProcess {
    pub fn start(spec: &StreamSpec, extra: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kinesis-source"))
            .args(args(spec))
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the kinesis-source binary starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped stdout")).read_line(&mut line).expect("a first line");
        let port = line
            .trim()
            .strip_prefix("listening on 127.0.0.1:")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        ServerProcess { child, port }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The command-line flags that describe `spec` to the binary.
pub fn args(spec: &StreamSpec) -> Vec<String> {
    let RecordCount::PerShard(per_shard) = spec.records else { panic!("tests use records per shard") };
    let keys = match spec.keys {
        KeyScheme::ShardPool(k) => format!("shard-pool:{k}"),
        KeyScheme::Unique => "unique".into(),
    };
    [
        ("--stream", spec.stream_name.clone()),
        ("--shards", spec.shard_count.to_string()),
        ("--records-per-shard", per_shard.to_string()),
        ("--record-size", spec.record_size.to_string()),
        ("--aggregate-share", spec.aggregate_share.to_string()),
        ("--records-per-aggregate", spec.records_per_aggregate.to_string()),
        ("--keys", keys),
        ("--payload", spec.payload.name().to_string()),
        ("--seed", spec.seed.to_string()),
        ("--created-at-ms", spec.created_at_ms.to_string()),
        ("--arrival-interval-ms", spec.arrival_interval_ms.to_string()),
        ("--max-record-size-kib", spec.max_record_size_kib.to_string()),
        ("--threads", "1".into()),
    ]
    .into_iter()
    .flat_map(|(flag, value)| [flag.to_string(), value])
    .collect()
}

/// 4 shards × 200 Kinesis records, a fifth of them KPL aggregates of 5 user records.
pub fn small_stream(keys: KeyScheme, seed: u64) -> StreamSpec {
    StreamSpec {
        stream_name: "conformance".into(),
        account_id: "000000000000".into(),
        region: "us-east-1".into(),
        shard_count: 4,
        records: RecordCount::PerShard(200),
        record_size: 300,
        record_sizes: Vec::new(),
        filler: kinesis_source::spec::Filler::Random,
        aggregate_share: 0.2,
        records_per_aggregate: 5,
        keys,
        payload: Payload::Ascii,
        seed,
        created_at_ms: 1_767_225_600_000,
        arrival_interval_ms: 3,
        max_record_size_kib: kinesis_source::spec::DEFAULT_MAX_RECORD_SIZE_KIB,
    }
    .validate()
    .expect("a valid spec")
}

/// A user record as a test compares it: (sequence number, sub, partition key, data).
pub type Seen = (String, u32, String, Vec<u8>);

pub fn expected_in_shard(spec: &StreamSpec, shard: u32) -> Vec<Seen> {
    Generator::new(spec.clone())
        .expected_in_shard(shard)
        .map(|r: ExpectedRecord| (r.sequence_number.to_string(), r.sub, r.partition_key, r.data))
        .collect()
}

/// Compares without printing thousands of bytes on a mismatch: the first differing record.
pub fn assert_same(shard: u32, seen: &[Seen], expected: &[Seen]) {
    for (i, (s, e)) in seen.iter().zip(expected).enumerate() {
        assert!(s == e, "shard {shard}, user record {i}: got {:?}, expected {:?}", short(s), short(e));
    }
    assert_eq!(seen.len(), expected.len(), "shard {shard}: user records read");
}

fn short(r: &Seen) -> (String, u32, String, String) {
    (r.0.clone(), r.1, r.2.clone(), String::from_utf8_lossy(&r.3[..r.3.len().min(40)]).into_owned())
}
