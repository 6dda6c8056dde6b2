//! The Enhanced Fan-Out consumer of an Application Name: registered on the stream if absent,
//! waited for until ACTIVE (with a warning bulletin while it is not), and deregistered when the
//! processor is removed. Also the pool of Kinesis clients subscriptions are spread over, so that
//! many shards do not share one HTTP/2 connection's stream limit and head-of-line blocking.

use std::time::Duration;

use aws_sdk_kinesis::error::ProvideErrorMetadata;
use aws_sdk_kinesis::types::ConsumerStatus;
use aws_sdk_kinesis::Client;
use tracing::{info, warn};

use super::address::{ForStream, StreamRef};
use super::{sdk_error_text_with, KinesisError};

/// Subscriptions per pooled client by default: each client has its own HTTP client and connection
/// pool, so over HTTP/2 (TLS with ALPN h2, as Kinesis serves SubscribeToShard) the subscriptions of
/// one client share one connection and its stream limit, and those of different clients never do.
pub const SUBSCRIPTIONS_PER_CLIENT: usize = 8;

/// Most clients in the pool.
pub const MAX_POOL: usize = 16;

/// How long registration may take before the engine gives up.
const ACTIVE_WAIT: Duration = Duration::from_secs(300);

fn error<E: ProvideErrorMetadata + std::error::Error + 'static>(
    stream: &str,
    e: &E,
    code: Option<&str>,
) -> KinesisError {
    KinesisError::from_sdk(stream, None, sdk_error_text_with(e, e.message()), code.map(str::to_owned))
}

/// The stream's ARN (SubscribeToShard and the consumer calls need it), from DescribeStream.
pub async fn stream_arn(client: &Client, stream: StreamRef<'_>) -> Result<String, KinesisError> {
    Ok(super::stream::describe(client, stream).await?.arn)
}

