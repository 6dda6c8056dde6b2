//! The Snowpipe Streaming v2 REST calls PutSnowflake makes, and nothing else: ingest host
//! discovery, the scoped token, open channel, append rows, bulk channel status. Each call carries
//! `requestId` (kept across retries) and `retryCount`; transient answers are retried here with
//! back-off, an expired token is re-minted once per call; everything else is returned as an
//! [`ApiError`] for the channel to act on.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use reqwest::{Method, StatusCode};
use serde::Deserialize;
use tokio::sync::Mutex;
use tracing::warn;
use url::Url;

use super::auth::{read_managed_token, unverified_expiry, AuthError, Credentials, TokenType, RENEW_BEFORE_EXPIRY};
use crate::config::proxy::Proxy;
use crate::contract::counters::put_snowflake::SinkCounter;
use crate::counters::SinkCounters;
use crate::error::{Classify, ErrorClass};
use crate::kinesis::limiter::Backoff;

/// Snowflake caps an append request at 4 MB as sent over the network, after compression: "REST
/// payload limit: 4 MB per request", a hard per-request cap not raised on request (Snowflake's
/// "Limitations and considerations for Snowpipe Streaming with high-performance architecture",
/// <https://docs.snowflake.com/en/user-guide/snowpipe-streaming/snowpipe-streaming-high-performance-limitations>).
/// Read as 4,000,000 bytes, the smaller of the two readings of "MB".
pub const MAX_COMPRESSED_REQUEST: usize = 4 * 1000 * 1000;
/// Snowflake's REST reference says "the maximum allowed size for a single request payload is 16
/// MB" without saying before or after compression ("Snowpipe Streaming REST API endpoints",
/// <https://docs.snowflake.com/en/user-guide/snowpipe-streaming/snowpipe-streaming-high-performance-rest-api>);
/// after compression the 4 MB cap above is the smaller, so it is taken here as the cap on the
/// payload before compression (what `x-snowflake-uncompressed-content-length` declares), read as
/// 16,000,000 bytes. Max Batch Size is clamped to it.
pub const MAX_UNCOMPRESSED_REQUEST: usize = 16 * 1000 * 1000;

#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiError {
    /// 429, 5xx, 408 or a transport error: retried here; seen by callers only when told to give up.
    #[error("Snowflake is busy or unreachable ({0})")]
    Transient(String),
    #[error("Snowflake refused the credentials: {0}")]
    Unauthorized(String),
    #[error("the channel was reopened elsewhere ({0})")]
    StaleContinuation(String),
    #[error("the channel no longer exists ({0})")]
    ChannelGone(String),
    #[error("the pipe failed over ({0})")]
    PipeFailover(String),
    /// Missing table or pipe, no privilege, bad request: the user must act.
    #[error("Snowflake rejected the request: HTTP {status} {code}: {message}")]
    Rejected { status: u16, code: String, message: String },
    #[error("{0}")]
    Auth(String),
    /// 407, or a 401 that is not Snowflake's (not JSON): a proxy refused the call.
    #[error("a proxy between NiFi and Snowflake refused the call ({0}): check the Proxy Configuration Service's user name and password")]
    ProxyRefused(String),
    #[error("unexpected answer from Snowflake: {0}")]
    Protocol(String),
}

impl From<AuthError> for ApiError {
    fn from(e: AuthError) -> Self {
        Self::Auth(e.to_string())
    }
}

impl Classify for ApiError {
    fn class(&self) -> ErrorClass {
        match self {
            Self::Transient(_) | Self::StaleContinuation(_) | Self::ChannelGone(_) | Self::PipeFailover(_) => {
                ErrorClass::Retryable
            }
            Self::Unauthorized(_) | Self::Rejected { .. } | Self::Auth(_) | Self::ProxyRefused(_) => {
                ErrorClass::Configuration
            }
            Self::Protocol(_) => ErrorClass::Fatal,
        }
    }
}

