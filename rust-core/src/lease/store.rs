//! Lease and checkpoint rows. Every write that depends on ownership is conditional on both the
//! owner and the lease counter, so a node that lost a lease has its late writes refused.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use aws_sdk_dynamodb::Client;

use super::table::{service_error, HASH_KEY, RANGE_KEY};
use super::{now_ms, LeaseError};
use crate::kinesis::position::Position;

/// What the row says about where reading resumes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checkpoint {
    /// Nothing committed yet: start at the Initial Stream Position.
    None,
    At(Position),
    /// Read to the end and committed; never read again.
    ShardEnd(Option<Position>),
}

/// A lease this node holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub shard_id: String,
    pub owner: String,
    /// Fencing token: bumped on every take.
    pub counter: u64,
    pub checkpoint: Checkpoint,
}

#[derive(Clone)]
pub struct LeaseStore {
    client: Client,
    table: String,
    stream: String,
    lease_duration: Duration,
}

type Item = HashMap<String, AttributeValue>;

impl LeaseStore {
    pub fn new(client: Client, table: impl Into<String>, stream: impl Into<String>, lease_duration: Duration) -> Self {
        Self { client, table: table.into(), stream: stream.into(), lease_duration }
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    /// Takes the lease if it is free, expired or already ours; bumps the counter either way.
    /// `Ok(None)` when another live node holds it.
    pub async fn acquire(&self, shard_id: &str, owner: &str) -> Result<Option<Lease>, LeaseError> {
        let now = now_ms();
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(self.key(shard_id)))
            .update_expression("SET leaseOwner = :me, leaseExpiry = :exp, lastUpdateTimestamp = :now ADD leaseCounter :one")
            .condition_expression("attribute_not_exists(leaseOwner) OR leaseOwner = :me OR leaseExpiry < :now")
            .expression_attribute_values(":me", s(owner))
            .expression_attribute_values(":exp", n(now + self.lease_duration.as_millis() as i64))
            .expression_attribute_values(":now", n(now))
            .expression_attribute_values(":one", n(1))
            .return_values(ReturnValue::AllNew)
            .send()
            .await;
        match result {
            Ok(out) => {
                let item = out.attributes().cloned().unwrap_or_default();
                Ok(Some(Lease {
                    shard_id: shard_id.to_owned(),
                    owner: owner.to_owned(),
                    counter: number(&item, "leaseCounter").unwrap_or(1),
                    checkpoint: checkpoint_of(shard_id, &item)?,
                }))
            }
            Err(e) if is_condition_failure(&e) => Ok(None),
            Err(e) => Err(service_error(&self.table, e)),
        }
    }

    /// Extends the lease; `Fenced` when it is no longer ours.
    pub async fn renew(&self, lease: &Lease) -> Result<(), LeaseError> {
        let now = now_ms();
        self.fenced_update(lease, "SET leaseExpiry = :exp", vec![(":exp", n(now + self.lease_duration.as_millis() as i64))])
            .await
    }

    /// Records that everything up to `position` is committed (and, with `shard_end`, that the
    /// shard is finished). Refused with `Fenced` if the lease moved on.
    pub async fn checkpoint(&self, lease: &Lease, position: &Position, shard_end: bool) -> Result<(), LeaseError> {
        let mut values = vec![
            (":seq", s(&position.sequence_number)),
            (":now", n(now_ms())),
            (":exp", n(now_ms() + self.lease_duration.as_millis() as i64)),
            (":end", AttributeValue::Bool(shard_end)),
        ];
        let expression = match position.sub_sequence_number {
            Some(sub) => {
                values.push((":sub", n(sub as i64)));
                "SET sequenceNumber = :seq, subSequenceNumber = :sub, lastUpdateTimestamp = :now, leaseExpiry = :exp, shardEnd = :end"
            }
            None => "SET sequenceNumber = :seq, lastUpdateTimestamp = :now, leaseExpiry = :exp, shardEnd = :end REMOVE subSequenceNumber",
        };
        self.fenced_update(lease, expression, values).await
    }

