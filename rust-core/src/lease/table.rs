//! Creates the lease table on demand (on-demand billing) and waits until it is ACTIVE; the
//! table's key names, and the two value makers every row write uses (`s`, `n`).

use std::time::Duration;

use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType, TableStatus,
};
use aws_sdk_dynamodb::Client;

use super::LeaseError;

pub const HASH_KEY: &str = "streamName";
pub const RANGE_KEY: &str = "shardId";

/// Makes sure `table` exists with our key schema and is ACTIVE, creating it if absent.
pub async fn ensure_table(client: &Client, table: &str, wait: Duration) -> Result<(), LeaseError> {
    let deadline = tokio::time::Instant::now() + wait;
    if describe_status(client, table).await?.is_none() {
        create(client, table).await?;
        tracing::info!("created DynamoDB lease table '{table}'");
    }
    loop {
        match describe_status(client, table).await? {
            Some(TableStatus::Active) => return check_schema(client, table).await,
            Some(_) | None if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(250)).await
            }
            status => {
                return Err(LeaseError::Table {
                    table: table.to_owned(),
                    message: format!("not ACTIVE after {} s (status {status:?})", wait.as_secs()),
                })
            }
        }
    }
}

async fn describe_status(client: &Client, table: &str) -> Result<Option<TableStatus>, LeaseError> {
    match client.describe_table().table_name(table).send().await {
        Ok(out) => Ok(out.table().and_then(|t| t.table_status()).cloned()),
        Err(e) if e.as_service_error().is_some_and(|s| s.is_resource_not_found_exception()) => Ok(None),
        Err(e) => Err(service_error(table, e)),
    }
}

async fn create(client: &Client, table: &str) -> Result<(), LeaseError> {
    let attr =
        |name: &str| AttributeDefinition::builder().attribute_name(name).attribute_type(ScalarAttributeType::S).build();
    let key = |name: &str, kind| KeySchemaElement::builder().attribute_name(name).key_type(kind).build();
    let built = (|| -> Result<_, aws_sdk_dynamodb::error::BuildError> {
        Ok((attr(HASH_KEY)?, attr(RANGE_KEY)?, key(HASH_KEY, KeyType::Hash)?, key(RANGE_KEY, KeyType::Range)?))
    })()
    .map_err(|e| LeaseError::Table { table: table.to_owned(), message: e.to_string() })?;
    let result = client
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(built.0)
        .attribute_definitions(built.1)
        .key_schema(built.2)
        .key_schema(built.3)
        .send()
        .await;
    match result {
        Ok(_) => Ok(()),
        // Another node created it at the same moment.
        Err(e) if e.as_service_error().is_some_and(|s| s.is_resource_in_use_exception()) => Ok(()),
        Err(e) => Err(service_error(table, e)),
    }
}

/// When `table` was created (ms since the epoch), as DynamoDB reports it: a table deleted and made
/// again has another time, which tells `feedback` that the leases it knew are gone.
pub async fn created_at(client: &Client, table: &str) -> Result<Option<i64>, LeaseError> {
    let out = client.describe_table().table_name(table).send().await.map_err(|e| service_error(table, e))?;
    Ok(out.table().and_then(|t| t.creation_date_time()).and_then(|t| t.to_millis().ok()))
}

/// A table with another key schema (for example KCL's `leaseKey`) is not ours to write into.
async fn check_schema(client: &Client, table: &str) -> Result<(), LeaseError> {
    let out = client.describe_table().table_name(table).send().await.map_err(|e| service_error(table, e))?;
    let keys: Vec<(String, KeyType)> = out
        .table()
        .map(|t| t.key_schema().iter().map(|k| (k.attribute_name().to_owned(), k.key_type().clone())).collect())
        .unwrap_or_default();
    let expected = vec![(HASH_KEY.to_owned(), KeyType::Hash), (RANGE_KEY.to_owned(), KeyType::Range)];
    if keys == expected {
        Ok(())
    } else {
        Err(LeaseError::Table {
            table: table.to_owned(),
            message: format!(
                "its key schema is {keys:?}, not streamName (HASH) + shardId (RANGE); choose another Application Name \
                 or migrate the table"
            ),
        })
    }
}

pub(crate) fn service_error<E, R>(table: &str, e: aws_sdk_dynamodb::error::SdkError<E, R>) -> LeaseError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug + 'static,
{
    let code = e.code().unwrap_or_default().to_owned();
    let message = crate::kinesis::sdk_error_text_with(&e, e.message());
    if code.contains("AccessDenied") || code.contains("UnrecognizedClient") || code.contains("InvalidSignature") {
        LeaseError::AccessDenied { table: table.to_owned(), message }
    } else {
        LeaseError::Service { table: table.to_owned(), message }
    }
}

/// A DynamoDB string value.
pub fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_owned())
}

/// A DynamoDB number value.
pub fn n(v: i64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}
