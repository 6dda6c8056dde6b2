//! A TLS terminator and HTTP/2 reverse proxy in front of kinesis-local, so the engine's Kinesis
//! clients speak HTTP/2 as they do with AWS (TLS with ALPN "h2"; over plain http the SDK only
//! speaks HTTP/1.1). It presents a certificate for 127.0.0.1 signed by a CA made at start
//! ([`H2TlsProxy::ca_pem`]), offers ALPN "h2" and "http/1.1", and forwards:
//!
//! - an h2 connection over one h2c (prior-knowledge HTTP/2) connection to kinesis-local's plain
//!   port, request by request, so it sees every request of every connection: its `X-Amz-Target`,
//!   the `ShardId` of a SubscribeToShard, and how many subscriptions were open on the connection
//!   at once;
//! - an http/1.1 connection as bytes to the same port.
//!
//! Response bodies (the event streams) are relayed as they come; the proxy does not hold them back.
//! [`H2TlsProxy::start_with_handshake_delay`] holds each TLS handshake back for a while, so that
//! requests a client starts together are all still waiting for a connection at the same time.

use std::error::Error;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::{TcpListener, TcpStream};

/// One request the proxy forwarded.
#[derive(Debug, Clone)]
pub struct Request {
    /// The operation, e.g. "SubscribeToShard" (from `X-Amz-Target: Kinesis_20131202.SubscribeToShard`).
    pub operation: String,
    pub shard_id: Option<String>,
}

/// One accepted TLS connection.
#[derive(Debug, Clone, Default)]
pub struct Connection {
    /// The protocol negotiated by ALPN, e.g. "h2".
    pub alpn: Option<String>,
    pub requests: Vec<Request>,
    /// SubscribeToShard streams open at the same time on this connection, now and at most.
    pub open_subscriptions: usize,
    pub max_open_subscriptions: usize,
}

impl Connection {
    /// The shards this connection carried SubscribeToShard requests for.
    pub fn subscribed_shards(&self) -> std::collections::BTreeSet<String> {
        self.requests.iter().filter(|r| r.operation == "SubscribeToShard").filter_map(|r| r.shard_id.clone()).collect()
    }
}

type Log = Arc<Mutex<Vec<Connection>>>;
type BoxError = Box<dyn Error + Send + Sync>;

pub struct H2TlsProxy {
    /// `https://127.0.0.1:<port>`
    pub url: String,
    /// The CA that signed the proxy's certificate (clients must trust it).
    pub ca_pem: String,
    log: Log,
}

impl H2TlsProxy {
    /// Listens on a free port of 127.0.0.1 and forwards to `upstream` (kinesis-local's plain-HTTP
    /// port, e.g. `http://127.0.0.1:4568`, which speaks HTTP/1.1 and prior-knowledge h2c).
    pub async fn start(upstream: &str) -> Self {
        Self::start_with_handshake_delay(upstream, std::time::Duration::ZERO).await
    }

    /// Like [`H2TlsProxy::start`]; each accepted TCP connection waits `delay` before its TLS handshake.
    pub async fn start_with_handshake_delay(upstream: &str, delay: std::time::Duration) -> Self {
        let (ca_pem, acceptor) = tls();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("https://{}", listener.local_addr().unwrap());
        let upstream = upstream.trim_start_matches("http://").trim_end_matches('/').to_owned();
        let log: Log = Arc::default();
        let l = log.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, log, upstream) = (acceptor.clone(), l.clone(), upstream.clone());
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                    let alpn = tls.get_ref().1.alpn_protocol().map(|p| String::from_utf8_lossy(p).into_owned());
                    let id = {
                        let mut log = log.lock().unwrap();
                        log.push(Connection { alpn: alpn.clone(), ..Connection::default() });
                        log.len() - 1
                    };
                    let Ok(mut up) = TcpStream::connect(&upstream).await else { return };
                    if alpn.as_deref() == Some("h2") {
                        let _ = serve_h2(tls, up, id, log).await;
                    } else {
                        let _ = tokio::io::copy_bidirectional(&mut tls, &mut up).await;
                    }
                });
            }
        });
        Self { url, ca_pem, log }
    }

    /// Every connection accepted so far, in order.
    pub fn connections(&self) -> Vec<Connection> {
        self.log.lock().unwrap().clone()
    }
}