/// A channel's state as Snowflake reports it.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct ChannelStatus {
    #[serde(default)]
    pub channel_status_code: Option<String>,
    #[serde(default)]
    pub last_committed_offset_token: Option<String>,
    #[serde(default, alias = "rows_errors")]
    pub rows_error_count: Option<u64>,
    #[serde(default)]
    pub rows_inserted: Option<u64>,
    #[serde(default)]
    pub last_error_offset_upper_bound: Option<String>,
    #[serde(default)]
    pub last_error_message: Option<String>,
}

#[derive(Debug, Clone)]
pub struct OpenedChannel {
    pub continuation_token: String,
    pub status: ChannelStatus,
}

/// Where and as whom: fixed for the processor's run.
pub struct Destination {
    pub control: Url,
    pub database: String,
    pub schema: String,
    pub pipe: String,
}

/// Tokens and the ingest host, discovered lazily and renewed when they expire or are refused.
#[derive(Default)]
struct Session {
    ingest: Option<Url>,
    jwt: Option<(String, SystemTime)>,
    scoped: Option<(String, SystemTime)>,
}

pub struct SnowflakeApi {
    http: reqwest::Client,
    destination: Destination,
    credentials: Credentials,
    session: Mutex<Session>,
    /// Transient failures are retried at most this long per call.
    retry_budget: Duration,
    /// Where retries are counted for NiFi's counters (the engine's; none for Verify Properties).
    counters: Option<Arc<SinkCounters>>,
}

/// Characters escaped in a path segment (channel and pipe names).
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.');

enum Body {
    None,
    Json(serde_json::Value),
    Form(String),
    /// Shared, not copied, by each attempt.
    Rows {
        zstd: bytes::Bytes,
        uncompressed_len: usize,
    },
}

