//! Snowflake's SQL API for the audit: one read-only statement (`POST /api/v2/statements`, key-pair
//! JWT as PutSnowflake signs it), waited for while Snowflake answers 202, and its result read one
//! partition at a time (`GET /api/v2/statements/<handle>?partition=<n>`), so the caller holds one
//! partition, never the whole result. Statements carry a timeout; nothing here retries but the
//! wait for a running statement.

use std::time::Duration;

use reqwest::StatusCode;
use serde::Deserialize;
use url::Url;

use crate::snowflake::auth::{KeyPairSigner, TokenType};

/// How long one statement may run (Snowflake cancels it after).
pub const STATEMENT_TIMEOUT_SECONDS: u64 = 600;

#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    #[error("Snowflake's SQL API is unreachable: {0}")]
    Transport(String),
    #[error("Snowflake refused the statement: HTTP {status} {code}: {message}")]
    Refused { status: u16, code: String, message: String },
    #[error("unexpected answer from Snowflake's SQL API: {0}")]
    Protocol(String),
}

/// Where and as whom statements run.
pub struct SqlApi {
    http: reqwest::Client,
    base: Url,
    signer: KeyPairSigner,
    role: Option<String>,
    warehouse: Option<String>,
}

/// One row: every value as text, as the SQL API returns it (`None` for SQL NULL).
pub type Row = Vec<Option<String>>;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Column {
    name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Partition {
    #[serde(default)]
    row_count: u64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Meta {
    row_type: Vec<Column>,
    #[serde(default)]
    partition_info: Vec<Partition>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Answer {
    #[serde(default)]
    result_set_meta_data: Option<Meta>,
    #[serde(default)]
    data: Option<Vec<Row>>,
    #[serde(default)]
    statement_handle: Option<String>,
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

/// A statement's result, read partition by partition.
pub struct ResultPages<'a> {
    api: &'a SqlApi,
    handle: String,
    /// Lower-case column names.
    pub columns: Vec<String>,
    /// Rows of the whole result, as Snowflake counts them.
    pub rows: u64,
    partitions: usize,
    next: usize,
    first: Option<Vec<Row>>,
}

impl ResultPages<'_> {
    /// The next partition's rows; `None` after the last.
    pub async fn next_partition(&mut self) -> Result<Option<Vec<Row>>, SqlError> {
        if let Some(first) = self.first.take() {
            self.next = 1;
            return Ok(Some(first));
        }
        if self.next >= self.partitions {
            return Ok(None);
        }
        let path = format!("/api/v2/statements/{}?partition={}", self.handle, self.next);
        let answer = self.api.get(&path).await?;
        self.next += 1;
        Ok(Some(answer.data.unwrap_or_default()))
    }
}

impl SqlApi {
    /// `base`: the account's URL (`https://<account>.snowflakecomputing.com`). `extra_root_ca_pem`: a
    /// CA trusted besides the public web roots (tests).
    pub fn new(
        base: Url,
        signer: KeyPairSigner,
        role: Option<String>,
        warehouse: Option<String>,
        extra_root_ca_pem: Option<&[u8]>,
        proxy: &crate::config::proxy::Proxy,
    ) -> Result<Self, SqlError> {
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("kinesnow-ctl/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(120));
        if let Some(pem) = extra_root_ca_pem {
            let ca =
                reqwest::Certificate::from_pem(pem).map_err(|e| SqlError::Protocol(format!("extra root CA: {e}")))?;
            builder = builder.add_root_certificate(ca);
        }
        let builder = proxy.apply_to(builder).map_err(SqlError::Protocol)?;
        let http = builder.build().map_err(|e| SqlError::Protocol(format!("HTTP client: {e}")))?;
        Ok(Self { http, base, signer, role, warehouse })
    }

    /// Runs `statement` and returns its result's first partition at hand and the rest to fetch.
    pub async fn query(&self, statement: &str) -> Result<ResultPages<'_>, SqlError> {
        let mut body = serde_json::json!({
            "statement": statement,
            "timeout": STATEMENT_TIMEOUT_SECONDS,
            "resultSetMetaData": {"format": "jsonv2"},
        });
        if let Some(role) = &self.role {
            body["role"] = role.clone().into();
        }
        if let Some(warehouse) = &self.warehouse {
            body["warehouse"] = warehouse.clone().into();
        }
        let url = self.url(&format!("/api/v2/statements?requestId={}", uuid::Uuid::new_v4()))?;
        let request = self.http.post(url).header("Content-Type", "application/json").body(body.to_string());
        let (status, mut answer) = self.send(request).await?;
        if status == StatusCode::ACCEPTED {
            answer = self.wait(&answer).await?;
        }
        let meta = answer.result_set_meta_data.ok_or_else(|| {
            SqlError::Protocol(format!("no result set ({})", answer.message.clone().unwrap_or_default()))
        })?;
        let handle = answer.statement_handle.unwrap_or_default();
        Ok(ResultPages {
            api: self,
            handle,
            columns: meta.row_type.into_iter().map(|c| c.name.to_lowercase()).collect(),
            rows: meta.partition_info.iter().map(|p| p.row_count).sum(),
            partitions: meta.partition_info.len().max(1),
            next: 0,
            first: Some(answer.data.unwrap_or_default()),
        })
    }

    /// Polls a running statement (202) until it has a result.
    async fn wait(&self, running: &Answer) -> Result<Answer, SqlError> {
        let handle = running
            .statement_handle
            .as_deref()
            .ok_or_else(|| SqlError::Protocol("202 without a statement handle".into()))?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(STATEMENT_TIMEOUT_SECONDS + 30);
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let url = self.url(&format!("/api/v2/statements/{handle}"))?;
            let (status, answer) = self.send(self.http.get(url)).await?;
            if status != StatusCode::ACCEPTED {
                return Ok(answer);
            }
            if tokio::time::Instant::now() > deadline {
                return Err(SqlError::Protocol(format!("statement {handle} still running")));
            }
        }
    }

    async fn get(&self, path_and_query: &str) -> Result<Answer, SqlError> {
        let url = self.url(path_and_query)?;
        Ok(self.send(self.http.get(url)).await?.1)
    }

    fn url(&self, path_and_query: &str) -> Result<Url, SqlError> {
        self.base.join(path_and_query).map_err(|e| SqlError::Protocol(format!("URL: {e}")))
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Result<(StatusCode, Answer), SqlError> {
        let (jwt, _) = self.signer.jwt(std::time::SystemTime::now());
        let response = request
            .header("Accept", "application/json")
            .header("Authorization", format!("Bearer {jwt}"))
            .header("X-Snowflake-Authorization-Token-Type", TokenType::KeypairJwt.header_value())
            .send()
            .await
            .map_err(|e| SqlError::Transport(e.without_url().to_string()))?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(|e| SqlError::Transport(e.without_url().to_string()))?;
        // reqwest decodes a body sent with `Content-Encoding: gzip`; one compressed without the header is decoded here.
        let bytes = if bytes.starts_with(&[0x1f, 0x8b]) { gunzip(&bytes)? } else { bytes.to_vec() };
        let answer: Answer = serde_json::from_slice(&bytes).map_err(|e| {
            SqlError::Protocol(format!(
                "HTTP {status}: {e} in '{}'",
                String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
            ))
        })?;
        if status.is_success() {
            return Ok((status, answer));
        }
        Err(SqlError::Refused {
            status: status.as_u16(),
            code: answer.code.unwrap_or_default(),
            message: answer.message.unwrap_or_default(),
        })
    }
}

fn gunzip(bytes: &[u8]) -> Result<Vec<u8>, SqlError> {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(bytes)
        .read_to_end(&mut out)
        .map_err(|e| SqlError::Protocol(format!("a gzip-compressed partition that does not decode: {e}")))?;
    Ok(out)
}

/// A SQL string literal.
pub fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_gzip_body_decodes_and_a_broken_one_is_refused() {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(br#"{"data":[["1"]]}"#).unwrap();
        assert_eq!(super::gunzip(&gz.finish().unwrap()).unwrap(), br#"{"data":[["1"]]}"#);
        assert!(super::gunzip(&[0x1f, 0x8b, 0, 1, 2]).is_err());
    }

    #[test]
    fn literals_double_their_quotes() {
        assert_eq!(super::literal("it's"), "'it''s'");
    }
}
