//! Drains every shard of a running kinesis-source once, for the self-measurement in README.md:
//! `drain <endpoint> <stream> <shards> <sdk|fanout|json|cbor> [limit]`.
//! - `sdk`: the AWS SDK for Rust (AWS JSON 1.1), one task per shard, records' data touched, not decoded;
//! - `fanout`: the same SDK, SubscribeToShard per shard (HTTP/1.1) until an event is 0 ms behind;
//! - `json`/`cbor`: plain HTTP/1.1 requests in that protocol (hyper), answers parsed only for the next iterator.
//!
//! Prints one JSON line: Kinesis records, data bytes, seconds, records/s.

use std::time::Instant;

use aws_sdk_kinesis::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_kinesis::types::ShardIteratorType;
use bytes::Bytes;
use ciborium::value::Value as Cbor;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use kinesis_source::generate::shard_id;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, endpoint, stream, shards, mode, rest @ ..] = args.as_slice() else {
        eprintln!("usage: drain <endpoint> <stream> <shards> <sdk|fanout|json|cbor> [limit]");
        std::process::exit(2);
    };
    let shards: u32 = shards.parse().expect("a shard count");
    let limit: i32 = rest.first().map(|l| l.parse().expect("a limit")).unwrap_or(10_000);
    let consumer = if mode == "fanout" { register(endpoint, stream).await } else { String::new() };
    let started = Instant::now();
    let mut tasks = Vec::new();
    for shard in 0..shards {
        let (endpoint, stream, mode, consumer) = (endpoint.clone(), stream.clone(), mode.clone(), consumer.clone());
        tasks.push(tokio::spawn(async move {
            match mode.as_str() {
                "sdk" => drain_sdk(&endpoint, &stream, shard, limit).await,
                "fanout" => drain_fan_out(&endpoint, &consumer, shard).await,
                "json" | "cbor" => drain_raw(&endpoint, &stream, shard, limit, mode == "cbor").await,
                other => panic!("unknown mode {other}"),
            }
        }));
    }
    let (mut records, mut bytes) = (0u64, 0u64);
    for t in tasks {
        let (r, b) = t.await.expect("a drain task");
        records += r;
        bytes += b;
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "{{\"mode\":\"{mode}\",\"records\":{records},\"data_bytes\":{bytes},\"seconds\":{seconds:.3},\"records_per_second\":{:.0}}}",
        records as f64 / seconds
    );
}

fn client(endpoint: &str) -> aws_sdk_kinesis::Client {
    let config = aws_sdk_kinesis::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("test", "test", None, None, "test"))
        .endpoint_url(endpoint)
        .build();
    aws_sdk_kinesis::Client::from_conf(config)
}

/// Registers a stream consumer and returns its ARN.
async fn register(endpoint: &str, stream: &str) -> String {
    let c = client(endpoint);
    let arn = c.describe_stream_summary().stream_name(stream).send().await.expect("DescribeStreamSummary");
    let arn = arn.stream_description_summary().expect("a summary").stream_arn().to_string();
    let out = c
        .register_stream_consumer()
        .stream_arn(arn)
        .consumer_name("drain")
        .send()
        .await
        .expect("RegisterStreamConsumer");
    out.consumer().expect("a consumer").consumer_arn().to_string()
}

async fn drain_fan_out(endpoint: &str, consumer: &str, shard: u32) -> (u64, u64) {
    use aws_sdk_kinesis::types::{StartingPosition, SubscribeToShardEventStream};
    let c = client(endpoint);
    let start = StartingPosition::builder().r#type(ShardIteratorType::TrimHorizon).build().expect("a position");
    let mut out = c
        .subscribe_to_shard()
        .consumer_arn(consumer)
        .shard_id(shard_id(shard))
        .starting_position(start)
        .send()
        .await
        .expect("SubscribeToShard");
    let (mut records, mut bytes) = (0u64, 0u64);
    while let Some(event) = out.event_stream.recv().await.expect("an event") {
        if let SubscribeToShardEventStream::SubscribeToShardEvent(e) = event {
            records += e.records().len() as u64;
            bytes += e.records().iter().map(|r| r.data().as_ref().len() as u64).sum::<u64>();
            if e.millis_behind_latest() == 0 {
                break;
            }
        }
    }
    (records, bytes)
}