    /// Marks a shard that ended with nothing left to commit as finished.
    pub async fn mark_shard_end(&self, lease: &Lease) -> Result<(), LeaseError> {
        self.fenced_update(lease, "SET shardEnd = :end, lastUpdateTimestamp = :now", vec![
            (":end", AttributeValue::Bool(true)),
            (":now", n(now_ms())),
        ])
        .await
    }

    /// Gives the lease up so another node can take it at once.
    pub async fn release(&self, lease: &Lease) -> Result<(), LeaseError> {
        self.fenced_update(lease, "REMOVE leaseOwner, leaseExpiry", vec![]).await
    }

    /// Every shard row of this stream (heartbeat and marker rows excluded).
    pub async fn rows(&self) -> Result<Vec<(String, Checkpoint, Option<String>)>, LeaseError> {
        let mut rows = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .consistent_read(true)
                .key_condition_expression("streamName = :s")
                .expression_attribute_values(":s", s(&self.stream))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| service_error(&self.table, e))?;
            for item in out.items() {
                let Some(shard) = string(item, RANGE_KEY) else { continue };
                if shard.starts_with("__") {
                    continue;
                }
                rows.push((shard.clone(), checkpoint_of(&shard, item)?, string(item, "leaseOwner")));
            }
            match out.last_evaluated_key() {
                Some(k) if !k.is_empty() => start = Some(k.clone()),
                _ => return Ok(rows),
            }
        }
    }

    async fn fenced_update(
        &self,
        lease: &Lease,
        expression: &str,
        values: Vec<(&str, AttributeValue)>,
    ) -> Result<(), LeaseError> {
        let mut request = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(self.key(&lease.shard_id)))
            .update_expression(expression)
            .condition_expression("leaseOwner = :me AND leaseCounter = :counter")
            .expression_attribute_values(":me", s(&lease.owner))
            .expression_attribute_values(":counter", n(lease.counter as i64));
        for (name, value) in values {
            request = request.expression_attribute_values(name, value);
        }
        match request.send().await {
            Ok(_) => Ok(()),
            Err(e) if is_condition_failure(&e) => Err(LeaseError::Fenced { shard: lease.shard_id.clone() }),
            Err(e) => Err(service_error(&self.table, e)),
        }
    }

    fn key(&self, shard_id: &str) -> Item {
        HashMap::from([(HASH_KEY.to_owned(), s(&self.stream)), (RANGE_KEY.to_owned(), s(shard_id))])
    }
}

fn is_condition_failure<R>(e: &aws_sdk_dynamodb::error::SdkError<aws_sdk_dynamodb::operation::update_item::UpdateItemError, R>) -> bool {
    e.as_service_error().is_some_and(|s| s.is_conditional_check_failed_exception())
}

fn checkpoint_of(shard: &str, item: &Item) -> Result<Checkpoint, LeaseError> {
    let position = match string(item, "sequenceNumber") {
        None => None,
        Some(seq) if seq.chars().all(|c| c.is_ascii_digit()) && !seq.is_empty() => {
            Some(Position::new(seq, number(item, "subSequenceNumber")))
        }
        Some(other) => {
            return Err(LeaseError::Malformed { shard: shard.to_owned(), message: format!("sequenceNumber '{other}' is not a number") })
        }
    };
    let ended = matches!(item.get("shardEnd"), Some(AttributeValue::Bool(true)));
    Ok(match (ended, position) {
        (true, p) => Checkpoint::ShardEnd(p),
        (false, Some(p)) => Checkpoint::At(p),
        (false, None) => Checkpoint::None,
    })
}

fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_owned())
}

fn n(v: i64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

fn string(item: &Item, name: &str) -> Option<String> {
    item.get(name).and_then(|v| v.as_s().ok()).cloned()
}

fn number(item: &Item, name: &str) -> Option<u64> {
    item.get(name).and_then(|v| v.as_n().ok()).and_then(|v| v.parse().ok())
}
