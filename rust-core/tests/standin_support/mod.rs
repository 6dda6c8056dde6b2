//! The Snowflake stand-in (tests/snowflake-standin) for PutSnowflake's integration tests: built
//! through its build script unless STANDIN_BIN names the binary, started on a free port over
//! plain HTTP (or TLS with the CA it generates: `--tls`), stopped (by its PID) when dropped. Admin calls go through its /admin API.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

use kinesnow_core::config::{PropertyMap, PutSnowflakeConfig};
use serde_json::{json, Value};

pub const ACCOUNT: &str = "TESTACCT";
pub const USER: &str = "LOADER";
pub const KEY: &str = include_str!("../fixtures/user.p8");
pub const PUBLIC_KEY: &str = include_str!("../fixtures/user.pub.pem");

fn binary() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Ok(bin) = std::env::var("STANDIN_BIN") {
            return PathBuf::from(bin);
        }
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/snowflake-standin/build.sh");
        let out =
            Command::new("bash").arg(script).stderr(Stdio::inherit()).output().expect("run the stand-in's build.sh");
        assert!(out.status.success(), "the stand-in did not build");
        PathBuf::from(String::from_utf8(out.stdout).unwrap().lines().last().expect("build.sh prints the binary").trim())
    })
    .clone()
}

pub struct Standin {
    pub url: String,
    /// The CA (PEM) of a stand-in started over TLS.
    pub ca_pem: Option<Vec<u8>>,
    child: Child,
    state_dir: PathBuf,
    http: reqwest::blocking::Client,
}

impl Standin {
    pub fn start(name: &str, commit_lag_ms: u64) -> Self {
        Self::start_with(name, commit_lag_ms, &[])
    }

    /// Over HTTPS; the admin client trusts the stand-in's CA, which `ca_pem` holds.
    pub fn start_tls(name: &str, commit_lag_ms: u64) -> Self {
        Self::start_with(name, commit_lag_ms, &["--tls"])
    }

    /// `--tls` among `extra_args` serves HTTPS instead of plain HTTP.
    pub fn start_with(name: &str, commit_lag_ms: u64, extra_args: &[&str]) -> Self {
        let tls = extra_args.contains(&"--tls");
        let state_dir = std::env::temp_dir().join(format!("kinesnow-standin-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&state_dir);
        std::fs::create_dir_all(&state_dir).unwrap();
        let mut child = Command::new(binary())
            .args([
                if tls { "--tls" } else { "--plain" },
                "--port",
                "0",
                "--commit-lag-ms",
                &commit_lag_ms.to_string(),
                "--state-dir",
            ])
            .arg(&state_dir)
            .args(extra_args.iter().filter(|a| **a != "--tls"))
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(state_dir.join("standin.log")).unwrap())
            .spawn()
            .expect("start the stand-in");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let url = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("url="))
            .unwrap_or_else(|| panic!("stand-in did not start: {line}"))
            .to_owned();
        let ca_pem = tls.then(|| {
            let path =
                line.split_whitespace().find_map(|w| w.strip_prefix("ca=")).expect("a TLS stand-in names its CA");
            std::fs::read(path).expect("read the stand-in's CA")
        });
        let mut http = reqwest::blocking::Client::builder();
        if let Some(pem) = &ca_pem {
            http = http.add_root_certificate(reqwest::Certificate::from_pem(pem).unwrap());
        }
        let s = Self { url, ca_pem, child, state_dir, http: http.build().unwrap() };
        s.admin("POST", "/admin/users", json!({"account": ACCOUNT, "user": USER, "public_key_pem": PUBLIC_KEY}));
        s
    }

    pub fn admin(&self, method: &str, path: &str, body: Value) -> Value {
        let request = self.http.request(method.parse().unwrap(), format!("{}{path}", self.url));
        let request = if body.is_null() { request } else { request.json(&body) };
        let response = request.send().unwrap();
        let status = response.status();
        let text = response.text().unwrap();
        assert!(status.is_success(), "{method} {path}: {status} {text}");
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    pub fn sql(&self, statement: &str) {
        self.admin("POST", "/admin/sql", json!({ "sql": statement }));
    }

    pub fn query(&self, sql: &str) -> Vec<Value> {
        self.admin("POST", "/admin/query", json!({ "sql": sql }))["rows"].as_array().cloned().unwrap_or_default()
    }

    pub fn count(&self, table: &str) -> u64 {
        self.query(&format!("SELECT COUNT(*) AS N FROM {table}"))[0]["N"].as_u64().unwrap()
    }

    pub fn fault(&self, fault: Value) -> Value {
        self.admin("POST", "/admin/faults", fault)
    }

    pub fn clear_faults(&self) {
        self.admin("DELETE", "/admin/faults", Value::Null);
    }

    pub fn requests(&self, path_contains: &str) -> Vec<Value> {
        self.admin("GET", &format!("/admin/requests?path_contains={path_contains}"), Value::Null)["requests"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}

/// A query parameter of a logged request (the stand-in logs the raw query string).
pub fn query_param(request: &Value, name: &str) -> Option<String> {
    let query = request["query"].as_str()?;
    url::form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == name).map(|(_, v)| v.into_owned())
}

impl Drop for Standin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::env::var("KINESNOW_KEEP_STANDIN").is_err() {
            let _ = std::fs::remove_dir_all(&self.state_dir);
        }
    }
}

/// The settings of a PutSnowflake with instance id `instance` writing to DB.PUBLIC.EVENTS on
/// `standin` (commits looked for every 20 ms), with `extra` properties (or facts) added.
pub fn sink_config(standin: &Standin, instance: &str, extra: &[(&str, &str)]) -> PutSnowflakeConfig {
    let mut pairs: Vec<(&str, &str)> = vec![
        ("PutSnowflake Instance", instance),
        ("Account Identifier", ACCOUNT),
        ("Snowflake URL Override", &standin.url),
        ("User", USER),
        ("Private Key", KEY),
        ("Database", "DB"),
        ("Schema", "PUBLIC"),
        ("Table", "EVENTS"),
        ("Max Latency", "20 ms"),
        ("Commit Timeout", "20 sec"),
    ];
    pairs.extend_from_slice(extra);
    PutSnowflakeConfig::parse(&PropertyMap::from_pairs(pairs)).expect("valid settings")
}