/// A CA and a certificate it signs for IP 127.0.0.1; the acceptor offers "h2" and "http/1.1".
fn tls() -> (String, tokio_rustls::TlsAcceptor) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "kinesnow fan-out test CA");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.subject_alt_names.push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    params.distinguished_name.push(DnType::CommonName, "127.0.0.1");
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params.signed_by(&key, &issuer).unwrap();
    // Both of rustls' crypto providers are compiled into the test binary: name one.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())))
        .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    (ca_cert.pem(), tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

async fn serve_h2(
    tls: tokio_rustls::server::TlsStream<TcpStream>,
    up: TcpStream,
    id: usize,
    log: Log,
) -> Result<(), BoxError> {
    let (upstream, connection) = h2::client::handshake(up).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let mut server = h2::server::handshake(tls).await?;
    while let Some(accepted) = server.accept().await {
        let (request, respond) = accepted?;
        let (upstream, log) = (upstream.clone(), log.clone());
        tokio::spawn(async move {
            let _ = forward(request, respond, upstream, id, log).await;
        });
    }
    Ok(())
}

/// Counts a SubscribeToShard stream as open on its connection until dropped.
struct Open {
    log: Log,
    id: usize,
}

impl Open {
    fn new(log: &Log, id: usize) -> Self {
        let mut l = log.lock().unwrap();
        let c = &mut l[id];
        c.open_subscriptions += 1;
        c.max_open_subscriptions = c.max_open_subscriptions.max(c.open_subscriptions);
        Self { log: log.clone(), id }
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.log.lock().unwrap()[self.id].open_subscriptions -= 1;
    }
}

async fn forward(
    request: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
    upstream: h2::client::SendRequest<Bytes>,
    id: usize,
    log: Log,
) -> Result<(), BoxError> {
    let (parts, mut body) = request.into_parts();
    // AWS JSON requests are small: take the whole body, to read the shard of a subscription.
    let mut payload = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk?;
        body.flow_control().release_capacity(chunk.len())?;
        payload.extend_from_slice(&chunk);
    }
    let target = parts.headers.get("x-amz-target").and_then(|v| v.to_str().ok()).unwrap_or_default();
    let operation = target.rsplit('.').next().unwrap_or_default().to_owned();
    let shard_id = serde_json::from_slice::<serde_json::Value>(&payload)
        .ok()
        .and_then(|v| v.get("ShardId").and_then(|s| s.as_str()).map(str::to_owned));
    let _open = (operation == "SubscribeToShard").then(|| Open::new(&log, id));
    log.lock().unwrap()[id].requests.push(Request { operation, shard_id });

    let mut sender = upstream.ready().await?;
    let (response, mut up_body) = sender.send_request(http::Request::from_parts(parts, ()), payload.is_empty())?;
    if !payload.is_empty() {
        up_body.send_data(Bytes::from(payload), true)?;
    }
    let (parts, mut body) = response.await?.into_parts();
    let end = body.is_end_stream();
    let mut down = respond.send_response(http::Response::from_parts(parts, ()), end)?;
    if end {
        return Ok(());
    }
    while let Some(chunk) = body.data().await {
        let chunk = chunk?;
        let n = chunk.len();
        down.send_data(chunk, false)?; // fails once the client reset the stream: then stop
        body.flow_control().release_capacity(n)?;
    }
    match body.trailers().await? {
        Some(trailers) => down.send_trailers(trailers)?,
        None => down.send_data(Bytes::new(), true)?,
    }
    Ok(())
}
