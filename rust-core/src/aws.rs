//! AWS SDK clients built from the processor's settings: region, credentials (static or the default
//! chain), endpoint overrides (one for Kinesis and DynamoDB, or DynamoDB's own), and timeouts. Retries are left to the
//! engine, which knows Kinesis' limits better than a generic policy.

use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::provider::SharedCredentialsProvider;
use aws_credential_types::Credentials;

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
}

pub async fn clients(settings: &AwsSettings) -> AwsClients {
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
    AwsClients {
        kinesis: aws_sdk_kinesis::Client::from_conf(kinesis.build()),
        dynamodb: aws_sdk_dynamodb::Client::from_conf(dynamodb.build()),
    }
}

async fn sdk_config(settings: &AwsSettings) -> SdkConfig {
    let timeouts = TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(3))
        .operation_attempt_timeout(Duration::from_secs(10))
        .operation_timeout(Duration::from_secs(30))
        .build();
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(settings.region.clone()))
        .timeout_config(timeouts)
        .retry_config(RetryConfig::standard().with_max_attempts(2));
    if let AwsCredentials::Static { access_key_id, secret_access_key } = &settings.credentials {
        let credentials = Credentials::new(access_key_id.expose(), secret_access_key.expose(), None, None, "kinesnow-static");
        loader = loader.credentials_provider(SharedCredentialsProvider::new(credentials));
    }
    loader.load().await
}
