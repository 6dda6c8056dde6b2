//! Test helpers: an in-process stand-in, key-pair JWTs signed with the fixture
//! keys in `tests/fixtures/` (test-only keys), and a small HTTP client wrapper
//! that sends the headers Snowflake requires.
#![allow(dead_code)]

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use snowflake_standin::{start, Options, Running, Settings};
use std::time::{Duration, Instant};

pub const ACCOUNT: &str = "TESTACCT";
pub const USER: &str = "LOADER";
pub const USER_KEY: &str = include_str!("../fixtures/user.p8");
pub const USER_PUB: &str = include_str!("../fixtures/user.pub.pem");
pub const FOREIGN_KEY: &str = include_str!("../fixtures/foreign.p8");
pub const FOREIGN_PUB: &str = include_str!("../fixtures/foreign.pub.pem");

pub fn now_s() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

/// A key-pair JWT as Snowflake clients build it; `ms` puts iat/exp in milliseconds.
pub fn keypair_jwt(private_pem: &str, public_pem: &str, iat: i64, exp: i64, ms: bool) -> String {
    keypair_jwt_of(USER, private_pem, public_pem, iat, exp, ms)
}

/// As [`keypair_jwt`], for another user of the account.
pub fn keypair_jwt_of(user: &str, private_pem: &str, public_pem: &str, iat: i64, exp: i64, ms: bool) -> String {
    let fp = snowflake_standin::auth::fingerprint(public_pem).unwrap();
    let scale = if ms { 1000 } else { 1 };
    let claims = json!({
        "iss": format!("{ACCOUNT}.{user}.{fp}"),
        "sub": format!("{ACCOUNT}.{user}"),
        "iat": iat * scale,
        "exp": exp * scale,
    });
    jsonwebtoken::encode(
        &Header::new(Algorithm::RS256),
        &claims,
        &EncodingKey::from_rsa_pem(private_pem.as_bytes()).unwrap(),
    )
    .unwrap()
}

pub fn user_jwt() -> String {
    keypair_jwt(USER_KEY, USER_PUB, now_s(), now_s() + 3540, false)
}

pub struct Env {
    pub run: Running,
    pub http: reqwest::Client,
    pub base: String,
    pub jwt: String,
    pub scoped: String,
}

pub struct Resp {
    pub status: StatusCode,
    pub text: String,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or(Value::Null)
    }
    /// After an append: the channel's continuation token moves on when the append was taken (200).
    pub fn advance(&self, token: &mut String) {
        if self.status == 200 {
            *token = self.json()["next_continuation_token"].as_str().unwrap().to_string();
        }
    }
    pub fn code(&self) -> String {
        match self.json() {
            Value::Object(o) => o.get("code").and_then(Value::as_str).unwrap_or_default().to_string(),
            Value::String(s) => s,
            _ => String::new(),
        }
    }
}

pub async fn env(commit_lag_ms: u64) -> Env {
    env_with(Settings { commit_lag_ms, ..Settings::default() }).await
}

pub async fn env_with(settings: Settings) -> Env {
    let run = start(Options { port: 0, tls: false, state_dir: None, config: None, settings }).await.expect("start");
    let base = run.url.clone();
    let http = reqwest::Client::new();
    let mut e = Env { run, http, base, jwt: user_jwt(), scoped: String::new() };
    e.admin("POST", "/admin/users", json!({"account": ACCOUNT, "user": USER, "public_key_pem": USER_PUB})).await;
    let r = e.oauth(&e.jwt.clone()).await;
    assert_eq!(r.status, 200, "{}", r.text);
    e.scoped = r.text;
    e
}

impl Env {
    pub async fn admin(&self, method: &str, path: &str, body: Value) -> Value {
        let m = Method::from_bytes(method.as_bytes()).unwrap();
        let r = self.http.request(m, format!("{}{}", self.base, path)).json(&body).send().await.unwrap();
        let status = r.status();
        let v: Value = r.json().await.unwrap_or(Value::Null);
        assert!(status.is_success(), "{method} {path}: {status} {v}");
        v
    }

    pub async fn sql(&self, sql: &str) {
        self.admin("POST", "/admin/sql", json!({ "sql": sql })).await;
    }

