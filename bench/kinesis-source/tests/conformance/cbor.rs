//! CBOR spoken directly (requests built with ciborium, sent over HTTP/1.1 with hyper), as the Java SDK v2
//! speaks it: every record of every shard byte-exact, Data as CBOR byte strings, arrival times as tag 1
//! around epoch milliseconds; AT_TIMESTAMP with a tag-1 timestamp; errors as CBOR maps with `__type`.

use bytes::Bytes;
use ciborium::value::Value as Cbor;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use kinesis_source::generate::{shard_id, Generator};
use kinesis_source::spec::{KeyScheme, StreamSpec};
use tokio::net::TcpStream;

use crate::common::{assert_same, expected_in_shard, small_stream, Seen, ServerProcess};
use crate::kpl_reference::deaggregate;

/// One HTTP/1.1 connection speaking Kinesis over CBOR.
struct CborClient {
    sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
}

impl CborClient {
    async fn connect(server: &ServerProcess) -> Self {
        let stream = TcpStream::connect(("127.0.0.1", server.port)).await.expect("connect");
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.expect("handshake");
        tokio::spawn(conn);
        CborClient { sender }
    }

    /// (HTTP status, decoded CBOR body)
    async fn call(&mut self, operation: &str, body: Vec<(&str, Cbor)>) -> (u16, Cbor) {
        let map = Cbor::Map(body.into_iter().map(|(k, v)| (Cbor::Text(k.into()), v)).collect());
        let mut bytes = Vec::new();
        ciborium::into_writer(&map, &mut bytes).unwrap();
        let req = Request::post("/")
            .header("content-type", "application/x-amz-cbor-1.1")
            .header("x-amz-target", format!("Kinesis_20131202.{operation}"))
            .header("authorization", "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/kinesis/aws4_request, SignedHeaders=host, Signature=0")
            .header("host", "127.0.0.1")
            .body(Full::new(Bytes::from(bytes)))
            .unwrap();
        self.sender.ready().await.expect("the connection is ready for the next request");
        let resp = self.sender.send_request(req).await.expect("a response");
        let status = resp.status().as_u16();
        assert_eq!(resp.headers()["content-type"], "application/x-amz-cbor-1.1");
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        (status, ciborium::from_reader(&body[..]).expect("a CBOR body"))
    }
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

fn as_u64(v: &Cbor) -> u64 {
    u64::try_from(v.as_integer().expect("an integer")).unwrap()
}

async fn iterator(c: &mut CborClient, spec: &StreamSpec, shard: u32, kind: &str, extra: Vec<(&str, Cbor)>) -> String {
    let mut body = vec![
        ("StreamName", text(&spec.stream_name)),
        ("ShardId", text(&shard_id(shard))),
        ("ShardIteratorType", text(kind)),
    ];
    body.extend(extra);
    let (status, out) = c.call("GetShardIterator", body).await;
    assert_eq!(status, 200, "{out:?}");
    field(&out, "ShardIterator").as_text().unwrap().to_string()
}

async fn drain(c: &mut CborClient, spec: &StreamSpec, shard: u32, mut it: String) -> Vec<Seen> {
    let g = Generator::new(spec.clone());
    let mut seen = Vec::new();
    loop {
        let (status, out) =
            c.call("GetRecords", vec![("ShardIterator", text(&it)), ("Limit", Cbor::Integer(29.into()))]).await;
        assert_eq!(status, 200, "{out:?}");
        let records = field(&out, "Records").as_array().expect("an array");
        for r in records {
            let seq = field(r, "SequenceNumber").as_text().unwrap();
            let index = g.layout().parse_in(shard, seq).expect("this shard's sequence number");
            let Cbor::Tag(1, millis) = field(r, "ApproximateArrivalTimestamp") else {
                panic!("no tag 1 timestamp in {r:?}")
            };
            assert_eq!(as_u64(millis), g.arrival_ms(index));
            let Cbor::Bytes(data) = field(r, "Data") else { panic!("Data is not a byte string in {r:?}") };
            let pk = field(r, "PartitionKey").as_text().unwrap();
            for (sub, pk, _ehk, data) in deaggregate(pk, data) {
                seen.push((seq.to_string(), sub, pk, data));
            }
        }
        it = field(&out, "NextShardIterator").as_text().expect("shards stay open").to_string();
        if records.is_empty() && as_u64(field(&out, "MillisBehindLatest")) == 0 {
            return seen;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cbor_client_reads_every_record_byte_exact() {
    let spec = small_stream(KeyScheme::ShardPool(8), 21);
    let server = ServerProcess::start(&spec, &[]);
    let mut c = CborClient::connect(&server).await;

    let (status, listed) = c.call("ListShards", vec![("StreamName", text(&spec.stream_name))]).await;
    assert_eq!(status, 200);
    let ids: Vec<&str> =
        field(&listed, "Shards").as_array().unwrap().iter().map(|s| field(s, "ShardId").as_text().unwrap()).collect();
    assert_eq!(ids, (0..4).map(shard_id).collect::<Vec<_>>());

    for shard in 0..4 {
        let it = iterator(&mut c, &spec, shard, "TRIM_HORIZON", vec![]).await;
        assert_same(shard, &drain(&mut c, &spec, shard, it).await, &expected_in_shard(&spec, shard));
    }

    // AT_TIMESTAMP as the Java SDK sends it: tag 1 around epoch milliseconds
    let g = Generator::new(spec.clone());
    let at = Cbor::Tag(1, Box::new(Cbor::Integer((g.arrival_ms(50) as i64).into())));
    let it = iterator(&mut c, &spec, 3, "AT_TIMESTAMP", vec![("Timestamp", at)]).await;
    let expected = expected_in_shard(&spec, 3);
    let from = expected.iter().position(|e| e.0 == g.sequence_number(3, 50).to_string()).unwrap();
    assert_same(3, &drain(&mut c, &spec, 3, it).await, &expected[from..]);

    let (status, summary) = c.call("DescribeStreamSummary", vec![("StreamName", text(&spec.stream_name))]).await;
    assert_eq!(status, 200);
    let created = field(field(&summary, "StreamDescriptionSummary"), "StreamCreationTimestamp");
    assert_eq!(created, &Cbor::Tag(1, Box::new(Cbor::Integer(spec.created_at_ms.into()))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cbor_errors_have_the_aws_shape() {
    let spec = small_stream(KeyScheme::ShardPool(8), 22);
    let server = ServerProcess::start(&spec, &[]);
    let mut c = CborClient::connect(&server).await;
    let (status, out) = c.call("GetRecords", vec![("ShardIterator", text("not-an-iterator"))]).await;
    assert_eq!(status, 400);
    assert_eq!(field(&out, "__type").as_text(), Some("InvalidArgumentException"));
    assert!(field(&out, "message").as_text().unwrap().contains("ShardIterator"));
    let (status, out) = c.call("ListShards", vec![("StreamName", text("missing"))]).await;
    assert_eq!(status, 400);
    assert_eq!(field(&out, "__type").as_text(), Some("ResourceNotFoundException"));
    let (status, out) = c.call("PutRecord", vec![]).await;
    assert_eq!(status, 400);
    assert_eq!(field(&out, "__type").as_text(), Some("UnknownOperationException"));
}
