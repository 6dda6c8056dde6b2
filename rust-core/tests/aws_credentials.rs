//! ConsumeKinesis' AWS credentials (issue 19) against a real STS: moto's server from PyPI
//! (`tests/sts/sts_emulator.py`), which checks signatures, the caller's IAM policy and the role's
//! trust policy with its `sts:ExternalId` condition. Recording proxies (`tests/sts/recording_proxy.py`)
//! sit in front of kinesis-local, dynalite and STS and log which access key signed each call, with
//! which session token (hashed), and when each key STS issued expires.
//!
//! kinesis-local and dynalite check no signatures, so what these tests assert about the Kinesis
//! and DynamoDB calls comes from the proxies' logs, not from the emulators refusing anything.
//!
//! moto answers a refused AssumeRole in another XML shape than STS (`<Errors>` around `<Error>`), which
//! the SDK cannot read an error code from; the engine then quotes the answer's status and text, which
//! is what the refusal tests see (with real STS the SDK's own message names the code and the reason).
//!
//! The refresh test asks STS for 60-second sessions: AWS refuses less than 900 seconds (and so
//! does the processor's validation), moto does not, which lets a two-minute test cross two
//! lifetimes. The settings are built here, not from processor properties, for that reason.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use aws_credential_types::provider::ProvideCredentials;
use kinesnow_core::aws::{clients, credentials_provider, AwsSettings};
use kinesnow_core::config::consume_kinesis::{AssumeRole, AwsCredentials, CredentialSource};
use kinesnow_core::config::Secret;
use kinesnow_core::consumer::ConsumerEngine;
use serde_json::Value;

use crate::support::{aws, create_stream, drain_within, put, settings, Emulators};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// moto's two servers (see `tests/sts/sts_emulator.py`), stopped when dropped.
struct Sts {
    child: Child,
    facts: Value,
}

