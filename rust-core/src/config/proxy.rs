//! The HTTP proxy a processor's calls go through. With NiFi's Proxy Configuration Service set, the
//! shim resolves the service and hands its settings over as facts (not properties, like the node
//! identity): type, host, port, user name and password. Without a service, the process
//! environment decides (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, `NO_PROXY`, in upper or lower
//! case), as the AWS SDK's and reqwest's default clients do: both read it through hyper-util's
//! matcher, so Kinesis, DynamoDB, STS and Snowflake calls follow the same rules.
//!
//! Only HTTP proxies are taken (the service's HTTP and HTTP with authentication); SOCKS is refused
//! by the processors' validation, as NiFi's AWS processors do.

use super::properties::Reader;
use super::Secret;

/// Facts the shim sets when a Proxy Configuration Service is set.
pub const PROXY_TYPE: &str = "Proxy Type";
pub const PROXY_HOST: &str = "Proxy Server Host";
pub const PROXY_PORT: &str = "Proxy Server Port";
pub const PROXY_USER: &str = "Proxy User Name";
pub const PROXY_PASSWORD: &str = "Proxy User Password";

/// The AWS instance metadata and container credential endpoints. A proxy never carries them: they
/// are link-local, answered by the host the processor runs on, and the default credentials chain
/// reads them through the same HTTP client as the service calls.
pub const METADATA_HOSTS: &str = "169.254.169.254,169.254.170.2,169.254.170.23,fd00:ec2::254,fd00:ec2::23";

/// How a processor's calls reach their endpoints.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Proxy {
    /// No Proxy Configuration Service: the environment's proxy variables apply.
    #[default]
    FromEnvironment,
    /// A service of type DIRECT: straight to the endpoints, whatever the environment says.
    Direct,
    /// A service of type HTTP: every call through this proxy (HTTPS ones through CONNECT).
    Http(HttpProxy),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpProxy {
    pub host: String,
    pub port: u16,
    /// Basic authentication, when the service has a user name.
    pub credentials: Option<ProxyCredentials>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyCredentials {
    pub user: String,
    pub password: Secret,
}

impl HttpProxy {
    /// `http://host:port`, without the credentials.
    pub fn url(&self) -> String {
        let host = if self.host.contains(':') && !self.host.starts_with('[') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        format!("http://{host}:{}", self.port)
    }
}

impl Proxy {
    /// Reads the facts; problems are reported under the Proxy Configuration Service property.
    pub fn read(r: &mut Reader<'_>) -> Self {
        let Some(kind) = r.optional(PROXY_TYPE) else { return Self::FromEnvironment };
        match kind.to_ascii_uppercase().as_str() {
            "DIRECT" => Self::Direct,
            "HTTP" => Self::read_http(r),
            other => {
                r.problem(
                    SERVICE_PROPERTY,
                    format!("proxy type {other} is not supported: use HTTP (with or without a user name) or DIRECT"),
                );
                Self::FromEnvironment
            }
        }
    }

    fn read_http(r: &mut Reader<'_>) -> Self {
        let host = r.optional(PROXY_HOST).unwrap_or_default();
        if host.is_empty() {
            r.problem(SERVICE_PROPERTY, "the proxy service has no Proxy Server Host");
        } else if !host.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']' | '_')) {
            r.problem(SERVICE_PROPERTY, format!("the proxy service's host '{host}' is not a host name or IP address"));
        }
        let port = match r.optional(PROXY_PORT).map(|p| p.parse::<u16>()) {
            Some(Ok(port)) if port > 0 => port,
            _ => {
                r.problem(SERVICE_PROPERTY, "the proxy service has no valid Proxy Server Port");
                0
            }
        };
        let credentials = r.optional(PROXY_USER).map(|user| ProxyCredentials {
            user,
            password: Secret::new(r.optional_raw(PROXY_PASSWORD).unwrap_or_default()),
        });
        Self::Http(HttpProxy { host, port, credentials })
    }

    /// A reqwest client builder (Snowflake's calls) whose calls go as this says: the environment's
    /// proxy variables (reqwest's default, read as the AWS SDK reads them), none, or this proxy.
    pub fn apply_to(&self, builder: reqwest::ClientBuilder) -> Result<reqwest::ClientBuilder, String> {
        Ok(match self {
            Self::FromEnvironment => builder,
            Self::Direct => builder.no_proxy(),
            Self::Http(http) => {
                let mut through = reqwest::Proxy::all(http.url()).map_err(|e| format!("proxy {}: {e}", http.url()))?;
                if let Some(c) = &http.credentials {
                    through = through.basic_auth(&c.user, c.password.expose());
                }
                builder.proxy(through)
            }
        })
    }

    /// What the calls go through, for verification and errors; never the password.
    pub fn describe(&self) -> String {
        match self {
            Self::FromEnvironment => {
                "the proxy environment variables (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY, NO_PROXY), if any".into()
            }
            Self::Direct => "no proxy (the Proxy Configuration Service says DIRECT)".into(),
            Self::Http(p) => match &p.credentials {
                Some(c) => format!("the HTTP proxy {} as user '{}'", p.url(), c.user),
                None => format!("the HTTP proxy {}", p.url()),
            },
        }
    }
}

