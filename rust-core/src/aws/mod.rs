//! AWS SDK clients built from the processor's settings: region, credentials (see `credentials`),
//! endpoint overrides (one for Kinesis and DynamoDB, or DynamoDB's own), and timeouts. Retries are left to the
//! engine, which knows Kinesis' limits better than a generic policy.
//!
//! Every Kinesis client the engine makes for its fan-out pool has an HTTP client (connection pool)
//! of its own: see [`AwsClients::separate_kinesis`].

pub mod credentials;
pub mod credentials_service;

use std::sync::Arc;
use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::provider::SharedCredentialsProvider;

use crate::config::consume_kinesis::AwsCredentials;

/// Where and as whom to call AWS.
#[derive(Debug, Clone)]
pub struct AwsSettings {
    pub region: String,
    pub credentials: AwsCredentials,
    pub endpoint_override: Option<url::Url>,
    /// DynamoDB's own override; `endpoint_override` when unset.
    pub dynamodb_endpoint_override: Option<url::Url>,
}

pub struct AwsClients {
    pub kinesis: aws_sdk_kinesis::Client,
    pub dynamodb: aws_sdk_dynamodb::Client,
    /// CA certificates (PEM) trusted besides the system roots; only set by [`clients_trusting`].
    extra_ca_pem: Option<Arc<str>>,
}

impl AwsClients {
    /// A Kinesis client with the same configuration as `kinesis` but an HTTP client, and so a
    /// connection pool, of its own: subscriptions made through it never share an HTTP/2
    /// connection with those of another such client.
    pub fn separate_kinesis(&self) -> aws_sdk_kinesis::Client {
        match &self.extra_ca_pem {
            // No HTTP client in the configuration: the SDK builds a default one for each client.
            None => aws_sdk_kinesis::Client::from_conf(self.kinesis.config().clone()),
            Some(pem) => aws_sdk_kinesis::Client::from_conf(self.kinesis.config().to_builder().http_client(https_client(pem)).build()),
        }
    }
}

pub async fn clients(settings: &AwsSettings) -> AwsClients {
    build(settings, None).await
}

/// Like [`clients`], with extra CA certificates (PEM) trusted besides the system roots, for an
/// endpoint behind a private CA (the engine's HTTP/2 test puts a TLS terminator in front of
/// kinesis-local). Not a processor property. The HTTPS proxy environment variables the SDK's
/// default client honours are not applied to these clients.
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

/// An HTTPS client of its own (rustls, as the SDK's default) trusting the system roots and `pem`.
fn https_client(pem: &str) -> aws_sdk_kinesis::config::SharedHttpClient {
    use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider, TlsContext, TrustStore};
    let trust = TrustStore::default().with_pem_certificate(pem.as_bytes());
    let context = TlsContext::builder().with_trust_store(trust).build().expect("a TLS context with a trust store is valid");
    aws_smithy_http_client::Builder::new().tls_provider(Provider::Rustls(CryptoMode::AwsLc)).tls_context(context).build_https()
}

async fn build(settings: &AwsSettings, extra_ca_pem: Option<Arc<str>>) -> AwsClients {
    let sdk = sdk_config(settings).await;
    let text = |u: &url::Url| u.as_str().trim_end_matches('/').to_owned();
    let mut kinesis = aws_sdk_kinesis::config::Builder::from(&sdk);
    let mut dynamodb = aws_sdk_dynamodb::config::Builder::from(&sdk);
    if let Some(url) = &settings.endpoint_override {
        kinesis = kinesis.endpoint_url(text(url));
    }
    if let Some(url) = settings.dynamodb_endpoint_override.as_ref().or(settings.endpoint_override.as_ref()) {
        dynamodb = dynamodb.endpoint_url(text(url));
    }
    if let Some(pem) = &extra_ca_pem {
        kinesis = kinesis.http_client(https_client(pem));
        dynamodb = dynamodb.http_client(https_client(pem));
    }
    AwsClients {
        kinesis: aws_sdk_kinesis::Client::from_conf(kinesis.build()),
        dynamodb: aws_sdk_dynamodb::Client::from_conf(dynamodb.build()),
        extra_ca_pem,
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
    if let Some(provider) = credentials::provider(settings).await {
        loader = loader.credentials_provider(provider);
    }
    loader.load().await
}