/// Registers the consumer `name` on the stream unless it exists, waits until it is ACTIVE and
/// returns its ARN.
pub async fn ensure_consumer(client: &Client, address: StreamRef<'_>, name: &str) -> Result<String, KinesisError> {
    let arn = stream_arn(client, address).await?;
    let stream = address.as_str();
    let started = tokio::time::Instant::now();
    let mut warned = false;
    loop {
        match describe(client, stream, &arn, name).await? {
            Some((consumer_arn, ConsumerStatus::Active)) => return Ok(consumer_arn),
            Some((_, ConsumerStatus::Deleting)) | Some((_, ConsumerStatus::Creating)) | Some(_) => {}
            None => register(client, stream, &arn, name).await?,
        }
        if started.elapsed() >= ACTIVE_WAIT {
            return Err(KinesisError::Service {
                stream: stream.to_owned(),
                message: format!(
                    "the Enhanced Fan-Out consumer '{name}' is not ACTIVE after {} s",
                    ACTIVE_WAIT.as_secs()
                ),
            });
        }
        if !warned && started.elapsed() >= Duration::from_secs(3) {
            warned = true;
            warn!("waiting for the Enhanced Fan-Out consumer '{name}' of stream '{stream}' to become ACTIVE");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn describe(
    client: &Client,
    stream: &str,
    stream_arn: &str,
    name: &str,
) -> Result<Option<(String, ConsumerStatus)>, KinesisError> {
    match client.describe_stream_consumer().stream_arn(stream_arn).consumer_name(name).send().await {
        Ok(out) => Ok(out.consumer_description().map(|d| (d.consumer_arn().to_owned(), d.consumer_status().clone()))),
        Err(e) if e.code() == Some("ResourceNotFoundException") => Ok(None),
        Err(e) => Err(error(stream, &e, e.code())),
    }
}

async fn register(client: &Client, stream: &str, stream_arn: &str, name: &str) -> Result<(), KinesisError> {
    match client.register_stream_consumer().stream_arn(stream_arn).consumer_name(name).send().await {
        Ok(_) => {
            info!("registered the Enhanced Fan-Out consumer '{name}' on stream '{stream}'");
            Ok(())
        }
        // Another node registered it at the same moment.
        Err(e) if e.code() == Some("ResourceInUseException") => Ok(()),
        Err(e) => Err(error(stream, &e, e.code())),
    }
}

/// Deregisters the consumer `name` from the stream; a consumer already gone is fine. It is found
/// by name and deregistered by its consumer ARN, the resource Snowflake's IAM policy grants
/// `DeregisterStreamConsumer` on (`.../stream/<name>/consumer/*`).
pub async fn deregister(client: &Client, address: StreamRef<'_>, name: &str) -> Result<(), KinesisError> {
    let arn = stream_arn(client, address).await?;
    let stream = address.as_str();
    let Some((consumer_arn, _)) = describe(client, stream, &arn, name).await? else { return Ok(()) };
    match client.deregister_stream_consumer().consumer_arn(&consumer_arn).send().await {
        Ok(_) => Ok(()),
        Err(e) if e.code() == Some("ResourceNotFoundException") => Ok(()),
        Err(e) => Err(error(stream, &e, e.code())),
    }
}

/// Clients for `shards` subscriptions: one per `per_client` subscriptions (the engine's default is
/// [`SUBSCRIPTIONS_PER_CLIENT`]), at least 1, at most [`MAX_POOL`].
pub fn pool_size(shards: usize, per_client: usize) -> usize {
    shards.div_ceil(per_client.max(1)).clamp(1, MAX_POOL)
}

/// Opens each pooled client's connection before its subscriptions start, with one ListShards
/// (MaxResults 1, in Snowflake's IAM policy) per client, all at once. hyper's pool shares a connection
/// between requests only once it knows the connection is HTTP/2: over TLS it learns that from ALPN,
/// at the end of the handshake, so subscriptions started together on a client with no connection
/// each open one, and now and then one of them carries its subscription there (a second connection
/// for that client). Once a client's first call has returned, its HTTP/2 connection waits in its
/// pool and every subscription takes it. A failed call is logged and the subscriptions go on: they
/// need no warm connection to work.
pub async fn open_connections(pool: &[Client], address: StreamRef<'_>) {
    let mut calls = tokio::task::JoinSet::new();
    let stream = address.as_str();
    for (i, client) in pool.iter().enumerate() {
        let request = client.list_shards().for_stream(address).max_results(1);
        calls.spawn(async move { (i, request.send().await) });
    }
    while let Some(done) = calls.join_next().await {
        if let Ok((i, Err(e))) = done {
            warn!(
                "Enhanced Fan-Out client {i} of stream '{stream}' could not open its connection before its \
                 subscriptions: {}",
                super::sdk_error_text(&e)
            );
        }
    }
}

/// The pooled client for the `index`-th subscription started, round-robin over the pool.
pub fn pooled(pool: &[Client], index: usize) -> &Client {
    &pool[index % pool.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscriptions_spread_over_the_pool() {
        let conf = aws_sdk_kinesis::Config::builder()
            .behavior_version(aws_sdk_kinesis::config::BehaviorVersion::latest())
            .build();
        let pool: Vec<Client> = (0..3).map(|_| Client::from_conf(conf.clone())).collect();
        let which = |i| pool.iter().position(|c| std::ptr::eq(c, pooled(&pool, i))).unwrap();
        assert_eq!((0..7).map(which).collect::<Vec<_>>(), vec![0, 1, 2, 0, 1, 2, 0]);
        let p = SUBSCRIPTIONS_PER_CLIENT;
        assert_eq!((pool_size(1, p), pool_size(8, p), pool_size(9, p), pool_size(1000, p)), (1, 1, 2, 16));
        assert_eq!((pool_size(8, 2), pool_size(8, 1), pool_size(7, 2), pool_size(3, 0)), (4, 8, 4, 3));
    }
}
