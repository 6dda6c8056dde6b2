//! The HTTP client of every AWS call (Kinesis, DynamoDB, STS, the credentials chain): which
//! certificates it trusts and which proxy it goes through (`config::proxy`). Without a proxy
//! service and extra certificates the SDK's own default client is used; it reads the proxy
//! environment variables exactly as the client built here does for `Proxy::FromEnvironment`.

use aws_sdk_kinesis::config::SharedHttpClient;
use aws_smithy_http_client::proxy::ProxyConfig;
use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider, TlsContext, TrustStore};
use aws_smithy_http_client::{Builder, ConnectorBuilder};

use aws_sdk_kinesis::config::interceptors::BeforeDeserializationInterceptorContextRef;
use aws_sdk_kinesis::config::{ConfigBag, Intercept, RuntimeComponents};

use crate::config::proxy::{Proxy, METADATA_HOSTS};

/// The client for `proxy` trusting the system roots and `extra_ca_pem`; `None` when the SDK's
/// default client does the same (no service, no extra certificates).
pub fn client(proxy: &Proxy, extra_ca_pem: Option<&str>) -> Result<Option<SharedHttpClient>, String> {
    if *proxy == Proxy::FromEnvironment && extra_ca_pem.is_none() {
        return Ok(None);
    }
    let proxy_config = proxy_config(proxy)?;
    let mut trust = TrustStore::default();
    if let Some(pem) = extra_ca_pem {
        trust = trust.with_pem_certificate(pem.as_bytes());
    }
    let tls = TlsContext::builder().with_trust_store(trust).build().map_err(|e| format!("TLS context: {e}"))?;
    let client = Builder::new().build_with_connector_fn(move |settings, components| {
        let mut connector =
            ConnectorBuilder::default().tls_provider(Provider::Rustls(CryptoMode::AwsLc)).tls_context(tls.clone());
        connector.set_connector_settings(settings.cloned());
        if let Some(components) = components {
            connector.set_sleep_impl(components.sleep_impl());
        }
        connector.proxy_config(proxy_config.clone()).build()
    });
    Ok(Some(client))
}

/// The SDK's proxy settings for `proxy`. A service's HTTP proxy carries every call but those to
/// the instance metadata and container credential endpoints ([`METADATA_HOSTS`]).
fn proxy_config(proxy: &Proxy) -> Result<ProxyConfig, String> {
    Ok(match proxy {
        Proxy::FromEnvironment => ProxyConfig::from_env(),
        Proxy::Direct => ProxyConfig::disabled(),
        Proxy::Http(http) => {
            let mut config = ProxyConfig::all(http.url())
                .map_err(|e| format!("proxy {}: {e}", http.url()))?
                .no_proxy(METADATA_HOSTS);
            if let Some(c) = &http.credentials {
                config = config.with_basic_auth(c.user.clone(), c.password.expose().to_owned());
            }
            config
        }
    })
}

/// Names the proxy when it refuses a call, where the SDK would report an "unhandled error" with
/// no hint: an answer of 407, or of 401 (tinyproxy's answer to a wrong password), that carries no
/// AWS request id. AWS answers refused credentials with 400 or 403, and always with a request id.
#[derive(Debug)]
pub struct ProxyRefusal {
    proxy: String,
}

impl ProxyRefusal {
    pub fn new(proxy: &Proxy) -> Self {
        Self { proxy: proxy.describe() }
    }
}

impl Intercept for ProxyRefusal {
    fn name(&self) -> &'static str {
        "ProxyRefusal"
    }

    fn read_after_transmit(
        &self,
        context: &BeforeDeserializationInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let response = context.response();
        let status = response.status().as_u16();
        let from_aws = ["x-amzn-requestid", "x-amz-request-id"].iter().any(|h| response.headers().contains_key(*h));
        if matches!(status, 401 | 407) && !from_aws {
            return Err(format!(
                "the call went through {} and the proxy refused it (HTTP {status}): check the Proxy Configuration Service's \
                 user name and password",
                self.proxy
            )
            .into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::proxy::{HttpProxy, ProxyCredentials};
    use crate::config::Secret;

    #[test]
    fn the_sdk_default_is_kept_only_without_a_service_and_extra_certificates() {
        assert!(client(&Proxy::FromEnvironment, None).unwrap().is_none());
        assert!(client(&Proxy::Direct, None).unwrap().is_some());
    }

    /// A proxy of one connection: answers `status` to the first request and returns its head.
    async fn one_request_proxy(status: &'static str) -> (u16, tokio::task::JoinHandle<String>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let head = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut seen = Vec::new();
            let mut buf = [0u8; 4096];
            while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = socket.read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                seen.extend_from_slice(&buf[..n]);
            }
            let answer = format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            socket.write_all(answer.as_bytes()).await.unwrap();
            String::from_utf8_lossy(&seen).into_owned()
        });
        (port, head)
    }

    #[tokio::test]
    async fn a_service_proxy_carries_kinesis_calls_with_basic_credentials() {
        let (port, head) = one_request_proxy("407 Proxy Authentication Required").await;
        let proxy = Proxy::Http(HttpProxy {
            host: "127.0.0.1".into(),
            port,
            credentials: Some(ProxyCredentials { user: "nifi".into(), password: Secret::new("pw-9f3e") }),
        });
        let config = aws_sdk_kinesis::Config::builder()
            .behavior_version(aws_sdk_kinesis::config::BehaviorVersion::latest())
            .region(aws_sdk_kinesis::config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_kinesis::config::Credentials::new("AKID", "SECRET", None, None, "test"))
            .endpoint_url("http://127.0.0.1:9")
            .http_client(client(&proxy, None).unwrap().unwrap())
            .interceptor(ProxyRefusal::new(&proxy))
            .build();
        let result = aws_sdk_kinesis::Client::from_conf(config).list_shards().stream_name("s").send().await;
        let text = crate::kinesis::sdk_error_text(&result.expect_err("the proxy answered 407"));
        assert!(text.contains("the HTTP proxy http://127.0.0.1:") && text.contains("refused it (HTTP 407)"), "{text}");
        assert!(!text.contains("pw-9f3e"), "{text}");
        let head = head.await.unwrap();
        assert!(head.starts_with("POST http://127.0.0.1:9/ HTTP/1.1"), "absolute-form request to the proxy: {head}");
        // "nifi:pw-9f3e" in base64.
        assert!(head.contains("bmlmaTpwdy05ZjNl"), "basic credentials for the proxy: {head}");
    }
}