async fn drain_sdk(endpoint: &str, stream: &str, shard: u32, limit: i32) -> (u64, u64) {
    let c = client(endpoint);
    let mut it = c
        .get_shard_iterator()
        .stream_name(stream)
        .shard_id(shard_id(shard))
        .shard_iterator_type(ShardIteratorType::TrimHorizon)
        .send()
        .await
        .expect("GetShardIterator")
        .shard_iterator()
        .expect("an iterator")
        .to_string();
    let (mut records, mut bytes) = (0u64, 0u64);
    loop {
        let out = c.get_records().shard_iterator(&it).limit(limit).send().await.expect("GetRecords");
        records += out.records().len() as u64;
        bytes += out.records().iter().map(|r| r.data().as_ref().len() as u64).sum::<u64>();
        it = out.next_shard_iterator().expect("a next iterator").to_string();
        if out.millis_behind_latest() == Some(0) {
            return (records, bytes);
        }
    }
}

async fn drain_raw(endpoint: &str, stream: &str, shard: u32, limit: i32, cbor: bool) -> (u64, u64) {
    let authority = endpoint.trim_start_matches("http://").to_string();
    let tcp = tokio::net::TcpStream::connect(&authority).await.expect("connect");
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake::<_, Full<Bytes>>(TokioIo::new(tcp)).await.expect("handshake");
    tokio::spawn(conn);
    let mut call = async |op: &'static str, body: serde_json::Value| {
        let (content_type, bytes) = if cbor {
            let mut out = Vec::new();
            ciborium::into_writer(&body, &mut out).expect("CBOR");
            ("application/x-amz-cbor-1.1", out)
        } else {
            ("application/x-amz-json-1.1", serde_json::to_vec(&body).expect("JSON"))
        };
        let req = hyper::Request::post("/")
            .header("host", authority.as_str())
            .header("content-type", content_type)
            .header("x-amz-target", format!("Kinesis_20131202.{op}"))
            .body(Full::new(Bytes::from(bytes)))
            .expect("a request");
        sender.ready().await.expect("the connection is ready for the next request");
        let resp = sender.send_request(req).await.expect("a response");
        resp.into_body().collect().await.expect("a body").to_bytes()
    };
    let first = call(
        "GetShardIterator",
        serde_json::json!({"StreamName": stream, "ShardId": shard_id(shard), "ShardIteratorType": "TRIM_HORIZON"}),
    )
    .await;
    let mut it = text_field(&first, cbor, "ShardIterator");
    let (mut records, mut bytes) = (0u64, 0u64);
    loop {
        let body = call("GetRecords", serde_json::json!({"ShardIterator": it, "Limit": limit})).await;
        let (n, data, next, behind) = summarize(&body, cbor);
        records += n;
        bytes += data;
        it = next;
        if behind == 0 {
            return (records, bytes);
        }
    }
}

fn text_field(body: &[u8], cbor: bool, name: &str) -> String {
    if cbor {
        let v: Cbor = ciborium::from_reader(body).expect("CBOR");
        v.as_map().unwrap().iter().find(|(k, _)| k.as_text() == Some(name)).unwrap().1.as_text().unwrap().to_string()
    } else {
        let v: serde_json::Value = serde_json::from_slice(body).expect("JSON");
        v[name].as_str().unwrap().to_string()
    }
}

/// (records, data bytes, next iterator, MillisBehindLatest) of a GetRecords answer.
fn summarize(body: &[u8], cbor: bool) -> (u64, u64, String, u64) {
    if cbor {
        let v: Cbor = ciborium::from_reader(body).expect("CBOR");
        let get = |m: &Cbor, name: &str| {
            m.as_map().unwrap().iter().find(|(k, _)| k.as_text() == Some(name)).unwrap().1.clone()
        };
        let recs = get(&v, "Records");
        let recs = recs.as_array().unwrap();
        let data = recs.iter().map(|r| get(r, "Data").as_bytes().unwrap().len() as u64).sum();
        let behind = u64::try_from(get(&v, "MillisBehindLatest").as_integer().unwrap()).unwrap();
        (recs.len() as u64, data, get(&v, "NextShardIterator").as_text().unwrap().to_string(), behind)
    } else {
        let v: serde_json::Value = serde_json::from_slice(body).expect("JSON");
        let recs = v["Records"].as_array().unwrap();
        // base64 length ≈ 4/3 of the data: the exact data size is not needed here
        let data = recs.iter().map(|r| r["Data"].as_str().unwrap().len() as u64 * 3 / 4).sum();
        (
            recs.len() as u64,
            data,
            v["NextShardIterator"].as_str().unwrap().to_string(),
            v["MillisBehindLatest"].as_u64().unwrap(),
        )
    }
}
