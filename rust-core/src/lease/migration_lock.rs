//! The lock that lets one node migrate a KCL table while the others wait: a row in the temporary
//! `<Application Name>_migration` table whose `beat` counter the holder bumps every few seconds.
//! A lock whose counter has not changed for the lock timeout, judged on the observer's own
//! monotonic clock (no clock comparison across nodes), belongs to a dead node and is taken over,
//! conditionally on the owner and counter last seen. A released lock is a tombstone (see
//! [`super::tombstone`]): free, and taken by overwriting it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::table::{service_error, HASH_KEY, RANGE_KEY};
use super::tombstone::{self, is_tombstone};
use super::LeaseError;

/// Control rows of the migration table live in their own partition, apart from any stream's.
pub const CONTROL_STREAM: &str = "__migration__";
const LOCK_ROW: &str = "__lock__";

/// What a try for the lock found.
pub enum Attempt {
    Taken(LockGuard),
    /// Another node holds it and is alive (its counter moves).
    Held {
        owner: String,
    },
    /// The migration table vanished meanwhile (the migration just finished): look again.
    Gone,
}

/// Who held the lock as last read, and since when (our clock) its counter has not moved.
#[derive(Default)]
pub struct LockWatch {
    seen: Option<(String, u64, Instant)>,
}

pub struct LockGuard {
    client: Client,
    table: String,
    owner: String,
    lost: Arc<AtomicBool>,
    beating: JoinHandle<()>,
}

fn key() -> HashMap<String, AttributeValue> {
    HashMap::from([
        (HASH_KEY.to_owned(), AttributeValue::S(CONTROL_STREAM.to_owned())),
        (RANGE_KEY.to_owned(), AttributeValue::S(LOCK_ROW.to_owned())),
    ])
}

/// Takes the lock if it is free or its holder has been silent for `timeout`.
pub async fn try_take(
    client: &Client,
    table: &str,
    owner: &str,
    watch: &mut LockWatch,
    timeout: Duration,
    beat_every: Duration,
) -> Result<Attempt, LeaseError> {
    let Some(current) = read(client, table).await? else { return Ok(Attempt::Gone) };
    let condition = match current {
        None => None,
        Some((holder, beat)) => {
            let now = Instant::now();
            let since = match &watch.seen {
                Some((o, b, t)) if *o == holder && *b == beat => *t,
                _ => now,
            };
            watch.seen = Some((holder.clone(), beat, since));
            if now.duration_since(since) < timeout {
                return Ok(Attempt::Held { owner: holder });
            }
            tracing::warn!(
                "taking over the migration lock of table '{table}' from node {holder}, silent for {} s",
                timeout.as_secs()
            );
            Some((holder, beat))
        }
    };
    let mut put = client
        .put_item()
        .table_name(table)
        .set_item(Some(key()))
        .item("owner", AttributeValue::S(owner.to_owned()))
        .item("beat", AttributeValue::N("0".into()));
    put = match &condition {
        None => put.condition_expression(tombstone::ABSENT),
        Some((holder, beat)) => put
            .condition_expression("#o = :prev AND beat = :beat")
            .expression_attribute_names("#o", "owner")
            .expression_attribute_values(":prev", AttributeValue::S(holder.clone()))
            .expression_attribute_values(":beat", AttributeValue::N(beat.to_string())),
    };
    match put.send().await {
        Ok(_) => Ok(Attempt::Taken(LockGuard::start(client.clone(), table.to_owned(), owner.to_owned(), beat_every))),
        Err(e) if e.as_service_error().is_some_and(|s| s.is_conditional_check_failed_exception()) => {
            let owner = read(client, table)
                .await
                .ok()
                .flatten()
                .flatten()
                .map_or_else(|| "another node".to_owned(), |(o, _)| o);
            Ok(Attempt::Held { owner })
        }
        Err(e) if e.as_service_error().is_some_and(|s| s.is_resource_not_found_exception()) => Ok(Attempt::Gone),
        Err(e) => Err(service_error(table, e)),
    }
}

/// The lock's holder and counter (`Some(None)`: free); `None` when the table is gone.
async fn read(client: &Client, table: &str) -> Result<Option<Option<(String, u64)>>, LeaseError> {
    let out = match client.get_item().table_name(table).consistent_read(true).set_key(Some(key())).send().await {
        Ok(out) => out,
        Err(e) if e.as_service_error().is_some_and(|s| s.is_resource_not_found_exception()) => return Ok(None),
        Err(e) => return Err(service_error(table, e)),
    };
    Ok(Some(out.item().filter(|item| !is_tombstone(item)).map(|item| {
        let owner = item.get("owner").and_then(|v| v.as_s().ok()).cloned().unwrap_or_default();
        let beat = item.get("beat").and_then(|v| v.as_n().ok()).and_then(|n| n.parse().ok()).unwrap_or(0);
        (owner, beat)
    })))
}

impl LockGuard {
    fn start(client: Client, table: String, owner: String, every: Duration) -> Self {
        let lost = Arc::new(AtomicBool::new(false));
        let beating = crate::runtime::spawn(beat(client.clone(), table.clone(), owner.clone(), every, lost.clone()));
        Self { client, table, owner, lost, beating }
    }

    /// Proves the lock is still ours right now (before a destructive step).
    pub async fn confirm(&self) -> Result<(), LeaseError> {
        if !self.lost.load(Ordering::Relaxed) && bump(&self.client, &self.table, &self.owner).await? {
            return Ok(());
        }
        self.lost.store(true, Ordering::Relaxed);
        Err(LeaseError::Table {
            table: self.table.clone(),
            message: "the migration lock was taken over by another node (this node was silent too long); that node \
                      completes the migration"
                .into(),
        })
    }

    /// Gives the lock up after a failure, so waiting nodes need not wait for the lock timeout: a
    /// tombstone, written only while the lock is still ours.
    pub async fn release(self) {
        self.beating.abort();
        let _ = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(tombstone::tombstone(key(), super::now_ms())))
            .condition_expression("#o = :me")
            .expression_attribute_names("#o", "owner")
            .expression_attribute_values(":me", AttributeValue::S(self.owner.clone()))
            .send()
            .await;
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        self.beating.abort();
    }
}

async fn beat(client: Client, table: String, owner: String, every: Duration, lost: Arc<AtomicBool>) {
    loop {
        tokio::time::sleep(every).await;
        match bump(&client, &table, &owner).await {
            Ok(true) => {}
            Ok(false) => {
                lost.store(true, Ordering::Relaxed);
                return;
            }
            // The table is gone (migration finished) or unreachable for a moment.
            Err(_) => {}
        }
    }
}

/// Bumps the counter if the lock is ours; false when another node holds it.
async fn bump(client: &Client, table: &str, owner: &str) -> Result<bool, LeaseError> {
    let result = client
        .update_item()
        .table_name(table)
        .set_key(Some(key()))
        .update_expression("ADD beat :one")
        .condition_expression("#o = :me")
        .expression_attribute_names("#o", "owner")
        .expression_attribute_values(":me", AttributeValue::S(owner.to_owned()))
        .expression_attribute_values(":one", AttributeValue::N("1".into()))
        .send()
        .await;
    match result {
        Ok(_) => Ok(true),
        Err(e) if e.as_service_error().is_some_and(|s| s.is_conditional_check_failed_exception()) => Ok(false),
        Err(e) => Err(service_error(table, e)),
    }
}
