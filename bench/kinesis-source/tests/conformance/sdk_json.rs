//! The AWS SDK for Rust (AWS JSON 1.1) against the server: every record of every shard, byte-exact;
//! every iterator type; DescribeStream(Summary); errors; the --limits throttle.

use aws_sdk_kinesis::config::retry::RetryConfig;
use aws_sdk_kinesis::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_kinesis::primitives::DateTime;
use aws_sdk_kinesis::types::ShardIteratorType;
use aws_sdk_kinesis::Client;
use kinesis_source::generate::{hash_ranges, shard_id, Generator};
use kinesis_source::spec::{KeyScheme, Payload, StreamSpec};

use crate::common::{assert_same, expected_in_shard, small_stream, Seen, ServerProcess};
use crate::kpl_reference::deaggregate;

fn client(server: &ServerProcess, retries: bool) -> Client {
    let config = aws_sdk_kinesis::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("test", "test", None, None, "test"))
        .endpoint_url(server.endpoint())
        .retry_config(if retries { RetryConfig::standard() } else { RetryConfig::disabled() })
        .build();
    Client::from_conf(config)
}

async fn iterator(
    c: &Client,
    spec: &StreamSpec,
    shard: u32,
    kind: ShardIteratorType,
    seq: Option<String>,
    at: Option<DateTime>,
) -> String {
    c.get_shard_iterator()
        .stream_name(&spec.stream_name)
        .shard_id(shard_id(shard))
        .shard_iterator_type(kind)
        .set_starting_sequence_number(seq)
        .set_timestamp(at)
        .send()
        .await
        .expect("GetShardIterator")
        .shard_iterator()
        .expect("an iterator")
        .to_string()
}

