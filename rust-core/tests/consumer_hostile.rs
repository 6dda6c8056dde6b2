//! The consumer engine against hostile input, on real kinesis-local and dynalite: nothing is
//! lost, order holds, and memory stays within the budget plus its documented constants.
//!
//! The test binary counts its allocations (`support/counting_alloc.rs`) and refuses to hold more
//! than 2 GiB at once, so a regression that asks for gigabytes aborts it instead of exhausting the
//! machine.

#[path = "support/counting_alloc.rs"]
mod counting_alloc;
mod support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_kinesis::primitives::Blob;
use kinesnow_core::aws::clients;
use kinesnow_core::consumer::ConsumerEngine;
use kinesnow_core::kinesis::deaggregate::{aggregate, key_bomb, MAX_EXPANSION_BYTES};
use support::{aws, create_stream, log, settings, Emulators};

#[global_allocator]
static ALLOCATOR: counting_alloc::Counting = counting_alloc::Counting;

/// A record as the test expects it back: (sub-sequence number, data).
type Got = (Option<u64>, Vec<u8>);

/// The KPL key bomb of issue 15 (a 1 MiB record: a 512 KiB key and 130,000 empty sub-records
/// pointing at it, valid MD5) between plain records and a large but real aggregate (30,000
/// sub-records with a 200-byte key: about 12 MB of expansion, three times the 4 MiB budget). Every
/// record arrives once, in shard order, the bomb whole as one record and the real aggregate
/// de-aggregated; the bytes the engine holds stay within Max Buffer Size plus one aggregate's
/// expansion bound, and the process's heap grows by far less than the bomb would expand to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kpl_key_bomb_is_delivered_whole_in_order_within_the_budget() {
    counting_alloc::cap_process(2 << 30);
    log();
    let e = Emulators::start("kpl-bomb");
    let c = clients(&aws(&e)).await;
    create_stream(&c, "hostile", 1).await;

    let bomb = key_bomb(512 * 1024, 130_000);
    assert!(bomb.len() <= 1 << 20, "the bomb is one Kinesis record: {} bytes", bomb.len());
    let key = "k".repeat(200);
    let users: Vec<(String, String)> = (0..30_000).map(|i| (key.clone(), format!("{i:020}"))).collect();
    let real = aggregate(&users);
    let mut expected: Vec<Got> = Vec::new();
    let put = |data: Vec<u8>| {
        let kinesis = c.kinesis.clone();
        async move {
            kinesis.put_record().stream_name("hostile").partition_key("p").data(Blob::new(data)).send().await.unwrap()
        }
    };
    for i in 0..20 {
        let data = format!("before-{i}").into_bytes();
        put(data.clone()).await;
        expected.push((None, data));
    }
    put(bomb.clone()).await;
    expected.push((None, bomb.clone()));
    put(real).await;
    expected.extend(users.iter().enumerate().map(|(i, (_, d))| (Some(i as u64), d.clone().into_bytes())));
    for i in 0..20 {
        let data = format!("after-{i}").into_bytes();
        put(data.clone()).await;
        expected.push((None, data));
    }
    drop(users);

    let s = settings("hostile", "hostile-app");
    let budget = s.max_buffer_size;
    counting_alloc::reset_process_peak();
    let heap_before = counting_alloc::process_live();
    let engine = Arc::new(ConsumerEngine::start(s, clients(&aws(&e)).await).await.unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let max_held = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (engine, stop, max_held) = (engine.clone(), stop.clone(), max_held.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                max_held.fetch_max(engine.held_bytes(), Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };

    let mut got: Vec<Got> = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    while got.len() < expected.len() && tokio::time::Instant::now() < deadline {
        if let Some(batch) = engine.poll(1024 * 1024, Duration::from_millis(500)).await {
            max_held.fetch_max(engine.held_bytes(), Ordering::SeqCst);
            for shard in &batch.shards {
                got.extend(shard.records.iter().map(|r| (r.sub_sequence_number, r.data.clone())));
            }
            engine.ack(batch.id).await.unwrap();
        }
    }
    stop.store(true, Ordering::SeqCst);
    sampler.await.unwrap();
    let heap_peak = counting_alloc::process_peak().saturating_sub(heap_before);
    let max_held = max_held.load(Ordering::SeqCst);
    eprintln!(
        "{} records arrived; the engine held at most {max_held} bytes (budget {budget} + bound {MAX_EXPANSION_BYTES}); the \
         process's heap grew by at most {heap_peak} bytes",
        got.len()
    );
    assert_eq!(got.len(), expected.len(), "every record arrives, once");
    let bomb_at = expected.iter().position(|(_, d)| *d == bomb).unwrap();
    assert_eq!(got[bomb_at], (None, bomb), "the bomb arrives whole, as one record, in its place");
    assert!(got == expected, "every record in shard order");
    assert!(max_held <= budget + MAX_EXPANSION_BYTES, "held {max_held} bytes, more than the budget plus one expansion");
    assert!(heap_peak < 256 << 20, "the heap grew by {heap_peak} bytes");
    assert!(engine.poll(1024 * 1024, Duration::from_millis(1500)).await.is_none(), "nothing more");
    engine.stop().await;
}