struct Call<'a> {
    method: Method,
    host: Host,
    path: String,
    query: Vec<(&'a str, String)>,
    body: Body,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Host {
    Control,
    Ingest,
}

impl SnowflakeApi {
    /// `proxy`: how calls reach Snowflake (see `config::proxy`). `extra_root_ca_pem`: a CA trusted
    /// besides the public web roots (tests and benchmarks only).
    pub fn new(
        destination: Destination,
        credentials: Credentials,
        retry_budget: Duration,
        proxy: &Proxy,
        extra_root_ca_pem: Option<&[u8]>,
    ) -> Result<Self, ApiError> {
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("kinesnow/", env!("CARGO_PKG_VERSION"), " (linux x86_64) RUST"))
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(60))
            .pool_idle_timeout(Duration::from_secs(60));
        if let Some(pem) = extra_root_ca_pem {
            let ca =
                reqwest::Certificate::from_pem(pem).map_err(|e| ApiError::Protocol(format!("extra root CA: {e}")))?;
            builder = builder.add_root_certificate(ca);
        }
        builder = proxy.apply_to(builder).map_err(ApiError::Protocol)?;
        let http = builder.build().map_err(|e| ApiError::Protocol(format!("HTTP client: {e}")))?;
        Ok(Self {
            http,
            destination,
            credentials,
            session: Mutex::new(Session::default()),
            retry_budget,
            counters: None,
        })
    }

    /// Counts the calls it retries in `counters`.
    pub fn with_counters(mut self, counters: Arc<SinkCounters>) -> Self {
        self.counters = Some(counters);
        self
    }

    fn count_retry(&self, message: &str) {
        if let Some(counters) = &self.counters {
            counters.increment(if throttled(message) {
                SinkCounter::RetriedThrottled
            } else {
                SinkCounter::RetriedTransient
            });
        }
    }

    pub fn pipe(&self) -> &str {
        &self.destination.pipe
    }

    fn pipe_path(&self, data: bool) -> String {
        let d = &self.destination;
        format!(
            "/v2/streaming/{}databases/{}/schemas/{}/pipes/{}",
            if data { "data/" } else { "" },
            seg(&d.database),
            seg(&d.schema),
            seg(&d.pipe)
        )
    }

    /// Opens (or reopens, invalidating earlier continuation tokens) a channel.
    pub async fn open_channel(&self, channel: &str) -> Result<OpenedChannel, ApiError> {
        #[derive(Deserialize)]
        struct Opened {
            next_continuation_token: String,
            #[serde(default)]
            channel_status: ChannelStatus,
        }
        let call = Call {
            method: Method::PUT,
            host: Host::Ingest,
            path: format!("{}/channels/{}", self.pipe_path(false), seg(channel)),
            query: vec![],
            body: Body::Json(serde_json::json!({"fail_on_uncommitted_rows": false})),
        };
        let opened: Opened = json(&self.execute(call).await?)?;
        Ok(OpenedChannel { continuation_token: opened.next_continuation_token, status: opened.channel_status })
    }

    /// Appends NDJSON rows (already zstd-compressed); returns the next continuation token.
    pub async fn append_rows(
        &self,
        channel: &str,
        continuation_token: &str,
        offset_token: &str,
        zstd: Vec<u8>,
        uncompressed_len: usize,
    ) -> Result<String, ApiError> {
        #[derive(Deserialize)]
        struct Appended {
            next_continuation_token: String,
        }
        let call = Call {
            method: Method::POST,
            host: Host::Ingest,
            path: format!("{}/channels/{}/rows", self.pipe_path(true), seg(channel)),
            query: vec![("continuationToken", continuation_token.to_owned()), ("offsetToken", offset_token.to_owned())],
            body: Body::Rows { zstd: zstd.into(), uncompressed_len },
        };
        let appended: Appended = json(&self.execute(call).await?)?;
        Ok(appended.next_continuation_token)
    }

    /// Status of the named channels; unknown channels are left out of the answer.
    pub async fn bulk_status(&self, channels: &[String]) -> Result<HashMap<String, ChannelStatus>, ApiError> {
        #[derive(Deserialize)]
        struct Statuses {
            #[serde(default)]
            channel_statuses: HashMap<String, ChannelStatus>,
        }
        let call = Call {
            method: Method::POST,
            host: Host::Ingest,
            path: format!("{}:bulk-channel-status", self.pipe_path(false)),
            query: vec![],
            body: Body::Json(serde_json::json!({ "channel_names": channels })),
        };
        let statuses: Statuses = json(&self.execute(call).await?)?;
        Ok(statuses.channel_statuses)
    }

    /// The ingest host, asked of the control host with the control token (the key-pair JWT or the
    /// managed token): so also whether Snowflake accepts that token. For verification.
    pub async fn ingest_host(&self) -> Result<Url, ApiError> {
        self.ingest_url().await
    }

    /// Exchanges the key-pair JWT for the ingest host's scoped token and returns when it expires;
    /// `None` with a managed token, which is sent to the ingest host as it is. For verification.
    pub async fn scoped_token_expiry(&self) -> Result<Option<SystemTime>, ApiError> {
        if let Credentials::Managed { .. } = &self.credentials {
            return Ok(None);
        }
        let ingest = self.ingest_url().await?;
        self.ingest_token(&ingest).await?;
        Ok(self.session.lock().await.scoped.as_ref().map(|(_, expires)| *expires))
    }

    /// Runs one statement through Snowflake's SQL API (`POST /api/v2/statements` on the control
    /// host, with the control token) and returns its rows by lower-case column name. Only used for
    /// metadata (DESCRIBE, SHOW), which needs no warehouse.
    pub async fn sql(
        &self,
        statement: &str,
        role: Option<&str>,
    ) -> Result<Vec<HashMap<String, Option<String>>>, ApiError> {
        let mut body = serde_json::json!({
            "statement": statement,
            "timeout": 30,
            "database": self.destination.database,
            "schema": self.destination.schema,
        });
        if let Some(role) = role {
            body["role"] = serde_json::Value::String(role.to_owned());
        }
        let call = Call {
            method: Method::POST,
            host: Host::Control,
            path: "/api/v2/statements".into(),
            query: vec![],
            body: Body::Json(body),
        };
        sql_rows(&self.execute(call).await?)
    }

    /// After a pipe failover: forget the ingest host and tokens so the next call discovers them anew.
    pub async fn reset_session(&self) {
        *self.session.lock().await = Session::default();
    }

    /// Runs one call: same `requestId` on every attempt, back-off on transient answers, tokens
    /// re-minted once on 401.
    async fn execute(&self, call: Call<'_>) -> Result<String, ApiError> {
        let request_id = uuid::Uuid::new_v4().to_string();
        let mut backoff = Backoff::new(Duration::from_millis(250), Duration::from_secs(8));
        let started = tokio::time::Instant::now();
        let mut reauthenticated = false;
        let mut retry_count = 0u32;
        loop {
            match self.attempt(&call, &request_id, retry_count).await {
                Ok(body) => return Ok(body),
                Err(ApiError::Unauthorized(message)) if !reauthenticated => {
                    reauthenticated = true;
                    self.forget_tokens().await;
                    warn!("Snowflake refused the token ({message}); minting a new one");
                }
                Err(ApiError::Transient(message)) if started.elapsed() < self.retry_budget => {
                    self.count_retry(&message);
                    let delay = backoff.next_delay();
                    if backoff.attempts() % 5 == 1 {
                        warn!("{} {}: {message}; retrying in {delay:?}", call.method, call.path);
                    }
                    tokio::time::sleep(delay).await;
                }
                Err(e) => return Err(e),
            }
            retry_count += 1;
        }
    }

    async fn attempt(&self, call: &Call<'_>, request_id: &str, retry_count: u32) -> Result<String, ApiError> {
        let (base, token, token_type) = match call.host {
            Host::Control => {
                let (token, kind) = self.control_token().await?;
                (self.destination.control.clone(), token, kind)
            }
            Host::Ingest => {
                let ingest = self.ingest_url().await?;
                let (token, kind) = self.ingest_token(&ingest).await?;
                (ingest, token, kind)
            }
        };
        let mut url = base.join(&call.path).map_err(|e| ApiError::Protocol(format!("URL: {e}")))?;
        {
            let mut q = url.query_pairs_mut();
            for (k, v) in &call.query {
                q.append_pair(k, v);
            }
            q.append_pair("requestId", request_id);
            q.append_pair("retryCount", &retry_count.to_string());
        }
        let mut request = self
            .http
            .request(call.method.clone(), url)
            .header("Accept", "application/json")
            .header("Authorization", format!("Bearer {token}"));
        // Managed tokens go without a declared type, as Openflow sends them.
        if let Some(kind) = token_type {
            request = request.header("X-Snowflake-Authorization-Token-Type", kind.header_value());
        }
        request = match &call.body {
            Body::None => request,
            Body::Json(v) => request.header("Content-Type", "application/json").body(v.to_string()),
            Body::Form(f) => request.header("Content-Type", "application/x-www-form-urlencoded").body(f.clone()),
            Body::Rows { zstd, uncompressed_len } => request
                .header("Content-Type", "application/x-ndjson")
                .header("Content-Encoding", "zstd")
                .header("x-snowflake-uncompressed-content-length", uncompressed_len.to_string())
                .body(zstd.clone()),
        };
        let response = request.send().await.map_err(|e| ApiError::Transient(transport(&e)))?;
        let status = response.status();
        let body = response.text().await.map_err(|e| ApiError::Transient(transport(&e)))?;
        if status.is_success() {
            return Ok(body);
        }
        Err(classify(status, &body))
    }

    /// The token of a control call, with its declared type (none for managed tokens).
    async fn control_token(&self) -> Result<(String, Option<TokenType>), ApiError> {
        match &self.credentials {
            Credentials::Managed { service_account, session } => {
                Ok((read_managed_token(service_account, session)?.bearer(), None))
            }
            Credentials::KeyPair(signer) => {
                let mut session = self.session.lock().await;
                let now = SystemTime::now();
                match &session.jwt {
                    Some((jwt, expires)) if now + RENEW_BEFORE_EXPIRY < *expires => {
                        Ok((jwt.clone(), Some(TokenType::KeypairJwt)))
                    }
                    _ => {
                        let (jwt, expires) = signer.jwt(now);
                        session.jwt = Some((jwt.clone(), expires));
                        Ok((jwt, Some(TokenType::KeypairJwt)))
                    }
                }
            }
        }
    }

    /// The scoped token for the ingest host (key pair), or the managed token as it is (Openflow
    /// sends it to the ingest host too, with no exchange).
    async fn ingest_token(&self, ingest: &Url) -> Result<(String, Option<TokenType>), ApiError> {
        if let Credentials::Managed { service_account, session } = &self.credentials {
            return Ok((read_managed_token(service_account, session)?.bearer(), None));
        }
        let now = SystemTime::now();
        if let Some((token, expires)) = &self.session.lock().await.scoped {
            if now + Duration::from_secs(60) < *expires {
                return Ok((token.clone(), Some(TokenType::OAuth)));
            }
        }
        let scope = ingest.host_str().unwrap_or_default().to_owned();
        let form = format!(
            "grant_type={}&scope={}",
            utf8_percent_encode("urn:ietf:params:oauth:grant-type:jwt-bearer", NON_ALPHANUMERIC),
            utf8_percent_encode(&scope, NON_ALPHANUMERIC)
        );
        let call = Call {
            method: Method::POST,
            host: Host::Control,
            path: "/oauth/token".into(),
            query: vec![],
            body: Body::Form(form),
        };
        let token = Box::pin(self.execute(call)).await?.trim().to_owned();
        if token.is_empty() || token.starts_with('{') {
            return Err(ApiError::Protocol("the scoped token answer is not a token".into()));
        }
        let expires = unverified_expiry(&token).unwrap_or(now + Duration::from_secs(10 * 60));
        self.session.lock().await.scoped = Some((token.clone(), expires));
        Ok((token, Some(TokenType::OAuth)))
    }

    /// The ingest host from `GET /v2/streaming/hostname` (plain text, or `{"hostname"}`), cached.
    async fn ingest_url(&self) -> Result<Url, ApiError> {
        if let Some(url) = &self.session.lock().await.ingest {
            return Ok(url.clone());
        }
        let call = Call {
            method: Method::GET,
            host: Host::Control,
            path: "/v2/streaming/hostname".into(),
            query: vec![],
            body: Body::None,
        };
        let answer = Box::pin(self.execute(call)).await?;
        let hostname = parse_hostname(&answer)?;
        let control = &self.destination.control;
        // The same host as the control URL (a stand-in, or Snowflake answering with its own host)
        // keeps the control URL's scheme and port.
        let url = if control.host_str() == Some(hostname.as_str()) {
            control.clone()
        } else {
            Url::parse(&format!("https://{hostname}"))
                .map_err(|e| ApiError::Protocol(format!("ingest host '{hostname}': {e}")))?
        };
        self.session.lock().await.ingest = Some(url.clone());
        Ok(url)
    }

    async fn forget_tokens(&self) {
        let mut session = self.session.lock().await;
        session.jwt = None;
        session.scoped = None;
    }
}

