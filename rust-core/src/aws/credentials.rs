//! Who ConsumeKinesis' AWS calls act as: the credentials provider built from its settings. A
//! source (static keys, a profile of the AWS shared files, a web identity token file, or the SDK's
//! default chain) and, optionally, a role that the source's credentials assume. Every provider is
//! the AWS SDK's own (`aws-config`'s profile, default-chain and AssumeRole providers; a web
//! identity token goes through `aws-sdk-sts`' AssumeRoleWithWebIdentity, since `aws-config`'s
//! provider for it takes no STS endpoint). The SDK's identity cache in front of the provider
//! refreshes temporary credentials shortly before they expire.
//!
//! A failure names the role or the source and STS' reason, never a secret (keys, tokens).

use std::path::PathBuf;
use std::time::SystemTime;

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::provider::error::CredentialsError;
use aws_credential_types::provider::{future, ProvideCredentials, SharedCredentialsProvider};
use aws_credential_types::Credentials;

use super::AwsSettings;
use crate::config::consume_kinesis::{AssumeRole, CredentialSource};

/// The provider of the settings' credentials; `None` for the default chain without a role (the
/// SDK's config loader builds that chain itself).
pub async fn provider(settings: &AwsSettings) -> Option<SharedCredentialsProvider> {
    let credentials = &settings.credentials;
    let region = Region::new(settings.region.clone());
    match (&credentials.source, &credentials.role) {
        (CredentialSource::DefaultChain, None) => None,
        // Validation refuses a role with the service; the service's credentials are used as they are.
        (CredentialSource::Service(service), _) => Some(service_provider(service)),
        (CredentialSource::WebIdentity { token_file }, Some(role)) => {
            let sts = sts_config(settings, role, None).await;
            let provider =
                WebIdentity { sts: aws_sdk_sts::Client::new(&sts), token_file: token_file.clone(), role: role.clone() };
            Some(SharedCredentialsProvider::new(provider))
        }
        // Refused by validation; without a role there is nothing to exchange the token for.
        (CredentialSource::WebIdentity { token_file }, None) => Some(SharedCredentialsProvider::new(Unusable(
            format!("the web identity token file {} needs an Assume Role ARN", token_file.display()),
        ))),
        (source, None) => Some(base(source, region, super::http_client(settings)).await),
        (source, Some(role)) => {
            let base = base(source, region, super::http_client(settings)).await;
            let sts = sts_config(settings, role, Some(base.clone())).await;
            let mut builder = aws_config::sts::AssumeRoleProvider::builder(role.role_arn.clone())
                .session_name(role.session_name.clone())
                .session_length(role.session_time)
                .configure(&sts);
            if let Some(id) = &role.external_id {
                builder = builder.external_id(id.clone());
            }
            let assumed = builder.build_from_provider(base).await;
            Some(SharedCredentialsProvider::new(Described { inner: assumed, what: describe_role(role, source) }))
        }
    }
}

/// What the provider of `source` and `role` is, for verification and errors.
pub fn describe(source: &CredentialSource, role: Option<&AssumeRole>) -> String {
    match role {
        None => describe_source(source),
        Some(role) => describe_role(role, source),
    }
}

fn describe_source(source: &CredentialSource) -> String {
    match source {
        CredentialSource::DefaultChain => "the AWS default credentials chain".into(),
        CredentialSource::Static { .. } => "AWS Access Key ID and AWS Secret Access Key".into(),
        CredentialSource::Profile { name, file } => format!(
            "profile '{}' of {}",
            name.as_deref().unwrap_or("default"),
            file.as_ref().map_or_else(|| "the AWS shared files".to_owned(), |f| f.display().to_string())
        ),
        CredentialSource::WebIdentity { token_file } => format!("the web identity token file {}", token_file.display()),
        CredentialSource::Service(service) => service.describe(),
    }
}

/// The credentials service's provider; without the supplier the shim registers (settings parsed
/// outside an open or a verification) one that says so.
fn service_provider(service: &crate::secrets::credentials_service::ServiceRef) -> SharedCredentialsProvider {
    match &service.supplier {
        Some(supplier) => SharedCredentialsProvider::new(crate::aws::credentials_service::ServiceProvider::new(service.clone(), supplier.clone())),
        None => SharedCredentialsProvider::new(Unusable(format!(
            "{} is not reachable from the native engine here (NiFi hands it over when the processor starts or verifies)",
            service.describe()
        ))),
    }
}

fn describe_role(role: &AssumeRole, source: &CredentialSource) -> String {
    let external = if role.external_id.is_some() { ", with the external ID" } else { "" };
    match source {
        CredentialSource::WebIdentity { token_file } => format!(
            "role {} (session '{}') by the web identity token file {}",
            role.role_arn,
            role.session_name,
            token_file.display()
        ),
        other => format!(
            "role {} (session '{}'{external}) assumed with {}",
            role.role_arn,
            role.session_name,
            describe_source(other)
        ),
    }
}