    pub async fn query(&self, sql: &str) -> Vec<Value> {
        let v = self.admin("POST", "/admin/query", json!({ "sql": sql })).await;
        v["rows"].as_array().cloned().unwrap_or_default()
    }

    pub async fn fault(&self, spec: Value) {
        self.admin("POST", "/admin/faults", spec).await;
    }

    pub async fn oauth(&self, jwt: &str) -> Resp {
        let r = self
            .http
            .post(format!("{}/oauth/token", self.base))
            .header("Accept", "application/json")
            .header("Authorization", format!("Bearer {jwt}"))
            .header("X-Snowflake-Authorization-Token-Type", "KEYPAIR_JWT")
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&scope=127.0.0.1")
            .send()
            .await
            .unwrap();
        Resp { status: r.status(), text: r.text().await.unwrap() }
    }

    /// A Snowflake request with the scoped token.
    pub async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Resp {
        let m = Method::from_bytes(method.as_bytes()).unwrap();
        let mut b = self
            .http
            .request(m, format!("{}{}", self.base, path))
            .header("Accept", "application/json")
            .header("Authorization", format!("Bearer {}", self.scoped))
            .header("X-Snowflake-Authorization-Token-Type", "OAUTH");
        if let Some(body) = body {
            b = b.json(&body);
        }
        let r = b.send().await.unwrap();
        Resp { status: r.status(), text: r.text().await.unwrap() }
    }

    pub fn pipe_path(table: &str) -> String {
        format!("/v2/streaming/databases/DB/schemas/PUBLIC/pipes/{table}-STREAMING")
    }

    pub async fn open(&self, table: &str, channel: &str, fail_on_uncommitted: bool) -> Resp {
        self.call(
            "PUT",
            &format!("{}/channels/{channel}", Self::pipe_path(table)),
            Some(json!({"fail_on_uncommitted_rows": fail_on_uncommitted})),
        )
        .await
    }

    /// Opens and returns the continuation token.
    pub async fn open_ok(&self, table: &str, channel: &str) -> String {
        let r = self.open(table, channel, false).await;
        assert_eq!(r.status, 200, "{}", r.text);
        r.json()["next_continuation_token"].as_str().unwrap().to_string()
    }

    /// Appends raw bytes with optional Content-Encoding and query string.
    pub async fn append_raw(
        &self,
        table: &str,
        channel: &str,
        query: &str,
        body: Vec<u8>,
        encoding: Option<&str>,
    ) -> Resp {
        let url = format!(
            "{}/v2/streaming/data/databases/DB/schemas/PUBLIC/pipes/{table}-STREAMING/channels/{channel}/rows?{query}",
            self.base
        );
        let mut b = self
            .http
            .post(url)
            .header("Accept", "application/json")
            .header("Authorization", format!("Bearer {}", self.scoped))
            .header("X-Snowflake-Authorization-Token-Type", "OAUTH")
            .header("Content-Type", "application/x-ndjson")
            .body(body);
        if let Some(e) = encoding {
            b = b.header("Content-Encoding", e);
        }
        let r = b.send().await.unwrap();
        Resp { status: r.status(), text: r.text().await.unwrap() }
    }

    /// Appends rows (NDJSON) with a continuation token and an offset token; returns the response.
    pub async fn append(&self, table: &str, channel: &str, token: &str, offset: &str, rows: &[Value]) -> Resp {
        let body: String = rows.iter().map(|r| format!("{r}\n")).collect();
        let q =
            format!("continuationToken={token}&offsetToken={offset}&requestId={}&retryCount=0", uuid::Uuid::new_v4());
        self.append_raw(table, channel, &q, body.into_bytes(), None).await
    }

    pub async fn status(&self, table: &str, channel: &str) -> Value {
        let r = self
            .call(
                "POST",
                &format!("{}:bulk-channel-status", Self::pipe_path(table)),
                Some(json!({"channel_names": [channel]})),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
        r.json()["channel_statuses"][channel].clone()
    }

    /// Polls status until the committed offset token equals `want`.
    pub async fn wait_committed(&self, table: &str, channel: &str, want: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let s = self.status(table, channel).await;
            if s["last_committed_offset_token"] == json!(want) {
                return s;
            }
            assert!(Instant::now() < deadline, "offset {want} not committed: {s}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