/// Reads a shard from `iterator` until a response is empty with MillisBehindLatest 0; checks the
/// arrival timestamps and that MillisBehindLatest is 0 exactly on the response that reaches the end.
async fn drain(c: &Client, spec: &StreamSpec, shard: u32, mut it: String, limit: i32) -> Vec<Seen> {
    let generator = Generator::new(spec.clone());
    let total = generator.records_in(shard);
    let mut seen = Vec::new();
    loop {
        let out = c.get_records().shard_iterator(&it).limit(limit).send().await.expect("GetRecords");
        let records = out.records();
        assert!(records.len() <= limit as usize);
        let mut last_index = None;
        for r in records {
            let index = generator.layout().parse_in(shard, r.sequence_number()).expect("this shard's sequence number");
            // epoch seconds with 3 decimals on the wire, parsed through an f64 by the SDK: round to the ms
            let arrival = r.approximate_arrival_timestamp().expect("an arrival time");
            let millis = arrival.secs() * 1000 + (arrival.subsec_nanos() as i64 + 500_000) / 1_000_000;
            assert_eq!(millis as u64, generator.arrival_ms(index));
            for (sub, pk, _ehk, data) in deaggregate(r.partition_key().expect("a partition key"), r.data().as_ref()) {
                seen.push((r.sequence_number().to_string(), sub, pk, data));
            }
            last_index = Some(index);
        }
        let behind = out.millis_behind_latest().expect("MillisBehindLatest");
        match last_index {
            Some(i) => {
                assert_eq!(behind == 0, i + 1 == total, "MillisBehindLatest {behind} after record {i} of {total}")
            }
            None => assert_eq!(behind, 0, "an empty answer only at the end"),
        }
        it = out.next_shard_iterator().expect("shards stay open: a next iterator").to_string();
        if records.is_empty() && behind == 0 {
            return seen;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_sdk_reads_every_record_byte_exact() {
    for keys in [KeyScheme::ShardPool(8), KeyScheme::Unique] {
        let spec = small_stream(keys, 11);
        let server = ServerProcess::start(&spec, &[]);
        let c = client(&server, true);

        let listed = c.list_shards().stream_name(&spec.stream_name).max_results(3).send().await.expect("ListShards");
        let token = listed.next_token().expect("a second page").to_string();
        let rest = c.list_shards().next_token(token).send().await.expect("ListShards page 2");
        let shards: Vec<_> = listed.shards().iter().chain(rest.shards()).cloned().collect();
        assert_eq!(shards.len(), 4);
        for (i, (shard, range)) in shards.iter().zip(hash_ranges(4)).enumerate() {
            assert_eq!(shard.shard_id(), shard_id(i as u32));
            let keys = shard.hash_key_range().expect("a hash key range");
            assert_eq!(
                (keys.starting_hash_key(), keys.ending_hash_key()),
                (range.start.to_string().as_str(), range.end.to_string().as_str())
            );
        }

        let mut aggregated_user_records = 0;
        for shard in 0..4 {
            let it = iterator(&c, &spec, shard, ShardIteratorType::TrimHorizon, None, None).await;
            let seen = drain(&c, &spec, shard, it, 37).await;
            assert_same(shard, &seen, &expected_in_shard(&spec, shard));
            aggregated_user_records += seen.iter().filter(|s| s.1 > 0).count();
        }
        // 40 aggregates of 5 per shard: 4 records past sub 0 each
        assert_eq!(aggregated_user_records, 4 * 40 * 4);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_and_avro_payloads_are_served_byte_exact() {
    for payload in [Payload::Json, Payload::Avro] {
        let spec = StreamSpec { payload, ..small_stream(KeyScheme::ShardPool(8), 12) };
        let server = ServerProcess::start(&spec, &[]);
        let c = client(&server, true);
        for shard in 0..4 {
            let it = iterator(&c, &spec, shard, ShardIteratorType::TrimHorizon, None, None).await;
            let seen = drain(&c, &spec, shard, it, 100).await;
            assert_same(shard, &seen, &expected_in_shard(&spec, shard));
            assert!(seen.iter().all(|s| s.3.len() == spec.record_size), "{payload:?}: every record of the record size");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_iterator_type_starts_where_it_should() {
    let spec = small_stream(KeyScheme::ShardPool(8), 12);
    let server = ServerProcess::start(&spec, &[]);
    let c = client(&server, true);
    let g = Generator::new(spec.clone());
    let expected = expected_in_shard(&spec, 2);
    let first_of = |index: u64| expected.iter().position(|e| e.0 == g.sequence_number(2, index).to_string()).unwrap();

    let seq = g.sequence_number(2, 17).to_string();
    let at = iterator(&c, &spec, 2, ShardIteratorType::AtSequenceNumber, Some(seq.clone()), None).await;
    assert_same(2, &drain(&c, &spec, 2, at, 1000).await, &expected[first_of(17)..]);
    let after = iterator(&c, &spec, 2, ShardIteratorType::AfterSequenceNumber, Some(seq), None).await;
    assert_same(2, &drain(&c, &spec, 2, after, 1000).await, &expected[first_of(18)..]);
    let when = DateTime::from_millis(g.arrival_ms(30) as i64 - 1);
    let at_time = iterator(&c, &spec, 2, ShardIteratorType::AtTimestamp, None, Some(when)).await;
    assert_same(2, &drain(&c, &spec, 2, at_time, 1000).await, &expected[first_of(30)..]);
    let latest = iterator(&c, &spec, 2, ShardIteratorType::Latest, None, None).await;
    assert!(drain(&c, &spec, 2, latest, 1000).await.is_empty());

    let foreign = g.sequence_number(1, 3).to_string();
    let err = c
        .get_shard_iterator()
        .stream_name(&spec.stream_name)
        .shard_id(shard_id(2))
        .shard_iterator_type(ShardIteratorType::AtSequenceNumber)
        .starting_sequence_number(foreign)
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert!(err.is_invalid_argument_exception(), "{err:?}");
    let missing = c
        .get_shard_iterator()
        .stream_name(&spec.stream_name)
        .shard_id(shard_id(9))
        .shard_iterator_type(ShardIteratorType::TrimHorizon)
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert!(missing.is_resource_not_found_exception(), "{missing:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_stream_and_summary() {
    let spec = small_stream(KeyScheme::ShardPool(8), 13);
    let server = ServerProcess::start(&spec, &[]);
    let c = client(&server, true);
    let d = c.describe_stream().stream_name(&spec.stream_name).limit(3).send().await.expect("DescribeStream");
    let d = d.stream_description().expect("a description");
    assert_eq!(d.stream_name(), spec.stream_name);
    assert_eq!(d.stream_arn(), spec.stream_arn());
    assert_eq!(d.stream_status().as_str(), "ACTIVE");
    assert_eq!(d.shards().len(), 3);
    assert!(d.has_more_shards());
    assert_eq!(d.stream_creation_timestamp().to_millis().unwrap() as u64, spec.created_at_ms);
    let s = c.describe_stream_summary().stream_name(&spec.stream_name).send().await.expect("DescribeStreamSummary");
    let s = s.stream_description_summary().expect("a summary");
    assert_eq!(s.open_shard_count(), 4);
    assert_eq!(s.stream_arn(), spec.stream_arn());
    let err = c.describe_stream_summary().stream_name("nope").send().await.unwrap_err().into_service_error();
    assert!(err.is_resource_not_found_exception(), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_mode_throttles_a_sixth_call_within_a_second() {
    let spec = small_stream(KeyScheme::ShardPool(8), 14);
    let server = ServerProcess::start(&spec, &["--limits"]);
    let c = client(&server, false);
    let it = iterator(&c, &spec, 0, ShardIteratorType::TrimHorizon, None, None).await;
    let started = std::time::Instant::now();
    for _ in 0..5 {
        c.get_records().shard_iterator(&it).limit(1).send().await.expect("within the limit");
    }
    let err = c.get_records().shard_iterator(&it).limit(1).send().await.unwrap_err().into_service_error();
    assert!(started.elapsed().as_millis() < 1000, "the calls took too long to show the limit");
    assert!(err.is_provisioned_throughput_exceeded_exception(), "{err:?}");
    // another shard is not throttled
    let other = iterator(&c, &spec, 1, ShardIteratorType::TrimHorizon, None, None).await;
    c.get_records().shard_iterator(&other).limit(1).send().await.expect("another shard's budget");
}
