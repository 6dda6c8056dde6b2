//! The consumer engine against real kinesis-local and dynalite: every record once and in shard
//! order, checkpoints only after ack, rewind on nack, resume after restart, fenced checkpoints,
//! and with LATEST a split child read from its start.

use crate::support;

use std::time::Duration;

use aws_sdk_kinesis::primitives::Blob;
use kinesnow_core::aws::clients;
use kinesnow_core::consumer::ConsumerEngine;
use kinesnow_core::lease::{Checkpoint, LeaseStore};
use support::{aws, by_shard, create_stream, drain, log, put, settings, Emulators};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_record_once_in_shard_order_and_resume_after_restart() {
    log();
    let emulators = Emulators::start("resume");
    let c = clients(&aws(&emulators)).await;
    create_stream(&c, "orders", 3).await;
    let first = put(&c, "orders", 0, 120).await;

    let engine =
        ConsumerEngine::start(settings("orders", "orders-app"), clients(&aws(&emulators)).await).await.unwrap();
    assert_eq!(engine.leased_shards().len(), 3);
    let (got, _) = drain(&engine, first.len(), true).await;
    assert_eq!(got, by_shard(&first), "every record, once, in shard order");
    engine.stop().await;

    // Checkpoints hold each shard's last record, and no lease is left behind.
    let store = LeaseStore::new(c.dynamodb.clone(), "orders-app", "orders");
    let rows = store.rows().await.unwrap();
    assert_eq!(rows.len(), 3);
    for (_, checkpoint, owner) in &rows {
        assert!(matches!(checkpoint, Checkpoint::At(_)), "{checkpoint:?}");
        assert_eq!(owner, &None, "stop releases the lease");
    }

    // A restarted engine delivers only what came after the checkpoints.
    let second = put(&c, "orders", 120, 30).await;
    let engine =
        ConsumerEngine::start(settings("orders", "orders-app"), clients(&aws(&emulators)).await).await.unwrap();
    let (got, _) = drain(&engine, second.len(), true).await;
    assert_eq!(got, by_shard(&second));
    assert!(engine.poll(1024 * 1024, Duration::from_millis(1500)).await.is_none(), "nothing more");
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unacknowledged_and_nacked_batches_are_delivered_again() {
    log();
    let emulators = Emulators::start("nack");
    let c = clients(&aws(&emulators)).await;
    create_stream(&c, "clicks", 1).await;
    let put1 = put(&c, "clicks", 0, 40).await;

    let engine =
        ConsumerEngine::start(settings("clicks", "clicks-app"), clients(&aws(&emulators)).await).await.unwrap();
    let (got, batches) = drain(&engine, 40, false).await;
    assert_eq!(got, by_shard(&put1));
    // NiFi's commit failed: everything comes again, in order.
    for id in &batches {
        engine.nack(*id).unwrap();
    }
    let (again, _) = drain(&engine, 40, true).await;
    assert_eq!(again, by_shard(&put1));
    // NiFi's counters say the same: 40 records read, rolled back and read again, then checkpointed.
    use kinesnow_core::contract::counters::consume_kinesis::ConsumerCounter as C;
    let counts = engine.take_counters();
    let count = |c: C| counts[c as usize];
    assert_eq!(count(C::RecordsRead), 80, "{counts:?}");
    assert_eq!(count(C::RecordsReadAgain), 40, "{counts:?}");
    assert_eq!(count(C::LeasesTaken), 1, "{counts:?}");
    assert!(count(C::Batches) as usize > batches.len() && count(C::GetRecordsCalls) >= 2, "{counts:?}");
    assert!(count(C::CheckpointsWritten) >= 1 && count(C::LeasesLost) == 0, "{counts:?}");
    // Acked now; then a batch is taken but never settled (NiFi dies before committing).
    let put2 = put(&c, "clicks", 40, 10).await;
    let (pending, _) = drain(&engine, 10, false).await;
    assert_eq!(pending, by_shard(&put2));
    drop(engine); // no stop: like a killed node, the lease stays until its heartbeat is seen stopped

    let engine =
        ConsumerEngine::start(settings("clicks", "clicks-app"), clients(&aws(&emulators)).await).await.unwrap();
    assert!(
        engine.leased_shards().is_empty(),
        "the dead node's lease is not taken before its heartbeat is seen stopped"
    );
    let (replayed, _) = drain(&engine, 10, true).await;
    assert_eq!(replayed, by_shard(&put2), "exactly the uncommitted records come again");
    assert!(engine.poll(1024 * 1024, Duration::from_millis(1500)).await.is_none());
    engine.stop().await;
}

/// Issue 34, item 4: with LATEST and no checkpoint yet, NiFi rolled the first batches back and the
/// reader started again at LATEST: the records read since the first LATEST never came again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_latest_a_rollback_before_the_first_checkpoint_reads_the_same_records_again() {
    log();
    let emulators = Emulators::start("latest-nack");
    let c = clients(&aws(&emulators)).await;
    create_stream(&c, "taps", 1).await;
    let mut s = settings("taps", "taps-app");
    s.initial_position = kinesnow_core::config::consume_kinesis::InitialPosition::Latest;
    let engine = ConsumerEngine::start(s, clients(&aws(&emulators)).await).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await; // the LATEST iterator is taken
    let first = put(&c, "taps", 0, 20).await;
    let (got, batches) = drain(&engine, 20, false).await;
    assert_eq!(got, by_shard(&first));
    for id in &batches {
        engine.nack(*id).unwrap(); // NiFi's commit failed before any checkpoint
    }
    tokio::time::sleep(Duration::from_secs(2)).await; // a reader restarting at LATEST would have its iterator now
    let second = put(&c, "taps", 20, 5).await;
    let (again, _) = drain(&engine, 25, true).await;
    let mut expected = by_shard(&first);
    for (shard, records) in by_shard(&second) {
        expected.entry(shard).or_default().extend(records);
    }
    assert_eq!(again, expected, "the rolled-back records come again, then the new ones");
    engine.stop().await;
}