impl Sts {
    fn start() -> Self {
        let venv = Command::new("bash")
            .arg(repo().join("tests/sts/venv.sh"))
            .stderr(Stdio::inherit())
            .output()
            .expect("run tests/sts/venv.sh");
        assert!(venv.status.success(), "tests/sts/venv.sh failed");
        let python = String::from_utf8(venv.stdout).unwrap().trim().to_owned();
        let mut child = Command::new(python)
            .arg(repo().join("tests/sts/sts_emulator.py"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the STS emulator");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let facts: Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("the STS emulator did not start ({e}): {line}"));
        Self { child, facts }
    }

    fn fact(&self, name: &str) -> String {
        self.facts[name].as_str().unwrap_or_else(|| panic!("no {name} in {}", self.facts)).to_owned()
    }

    fn keys(&self, which: &str) -> CredentialSource {
        let k = &self.facts[which];
        CredentialSource::Static {
            access_key_id: Secret::new(k["id"].as_str().unwrap()),
            secret_access_key: Secret::new(k["secret"].as_str().unwrap()),
        }
    }

    fn secret(&self, which: &str) -> String {
        self.facts[which]["secret"].as_str().unwrap().to_owned()
    }
}

impl Drop for Sts {
    fn drop(&mut self) {
        drop(self.child.stdin.take()); // the emulator stops both servers when its stdin closes
        for _ in 0..100 {
            if self.child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A recording proxy in front of `upstream`.
struct Recorder {
    child: Child,
    url: String,
    log: PathBuf,
}

impl Recorder {
    fn start(upstream: &str, dir: &Path, name: &str) -> Self {
        let log = dir.join(format!("{name}.jsonl"));
        let mut child = Command::new("python3")
            .arg(repo().join("tests/sts/recording_proxy.py"))
            .args(["--upstream", upstream, "--log"])
            .arg(&log)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start a recording proxy");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let url =
            line.trim().strip_prefix("listening on ").unwrap_or_else(|| panic!("recording proxy: {line}")).to_owned();
        Self { child, url, log }
    }

    fn entries(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The requests (not the issued-credentials lines).
    fn requests(&self) -> Vec<Value> {
        self.entries().into_iter().filter(|e| e.get("action").is_some()).collect()
    }

    /// Access key -> (expiry in epoch seconds, token hash) of what STS issued through this proxy.
    fn issued(&self) -> HashMap<String, (f64, String)> {
        self.entries()
            .into_iter()
            .filter_map(|e| {
                Some((e["issued"].as_str()?.to_owned(), (e["expires"].as_f64()?, e["token"].as_str()?.to_owned())))
            })
            .collect()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The test's own files; not the emulators' state directory (`kinesnow-<name>-<pid>`), whose PID files
/// their stop needs.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kinesnow-{name}-files-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn role(arn: &str, endpoint: &str, external_id: Option<String>, session_time: Duration) -> AssumeRole {
    AssumeRole {
        role_arn: arn.to_owned(),
        session_name: "kinesnow-test".into(),
        external_id,
        session_time,
        sts_region: None,
        sts_endpoint: Some(endpoint.parse().unwrap()),
    }
}

fn through(kinesis: &Recorder, dynamodb: &Recorder, credentials: AwsCredentials) -> AwsSettings {
    AwsSettings {
        region: "us-east-1".into(),
        credentials,
        endpoint_override: Some(kinesis.url.parse().unwrap()),
        dynamodb_endpoint_override: Some(dynamodb.url.parse().unwrap()),
        proxy: Default::default(),
    }
}

/// Every request in `log` was signed by a key STS issued (with that key's session token) before
/// that key expired; returns the keys used.
fn signed_by_issued_keys(log: &Recorder, issued: &HashMap<String, (f64, String)>) -> Vec<String> {
    let requests = log.requests();
    assert!(!requests.is_empty(), "no request went through {}", log.url);
    let mut used = Vec::new();
    for r in &requests {
        let key = r["key"].as_str().unwrap_or_else(|| panic!("an unsigned request: {r}"));
        let (expires, token) =
            issued.get(key).unwrap_or_else(|| panic!("a request signed by {key}, which STS did not issue: {r}"));
        assert_eq!(r["token"].as_str(), Some(token.as_str()), "the session token of {key}: {r}");
        let at = r["t"].as_f64().unwrap();
        assert!(at < *expires, "{key} used {:.1} s after it expired: {r}", at - expires);
        if !used.contains(&key.to_owned()) {
            used.push(key.to_owned());
        }
    }
    used
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_assumed_role_signs_every_call_and_is_renewed_before_it_expires() {
    let emulators = Emulators::start("creds-assume");
    let sts = Sts::start();
    let dir = temp_dir("creds-assume");
    let (kinesis, dynamodb, sts_log) = (
        Recorder::start(&emulators.kinesis, &dir, "kinesis"),
        Recorder::start(&emulators.dynamodb, &dir, "dynamodb"),
        Recorder::start(&sts.fact("sts"), &dir, "sts"),
    );
    let direct = clients(&aws(&emulators)).await;
    create_stream(&direct, "creds", 2).await;

    let lifetime = Duration::from_secs(60);
    let credentials = AwsCredentials {
        source: sts.keys("base"),
        role: Some(role(&sts.fact("role_arn"), &sts_log.url, Some(sts.fact("external_id")), lifetime)),
    };
    let engine = ConsumerEngine::start(
        settings("creds", "creds-app"),
        clients(&through(&kinesis, &dynamodb, credentials)).await,
    )
    .await
    .unwrap();
    // Records keep coming for more than two of the sessions' lifetimes.
    let started = std::time::Instant::now();
    let mut sent = 0;
    let mut received = 0;
    while started.elapsed() < lifetime * 2 + Duration::from_secs(20) {
        put(&direct, "creds", sent, 5).await;
        sent += 5;
        let (got, _) = drain_within(&engine, 5, true, Duration::from_secs(30)).await;
        received += got.values().map(Vec::len).sum::<usize>();
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    engine.stop().await;
    assert_eq!(received, sent, "every record read with the assumed role's credentials");

    let issued = sts_log.issued();
    for r in sts_log.requests() {
        assert_eq!(r["action"], "AssumeRole", "{r}");
        assert_eq!(
            r["key"].as_str(),
            Some(sts.facts["base"]["id"].as_str().unwrap()),
            "AssumeRole signed by the base keys: {r}"
        );
    }
    let on_kinesis = signed_by_issued_keys(&kinesis, &issued);
    let on_dynamodb = signed_by_issued_keys(&dynamodb, &issued);
    assert!(on_kinesis.len() >= 2, "the session was renewed: Kinesis saw {on_kinesis:?}, STS issued {}", issued.len());
    assert!(
        on_dynamodb.len() >= 2,
        "the session was renewed: DynamoDB saw {on_dynamodb:?}, STS issued {}",
        issued.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_assume_role_names_the_role_and_the_reason_and_no_secret() {
    let emulators = Emulators::start("creds-denied");
    let sts = Sts::start();
    let dir = temp_dir("creds-denied");
    let (kinesis, dynamodb) =
        (Recorder::start(&emulators.kinesis, &dir, "kinesis"), Recorder::start(&emulators.dynamodb, &dir, "dynamodb"));
    let role_arn = sts.fact("role_arn");
    let cases = [
        (
            "a caller the role does not trust",
            sts.keys("denied_base"),
            Some(sts.fact("external_id")),
            sts.secret("denied_base"),
        ),
        ("the wrong external ID", sts.keys("base"), Some("not-the-external-id".to_owned()), sts.secret("base")),
        // No external ID at all is refused by IAM (a StringEquals condition on an absent key fails), but
        // moto 5.2.5 lets it through, so that case is not tested here.
    ];
    for (case, source, external_id, secret) in cases {
        let credentials = AwsCredentials {
            source,
            role: Some(role(&role_arn, &sts.fact("sts"), external_id, Duration::from_secs(900))),
        };
        let settings_ = through(&kinesis, &dynamodb, credentials);
        let provider = credentials_provider(&settings_).await.expect("a provider");
        let error = provider.provide_credentials().await.expect_err(case);
        let text = kinesnow_core::kinesis::sdk_error_text(&error);
        assert!(text.contains(&role_arn), "{case}: the role is named: {text}");
        assert!(text.contains("AccessDenied") || text.contains("not authorized"), "{case}: STS' reason: {text}");
        assert!(!text.contains(&secret), "{case}: no secret: {text}");
        // What the engine reports (NiFi's bulletin) when it starts with them.
        let engine = ConsumerEngine::start(settings("creds", "creds-app"), clients(&settings_).await).await;
        let text = engine.err().expect("the start fails").to_string();
        assert!(text.contains(&role_arn) && !text.contains(&secret), "{case}: the engine's error: {text}");
    }
    assert!(
        kinesis.requests().iter().chain(dynamodb.requests().iter()).all(|r| r["key"].is_null()),
        "nothing signed reached the services"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_web_identity_token_is_exchanged_for_the_role_at_each_refresh() {
    let emulators = Emulators::start("creds-web");
    let sts = Sts::start();
    let dir = temp_dir("creds-web");
    let (kinesis, dynamodb, sts_log) = (
        Recorder::start(&emulators.kinesis, &dir, "kinesis"),
        Recorder::start(&emulators.dynamodb, &dir, "dynamodb"),
        Recorder::start(&sts.fact("sts_web"), &dir, "sts"),
    );
    let direct = clients(&aws(&emulators)).await;
    create_stream(&direct, "web", 1).await;
    put(&direct, "web", 0, 10).await;
    let token_file = dir.join("token");
    let web = |file: &Path| AwsCredentials {
        source: CredentialSource::WebIdentity { token_file: file.to_owned() },
        role: Some(role(&sts.fact("web_role_arn"), &sts_log.url, None, Duration::from_secs(900))),
    };

    // No token file yet: the error names the file and the role.
    let provider = credentials_provider(&through(&kinesis, &dynamodb, web(&token_file))).await.unwrap();
    let text =
        kinesnow_core::kinesis::sdk_error_text(&provider.provide_credentials().await.expect_err("no token file"));
    assert!(text.contains(&token_file.display().to_string()) && text.contains(&sts.fact("web_role_arn")), "{text}");

    std::fs::write(&token_file, "eyJhbGciOiJSUzI1NiJ9.first-token.sig\n").unwrap();
    let engine = ConsumerEngine::start(
        settings("web", "web-app"),
        clients(&through(&kinesis, &dynamodb, web(&token_file))).await,
    )
    .await
    .unwrap();
    let (got, _) = drain_within(&engine, 10, true, Duration::from_secs(60)).await;
    engine.stop().await;
    assert_eq!(got.values().map(Vec::len).sum::<usize>(), 10);
    let issued = sts_log.issued();
    let exchanges = sts_log.requests();
    assert!(
        exchanges.iter().all(|r| r["action"] == "AssumeRoleWithWebIdentity" && r["key"].is_null()),
        "unsigned exchanges: {exchanges:?}"
    );
    signed_by_issued_keys(&kinesis, &issued);
    signed_by_issued_keys(&dynamodb, &issued);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_of_a_credentials_file_signs_the_calls_and_can_assume_a_role() {
    let emulators = Emulators::start("creds-profile");
    let sts = Sts::start();
    let dir = temp_dir("creds-profile");
    let (kinesis, dynamodb, sts_log) = (
        Recorder::start(&emulators.kinesis, &dir, "kinesis"),
        Recorder::start(&emulators.dynamodb, &dir, "dynamodb"),
        Recorder::start(&sts.fact("sts"), &dir, "sts"),
    );
    let file = dir.join("credentials");
    let base = &sts.facts["base"];
    std::fs::write(
        &file,
        format!(
            "[default]\naws_access_key_id = AKIADEFAULTPROFILE01\naws_secret_access_key = not-this-one\n\n[reader]\naws_access_key_id = {}\naws_secret_access_key = {}\n",
            base["id"].as_str().unwrap(),
            base["secret"].as_str().unwrap()
        ),
    )
    .unwrap();
    let profile = CredentialSource::Profile { name: Some("reader".into()), file: Some(file.clone()) };

    let plain = through(&kinesis, &dynamodb, AwsCredentials { source: profile.clone(), role: None });
    clients(&plain).await.kinesis.list_streams().send().await.unwrap();
    let keys: Vec<Value> = kinesis.requests().iter().map(|r| r["key"].clone()).collect();
    assert_eq!(keys, vec![base["id"].clone()], "the profile's keys signed ListStreams");

    let assumed = AwsCredentials {
        source: profile,
        role: Some(role(&sts.fact("role_arn"), &sts_log.url, Some(sts.fact("external_id")), Duration::from_secs(900))),
    };
    let c = clients(&through(&kinesis, &dynamodb, assumed)).await;
    c.kinesis.list_streams().send().await.unwrap();
    c.dynamodb.list_tables().send().await.unwrap();
    let issued = sts_log.issued();
    assert_eq!(issued.len(), 1, "one session for both clients: {issued:?}");
    let last_kinesis = kinesis.requests().last().cloned().unwrap();
    assert!(issued.contains_key(last_kinesis["key"].as_str().unwrap()), "{last_kinesis}");
    signed_by_issued_keys(&dynamodb, &issued);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Behind an authenticating HTTP proxy (Proxy Configuration Service), the role's AssumeRole goes
/// through the proxy like every Kinesis and DynamoDB call: tinyproxy's log has all three.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_assumed_role_is_obtained_through_the_proxy_like_every_call() {
    use kinesnow_core::config::proxy::{HttpProxy, Proxy, ProxyCredentials};
    let emulators = Emulators::start("creds-proxy");
    let sts = Sts::start();
    let direct = clients(&aws(&emulators)).await;
    create_stream(&direct, "viaproxy", 1).await;
    put(&direct, "viaproxy", 0, 10).await;
    let tinyproxy = crate::consumer_fanout::tinyproxy::Tinyproxy::start("nifi", "proxy-pw");
    let mut proxied = aws(&emulators);
    proxied.credentials = AwsCredentials {
        source: sts.keys("base"),
        role: Some(role(
            &sts.fact("role_arn"),
            &sts.fact("sts"),
            Some(sts.fact("external_id")),
            Duration::from_secs(900),
        )),
    };
    proxied.proxy = Proxy::Http(HttpProxy {
        host: "127.0.0.1".into(),
        port: tinyproxy.port,
        credentials: Some(ProxyCredentials { user: "nifi".into(), password: Secret::new("proxy-pw") }),
    });
    let engine = ConsumerEngine::start(settings("viaproxy", "viaproxy-app"), clients(&proxied).await).await.unwrap();
    let (got, _) = drain_within(&engine, 10, true, Duration::from_secs(60)).await;
    engine.stop().await;
    assert_eq!(got.values().map(Vec::len).sum::<usize>(), 10, "every record read");
    let requests = tinyproxy.requests();
    let port = |url: &str| url.trim_end_matches('/').rsplit(':').next().unwrap().to_owned();
    for (what, url) in
        [("STS", sts.fact("sts")), ("Kinesis", emulators.kinesis.clone()), ("DynamoDB", emulators.dynamodb.clone())]
    {
        let target = format!("http://127.0.0.1:{}/", port(&url));
        assert!(
            requests.iter().any(|(m, t)| m == "POST" && t.starts_with(&target)),
            "{what} through the proxy: {requests:?}"
        );
    }
}
