//! Prepares the lease table when the processor is scheduled: ours is used as it is; a legacy KCL
//! table named after the Application Name is migrated once; none is created; anything else is
//! refused without touching it.
//!
//! The migration is crash-safe because there is always one complete copy of the checkpoints:
//! 1. the KCL items are converted and written to `<app>_migration` (our schema), then a `__copied__`
//!    marker is written - until then the KCL table is untouched;
//! 2. only then is the KCL table deleted and `<app>` created with our schema;
//! 3. the rows are copied from `<app>_migration` into `<app>` (never over a row a consumer has
//!    taken since), and `<app>_migration` is deleted last.
//!
//! A node killed at any step leaves a state the next start recognises and completes: KCL table
//! present (start over), KCL table gone and `<app>_migration` present (create and copy), both ours
//! (copy again, then delete the copy). Consumers start only once `<app>` is ours and
//! `<app>_migration` is gone. One node migrates under a lock (see `migration_lock`); the others
//! wait, bounded, with a warning bulletin.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::types::{AttributeValue, KeyType, TableStatus};
use aws_sdk_dynamodb::Client;
use tokio::time::Instant;
use tracing::{info, warn};

use super::kcl::{self, Item, KCL_KEY};
use super::migration_lock::{self, Attempt, LockWatch, CONTROL_STREAM};
use super::table::{self, service_error, HASH_KEY, RANGE_KEY};
use super::tombstone::is_tombstone;
use super::LeaseError;

const COPIED_ROW: &str = "__copied__";

/// Timings of the migration lock and of waiting for another node's migration.
#[derive(Debug, Clone)]
pub struct MigrationSettings {
    /// The lock holder bumps its counter this often.
    pub lock_beat: Duration,
    /// A lock whose counter has not moved for this long is taken over.
    pub lock_timeout: Duration,
    /// How long a node waits for another node's migration before giving up with an error.
    pub wait_limit: Duration,
    /// Test hook: stop dead (as if killed) at this step.
    #[cfg(feature = "test-support")]
    pub halt_at: Option<Step>,
}

impl Default for MigrationSettings {
    fn default() -> Self {
        Self {
            lock_beat: Duration::from_secs(2),
            lock_timeout: Duration::from_secs(30),
            wait_limit: Duration::from_secs(600),
            #[cfg(feature = "test-support")]
            halt_at: None,
        }
    }
}

/// The points at which a crash is injected in tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// `<app>_migration` was created, nothing else.
    MigrationTableCreated,
    /// The lock is taken.
    Locked,
    /// This many rows were written to `<app>_migration`.
    CopyingOut(usize),
    /// The `__copied__` marker is written; the KCL table still exists.
    CopiedOut,
    /// DeleteTable of the KCL table was sent.
    SourceDeleted,
    /// `<app>` exists with our schema and is empty.
    TargetCreated,
    /// This many rows were copied into `<app>`.
    CopyingIn(usize),
}

/// What preparing the table did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Our table was there already.
    Ready,
    /// No table: ours was created.
    Created,
    /// This node carried this many checkpoint rows over (from KCL, or finishing an interrupted run).
    Migrated { rows: usize },
    /// Another node migrated while this one waited.
    Waited,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub outcome: Outcome,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Schema {
    Absent,
    /// Being created, updated or deleted: look again shortly.
    Busy,
    Ours,
    Kcl,
    Unknown(String),
}

