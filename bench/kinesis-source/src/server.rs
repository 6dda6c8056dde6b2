//! The HTTP side: a hyper server (HTTP/1.1, and HTTP/2 with prior knowledge) on 127.0.0.1 that hands
//! each `POST /` to `ops` in the protocol its Content-Type names, and answers `GET /stats` with `stats`.
//! A SubscribeToShard answer is a streamed body fed by `fan_out::push_events` through a small channel.
//! Signatures are not checked: any Authorization header (or none) is accepted.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::Frame;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::error::ApiError;
use crate::fan_out;
use crate::ops::{Operation, Reply, Source};
use crate::protocol::{eventstream, Protocol};
use crate::stats::Stats;

type Body = BoxBody<Bytes, Infallible>;

/// Request bodies are small (an iterator, a stream name); anything past this is refused.
const MAX_REQUEST_BYTES: usize = 1024 * 1024;

pub struct Server {
    pub source: Source,
    pub stats: Stats,
    /// How long a SubscribeToShard subscription lasts (5 minutes on Kinesis).
    pub subscription_lifetime: Duration,
}

impl Server {
    pub fn new(source: Source, subscription_lifetime: Duration) -> Arc<Self> {
        Arc::new(Server { source, stats: Stats::default(), subscription_lifetime })
    }

    /// Binds 127.0.0.1:`port` (0 = any free port).
    pub async fn bind(port: u16) -> std::io::Result<TcpListener> {
        TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port))).await
    }

    /// Accepts connections until the task is dropped.
    pub async fn run(self: Arc<Self>, listener: TcpListener) {
        loop {
            let (stream, _) = match listener.accept().await {
                Ok(conn) => conn,
                Err(e) => {
                    eprintln!("kinesis-source: accept failed: {e}");
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let server = Arc::clone(&self);
            tokio::spawn(async move {
                let service = service_fn(move |req| {
                    let server = Arc::clone(&server);
                    async move { Ok::<_, Infallible>(server.respond(req).await) }
                });
                // a client that goes away mid-answer is no error of ours
                let _ = auto::Builder::new(TokioExecutor::new()).serve_connection(TokioIo::new(stream), service).await;
            });
        }
    }

    async fn respond(self: Arc<Self>, req: Request<Incoming>) -> Response<Body> {
        if req.method() == Method::GET && req.uri().path() == "/stats" {
            let body = serde_json::to_vec(&self.stats.to_json()).expect("a JSON value");
            return response(StatusCode::OK, "application/json", body);
        }
        self.stats.http_version(req.version() == hyper::Version::HTTP_2);
        let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let target = header("x-amz-target").unwrap_or_default();
        let protocol = match Protocol::from_content_type(header("content-type").as_deref()) {
            Ok(p) => p,
            Err(e) => return self.error(Protocol::Json, &e),
        };
        if req.method() != Method::POST {
            return self.error(
                protocol,
                &ApiError::UnknownOperation(format!("{} is not served; POST an X-Amz-Target", req.method())),
            );
        }
        let body = match read_body(req.into_body()).await {
            Ok(b) => b,
            Err(e) => return self.error(protocol, &e),
        };
        match self.call(protocol, &target, &body) {
            Ok(Reply::SubscribeToShard(sub)) => self.subscribe(protocol, sub),
            Ok(reply) => response(StatusCode::OK, protocol.content_type(), protocol.encode_reply(&reply)),
            Err(e) => self.error(protocol, &e),
        }
    }

    /// Starts the subscription's event task and answers with the body it feeds.
    fn subscribe(self: Arc<Self>, protocol: Protocol, sub: fan_out::Subscription) -> Response<Body> {
        // two frames in flight: the task builds the next event while the client reads one
        let (events, body) = mpsc::channel(2);
        let lifetime = self.subscription_lifetime;
        tokio::spawn(fan_out::push_events(Arc::clone(&self), protocol, sub, lifetime, events));
        let mut resp = Response::new(BoxBody::new(ChannelBody(body)));
        resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(eventstream::CONTENT_TYPE));
        resp.headers_mut().insert("x-amzn-requestid", HeaderValue::from_static("00000000-0000-0000-0000-000000000000"));
        resp
    }

    /// Decodes, runs and counts one operation (the CPU-bound part, done inline on the worker thread:
    /// a GetRecords answer is built in a few milliseconds at most).
    fn call(&self, protocol: Protocol, target: &str, body: &[u8]) -> Result<Reply, ApiError> {
        let op = Operation::from_target(target)?;
        self.stats.request(protocol, op);
        let input = protocol.decode_request(body)?;
        let reply = self.source.handle(op, input)?;
        if let Reply::GetRecords(batch) = &reply {
            self.stats.served(batch.records.len(), batch.data.len());
        }
        Ok(reply)
    }

    fn error(&self, protocol: Protocol, error: &ApiError) -> Response<Body> {
        match error {
            ApiError::ProvisionedThroughputExceeded(_) => self.stats.throttle(),
            _ => {
                self.stats.error(error.type_name());
                eprintln!("kinesis-source: {}: {}", error.type_name(), error.message());
            }
        }
        let status = StatusCode::from_u16(error.status()).expect("a valid status");
        let mut resp = response(status, protocol.content_type(), protocol.encode_error(error));
        resp.headers_mut().insert("x-amzn-errortype", HeaderValue::from_static(error.type_name()));
        resp
    }
}

async fn read_body(body: Incoming) -> Result<Bytes, ApiError> {
    let limited = http_body_util::Limited::new(body, MAX_REQUEST_BYTES);
    limited
        .collect()
        .await
        .map(|c| c.to_bytes())
        .map_err(|e| ApiError::Serialization(format!("could not read the request body: {e}")))
}

/// A streamed body: the frames a subscription task sends, ending when the task drops its sender.
struct ChannelBody(mpsc::Receiver<Bytes>);

impl http_body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|frame| frame.map(|bytes| Ok(Frame::data(bytes))))
    }
}

fn response(status: StatusCode, content_type: &'static str, body: Vec<u8>) -> Response<Body> {
    let mut resp = Response::new(Full::new(Bytes::from(body)).boxed());
    *resp.status_mut() = status;
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp.headers_mut().insert("x-amzn-requestid", HeaderValue::from_static("00000000-0000-0000-0000-000000000000"));
    resp
}
