//! Enhanced fan-out: SubscribeToShard's event stream read by the AWS SDK for Rust (AWS JSON 1.1 over
//! HTTP/1.1) and by a hand-built CBOR client over HTTP/2 with prior knowledge (h2c), every record of
//! every shard byte-exact; the consumer operations.

use std::time::Duration;

use aws_sdk_kinesis::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_kinesis::types::{ShardIteratorType, StartingPosition, SubscribeToShardEventStream};
use aws_sdk_kinesis::Client;
use aws_smithy_eventstream::frame::read_message_from;
use bytes::{Buf, Bytes};
use ciborium::value::Value as Cbor;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use kinesis_source::generate::{shard_id, Generator};
use kinesis_source::spec::{KeyScheme, StreamSpec};

use crate::common::{assert_same, expected_in_shard, small_stream, Seen, ServerProcess};
use crate::kpl_reference::deaggregate;

fn client(server: &ServerProcess) -> Client {
    let config = aws_sdk_kinesis::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("test", "test", None, None, "test"))
        .endpoint_url(server.endpoint())
        .build();
    Client::from_conf(config)
}

/// Reads one subscription until `wanted` user records arrived and an event says MillisBehindLatest 0.
async fn subscribe(
    c: &Client,
    consumer: &str,
    spec: &StreamSpec,
    shard: u32,
    start: StartingPosition,
    wanted: usize,
) -> Vec<Seen> {
    let g = Generator::new(spec.clone());
    let mut out = c
        .subscribe_to_shard()
        .consumer_arn(consumer)
        .shard_id(shard_id(shard))
        .starting_position(start)
        .send()
        .await
        .expect("SubscribeToShard");
    let mut seen = Vec::new();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(30), out.event_stream.recv())
            .await
            .expect("an event within 30 s")
            .expect("a well-formed event")
            .expect("the subscription is still open");
        let SubscribeToShardEventStream::SubscribeToShardEvent(e) = event else { panic!("unexpected event {event:?}") };
        for r in e.records() {
            let index = g.layout().parse_in(shard, r.sequence_number()).expect("this shard's sequence number");
            let arrival = r.approximate_arrival_timestamp().expect("an arrival time");
            let millis = arrival.secs() * 1000 + (arrival.subsec_nanos() as i64 + 500_000) / 1_000_000;
            assert_eq!(millis as u64, g.arrival_ms(index));
            for (sub, pk, _ehk, data) in deaggregate(r.partition_key().expect("a partition key"), r.data().as_ref()) {
                seen.push((r.sequence_number().to_string(), sub, pk, data));
            }
        }
        if let Some(last) = e.records().last() {
            assert_eq!(e.continuation_sequence_number(), last.sequence_number());
        }
        if seen.len() >= wanted && e.millis_behind_latest() == 0 {
            return seen;
        }
    }
}

fn position(kind: ShardIteratorType, seq: Option<String>) -> StartingPosition {
    StartingPosition::builder().r#type(kind).set_sequence_number(seq).build().expect("a starting position")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_sdk_subscribes_to_every_shard_byte_exact() {
    let spec = small_stream(KeyScheme::ShardPool(8), 41);
    let server = ServerProcess::start(&spec, &[]);
    let c = client(&server);
    let stream_arn = spec.stream_arn();
    let registered = c
        .register_stream_consumer()
        .stream_arn(&stream_arn)
        .consumer_name("bench")
        .send()
        .await
        .expect("RegisterStreamConsumer");
    let consumer = registered.consumer().expect("a consumer").consumer_arn().to_string();
    let described = c.describe_stream_consumer().consumer_arn(&consumer).send().await.expect("DescribeStreamConsumer");
    let description = described.consumer_description().expect("a description");
    assert_eq!(description.consumer_status().as_str(), "ACTIVE");
    assert_eq!(description.stream_arn(), stream_arn);
    let listed = c.list_stream_consumers().stream_arn(&stream_arn).send().await.expect("ListStreamConsumers");
    assert_eq!(listed.consumers().len(), 1);
    let again = c
        .register_stream_consumer()
        .stream_arn(&stream_arn)
        .consumer_name("bench")
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert!(again.is_resource_in_use_exception(), "{again:?}");

    let mut tasks = Vec::new();
    for shard in 0..4 {
        let (c, consumer, spec) = (c.clone(), consumer.clone(), spec.clone());
        tasks.push(tokio::spawn(async move {
            let expected = expected_in_shard(&spec, shard);
            let seen =
                subscribe(&c, &consumer, &spec, shard, position(ShardIteratorType::TrimHorizon, None), expected.len())
                    .await;
            assert_same(shard, &seen, &expected);
        }));
    }
    for t in tasks {
        t.await.expect("a shard's subscription");
    }

    let g = Generator::new(spec.clone());
    let expected = expected_in_shard(&spec, 1);
    let from = expected.iter().position(|e| e.0 == g.sequence_number(1, 120).to_string()).unwrap();
    let at = position(ShardIteratorType::AtSequenceNumber, Some(g.sequence_number(1, 120).to_string()));
    let seen = subscribe(&c, &consumer, &spec, 1, at, expected.len() - from).await;
    assert_same(1, &seen, &expected[from..]);

    c.deregister_stream_consumer().consumer_arn(&consumer).send().await.expect("DeregisterStreamConsumer");
    let gone = c
        .subscribe_to_shard()
        .consumer_arn(&consumer)
        .shard_id(shard_id(0))
        .starting_position(position(ShardIteratorType::TrimHorizon, None))
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert!(gone.is_resource_not_found_exception(), "{gone:?}");
}

fn text(s: &str) -> Cbor {
    Cbor::Text(s.into())
}