/// The provider of a source of its own.
async fn base(
    source: &CredentialSource,
    region: Region,
    http: Option<aws_sdk_kinesis::config::SharedHttpClient>,
) -> SharedCredentialsProvider {
    match source {
        CredentialSource::Static { access_key_id, secret_access_key } => SharedCredentialsProvider::new(
            Credentials::new(access_key_id.expose(), secret_access_key.expose(), None, None, "kinesnow-static"),
        ),
        CredentialSource::Profile { name, file } => {
            let mut files = aws_runtime::env_config::file::EnvConfigFiles::builder().include_default_config_file(true);
            match file {
                Some(path) => {
                    files = files.with_file(aws_runtime::env_config::file::EnvConfigFileKind::Credentials, path.clone())
                }
                None => files = files.include_default_credentials_file(true),
            }
            let mut config = aws_config::provider_config::ProviderConfig::default().with_region(Some(region));
            if let Some(client) = http {
                config = config.with_http_client(client);
            }
            let mut builder = aws_config::profile::ProfileFileCredentialsProvider::builder()
                .configure(&config)
                .profile_files(files.build());
            if let Some(name) = name {
                builder = builder.profile_name(name.clone());
            }
            SharedCredentialsProvider::new(Described { inner: builder.build(), what: describe_source(source) })
        }
        CredentialSource::DefaultChain => SharedCredentialsProvider::new(
            aws_config::default_provider::credentials::DefaultCredentialsChain::builder().region(region).build().await,
        ),
        CredentialSource::WebIdentity { token_file } => SharedCredentialsProvider::new(Unusable(format!(
            "the web identity token file {} needs an Assume Role ARN",
            token_file.display()
        ))),
        CredentialSource::Service(service) => service_provider(service),
    }
}

/// The configuration of the STS client: the role's STS region (else the processor's), its endpoint
/// override, the engine's timeouts, and the credentials that sign AssumeRole (none for a web
/// identity: AssumeRoleWithWebIdentity is unsigned).
async fn sts_config(settings: &AwsSettings, role: &AssumeRole, signer: Option<SharedCredentialsProvider>) -> SdkConfig {
    let region = role.sts_region.clone().unwrap_or_else(|| settings.region.clone());
    let mut loader =
        aws_config::defaults(BehaviorVersion::latest()).region(Region::new(region)).timeout_config(super::timeouts());
    if let Some(client) = super::http_client(settings) {
        loader = loader.http_client(client);
    }
    if let Some(url) = &role.sts_endpoint {
        loader = loader.endpoint_url(url.as_str().trim_end_matches('/'));
    }
    loader = match signer {
        Some(provider) => loader.credentials_provider(provider),
        None => loader.no_credentials(),
    };
    loader.load().await
}

/// Adds what the provider is (the role, the profile) to its errors.
#[derive(Debug)]
struct Described<P> {
    inner: P,
    what: String,
}

impl<P: ProvideCredentials> ProvideCredentials for Described<P> {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        future::ProvideCredentials::new(async move {
            self.inner
                .provide_credentials()
                .await
                .map_err(|source| CredentialsError::provider_error(Failed::new(self.what.clone(), source)))
        })
    }
}

/// A credentials failure with what was asked.
#[derive(Debug)]
struct Failed {
    what: String,
    /// STS' answer when the SDK could not read an error code from it (see [`unread_answer`]).
    answer: Option<String>,
    source: CredentialsError,
}

impl Failed {
    fn new(what: String, source: CredentialsError) -> Self {
        Self { what, answer: unread_answer(&source), source }
    }
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "no credentials from {}", self.what)?;
        match &self.answer {
            Some(answer) => write!(f, " ({answer})"),
            None => Ok(()),
        }
    }
}

impl std::error::Error for Failed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// The status and text of an STS error answer whose code the SDK could not read (it then says only
/// "unhandled error"): an HTML page of a proxy in the way, or an STS look-alike answering in
/// another XML shape. Error answers carry no credentials.
fn unread_answer(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut next = Some(error);
    while let Some(e) = next {
        let found = unread::<aws_sdk_sts::operation::assume_role::AssumeRoleError>(e).or_else(|| {
            unread::<aws_sdk_sts::operation::assume_role_with_web_identity::AssumeRoleWithWebIdentityError>(e)
        });
        if found.is_some() {
            return found;
        }
        next = e.source();
    }
    None
}