/// The rows of a SQL API result set (`resultSetMetaData.rowType` names, `data` rows of strings).
fn sql_rows(body: &str) -> Result<Vec<HashMap<String, Option<String>>>, ApiError> {
    #[derive(Deserialize)]
    struct Column {
        name: String,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Meta {
        row_type: Vec<Column>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct ResultSet {
        result_set_meta_data: Option<Meta>,
        #[serde(default)]
        data: Vec<Vec<Option<String>>>,
        #[serde(default)]
        message: Option<String>,
    }
    let set: ResultSet = json(body)?;
    let meta = set.result_set_meta_data.ok_or_else(|| {
        ApiError::Protocol(format!("the SQL API answered without a result set: {}", set.message.unwrap_or_default()))
    })?;
    let names: Vec<String> = meta.row_type.into_iter().map(|c| c.name.to_lowercase()).collect();
    Ok(set.data.into_iter().map(|row| names.iter().cloned().zip(row).collect()).collect())
}

fn seg(s: &str) -> String {
    utf8_percent_encode(s, SEGMENT).to_string()
}

fn json<T: serde::de::DeserializeOwned>(body: &str) -> Result<T, ApiError> {
    serde_json::from_str(body)
        .map_err(|e| ApiError::Protocol(format!("{e} in '{}'", body.chars().take(200).collect::<String>())))
}

fn parse_hostname(answer: &str) -> Result<String, ApiError> {
    let text = answer.trim();
    let host = match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(o)) => o.get("hostname").and_then(|h| h.as_str()).unwrap_or_default().to_owned(),
        Ok(serde_json::Value::String(s)) => s,
        _ => text.to_owned(),
    };
    if host.is_empty() || host.contains(char::is_whitespace) {
        return Err(ApiError::Protocol(format!("'{text}' is not a host name")));
    }
    Ok(host.replace('_', "-").to_lowercase())
}