/// Makes `<application>` our ACTIVE lease table, migrating a KCL table first if there is one.
pub async fn prepare_table(
    client: &Client,
    application: &str,
    stream: &str,
    owner: &str,
    settings: &MigrationSettings,
) -> Result<Report, LeaseError> {
    let copy_table = format!("{application}_migration");
    let started = Instant::now();
    let mut watch = LockWatch::default();
    let mut waited = false;
    loop {
        let main = inspect(client, application).await?;
        let copy = inspect(client, &copy_table).await?;
        match (&main, &copy) {
            (Schema::Unknown(keys), _) => {
                return Err(LeaseError::Table {
                    table: application.to_owned(),
                    message: format!(
                        "its key schema is {keys}: neither this processor's (streamName + shardId) nor a KCL lease table's \
                         (leaseKey). Nothing was changed; choose another Application Name"
                    ),
                })
            }
            (Schema::Ours, Schema::Absent) => {
                let outcome = if waited { Outcome::Waited } else { Outcome::Ready };
                return Ok(report(application, outcome));
            }
            (Schema::Absent, Schema::Absent) => {
                table::ensure_table(client, application, Duration::from_secs(60)).await?;
                return Ok(report(application, Outcome::Created));
            }
            (Schema::Busy, _) | (_, Schema::Busy) => {}
            (_, Schema::Unknown(keys)) => {
                return Err(LeaseError::Table {
                    table: copy_table.clone(),
                    message: format!("it has key schema {keys}, not a migration copy; nothing was changed"),
                })
            }
            (_, Schema::Absent) => {
                // A KCL table: make the copy table (the lock lives in it), then take the lock.
                create_copy_table(client, &copy_table).await?;
                halt(settings, Step::MigrationTableCreated)?;
                continue;
            }
            (_, _) => {
                match migration_lock::try_take(client, &copy_table, owner, &mut watch, settings.lock_timeout, settings.lock_beat).await? {
                    Attempt::Taken(lock) => {
                        halt(settings, Step::Locked)?;
                        let run = Migration { client, application, copy_table: &copy_table, stream, settings };
                        return run.under(lock).await;
                    }
                    Attempt::Gone => continue,
                    Attempt::Held { owner: holder } => {
                        if !waited {
                            warn!("waiting for node {holder} to finish migrating the KCL lease table '{application}'");
                            waited = true;
                        }
                    }
                }
            }
        }
        if started.elapsed() >= settings.wait_limit {
            return Err(waited_too_long(application, settings));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn waited_too_long(application: &str, settings: &MigrationSettings) -> LeaseError {
    LeaseError::Table {
        table: application.to_owned(),
        message: format!(
            "the lease table's migration did not finish within {} s (another node holds the lock or the table stays \
             busy); nothing was lost, start the processor again",
            settings.wait_limit.as_secs()
        ),
    }
}

/// The steps a node takes once it holds the lock, from wherever the last run stopped.
struct Migration<'a> {
    client: &'a Client,
    application: &'a str,
    copy_table: &'a str,
    stream: &'a str,
    settings: &'a MigrationSettings,
}

impl Migration<'_> {
    /// Completes the migration holding `lock`: dropped once done, released after an error (kept at a
    /// test's halt, as a node that died there would leave it).
    async fn under(&self, lock: migration_lock::LockGuard) -> Result<Report, LeaseError> {
        match self.complete(&lock).await {
            Ok(rows) => {
                drop(lock);
                Ok(report(self.application, Outcome::Migrated { rows }))
            }
            Err(e) if is_halt(&e) => Err(e),
            Err(e) => {
                lock.release().await;
                Err(e)
            }
        }
    }

    async fn complete(&self, lock: &migration_lock::LockGuard) -> Result<usize, LeaseError> {
        let mut main = inspect(self.client, self.application).await?;
        while main == Schema::Busy {
            tokio::time::sleep(Duration::from_millis(250)).await;
            main = inspect(self.client, self.application).await?;
        }
        if main == Schema::Kcl {
            self.copy_out().await?;
            lock.confirm().await?;
            self.delete_source().await?;
            halt(self.settings, Step::SourceDeleted)?;
            self.wait_gone(self.application).await?;
            main = Schema::Absent;
        }
        let (rows, complete) = scan_copy(self.client, self.copy_table).await?;
        if !complete {
            warn!(
                "'{}' has no mark of a complete copy and no KCL table is left to copy from; adopting its {} row(s) \
                 (shards without a row start at the Initial Stream Position)",
                self.copy_table,
                rows.len()
            );
        }
        if main == Schema::Absent {
            table::ensure_table(self.client, self.application, Duration::from_secs(60)).await?;
            halt(self.settings, Step::TargetCreated)?;
        }
        self.copy_in(&rows).await?;
        lock.confirm().await?;
        delete_table(self.client, self.copy_table).await?;
        info!(
            "migrated {} checkpoint row(s) into lease table '{}'; the temporary table '{}' is deleted",
            rows.len(),
            self.application,
            self.copy_table
        );
        Ok(rows.len())
    }

    /// Step 1: KCL items -> `<app>_migration`, then the `__copied__` marker.
    async fn copy_out(&self) -> Result<(), LeaseError> {
        let items = scan_all(self.client, self.application).await?;
        let rows = kcl::convert(&items, self.stream).map_err(|message| LeaseError::Table {
            table: self.application.to_owned(),
            message: format!("{message}; nothing was changed"),
        })?;
        let converted: Vec<Item> = rows.iter().map(kcl::to_item).collect();
        let mut written = 0;
        for item in &converted {
            put(self.client, self.copy_table, item).await?;
            written += 1;
            if let Some(Step::CopyingOut(n)) = halt_step(self.settings) {
                if written >= n {
                    return halt(self.settings, Step::CopyingOut(n));
                }
            }
        }
        let marker = Item::from([
            (HASH_KEY.to_owned(), AttributeValue::S(CONTROL_STREAM.to_owned())),
            (RANGE_KEY.to_owned(), AttributeValue::S(COPIED_ROW.to_owned())),
            ("rows".to_owned(), AttributeValue::N(converted.len().to_string())),
            ("source".to_owned(), AttributeValue::S(format!("KCL table {}", self.application))),
        ]);
        put(self.client, self.copy_table, &marker).await?;
        info!("copied {} KCL lease(s) of table '{}' to '{}'", items.len(), self.application, self.copy_table);
        halt(self.settings, Step::CopiedOut)
    }

    async fn delete_source(&self) -> Result<(), LeaseError> {
        match delete_table(self.client, self.application).await {
            Err(LeaseError::AccessDenied { table, message }) => Err(LeaseError::AccessDenied {
                table,
                message: format!(
                    "DeleteTable was refused, so the KCL table cannot be replaced: grant dynamodb:DeleteTable on '{}' (see \
                     the IAM policy in the processor's documentation) and start the processor again. Nothing was lost: the \
                     KCL table is unchanged and '{}' holds a complete copy. ({message})",
                    self.application, self.copy_table
                ),
            }),
            other => other,
        }
    }

    /// Step 3: copy rows into `<app>`, never over a row a consumer has taken since.
    async fn copy_in(&self, rows: &[Item]) -> Result<(), LeaseError> {
        for (done, row) in rows.iter().enumerate() {
            if let Some(Step::CopyingIn(n)) = halt_step(self.settings) {
                if done >= n {
                    return halt(self.settings, Step::CopyingIn(n));
                }
            }
            let result = self
                .client
                .put_item()
                .table_name(self.application)
                .set_item(Some(row.clone()))
                .condition_expression("attribute_not_exists(leaseCounter)")
                .send()
                .await;
            match result {
                Ok(_) => {}
                Err(e) if e.as_service_error().is_some_and(|s| s.is_conditional_check_failed_exception()) => {}
                Err(e) => return Err(service_error(self.application, e)),
            }
        }
        Ok(())
    }

    async fn wait_gone(&self, table: &str) -> Result<(), LeaseError> {
        let deadline = Instant::now() + Duration::from_secs(120);
        while inspect(self.client, table).await? != Schema::Absent {
            if Instant::now() >= deadline {
                return Err(LeaseError::Table {
                    table: table.to_owned(),
                    message: "still not deleted after 120 s".into(),
                });
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        Ok(())
    }
}

async fn inspect(client: &Client, table: &str) -> Result<Schema, LeaseError> {
    let out = match client.describe_table().table_name(table).send().await {
        Ok(out) => out,
        Err(e) if e.as_service_error().is_some_and(|s| s.is_resource_not_found_exception()) => {
            return Ok(Schema::Absent)
        }
        Err(e) => return Err(service_error(table, e)),
    };
    let Some(description) = out.table() else { return Ok(Schema::Absent) };
    if description.table_status() != Some(&TableStatus::Active) {
        return Ok(Schema::Busy);
    }
    let keys: Vec<(&str, &KeyType)> =
        description.key_schema().iter().map(|k| (k.attribute_name(), k.key_type())).collect();
    Ok(match keys.as_slice() {
        [(HASH_KEY, KeyType::Hash), (RANGE_KEY, KeyType::Range)] => Schema::Ours,
        [(KCL_KEY, KeyType::Hash)] => Schema::Kcl,
        other => Schema::Unknown(format!("{other:?}")),
    })
}

async fn create_copy_table(client: &Client, copy_table: &str) -> Result<(), LeaseError> {
    table::ensure_table(client, copy_table, Duration::from_secs(60)).await
}

/// Every item of a table, read consistently.
async fn scan_all(client: &Client, table: &str) -> Result<Vec<Item>, LeaseError> {
    let mut items = Vec::new();
    let mut start: Option<Item> = None;
    loop {
        let out = client
            .scan()
            .table_name(table)
            .consistent_read(true)
            .set_exclusive_start_key(start.take())
            .send()
            .await
            .map_err(|e| service_error(table, e))?;
        items.extend(out.items().iter().cloned());
        match out.last_evaluated_key() {
            Some(k) if !k.is_empty() => start = Some(k.clone()),
            _ => return Ok(items),
        }
    }
}

/// The copy's shard rows, and whether it is marked complete (ours, or NiFi's migrator's
/// `__migration__` row with status COMPLETE).
async fn scan_copy(client: &Client, copy_table: &str) -> Result<(Vec<Item>, bool), LeaseError> {
    let items = scan_all(client, copy_table).await?;
    let text = |item: &Item, name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned().unwrap_or_default();
    let complete = items.iter().any(|i| {
        (text(i, HASH_KEY) == CONTROL_STREAM && text(i, RANGE_KEY) == COPIED_ROW)
            || (text(i, RANGE_KEY) == "__migration__" && text(i, "migrationStatus") == "COMPLETE")
    });
    let rows = items
        .into_iter()
        .filter(|i| !is_tombstone(i) && text(i, HASH_KEY) != CONTROL_STREAM && !text(i, RANGE_KEY).starts_with("__"))
        .collect();
    Ok((rows, complete))
}

/// Writes one item of the copy, over whatever an interrupted run left under its key (the copy is
/// ours alone until it is marked complete; BatchWriteItem, which Snowflake's policy does not
/// grant, was as unconditional).
async fn put(client: &Client, table: &str, item: &Item) -> Result<(), LeaseError> {
    client
        .put_item()
        .table_name(table)
        .set_item(Some(item.clone()))
        .send()
        .await
        .map(|_| ())
        .map_err(|e| service_error(table, e))
}

async fn delete_table(client: &Client, table: &str) -> Result<(), LeaseError> {
    match client.delete_table().table_name(table).send().await {
        Ok(_) => Ok(()),
        Err(e) if e.as_service_error().is_some_and(|s| s.is_resource_not_found_exception()) => Ok(()),
        Err(e) if e.code() == Some("ResourceInUseException") => Ok(()), // already being deleted
        Err(e) => Err(service_error(table, e)),
    }
}

/// After this node migrated, names KCL 3's side tables, which this processor never uses. Their
/// existence is not probed: Snowflake's IAM policy grants no DescribeTable on them, and a refused
/// call on every migration would be noise in the audit trail.
fn report(application: &str, outcome: Outcome) -> Report {
    if matches!(outcome, Outcome::Migrated { .. }) {
        warn!(
            "if KCL 3 made the tables '{application}-CoordinatorState' and '{application}-WorkerMetricStats', \
             this processor does not use them: they were left alone and can be deleted"
        );
    }
    Report { outcome }
}

#[cfg(feature = "test-support")]
fn halt_step(settings: &MigrationSettings) -> Option<Step> {
    settings.halt_at
}

#[cfg(not(feature = "test-support"))]
fn halt_step(_: &MigrationSettings) -> Option<Step> {
    None
}

/// Stops dead at `step` when a test asks for it: nothing after it runs, as if the node was killed.
fn halt(settings: &MigrationSettings, step: Step) -> Result<(), LeaseError> {
    if halt_step(settings) == Some(step) {
        return Err(LeaseError::Table { table: String::new(), message: format!("{HALTED}{step:?}") });
    }
    Ok(())
}

const HALTED: &str = "halted by a test at ";

fn is_halt(e: &LeaseError) -> bool {
    matches!(e, LeaseError::Table { message, .. } if message.starts_with(HALTED))
}

/// Every item of `table` keyed by (stream, shard), for tests and diagnostics.
pub async fn items_by_shard(client: &Client, table: &str) -> Result<HashMap<(String, String), Item>, LeaseError> {
    let text = |item: &Item, name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned().unwrap_or_default();
    Ok(scan_all(client, table).await?.into_iter().map(|i| ((text(&i, HASH_KEY), text(&i, RANGE_KEY)), i)).collect())
}