fn unread<E>(e: &(dyn std::error::Error + 'static)) -> Option<String>
where
    E: aws_sdk_sts::error::ProvideErrorMetadata + std::error::Error + 'static,
{
    use aws_sdk_sts::error::SdkError;
    let Some(SdkError::ServiceError(context)) =
        e.downcast_ref::<SdkError<E, aws_sdk_sts::config::http::HttpResponse>>()
    else {
        return None;
    };
    if context.err().code().is_some() {
        return None; // the SDK's own message names the code and STS' message
    }
    let raw = context.raw();
    let body = raw.body().bytes().map(String::from_utf8_lossy).unwrap_or_default();
    Some(format!("STS answered HTTP {}: {}", raw.status().as_u16(), text_of(&body)))
}

/// The text of an XML or HTML answer, without its tags, on one line, at most 400 characters.
fn text_of(markup: &str) -> String {
    let mut text = String::new();
    let mut in_tag = false;
    for c in markup.chars() {
        match c {
            '<' => {
                in_tag = true;
                text.push(' ');
            }
            '>' => in_tag = false,
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    let words: Vec<&str> = text.split_whitespace().collect();
    let line = words.join(" ");
    match line.char_indices().nth(400) {
        Some((cut, _)) => format!("{}...", &line[..cut]),
        None => line,
    }
}

/// A configuration validation refuses; kept so a provider always exists.
#[derive(Debug)]
struct Unusable(String);

impl ProvideCredentials for Unusable {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        future::ProvideCredentials::ready(Err(CredentialsError::invalid_configuration(self.0.clone())))
    }
}

/// A web identity token (re-read at each refresh: EKS rotates it) exchanged for the role's
/// credentials.
#[derive(Debug)]
struct WebIdentity {
    sts: aws_sdk_sts::Client,
    token_file: PathBuf,
    role: AssumeRole,
}

impl WebIdentity {
    async fn credentials(&self) -> Result<Credentials, CredentialsError> {
        // A few hundred bytes, read about once per session: no blocking worth a thread.
        let token =
            std::fs::read_to_string(&self.token_file).map_err(|e| self.failed(CredentialsError::provider_error(e)))?;
        let answer = self
            .sts
            .assume_role_with_web_identity()
            .role_arn(&self.role.role_arn)
            .role_session_name(&self.role.session_name)
            .web_identity_token(token.trim())
            .duration_seconds(i32::try_from(self.role.session_time.as_secs()).unwrap_or(i32::MAX))
            .send()
            .await
            .map_err(|e| self.failed(CredentialsError::provider_error(e)))?;
        let issued = answer
            .credentials
            .ok_or_else(|| self.failed(CredentialsError::unhandled("STS answered without credentials")))?;
        let expiry =
            SystemTime::try_from(issued.expiration).map_err(|e| self.failed(CredentialsError::unhandled(e)))?;
        Ok(Credentials::new(
            issued.access_key_id,
            issued.secret_access_key,
            Some(issued.session_token),
            Some(expiry),
            "kinesnow-web-identity",
        ))
    }

    fn failed(&self, source: CredentialsError) -> CredentialsError {
        let what = describe_role(&self.role, &CredentialSource::WebIdentity { token_file: self.token_file.clone() });
        CredentialsError::provider_error(Failed::new(what, source))
    }
}

impl ProvideCredentials for WebIdentity {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        future::ProvideCredentials::new(self.credentials())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Secret;
    use std::time::Duration;

    fn role() -> AssumeRole {
        AssumeRole {
            role_arn: "arn:aws:iam::123456789012:role/reader".into(),
            session_name: "nifi-kinesnow".into(),
            external_id: Some("ext-secretish".into()),
            session_time: Duration::from_secs(900),
            sts_region: None,
            sts_endpoint: None,
        }
    }

    #[test]
    fn an_unread_answer_is_shown_as_its_text() {
        let moto = r#"<?xml version="1.0" encoding="utf-8"?>
<ErrorResponse><Errors><Error><Code>AccessDenied</Code><Message>User: arn:aws:iam::123456789012:user/nobody is not authorized to perform: sts:AssumeRole</Message></Error></Errors></ErrorResponse>"#;
        assert_eq!(
            text_of(moto),
            "AccessDenied User: arn:aws:iam::123456789012:user/nobody is not authorized to perform: sts:AssumeRole"
        );
        let page = format!("<html><body><h1>407 Proxy Authentication Required</h1>{}</body></html>", "x".repeat(1000));
        let text = text_of(&page);
        assert!(
            text.starts_with("407 Proxy Authentication Required")
                && text.ends_with("...")
                && text.chars().count() == 403,
            "{text}"
        );
    }

    #[test]
    fn descriptions_name_the_role_and_the_source_and_no_secret() {
        let keys = CredentialSource::Static {
            access_key_id: Secret::new("AKIAEXAMPLE"),
            secret_access_key: Secret::new("topsecretvalue"),
        };
        let text = describe(&keys, Some(&role()));
        assert!(text.contains("arn:aws:iam::123456789012:role/reader") && text.contains("AWS Access Key ID"), "{text}");
        assert!(
            !text.contains("topsecretvalue") && !text.contains("AKIAEXAMPLE") && !text.contains("ext-secretish"),
            "{text}"
        );
        let profile = CredentialSource::Profile { name: None, file: Some("/etc/nifi/aws".into()) };
        assert_eq!(describe(&profile, None), "profile 'default' of /etc/nifi/aws");
        let web = CredentialSource::WebIdentity { token_file: "/var/run/token".into() };
        assert!(describe(&web, Some(&role())).contains("web identity token file /var/run/token"));
    }
}
