//! CPU per million records of reading GetRecords' answers: the SDK's JSON codec alone against the
//! engine's `FastRecords` interceptor (`aws::get_records`), on one thread, over a canned answer of
//! 1,000 records of 1 KiB that arrives in 16 KiB chunks (the whole call: the SDK's orchestration,
//! signing and the answer's reading; no network). The two ways alternate, sample by sample; the
//! figures are medians of the samples' thread CPU time (`/proc/thread-self/schedstat`).
//!
//!   cargo bench -p kinesnow-core --features test-support --bench get_records_decode

use kinesnow_core::aws::get_records::canned;

const SAMPLES: usize = 15;
const CALLS_PER_SAMPLE: usize = 40;
const RECORDS: usize = 1000;
const RECORD_BYTES: usize = 1024;

/// This thread's CPU time so far, in nanoseconds.
fn thread_cpu_ns() -> u64 {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
    text.split_whitespace().next().and_then(|n| n.parse().ok()).expect("CPU time")
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let answer = canned::answer(RECORDS, RECORD_BYTES);
    let clients =
        [("the SDK's codec", canned::client(answer.clone(), false)), ("FastRecords", canned::client(answer, true))];
    let mut per_million: Vec<Vec<f64>> = vec![Vec::new(); clients.len()];
    for sample in 0..=SAMPLES {
        for (i, (_, client)) in clients.iter().enumerate() {
            let start = thread_cpu_ns();
            runtime.block_on(async {
                for _ in 0..CALLS_PER_SAMPLE {
                    let out = client.get_records().shard_iterator("it").send().await.expect("GetRecords");
                    assert_eq!(std::hint::black_box(out).records().len(), RECORDS);
                }
            });
            let seconds = (thread_cpu_ns() - start) as f64 / 1e9;
            if sample > 0 {
                // The first round warms up.
                per_million[i].push(seconds / (CALLS_PER_SAMPLE * RECORDS) as f64 * 1e6);
            }
        }
    }
    println!("GetRecords answers of {RECORDS} records of {RECORD_BYTES} bytes, {SAMPLES} samples of {CALLS_PER_SAMPLE} calls each way");
    let base = median(per_million[0].clone());
    for (i, (name, _)) in clients.iter().enumerate() {
        let m = median(per_million[i].clone());
        println!("{name:16} {m:6.3} CPU-s per million records ({:.2}x the SDK's codec)", m / base);
    }
}
