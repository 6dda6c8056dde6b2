//! The HTTP side: a hyper server (HTTP/1.1, and HTTP/2 with prior knowledge) on 127.0.0.1 that hands
//! each `POST /` to `ops` in the protocol its Content-Type names, and answers `GET /stats` with `stats`.
//! Signatures are not checked: any Authorization header (or none) is accepted.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;

use crate::error::ApiError;
use crate::ops::{Operation, Reply, Source};
use crate::protocol::Protocol;
use crate::stats::Stats;

/// Request bodies are small (an iterator, a stream name); anything past this is refused.
const MAX_REQUEST_BYTES: usize = 1024 * 1024;

pub struct Server {
    pub source: Source,
    pub stats: Stats,
}

impl Server {
    pub fn new(source: Source) -> Arc<Self> {
        Arc::new(Server { source, stats: Stats::default() })
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

    async fn respond(&self, req: Request<Incoming>) -> Response<Full<Bytes>> {
        if req.method() == Method::GET && req.uri().path() == "/stats" {
            let body = serde_json::to_vec(&self.stats.to_json()).expect("a JSON value");
            return response(StatusCode::OK, "application/json", body);
        }
        let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let target = header("x-amz-target").unwrap_or_default();
        let protocol = match Protocol::from_content_type(header("content-type").as_deref()) {
            Ok(p) => p,
            Err(e) => return self.error(Protocol::Json, &e),
        };
        if req.method() != Method::POST {
            return self.error(protocol, &ApiError::UnknownOperation(format!("{} is not served; POST an X-Amz-Target", req.method())));
        }
        let body = match read_body(req.into_body()).await {
            Ok(b) => b,
            Err(e) => return self.error(protocol, &e),
        };
        match self.call(protocol, &target, &body) {
            Ok(reply) => response(StatusCode::OK, protocol.content_type(), protocol.encode_reply(&reply)),
            Err(e) => self.error(protocol, &e),
        }
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

    fn error(&self, protocol: Protocol, error: &ApiError) -> Response<Full<Bytes>> {
        match error {
            ApiError::ProvisionedThroughputExceeded(_) => self.stats.throttle(),
            _ => {
                self.stats.error();
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

fn response(status: StatusCode, content_type: &'static str, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp.headers_mut().insert("x-amzn-requestid", HeaderValue::from_static("00000000-0000-0000-0000-000000000000"));
    resp
}