/// NiFi's name of the property; problems with the service's settings are reported under it.
pub const SERVICE_PROPERTY: &str = "Proxy Configuration Service";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PropertyMap;

    fn read(pairs: &[(&str, &str)]) -> (Proxy, Vec<String>) {
        let props = PropertyMap::from_pairs(pairs.iter().copied());
        let mut r = Reader::new(&props);
        let proxy = Proxy::read(&mut r);
        let problems = r.finish(()).err().map(|p| p.0.iter().map(|p| p.to_string()).collect()).unwrap_or_default();
        (proxy, problems)
    }

    #[test]
    fn no_service_means_the_environment_decides() {
        assert_eq!(read(&[]), (Proxy::FromEnvironment, vec![]));
    }

    #[test]
    fn an_http_service_with_a_user_carries_basic_credentials_that_never_print() {
        let (proxy, problems) = read(&[
            (PROXY_TYPE, "HTTP"),
            (PROXY_HOST, "127.0.0.1"),
            (PROXY_PORT, "3128"),
            (PROXY_USER, "nifi"),
            (PROXY_PASSWORD, "s3cr3t-pw"),
        ]);
        assert!(problems.is_empty(), "{problems:?}");
        let Proxy::Http(http) = &proxy else { panic!("{proxy:?}") };
        assert_eq!(http.url(), "http://127.0.0.1:3128");
        assert_eq!(http.credentials.as_ref().unwrap().password.expose(), "s3cr3t-pw");
        let shown = format!("{} {proxy:?}", proxy.describe());
        assert!(shown.contains("as user 'nifi'") && !shown.contains("s3cr3t-pw"), "{shown}");
    }

    #[test]
    fn an_ipv6_proxy_host_is_bracketed_in_the_url() {
        let (proxy, _) = read(&[(PROXY_TYPE, "HTTP"), (PROXY_HOST, "::1"), (PROXY_PORT, "3128")]);
        let Proxy::Http(http) = proxy else { panic!() };
        assert_eq!(http.url(), "http://[::1]:3128");
    }

    #[test]
    fn direct_ignores_the_environment_and_socks_or_a_missing_port_is_refused() {
        assert_eq!(read(&[(PROXY_TYPE, "DIRECT")]).0, Proxy::Direct);
        let (_, problems) = read(&[(PROXY_TYPE, "SOCKS"), (PROXY_HOST, "h"), (PROXY_PORT, "1080")]);
        assert!(problems.iter().any(|p| p.contains("SOCKS is not supported")), "{problems:?}");
        let (_, problems) = read(&[(PROXY_TYPE, "HTTP"), (PROXY_HOST, "h")]);
        assert!(problems.iter().any(|p| p.contains("Proxy Server Port")), "{problems:?}");
        let (_, problems) = read(&[(PROXY_TYPE, "HTTP"), (PROXY_HOST, "user@evil/x"), (PROXY_PORT, "3128")]);
        assert!(problems.iter().any(|p| p.contains("not a host name")), "{problems:?}");
    }
}