fn field<'a>(map: &'a Cbor, name: &str) -> &'a Cbor {
    map.as_map()
        .expect("a map")
        .iter()
        .find(|(k, _)| k.as_text() == Some(name))
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no {name} in {map:?}"))
}

fn cbor_body(entries: Vec<(&str, Cbor)>) -> Full<Bytes> {
    let mut out = Vec::new();
    ciborium::into_writer(&Cbor::Map(entries.into_iter().map(|(k, v)| (text(k), v)).collect()), &mut out).unwrap();
    Full::new(Bytes::from(out))
}

fn cbor_request(operation: &str, entries: Vec<(&str, Cbor)>) -> Request<Full<Bytes>> {
    Request::post("http://127.0.0.1/")
        .header("content-type", "application/x-amz-cbor-1.1")
        .header("x-amz-target", format!("Kinesis_20131202.{operation}"))
        .body(cbor_body(entries))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cbor_subscription_over_h2c_byte_exact() {
    let spec = small_stream(KeyScheme::Unique, 42);
    // subscriptions end after 2 s, so the whole event stream can be read as one body
    let server = ServerProcess::start(&spec, &["--subscription-seconds", "2"]);
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", server.port)).await.unwrap();
    let (mut h2, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
        .await
        .expect("an h2c connection");
    tokio::spawn(conn);

    let resp = h2
        .send_request(cbor_request(
            "RegisterStreamConsumer",
            vec![("StreamARN", text(&spec.stream_arn())), ("ConsumerName", text("h2"))],
        ))
        .await
        .unwrap();
    assert_eq!(resp.version(), hyper::Version::HTTP_2);
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    let registered: Cbor = ciborium::from_reader(&body[..]).unwrap();
    let consumer = field(field(&registered, "Consumer"), "ConsumerARN").as_text().unwrap().to_string();

    let start = Cbor::Map(vec![(text("Type"), text("TRIM_HORIZON"))]);
    let resp = h2
        .send_request(cbor_request(
            "SubscribeToShard",
            vec![("ConsumerARN", text(&consumer)), ("ShardId", text(&shard_id(3))), ("StartingPosition", start)],
        ))
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/vnd.amazon.eventstream");
    let mut body = resp.into_body().collect().await.unwrap().to_bytes();

    let g = Generator::new(spec.clone());
    let first = read_message_from(&mut body).expect("the initial-response message");
    let header = |m: &aws_smithy_types::event_stream::Message, name: &str| {
        m.headers()
            .iter()
            .find(|h| h.name().as_str() == name)
            .map(|h| h.value().as_string().unwrap().as_str().to_string())
    };
    assert_eq!(header(&first, ":event-type").as_deref(), Some("initial-response"));
    let mut seen = Vec::new();
    let mut events = 0;
    while body.has_remaining() {
        let m = read_message_from(&mut body).expect("a complete event-stream message");
        assert_eq!(header(&m, ":message-type").as_deref(), Some("event"));
        assert_eq!(header(&m, ":event-type").as_deref(), Some("SubscribeToShardEvent"));
        assert_eq!(header(&m, ":content-type").as_deref(), Some("application/x-amz-cbor-1.1"));
        let event: Cbor = ciborium::from_reader(&m.payload()[..]).expect("a CBOR payload");
        for r in field(&event, "Records").as_array().unwrap() {
            let seq = field(r, "SequenceNumber").as_text().unwrap();
            let index = g.layout().parse_in(3, seq).unwrap();
            assert_eq!(
                field(r, "ApproximateArrivalTimestamp"),
                &Cbor::Tag(1, Box::new(Cbor::Integer(g.arrival_ms(index).into())))
            );
            let Cbor::Bytes(data) = field(r, "Data") else { panic!("Data is not a byte string") };
            for (sub, pk, ehk, data) in deaggregate(field(r, "PartitionKey").as_text().unwrap(), data) {
                if sub > 0 || ehk.is_some() {
                    let hash: u128 =
                        ehk.expect("unique keys: aggregated records carry an explicit hash key").parse().unwrap();
                    let range = g.hash_range(3);
                    assert!(range.start <= hash && hash <= range.end);
                }
                seen.push((seq.to_string(), sub, pk, data));
            }
        }
        events += 1;
    }
    assert!(events >= 2, "the records, then at least one empty event while drained");
    assert_same(3, &seen, &expected_in_shard(&spec, 3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_mode_paces_a_subscription_at_two_mib_per_second() {
    // one shard of 60 records × 100 KiB = 6 MiB: three 2 MiB events, the second after 1 s, the last after 2 s
    let spec = StreamSpec {
        shard_count: 1,
        records: kinesis_source::spec::RecordCount::PerShard(60),
        record_size: 100 * 1024,
        aggregate_share: 0.0,
        ..small_stream(KeyScheme::ShardPool(8), 43)
    };
    let server = ServerProcess::start(&spec, &["--limits"]);
    let c = client(&server);
    let registered =
        c.register_stream_consumer().stream_arn(spec.stream_arn()).consumer_name("paced").send().await.unwrap();
    let consumer = registered.consumer().unwrap().consumer_arn().to_string();
    let started = std::time::Instant::now();
    let seen = subscribe(&c, &consumer, &spec, 0, position(ShardIteratorType::TrimHorizon, None), 60).await;
    let elapsed = started.elapsed();
    assert_same(0, &seen, &expected_in_shard(&spec, 0));
    assert!(elapsed >= Duration::from_millis(1900), "6 MiB in {elapsed:?}: faster than 2 MiB/s");
    assert!(elapsed < Duration::from_secs(6), "6 MiB in {elapsed:?}: far slower than 2 MiB/s");
}