fn transport(e: &reqwest::Error) -> String {
    // reqwest's Display names the URL but never headers; walk the sources for the cause.
    let mut message = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    message
}

/// Sorts a failed answer into what the caller must do (shared/reference: error classification).
pub(crate) fn classify(status: StatusCode, body: &str) -> ApiError {
    let (code, message) = error_body(body);
    let described = if code.is_empty() { message.clone() } else { format!("{code}: {message}") };
    match (status.as_u16(), code.as_str()) {
        (_, "STALE_CONTINUATION_TOKEN_SEQUENCER") => ApiError::StaleContinuation(described),
        (_, "ERR_CHANNEL_NO_LONGER_EXISTS") | (404, "ERR_CHANNEL_DOES_NOT_EXIST_OR_NOT_AUTHORIZED") => {
            ApiError::ChannelGone(described)
        }
        (_, "ERR_OPEN_CHANNEL_IN_PROGRESS") | (_, "ERR_CHANNEL_HAS_UNCOMMITTED_DATA") => ApiError::Transient(described),
        (407, _) => ApiError::ProxyRefused("HTTP 407 Proxy Authentication Required".into()),
        // Snowflake answers in JSON; a 401 in anything else is a proxy's (tinyproxy answers a wrong password so).
        (401, _) if serde_json::from_str::<serde_json::Value>(body).is_err() => {
            ApiError::ProxyRefused("HTTP 401 in an answer that is not Snowflake's".into())
        }
        (401, _) => ApiError::Unauthorized(described),
        (410, _) => ApiError::PipeFailover(described),
        // The client must be recreated, as after a pipe failover (Snowflake's SDK files InvalidClientError under 409,
        // issue 50 names a 404: whatever the status). A 404 without Snowflake's envelope is a proxy's with no route
        // while the ingest host moves: Snowflake's Kafka connector recreates its client on it, the SDK retries it
        // (tests/snowflake-standin/README.md, "Where the pressure faults' answers come from").
        (_, "InvalidClientError") => ApiError::PipeFailover(described),
        (404, "") => ApiError::PipeFailover(format!("HTTP 404 without a Snowflake error code: {described}")),
        (408 | 429 | 499, _) => ApiError::Transient(format!("HTTP {status}: {described}")),
        (s, _) if s >= 500 => ApiError::Transient(format!("HTTP {status}: {described}")),
        (s, _) => ApiError::Rejected { status: s, code, message },
    }
}

