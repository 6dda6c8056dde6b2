//! AWS SDK clients built from the processor's settings: region, credentials (see `credentials`, and
//! `credentials_service` for NiFi's credentials service), proxies (`http`), endpoint overrides (one
//! for Kinesis and DynamoDB, or DynamoDB's own), and timeouts. The SDK retries a failed attempt
//! once (standard retry mode, at most 2 attempts); beyond that retries are left to the engine,
//! which knows Kinesis' limits better than a generic policy. GetRecords' answers are read by
//! `get_records`, with `records_answer` in place of the SDK's JSON codec.
//!
//! Every Kinesis client the engine makes for its fan-out pool has an HTTP client (connection pool)
//! of its own: see [`AwsClients::separate_kinesis`].

pub mod credentials;
pub mod credentials_service;
pub mod get_records;
pub mod http;
pub mod records_answer;

use std::sync::Arc;
use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::provider::SharedCredentialsProvider;

use crate::config::consume_kinesis::AwsCredentials;
use crate::config::proxy::Proxy;

/// Where and as whom to call AWS.
#[derive(Debug, Clone)]
pub struct AwsSettings {
    pub region: String,
    pub credentials: AwsCredentials,
    pub endpoint_override: Option<url::Url>,
    /// DynamoDB's own override; `endpoint_override` when unset.
    pub dynamodb_endpoint_override: Option<url::Url>,
    /// How the calls reach AWS (see `config::proxy`).
    pub proxy: Proxy,
}

impl AwsSettings {
    /// Where and as whom ConsumeKinesis calls AWS.
    pub fn of(config: &crate::config::ConsumeKinesisConfig) -> Self {
        Self {
            region: config.region.clone(),
            credentials: config.credentials.clone(),
            endpoint_override: config.endpoint_override.clone(),
            dynamodb_endpoint_override: config.dynamodb_endpoint_override.clone(),
            proxy: config.proxy.clone(),
        }
    }
}

pub struct AwsClients {
    pub kinesis: aws_sdk_kinesis::Client,
    pub dynamodb: aws_sdk_dynamodb::Client,
    /// CA certificates (PEM) trusted besides the system roots; only set by [`clients_trusting`].
    extra_ca_pem: Option<Arc<str>>,
    proxy: Proxy,
}

impl AwsClients {
    /// A Kinesis client with the same configuration as `kinesis` but an HTTP client, and so a
    /// connection pool, of its own: subscriptions made through it never share an HTTP/2
    /// connection with those of another such client.
    pub fn separate_kinesis(&self) -> aws_sdk_kinesis::Client {
        match http::client(&self.proxy, self.extra_ca_pem.as_deref()) {
            Ok(Some(client)) => {
                aws_sdk_kinesis::Client::from_conf(self.kinesis.config().to_builder().http_client(client).build())
            }
            // No HTTP client in the configuration: the SDK builds a default one for each client. (The
            // settings made a client once already, in `build`, so they make one again.)
            _ => aws_sdk_kinesis::Client::from_conf(self.kinesis.config().clone()),
        }
    }
}

pub async fn clients(settings: &AwsSettings) -> AwsClients {
    build(settings, None).await
}

/// Like [`clients`], with extra CA certificates (PEM) trusted besides the system roots, for an
/// endpoint behind a private CA (the engine's HTTP/2 test puts a TLS terminator in front of
/// kinesis-local). Not a processor property.
pub async fn clients_trusting(settings: &AwsSettings, extra_ca_pem: &str) -> Result<AwsClients, String> {
    use rustls_pki_types::pem::PemObject;
    let certs = rustls_pki_types::CertificateDer::pem_slice_iter(extra_ca_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("extra CA certificates: {e}"))?;
    if certs.is_empty() {
        return Err("extra CA certificates: no PEM certificate found".into());
    }
    Ok(build(settings, Some(Arc::from(extra_ca_pem))).await)
}

async fn build(settings: &AwsSettings, extra_ca_pem: Option<Arc<str>>) -> AwsClients {
    let sdk = sdk_config(settings).await;
    let text = |u: &url::Url| u.as_str().trim_end_matches('/').to_owned();
    let mut kinesis = aws_sdk_kinesis::config::Builder::from(&sdk)
        .interceptor(http::ProxyRefusal::new(&settings.proxy))
        .interceptor(get_records::FastRecords);
    let mut dynamodb =
        aws_sdk_dynamodb::config::Builder::from(&sdk).interceptor(http::ProxyRefusal::new(&settings.proxy));
    if let Some(url) = &settings.endpoint_override {
        kinesis = kinesis.endpoint_url(text(url));
    }
    if let Some(url) = settings.dynamodb_endpoint_override.as_ref().or(settings.endpoint_override.as_ref()) {
        dynamodb = dynamodb.endpoint_url(text(url));
    }
    if extra_ca_pem.is_some() {
        // The shared configuration's client (if any) lacks the extra certificates.
        if let Ok(Some(client)) = http::client(&settings.proxy, extra_ca_pem.as_deref()) {
            kinesis = kinesis.http_client(client.clone());
            dynamodb = dynamodb.http_client(client);
        }
    }
    AwsClients {
        kinesis: aws_sdk_kinesis::Client::from_conf(kinesis.build()),
        dynamodb: aws_sdk_dynamodb::Client::from_conf(dynamodb.build()),
        extra_ca_pem,
        proxy: settings.proxy.clone(),
    }
}

/// The credentials provider the clients use, for verification.
pub async fn credentials_provider(settings: &AwsSettings) -> Option<SharedCredentialsProvider> {
    sdk_config(settings).await.credentials_provider()
}

/// The engine's timeouts for every AWS call (STS' too).
fn timeouts() -> TimeoutConfig {
    TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(3))
        .operation_attempt_timeout(Duration::from_secs(10))
        .operation_timeout(Duration::from_secs(30))
        .build()
}

async fn sdk_config(settings: &AwsSettings) -> SdkConfig {
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(settings.region.clone()))
        .timeout_config(timeouts())
        .retry_config(RetryConfig::standard().with_max_attempts(2));
    // Every client made from this configuration, and the credentials chain, uses it.
    if let Some(client) = http_client(settings) {
        loader = loader.http_client(client);
    }
    if let Some(provider) = credentials::provider(settings).await {
        loader = loader.credentials_provider(provider);
    }
    loader.load().await
}

/// The HTTP client of the settings' proxy, for configurations made from them; `None` keeps the
/// SDK's default. A proxy the SDK cannot take (validation has checked host and port) leaves the
/// default too, with an error logged.
pub(crate) fn http_client(settings: &AwsSettings) -> Option<aws_sdk_kinesis::config::SharedHttpClient> {
    match http::client(&settings.proxy, None) {
        Ok(client) => client,
        Err(e) => {
            tracing::error!("AWS calls cannot use {}: {e}", settings.proxy.describe());
            None
        }
    }
}
