//! Enhanced fan-out: registered consumers (RegisterStreamConsumer, DescribeStreamConsumer,
//! ListStreamConsumers, DeregisterStreamConsumer; a consumer is ACTIVE at once) and SubscribeToShard's
//! event stream: an `initial-response` event, then `SubscribeToShardEvent`s of up to 2 MiB of records as
//! fast as the client takes them (HTTP/2 or HTTP/1.1 flow control is the back-pressure), one empty event
//! a second once the shard is drained, and the end of the body after the subscription's lifetime (5 min
//! as on Kinesis, `--subscription-seconds`). With `--limits` each subscription is paced at 2 MiB/s.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::error::ApiError;
use crate::iterator::ShardIterator;
use crate::ops::StartingPosition;
use crate::protocol::{eventstream, Protocol, Timestamp};
use crate::server::Server;

/// Data per event (Kinesis pushes at most 2 MiB per shard per second to a consumer).
pub const EVENT_MAX_BYTES: usize = 2 * 1024 * 1024;
const EVENT_MAX_RECORDS: u64 = 10_000;
/// How often a drained subscription gets an empty event.
const IDLE_EVENT_EVERY: Duration = Duration::from_secs(1);
const LIMITED_BYTES_PER_SECOND: f64 = 2.0 * 1024.0 * 1024.0;

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ConsumerInput {
    #[serde(rename = "StreamARN")]
    pub stream_arn: Option<String>,
    pub consumer_name: Option<String>,
    #[serde(rename = "ConsumerARN")]
    pub consumer_arn: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct SubscribeToShardInput {
    #[serde(rename = "ConsumerARN")]
    pub consumer_arn: String,
    pub shard_id: String,
    pub starting_position: StartingPosition,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Consumer {
    pub consumer_name: String,
    #[serde(rename = "ConsumerARN")]
    pub consumer_arn: String,
    pub consumer_status: &'static str,
    pub consumer_creation_timestamp: Timestamp,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct ConsumerDescription {
    #[serde(flatten)]
    pub consumer: Consumer,
    #[serde(rename = "StreamARN")]
    pub stream_arn: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct RegisterStreamConsumerOutput {
    pub consumer: Consumer,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct DescribeStreamConsumerOutput {
    pub consumer_description: ConsumerDescription,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct ListStreamConsumersOutput {
    pub consumers: Vec<Consumer>,
}

/// An accepted SubscribeToShard: the events start at record `position` of `shard`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    pub consumer_arn: String,
    pub shard: u32,
    pub position: u64,
}

/// The consumers registered on the stream.
#[derive(Default)]
pub struct Consumers {
    registered: Mutex<Vec<Consumer>>,
}

impl Consumers {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Consumer>> {
        self.registered.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn register(&self, stream_arn: &str, input: ConsumerInput) -> Result<RegisterStreamConsumerOutput, ApiError> {
        let name = input.consumer_name.ok_or_else(|| ApiError::InvalidArgument("ConsumerName is required".into()))?;
        let mut registered = self.lock();
        if registered.iter().any(|c| c.consumer_name == name) {
            return Err(ApiError::ResourceInUse(format!("Consumer {name} under stream {stream_arn} already exists.")));
        }
        let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
        let consumer = Consumer {
            consumer_arn: format!("{stream_arn}/consumer/{name}:{}", now_ms / 1000),
            consumer_name: name,
            consumer_status: "ACTIVE",
            consumer_creation_timestamp: Timestamp(now_ms),
        };
        registered.push(consumer.clone());
        Ok(RegisterStreamConsumerOutput { consumer })
    }

    /// By ConsumerARN, or by StreamARN (checked by the caller) and ConsumerName.
    pub fn describe(&self, stream_arn: &str, input: &ConsumerInput) -> Result<DescribeStreamConsumerOutput, ApiError> {
        let consumer = self.find(input)?;
        Ok(DescribeStreamConsumerOutput {
            consumer_description: ConsumerDescription { consumer, stream_arn: stream_arn.to_string() },
        })
    }

    pub fn list(&self) -> ListStreamConsumersOutput {
        ListStreamConsumersOutput { consumers: self.lock().clone() }
    }

    pub fn deregister(&self, input: &ConsumerInput) -> Result<(), ApiError> {
        let consumer = self.find(input)?;
        self.lock().retain(|c| c.consumer_arn != consumer.consumer_arn);
        Ok(())
    }

    pub fn find_arn(&self, arn: &str) -> Result<Consumer, ApiError> {
        self.find(&ConsumerInput { consumer_arn: Some(arn.to_string()), ..Default::default() })
    }

    fn find(&self, input: &ConsumerInput) -> Result<Consumer, ApiError> {
        let registered = self.lock();
        let found = match (&input.consumer_arn, &input.consumer_name) {
            (Some(arn), _) => registered.iter().find(|c| c.consumer_arn == *arn),
            (None, Some(name)) => registered.iter().find(|c| c.consumer_name == *name),
            (None, None) => return Err(ApiError::InvalidArgument("ConsumerARN or ConsumerName is required".into())),
        };
        found.cloned().ok_or_else(|| {
            let what = input.consumer_arn.as_deref().or(input.consumer_name.as_deref()).unwrap_or_default();
            ApiError::ResourceNotFound(format!("Consumer {what} not found."))
        })
    }
}

/// Streams a subscription's events into `events` (frames of the event-stream encoding) until its
/// lifetime ends or the client goes away.
pub async fn push_events(
    server: Arc<Server>,
    protocol: Protocol,
    sub: Subscription,
    lifetime: Duration,
    events: mpsc::Sender<Bytes>,
) {
    let source = &server.source;
    let started = Instant::now();
    let ends = started + lifetime;
    if events.send(eventstream::initial_response(protocol)).await.is_err() {
        return;
    }
    let mut position = sub.position;
    let mut sent_bytes = 0f64;
    while Instant::now() < ends {
        let batch = source.read_batch(ShardIterator { shard: sub.shard, position }, EVENT_MAX_RECORDS, EVENT_MAX_BYTES);
        let records = batch.records.len();
        let g = source.generator();
        // the last record sent so far: where a new subscription AFTER_SEQUENCE_NUMBER continues
        let continuation = match batch.records.last() {
            Some(r) => r.sequence_number,
            None => g.sequence_number(sub.shard, position.saturating_sub(1)),
        };
        let frame = eventstream::records_event(protocol, &batch, continuation.as_str());
        server.stats.served(records, batch.data.len());
        if events.send(frame).await.is_err() {
            return; // the client closed the subscription
        }
        position += records as u64;
        sent_bytes += batch.data.len() as f64;
        let next = if records == 0 {
            Instant::now() + IDLE_EVENT_EVERY
        } else if source.limited() {
            started + Duration::from_secs_f64(sent_bytes / LIMITED_BYTES_PER_SECOND)
        } else {
            continue;
        };
        tokio::time::sleep_until(next.min(ends)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(name: &str) -> ConsumerInput {
        ConsumerInput { consumer_name: Some(name.into()), ..Default::default() }
    }

    #[test]
    fn consumers_register_describe_and_deregister() {
        let c = Consumers::default();
        let arn = "arn:aws:kinesis:us-east-1:000000000000:stream/s";
        let made = c.register(arn, named("app")).unwrap().consumer;
        assert!(made.consumer_arn.starts_with("arn:aws:kinesis:us-east-1:000000000000:stream/s/consumer/app:"));
        assert_eq!(made.consumer_status, "ACTIVE");
        assert!(matches!(c.register(arn, named("app")), Err(ApiError::ResourceInUse(_))));
        assert_eq!(
            c.describe(arn, &named("app")).unwrap().consumer_description.consumer.consumer_arn,
            made.consumer_arn
        );
        assert_eq!(c.find_arn(&made.consumer_arn).unwrap().consumer_name, "app");
        assert_eq!(c.list().consumers.len(), 1);
        c.deregister(&named("app")).unwrap();
        assert!(matches!(c.find_arn(&made.consumer_arn), Err(ApiError::ResourceNotFound(_))));
    }
}