/// `{"code","message"}`, `{"error_code",…}`, a bare JSON string, or text.
fn error_body(body: &str) -> (String, String) {
    match serde_json::from_str::<serde_json::Value>(body) {
        Ok(serde_json::Value::Object(o)) => {
            let text = |k: &str| o.get(k).map(|v| v.as_str().map(str::to_owned).unwrap_or_else(|| v.to_string()));
            let code = text("code").or_else(|| text("error_code")).unwrap_or_default();
            let message = text("message").unwrap_or_default();
            (code, message)
        }
        Ok(serde_json::Value::String(s)) => (String::new(), s),
        _ => (String::new(), body.chars().take(300).collect()),
    }
}

/// A transient answer that says Snowflake throttles this client (429, 503), as `classify` words it.
fn throttled(message: &str) -> bool {
    message.starts_with("HTTP 429") || message.starts_with("HTTP 503")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_answers_are_sorted_as_the_reference_table_says() {
        let c = |s: u16, b: &str| classify(StatusCode::from_u16(s).unwrap(), b);
        assert!(matches!(
            c(400, r#"{"code":"STALE_CONTINUATION_TOKEN_SEQUENCER","message":"x"}"#),
            ApiError::StaleContinuation(_)
        ));
        assert!(matches!(c(409, r#"{"code":"ERR_OPEN_CHANNEL_IN_PROGRESS"}"#), ApiError::Transient(_)));
        assert!(matches!(c(429, r#"{"code":"ReceiverSaturated"}"#), ApiError::Transient(_)));
        let message = |status, body| match c(status, body) {
            ApiError::Transient(m) => m,
            other => panic!("{other:?}"),
        };
        assert!(throttled(&message(429, r#"{"code":"ReceiverSaturated"}"#)), "a 429 counts as throttled");
        assert!(throttled(&message(503, "")), "a 503 counts as throttled");
        assert!(!throttled(&message(500, "")), "a 500 is a server error");
        assert!(matches!(c(500, r#""ERR_GENERAL_EXCEPTION_RETRY_REQUEST""#), ApiError::Transient(_)));
        assert!(matches!(c(503, "busy"), ApiError::Transient(_)));
        assert!(matches!(c(401, r#"{"code":"390144","message":"JWT token is invalid."}"#), ApiError::Unauthorized(_)));
        assert!(matches!(c(410, r#"{"code":"SfApiPipeFailedOverError"}"#), ApiError::PipeFailover(_)));
        assert!(matches!(c(404, r#"{"code":"InvalidClientError","message":"x"}"#), ApiError::PipeFailover(_)));
        assert!(matches!(c(409, r#"{"code":"InvalidClientError"}"#), ApiError::PipeFailover(_)));
        assert!(matches!(c(404, ""), ApiError::PipeFailover(_)), "a 404 without envelope");
        assert!(matches!(c(429, r#"{"code":"MemoryThresholdExceeded"}"#), ApiError::Transient(_)));
        assert!(matches!(
            c(404, r#"{"code":"ERR_CHANNEL_DOES_NOT_EXIST_OR_NOT_AUTHORIZED"}"#),
            ApiError::ChannelGone(_)
        ));
        assert!(matches!(c(407, "<html>Proxy Authentication Required</html>"), ApiError::ProxyRefused(_)));
        assert!(matches!(c(401, "<html><title>401 Unauthorized</title></html>"), ApiError::ProxyRefused(_)));
        match c(404, r#"{"error_code":"ERR_TABLE_DOES_NOT_EXIST_NOT_AUTHORIZED","message":"Table T does not exist"}"#) {
            ApiError::Rejected { status, code, message } => {
                assert_eq!(
                    (status, code.as_str(), message.as_str()),
                    (404, "ERR_TABLE_DOES_NOT_EXIST_NOT_AUTHORIZED", "Table T does not exist")
                )
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn hostname_answers_in_either_form_are_normalised() {
        assert_eq!(
            parse_hostname("my_org-acct.snowflakecomputing.com\n").unwrap(),
            "my-org-acct.snowflakecomputing.com"
        );
        assert_eq!(parse_hostname(r#"{"hostname":"A_B.example"}"#).unwrap(), "a-b.example");
        assert!(parse_hostname("").is_err());
    }

    #[test]
    fn sql_api_rows_are_read_by_column_name() {
        let body = r#"{"resultSetMetaData":{"numRows":2,"format":"jsonv2","rowType":[{"name":"name","type":"text"},{"name":"null?","type":"text"}]},
            "data":[["ID","N"],["PAYLOAD",null]],"code":"090001","statementHandle":"h","message":"Statement executed successfully."}"#;
        let rows = sql_rows(body).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0]["name"].as_deref(), Some("ID"));
        assert_eq!(rows[0]["null?"].as_deref(), Some("N"));
        assert_eq!(rows[1]["null?"], None);
        assert!(matches!(
            sql_rows(r#"{"code":"333334","message":"Asynchronous execution in progress"}"#),
            Err(ApiError::Protocol(_))
        ));
    }

    #[test]
    fn names_are_escaped_in_paths() {
        assert_eq!(seg("T-STREAMING"), "T-STREAMING");
        assert_eq!(seg("\"My Pipe\""), "%22My%20Pipe%22");
    }

    #[test]
    fn status_reads_either_error_count_name() {
        let s: ChannelStatus = serde_json::from_str(r#"{"rows_errors":3,"last_committed_offset_token":"5"}"#).unwrap();
        assert_eq!(s.rows_error_count, Some(3));
    }
}
