//! De-aggregation throughput on one core: KPL aggregates of 1000 × 1 KiB user records, and plain
//! (non-aggregated) 1 KiB records passing through. Prints the median of several samples, in MB/s
//! of input bytes (10^6 bytes) and user records/s.
//!
//!   cargo bench -p kinesnow-core --features test-support --bench deaggregate
//!
//! The timed loop covers only `deaggregate_into` over records prepared beforehand; building the
//! inputs and dropping the outputs happen outside it.

use std::hint::black_box;
use std::time::{Duration, Instant};

use kinesnow_core::kinesis::deaggregate::{aggregate, deaggregate_into, Outcome};
use kinesnow_core::kinesis::record::KinesisRecord;

const SAMPLES: usize = 15;
const RECORD_BYTES: usize = 1024;
const RECORDS_PER_AGGREGATE: usize = 1000;

fn record(data: Vec<u8>) -> KinesisRecord {
    KinesisRecord {
        sequence_number: "49590338271490256608559692538361571095921575989136588898".into(),
        sub_sequence_number: None,
        partition_key: "p".into(),
        approximate_arrival_ms: 1_700_000_000_000,
        data,
    }
}

/// Pseudo-random bytes (xorshift), so neither MD5 nor memcpy sees a trivial pattern.
fn payload(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn one_aggregate(seed: u64) -> Vec<u8> {
    let users: Vec<(String, Vec<u8>)> = (0..RECORDS_PER_AGGREGATE)
        .map(|i| (format!("device-{:03}", i % 100), payload(seed * 10_000 + i as u64, RECORD_BYTES)))
        .collect();
    aggregate(&users)
}

struct Sample {
    seconds: f64,
    input_bytes: usize,
    user_records: usize,
}

/// Times `deaggregate_into` over one batch of inputs.
fn run(inputs: Vec<KinesisRecord>) -> Sample {
    let input_bytes = inputs.iter().map(|r| r.data.len()).sum();
    let mut out = Vec::with_capacity(inputs.len() * RECORDS_PER_AGGREGATE);
    let start = Instant::now();
    for r in inputs {
        let outcome = deaggregate_into(r, &mut out);
        debug_assert!(!matches!(outcome, Outcome::Invalid(_)));
        black_box(&outcome);
    }
    let seconds = start.elapsed().as_secs_f64();
    let user_records = black_box(&out).len();
    drop(out);
    Sample { seconds, input_bytes, user_records }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn report(name: &str, make_batch: impl Fn() -> Vec<KinesisRecord>) {
    run(make_batch()); // warm-up
    let samples: Vec<Sample> = (0..SAMPLES).map(|_| run(make_batch())).collect();
    let mb_s = median(samples.iter().map(|s| s.input_bytes as f64 / s.seconds / 1e6).collect());
    let rec_s = median(samples.iter().map(|s| s.user_records as f64 / s.seconds).collect());
    let batch_mb = samples[0].input_bytes as f64 / 1e6;
    let total = Duration::from_secs_f64(samples.iter().map(|s| s.seconds).sum());
    println!(
        "{name:<44} median {mb_s:>10.1} MB/s  {rec_s:>12.0} user records/s  ({SAMPLES} samples of {batch_mb:.1} MB, {total:.2?} timed)"
    );
}

fn main() {
    let aggregates: Vec<Vec<u8>> = (0..64).map(one_aggregate).collect();
    let plain: Vec<Vec<u8>> = (0..64_000).map(|i| payload(i, RECORD_BYTES)).collect();
    println!("aggregate: {RECORDS_PER_AGGREGATE} x {RECORD_BYTES} B user records = {} bytes", aggregates[0].len());
    report("KPL aggregates (1000 x 1 KiB), 64 per sample", || aggregates.iter().cloned().map(record).collect());
    report("plain 1 KiB records, 64000 per sample", || plain.iter().cloned().map(record).collect());
    md5_reference(&aggregates);
}

/// The MD5 check alone over the same aggregates: the ceiling for de-aggregation on this core.
fn md5_reference(aggregates: &[Vec<u8>]) {
    use md5::{Digest, Md5};
    let bytes: usize = aggregates.iter().map(Vec::len).sum();
    let samples = (0..SAMPLES)
        .map(|_| {
            let start = Instant::now();
            for a in aggregates {
                black_box(Md5::digest(black_box(a)));
            }
            bytes as f64 / start.elapsed().as_secs_f64() / 1e6
        })
        .collect();
    println!(
        "{:<44} median {:>10.1} MB/s  (reference: MD5 of the aggregates only)",
        "md-5 crate alone",
        median(samples)
    );
    let samples = (0..SAMPLES)
        .map(|_| {
            let start = Instant::now();
            for a in aggregates {
                black_box(kinesnow_core::kinesis::digest::md5(black_box(a)));
            }
            bytes as f64 / start.elapsed().as_secs_f64() / 1e6
        })
        .collect();
    println!(
        "{:<44} median {:>10.1} MB/s  (what de-aggregation uses; compare `openssl speed -bytes 8192 md5`)",
        "AWS-LC MD5 alone",
        median(samples)
    );
}