/// Issue 34, item 4 (the rest): with LATEST, a lease handed on before its first checkpoint (a stop,
/// a hand-back, a kill) left the next owner starting at a new LATEST, past the records the first
/// owner read and NiFi never committed. The first take now pins LATEST to a time in the row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_latest_a_lease_handed_on_before_the_first_checkpoint_reads_the_same_records_again() {
    log();
    let emulators = Emulators::start("latest-handon");
    let c = clients(&aws(&emulators)).await;
    create_stream(&c, "handon", 1).await;
    let mut s = settings("handon", "handon-app");
    s.initial_position = kinesnow_core::config::consume_kinesis::InitialPosition::Latest;
    let first_owner = ConsumerEngine::start(s.clone(), clients(&aws(&emulators)).await).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await; // the first owner's reader has started
    let rows = LeaseStore::new(c.dynamodb.clone(), "handon-app", "handon").scan().await.unwrap().leases;
    assert!(
        matches!(rows[0].start, Some(kinesnow_core::lease::kcl::StartHint::AtTimestamp(_))),
        "the first take pinned LATEST to a time: {:?}",
        rows[0].start
    );
    let first = put(&c, "handon", 0, 20).await;
    let (got, batches) = drain(&first_owner, 20, false).await;
    assert_eq!(got, by_shard(&first));
    for id in &batches {
        first_owner.nack(*id).unwrap(); // NiFi's commit failed, then the processor was stopped
    }
    first_owner.stop().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let second_owner = ConsumerEngine::start(s, clients(&aws(&emulators)).await).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await; // a reader starting at a new LATEST would have it now
    let second = put(&c, "handon", 20, 5).await;
    let (again, _) = drain(&second_owner, 25, true).await;
    let mut expected = by_shard(&first);
    for (shard, records) in by_shard(&second) {
        expected.entry(shard).or_default().extend(records);
    }
    assert_eq!(again, expected, "the next owner reads what the first read and NiFi never committed, then the new ones");
    second_owner.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kpl_aggregates_resume_exactly_at_the_committed_sub_record() {
    log();
    let emulators = Emulators::start("kpl");
    let c = clients(&aws(&emulators)).await;
    create_stream(&c, "kpl", 1).await;
    // Two aggregates of 30 user records each, with a plain record between them.
    let mut expected = Vec::new();
    for a in 0..2 {
        let users: Vec<(String, String)> = (0..30).map(|i| (format!("pk-{}", i % 4), format!("agg{a}-{i}"))).collect();
        let blob = kinesnow_core::kinesis::deaggregate::aggregate(&users);
        c.kinesis.put_record().stream_name("kpl").partition_key("agg").data(Blob::new(blob)).send().await.unwrap();
        expected.extend(users.into_iter().map(|(_, d)| d));
        if a == 0 {
            c.kinesis
                .put_record()
                .stream_name("kpl")
                .partition_key("plain")
                .data(Blob::new("plain"))
                .send()
                .await
                .unwrap();
            expected.push("plain".into());
        }
    }

    // Small batches split the first aggregate; only the first batch is committed.
    let engine = ConsumerEngine::start(settings("kpl", "kpl-app"), clients(&aws(&emulators)).await).await.unwrap();
    let first = engine.poll(10 * 120, Duration::from_secs(10)).await.expect("a batch");
    let records = &first.shards[0].records;
    assert!(records.len() >= 2 && records.len() < 30, "the batch ends inside the first aggregate: {}", records.len());
    assert_eq!(records[0].sub_sequence_number, Some(0));
    assert_eq!(records[1].sub_sequence_number, Some(1));
    assert_eq!(&*records[1].partition_key, "pk-1");
    let committed = records.len();
    engine.ack(first.id).await.unwrap();
    engine.stop().await;

    // A new engine starts inside the aggregate, right after the committed sub-record.
    let engine = ConsumerEngine::start(settings("kpl", "kpl-app"), clients(&aws(&emulators)).await).await.unwrap();
    let (got, _) = drain(&engine, expected.len() - committed, true).await;
    let rest: Vec<String> = got.into_values().flatten().collect();
    assert_eq!(rest, expected[committed..].to_vec());
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_latest_a_childs_records_written_before_its_lease_are_not_skipped() {
    log();
    let emulators = Emulators::start("latest-split");
    let c = clients(&aws(&emulators)).await;
    create_stream(&c, "events", 1).await;
    let mut s = settings("events", "events-app");
    s.initial_position = kinesnow_core::config::consume_kinesis::InitialPosition::Latest;
    let engine = ConsumerEngine::start(s, clients(&aws(&emulators)).await).await.unwrap();
    let parent = engine.leased_shards().into_iter().next().expect("the shard is leased");
    tokio::time::sleep(Duration::from_secs(2)).await; // the LATEST iterator is taken
    let before = put(&c, "events", 0, 5).await;
    let (got, _) = drain(&engine, 5, true).await;
    assert_eq!(got, by_shard(&before), "LATEST reads what is written after the start");

    c.kinesis
        .split_shard()
        .stream_name("events")
        .shard_to_split(&parent)
        .new_starting_hash_key("170141183460469231731687303715884105728")
        .send()
        .await
        .unwrap();
    // Written at once, before the engine has seen the parent end and leased the children.
    let mut children: std::collections::BTreeMap<String, Vec<String>> = std::collections::BTreeMap::new();
    for i in 0..10 {
        let hash = if i % 2 == 0 { "1" } else { "300000000000000000000000000000000000000" };
        let data = format!("{{\"child\":{i}}}");
        let out = c
            .kinesis
            .put_record()
            .stream_name("events")
            .partition_key("k")
            .explicit_hash_key(hash)
            .data(Blob::new(data.clone()))
            .send()
            .await
            .unwrap();
        assert_ne!(out.shard_id(), parent, "written to a child");
        children.entry(out.shard_id().to_owned()).or_default().push(data);
    }
    let (got, _) = drain(&engine, 10, true).await;
    assert_eq!(got, children, "the children are read from their start (TRIM_HORIZON), not from LATEST");
    engine.stop().await;
}
