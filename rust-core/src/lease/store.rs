//! Lease, heartbeat and checkpoint rows. Every write that depends on ownership is conditional on
//! both the owner and the lease counter, so a node that lost a lease has its late writes refused.
//! Every write is counted, so the table's write rate can be reported. Removed rows are tombstones
//! (see [`super::tombstone`]): `scan` leaves them out, and a write that creates a row clears the mark.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use aws_sdk_dynamodb::Client;

use super::kcl::StartHint;
use super::table::{n, s, service_error, HASH_KEY, RANGE_KEY};
use super::tombstone::{self, is_tombstone, reviving};
use super::{now_ms, LeaseError};
use crate::kinesis::position::Position;

/// Heartbeat rows share the stream's partition, under shard ids no Kinesis shard can have.
const NODE_PREFIX: &str = "__node__";
/// NiFi's own ConsumeKinesis keeps its node rows under `__node__#<uuid>` (with `nodeHeartbeat`, a
/// time): not nodes of ours, never counted for balancing nor removed (our owners never start with
/// `#`).
const NIFI_NODE_PREFIX: &str = "__node__#";

/// What a lease row says Snowflake has of a shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Loaded {
    /// Nothing is known to be loaded since tracking began at the shard's start: a new owner
    /// reads it from TRIM_HORIZON.
    FromTrimHorizon,
    /// Every record up to here is in Snowflake.
    Through(Position),
}

impl Loaded {
    /// The later of two facts.
    pub fn max(self, other: Loaded) -> Loaded {
        match (&self, &other) {
            (Loaded::FromTrimHorizon, _) => other,
            (_, Loaded::FromTrimHorizon) => self,
            (Loaded::Through(a), Loaded::Through(b)) => {
                if crate::kinesis::position::is_after(b, a) {
                    other
                } else {
                    self
                }
            }
        }
    }
}

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
    /// `loadedSequenceNumber` as the row had it when this lease was taken (see `feedback`).
    pub loaded: Option<Loaded>,
}

/// How long a lease of ours stays valid for NiFi's own ConsumeKinesis after our last take or
/// checkpoint of it (NiFi's own lease duration, `KinesisShardManager`'s default): NiFi takes a
/// leased row only once its `leaseExpiry` has passed, so without one it could never take a row a
/// crashed node of ours left. Ours judges its own nodes by their heartbeats, not by this.
pub const LEASE_EXPIRY_FOR_NIFI_MS: i64 = 30_000;

/// Who holds a lease row, as last read: what a take of a dead node's lease is conditional on.
#[derive(Debug, Clone, Eq)]
pub struct Holder {
    pub owner: String,
    /// 0 when the row has no `leaseCounter` (NiFi's own ConsumeKinesis writes none); our takes
    /// start it at 1.
    pub counter: u64,
    /// `leaseExpiry` (ms since the epoch, on the writer's clock): NiFi's ConsumeKinesis holds its
    /// lease until then and renews it every 10 s; ours writes it for NiFi's sake.
    pub lease_expiry: Option<i64>,
}

/// Two reads name the same holder when owner and counter agree: `leaseExpiry` moves on with
/// every checkpoint.
impl PartialEq for Holder {
    fn eq(&self, other: &Self) -> bool {
        self.owner == other.owner && self.counter == other.counter
    }
}

/// One shard's row as read from the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRow {
    pub shard_id: String,
    pub checkpoint: Checkpoint,
    pub holder: Option<Holder>,
    /// Parents recorded when a finished parent wrote this child's row (from ChildShards).
    pub parents: Vec<String>,
    /// Where to start without a checkpoint, as carried over from a KCL lease (TRIM_HORIZON/LATEST).
    pub start: Option<StartHint>,
    /// What Snowflake has of the shard, as the holder last wrote it (see `feedback`).
    pub loaded: Option<Loaded>,
    /// `leaseCounter`, held or not (`None` for a row never taken by ours).
    pub counter: Option<u64>,
}

/// What a take does to the row's loaded position (see `consumer::resume`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadedOnTake {
    Keep,
    /// Marks a row without one [`Loaded::FromTrimHorizon`].
    MarkStart,
    /// Removes it: a tenure that does not track leaves no loaded position behind, so a row has
    /// one exactly while tracking tenures hold it.
    Remove,
}

/// A node's heartbeat row: its counter grows while the node lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeBeat {
    pub owner: String,
    /// The row's name after `__node__`: a slot (see [`super::node_row`]), or the owner itself in a
    /// row written before slots.
    pub row: String,
    pub beat: u64,
}

/// The attribute of a heartbeat slot that names the node beating on it.
const NODE_OWNER: &str = "nodeOwner";

/// Everything of one stream in the table, read in one consistent query.
#[derive(Debug, Clone, Default)]
pub struct TableView {
    pub leases: Vec<LeaseRow>,
    pub nodes: Vec<NodeBeat>,
    /// Shard rows that cannot be understood, left out of `leases`: (shard, what is wrong).
    pub malformed: Vec<(String, String)>,
}

#[derive(Clone)]
pub struct LeaseStore {
    client: Client,
    table: String,
    stream: String,
    writes: Arc<AtomicU64>,
}

type Item = HashMap<String, AttributeValue>;

impl LeaseStore {
    pub fn new(client: Client, table: impl Into<String>, stream: impl Into<String>) -> Self {
        Self { client, table: table.into(), stream: stream.into(), writes: Arc::new(AtomicU64::new(0)) }
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    /// Write requests sent to the table by this store (and its clones) so far.
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    /// Takes the lease if it is free, or still held by `seen` (a holder judged dead) exactly as
    /// read, `leaseExpiry` included (so a lease NiFi renewed meanwhile is not taken); bumps the
    /// counter and sets a `leaseExpiry` for NiFi. With `mark_start`, a row without a loaded
    /// position gets [`Loaded::FromTrimHorizon`] in the same write. The lease returned carries the
    /// row as it was before the take. `Ok(None)` when the row changed meanwhile.
    pub async fn acquire(
        &self,
        shard_id: &str,
        owner: &str,
        seen: Option<&Holder>,
        on_take: LoadedOnTake,
    ) -> Result<Option<Lease>, LeaseError> {
        let mark_start = on_take == LoadedOnTake::MarkStart;
        let set = match on_take {
            LoadedOnTake::MarkStart => {
                "SET leaseOwner = :me, leaseExpiry = :expiry, lastUpdateTimestamp = :now, \
                 loadedSequenceNumber = if_not_exists(loadedSequenceNumber, :fromStart) ADD leaseCounter :one"
            }
            LoadedOnTake::Keep => {
                "SET leaseOwner = :me, leaseExpiry = :expiry, lastUpdateTimestamp = :now ADD leaseCounter :one"
            }
            LoadedOnTake::Remove => {
                "SET leaseOwner = :me, leaseExpiry = :expiry, lastUpdateTimestamp = :now ADD leaseCounter :one \
                 REMOVE loadedSequenceNumber, loadedSubSequenceNumber"
            }
        };
        let mut request = self
            .update(shard_id)
            .update_expression(reviving(set))
            .expression_attribute_values(":me", s(owner))
            .expression_attribute_values(":now", n(now_ms()))
            .expression_attribute_values(":expiry", n(now_ms() + LEASE_EXPIRY_FOR_NIFI_MS))
            .expression_attribute_values(":one", n(1))
            .return_values(ReturnValue::AllOld);
        if mark_start {
            request = request.expression_attribute_values(":fromStart", s(LOADED_FROM_TRIM_HORIZON));
        }
        request = match seen {
            None => request.condition_expression("attribute_not_exists(leaseOwner)"),
            Some(holder) => {
                // A row without a counter (NiFi's ConsumeKinesis) is taken as it was read.
                let counter = if holder.counter == 0 {
                    "(attribute_not_exists(leaseCounter) OR leaseCounter = :counter)"
                } else {
                    "leaseCounter = :counter"
                };
                let expiry = match holder.lease_expiry {
                    Some(_) => "leaseExpiry = :seenExpiry",
                    None => "attribute_not_exists(leaseExpiry)",
                };
                request = request
                    .condition_expression(format!("leaseOwner = :prev AND {counter} AND {expiry}"))
                    .expression_attribute_values(":prev", s(&holder.owner))
                    .expression_attribute_values(":counter", n(holder.counter as i64));
                match holder.lease_expiry {
                    Some(e) => request.expression_attribute_values(":seenExpiry", n(e)),
                    None => request,
                }
            }
        };
        self.count_write();
        match request.send().await {
            Ok(out) => {
                // The row before the take (nothing for a new row or a tombstone).
                let item = out.attributes().filter(|item| !is_tombstone(item)).cloned().unwrap_or_default();
                Ok(Some(Lease {
                    shard_id: shard_id.to_owned(),
                    owner: owner.to_owned(),
                    counter: number(&item, "leaseCounter").unwrap_or(0) + 1,
                    checkpoint: checkpoint_of(shard_id, &item)?,
                    loaded: loaded_of(shard_id, &item)?,
                }))
            }
            Err(e) if is_condition_failure(&e) => Ok(None),
            Err(e) => Err(service_error(&self.table, e)),
        }
    }

    /// Records that everything up to `position` is committed (and, with `shard_end`, that the
    /// shard is finished). Refused with `Fenced` if the lease moved on.
    /// With `loaded`, what Snowflake has of the shard is written in the same request.
    pub async fn checkpoint(
        &self,
        lease: &Lease,
        position: &Position,
        shard_end: bool,
        loaded: Option<&Loaded>,
    ) -> Result<(), LeaseError> {
        let now = now_ms();
        let mut values = vec![
            (":seq", s(&position.sequence_number)),
            (":now", n(now)),
            (":end", AttributeValue::Bool(shard_end)),
            (":expiry", n(now + LEASE_EXPIRY_FOR_NIFI_MS)),
        ];
        let mut set =
            vec!["sequenceNumber = :seq", "lastUpdateTimestamp = :now", "shardEnd = :end", "leaseExpiry = :expiry"];
        let mut remove = Vec::new();
        match position.sub_sequence_number {
            Some(sub) => {
                values.push((":sub", n(sub as i64)));
                set.push("subSequenceNumber = :sub");
            }
            None => remove.push("subSequenceNumber"),
        }
        if let Some(loaded) = loaded {
            loaded_update(loaded, &mut set, &mut remove, &mut values);
        }
        self.fenced_update(lease, &update_expression(&set, &remove), values).await
    }

    /// Writes what Snowflake has of an idle shard (no checkpoint to carry it), renewing the
    /// `leaseExpiry` as a checkpoint does.
    pub async fn write_loaded(&self, lease: &Lease, loaded: &Loaded) -> Result<(), LeaseError> {
        let now = now_ms();
        let mut values = vec![(":now", n(now)), (":expiry", n(now + LEASE_EXPIRY_FOR_NIFI_MS))];
        let mut set = vec!["lastUpdateTimestamp = :now", "leaseExpiry = :expiry"];
        let mut remove = Vec::new();
        loaded_update(loaded, &mut set, &mut remove, &mut values);
        self.fenced_update(lease, &update_expression(&set, &remove), values).await
    }

    /// Marks a shard whose every record is committed as finished and gives its lease up.
    pub async fn mark_shard_end(&self, lease: &Lease) -> Result<(), LeaseError> {
        self.fenced_update(
            lease,
            "SET shardEnd = :end, lastUpdateTimestamp = :now REMOVE leaseOwner, leaseExpiry",
            vec![(":end", AttributeValue::Bool(true)), (":now", n(now_ms()))],
        )
        .await
    }

    /// Gives the lease up so another node can take it at once.
    pub async fn release(&self, lease: &Lease) -> Result<(), LeaseError> {
        self.fenced_update(lease, "REMOVE leaseOwner, leaseExpiry", vec![]).await
    }

    /// Writes the rows of a finished shard's children (from ChildShards) with their parents, so
    /// every node sees them on its next scan without listing the stream. Existing rows keep their
    /// state; only missing parents are filled in.
    pub async fn add_child(&self, child: &str, parents: &[String]) -> Result<(), LeaseError> {
        self.count_write();
        self.update(child)
            .update_expression(reviving("SET parentShardIds = if_not_exists(parentShardIds, :parents)"))
            .expression_attribute_values(":parents", AttributeValue::L(parents.iter().map(|p| s(p)).collect()))
            .send()
            .await
            .map(|_| ())
            .map_err(|e| service_error(&self.table, e))
    }

    /// Before the row of a finished parent is removed: a child without a checkpoint keeps where
    /// it must start (TRIM_HORIZON: its parent was read to the end), which the parent's row told
    /// until now. Creates the child's row if it has none.
    pub async fn keep_child_start(&self, child: &str) -> Result<(), LeaseError> {
        self.count_write();
        let result = self
            .update(child)
            .update_expression(reviving("SET startPosition = if_not_exists(startPosition, :start)"))
            .condition_expression("attribute_not_exists(sequenceNumber)")
            .expression_attribute_values(":start", s(&StartHint::TrimHorizon.text()))
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(e) if is_condition_failure(&e) => Ok(()), // it has a checkpoint now: nothing to keep
            Err(e) => Err(service_error(&self.table, e)),
        }
    }

    /// Pins the LATEST start of `lease`'s shard to `at_ms` (`StartHint::AtTimestamp`), while the
    /// lease is still held and the row has no checkpoint and no other start position (KCL's
    /// `LATEST` sentinel is replaced). Returns false, writing nothing, when that no longer holds.
    pub async fn pin_latest_start(&self, lease: &Lease, at_ms: i64) -> Result<bool, LeaseError> {
        self.count_write();
        let result = self
            .update(&lease.shard_id)
            .update_expression("SET startPosition = :start")
            .condition_expression(
                "leaseOwner = :owner AND leaseCounter = :counter AND attribute_not_exists(sequenceNumber) \
                 AND (attribute_not_exists(startPosition) OR startPosition = :latest)",
            )
            .expression_attribute_values(":start", s(&StartHint::AtTimestamp(at_ms).text()))
            .expression_attribute_values(":latest", s(&StartHint::Latest.text()))
            .expression_attribute_values(":owner", s(&lease.owner))
            .expression_attribute_values(":counter", n(lease.counter as i64))
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(e) if is_condition_failure(&e) => Ok(false),
            Err(e) => Err(service_error(&self.table, e)),
        }
    }

    /// Removes the row of a finished shard (only while it is still marked finished): a tombstone.
    pub async fn remove_finished(&self, shard_id: &str) -> Result<(), LeaseError> {
        self.count_write();
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(tombstone::tombstone(self.key(shard_id), now_ms())))
            .condition_expression("shardEnd = :end")
            .expression_attribute_values(":end", AttributeValue::Bool(true))
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_conditional_check_failed_exception()) => Ok(()),
            Err(e) => Err(service_error(&self.table, e)),
        }
    }

    /// Takes the heartbeat slot `row` for `owner` with a first beat, if no live row holds it (it is
    /// absent or a tombstone). Returns whether it did: another node may take it first.
    pub async fn claim_node_row(&self, row: &str, owner: &str) -> Result<bool, LeaseError> {
        self.count_write();
        let out = self
            .update(&format!("{NODE_PREFIX}{row}"))
            .update_expression(reviving("SET nodeOwner = :owner, lastUpdateTimestamp = :now, heartbeat = :one"))
            .condition_expression(tombstone::ABSENT)
            .expression_attribute_values(":owner", s(owner))
            .expression_attribute_values(":now", n(now_ms()))
            .expression_attribute_values(":one", n(1))
            .send()
            .await;
        match out {
            Ok(_) => Ok(true),
            Err(e) if is_condition_failure(&e) => Ok(false),
            Err(e) => Err(service_error(&self.table, e)),
        }
    }

    /// Bumps `owner`'s heartbeat counter on its slot `row`. Returns false, writing nothing, when the
    /// row is no longer `owner`'s (removed by a peer after a long silence, or taken over since).
    pub async fn heartbeat(&self, row: &str, owner: &str) -> Result<bool, LeaseError> {
        self.count_write();
        let out = self
            .update(&format!("{NODE_PREFIX}{row}"))
            .update_expression("SET lastUpdateTimestamp = :now ADD heartbeat :one")
            .condition_expression("nodeOwner = :owner AND attribute_not_exists(removedAt)")
            .expression_attribute_values(":owner", s(owner))
            .expression_attribute_values(":now", n(now_ms()))
            .expression_attribute_values(":one", n(1))
            .send()
            .await;
        match out {
            Ok(_) => Ok(true),
            Err(e) if is_condition_failure(&e) => Ok(false),
            Err(e) => Err(service_error(&self.table, e)),
        }
    }

    /// Removes a node's heartbeat row (on stop, or a long-dead node's row): a tombstone, which a
    /// later start may take. Only while the row is still `owner`'s and, with `beat`, its counter
    /// still stands there (a row written before slots, named after its owner, has no `nodeOwner`).
    /// A row that has moved on is left alone.
    pub async fn remove_node(&self, row: &str, owner: &str, beat: Option<u64>) -> Result<(), LeaseError> {
        self.count_write();
        let legacy = row == owner;
        let mut condition =
            if legacy { format!("attribute_not_exists({NODE_OWNER})") } else { format!("{NODE_OWNER} = :owner") };
        condition.push_str(" AND attribute_not_exists(removedAt)");
        if beat.is_some() {
            condition.push_str(" AND heartbeat = :beat");
        }
        let values: HashMap<String, AttributeValue> =
            [(!legacy).then(|| (":owner".to_owned(), s(owner))), beat.map(|b| (":beat".to_owned(), n(b as i64)))]
                .into_iter()
                .flatten()
                .collect();
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(tombstone::tombstone(self.key(&format!("{NODE_PREFIX}{row}")), now_ms())))
            .condition_expression(condition)
            .set_expression_attribute_values(Some(values).filter(|v| !v.is_empty()));
        match put.send().await {
            Ok(_) => Ok(()),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_conditional_check_failed_exception()) => Ok(()),
            Err(e) => Err(service_error(&self.table, e)),
        }
    }

    /// Every row of this stream: shard leases and our node heartbeats (NiFi's node rows, other `__`
    /// rows such as NiFi's `__migration__` marker, and tombstones skipped). A shard row that cannot be understood is listed in `malformed`, not read as a lease.
    pub async fn scan(&self) -> Result<TableView, LeaseError> {
        let mut view = TableView::default();
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
            for item in out.items().iter().filter(|item| !is_tombstone(item)) {
                let Some(id) = string(item, RANGE_KEY) else { continue };
                if id.starts_with(NIFI_NODE_PREFIX) {
                    continue;
                }
                if let Some(row) = id.strip_prefix(NODE_PREFIX) {
                    view.nodes.push(NodeBeat {
                        owner: string(item, NODE_OWNER).unwrap_or_else(|| row.to_owned()),
                        row: row.to_owned(),
                        beat: number(item, "heartbeat").unwrap_or(0),
                    });
                } else if !id.starts_with("__") {
                    match lease_row(id.clone(), item) {
                        Ok(row) => view.leases.push(row),
                        Err(LeaseError::Malformed { message, .. }) => view.malformed.push((id, message)),
                        Err(e) => return Err(e),
                    }
                }
            }
            match out.last_evaluated_key() {
                Some(k) if !k.is_empty() => start = Some(k.clone()),
                _ => return Ok(view),
            }
        }
    }

    /// Every shard row of this stream as (shard, checkpoint, owner).
    pub async fn rows(&self) -> Result<Vec<(String, Checkpoint, Option<String>)>, LeaseError> {
        Ok(self
            .scan()
            .await?
            .leases
            .into_iter()
            .map(|r| (r.shard_id, r.checkpoint, r.holder.map(|h| h.owner)))
            .collect())
    }

    async fn fenced_update(
        &self,
        lease: &Lease,
        expression: &str,
        values: Vec<(&str, AttributeValue)>,
    ) -> Result<(), LeaseError> {
        let mut request = self
            .update(&lease.shard_id)
            .update_expression(expression)
            .condition_expression("leaseOwner = :me AND leaseCounter = :counter")
            .expression_attribute_values(":me", s(&lease.owner))
            .expression_attribute_values(":counter", n(lease.counter as i64));
        for (name, value) in values {
            request = request.expression_attribute_values(name, value);
        }
        self.count_write();
        match request.send().await {
            Ok(_) => Ok(()),
            Err(e) if is_condition_failure(&e) => Err(LeaseError::Fenced { shard: lease.shard_id.clone() }),
            Err(e) => Err(service_error(&self.table, e)),
        }
    }

    fn count_write(&self) {
        self.writes.fetch_add(1, Ordering::Relaxed);
    }

    /// An UpdateItem of the row `row` (a shard's, or a node row's) of this stream's rows.
    fn update(&self, row: &str) -> aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder {
        self.client.update_item().table_name(&self.table).set_key(Some(self.key(row)))
    }

    fn key(&self, shard_id: &str) -> Item {
        HashMap::from([(HASH_KEY.to_owned(), s(&self.stream)), (RANGE_KEY.to_owned(), s(shard_id))])
    }
}

fn is_condition_failure<R>(
    e: &aws_sdk_dynamodb::error::SdkError<aws_sdk_dynamodb::operation::update_item::UpdateItemError, R>,
) -> bool {
    e.as_service_error().is_some_and(|s| s.is_conditional_check_failed_exception())
}

fn lease_row(shard_id: String, item: &Item) -> Result<LeaseRow, LeaseError> {
    let lease_expiry = item.get("leaseExpiry").and_then(|v| v.as_n().ok()).and_then(|v| v.parse::<i64>().ok());
    let holder = string(item, "leaseOwner").map(|owner| Holder {
        owner,
        counter: number(item, "leaseCounter").unwrap_or(0),
        lease_expiry,
    });
    let parents = match item.get("parentShardIds") {
        Some(AttributeValue::L(list)) => list.iter().filter_map(|v| v.as_s().ok().cloned()).collect(),
        Some(AttributeValue::Ss(set)) => set.clone(),
        _ => Vec::new(),
    };
    let start = string(item, "startPosition").and_then(|t| StartHint::parse(&t));
    let loaded = loaded_of(&shard_id, item)?;
    let counter = number(item, "leaseCounter");
    Ok(LeaseRow { checkpoint: checkpoint_of(&shard_id, item)?, shard_id, holder, parents, start, loaded, counter })
}

/// `loadedSequenceNumber` (and `loadedSubSequenceNumber`), as `feedback` defines them.
const LOADED_SEQUENCE: &str = "loadedSequenceNumber";
const LOADED_SUB_SEQUENCE: &str = "loadedSubSequenceNumber";
const LOADED_FROM_TRIM_HORIZON: &str = "TRIM_HORIZON";

fn loaded_of(shard: &str, item: &Item) -> Result<Option<Loaded>, LeaseError> {
    match string(item, LOADED_SEQUENCE) {
        None => Ok(None),
        Some(text) if text == LOADED_FROM_TRIM_HORIZON => Ok(Some(Loaded::FromTrimHorizon)),
        Some(seq) if !seq.is_empty() && seq.chars().all(|c| c.is_ascii_digit()) => {
            Ok(Some(Loaded::Through(Position::new(seq, number(item, LOADED_SUB_SEQUENCE)))))
        }
        Some(other) => Err(LeaseError::Malformed {
            shard: shard.to_owned(),
            message: format!("{LOADED_SEQUENCE} '{other}' is not a number"),
        }),
    }
}

fn loaded_update(
    loaded: &Loaded,
    set: &mut Vec<&'static str>,
    remove: &mut Vec<&'static str>,
    values: &mut Vec<(&'static str, AttributeValue)>,
) {
    set.push("loadedSequenceNumber = :loaded");
    match loaded {
        Loaded::FromTrimHorizon => {
            values.push((":loaded", s(LOADED_FROM_TRIM_HORIZON)));
            remove.push(LOADED_SUB_SEQUENCE);
        }
        Loaded::Through(p) => {
            values.push((":loaded", s(&p.sequence_number)));
            match p.sub_sequence_number {
                Some(sub) => {
                    set.push("loadedSubSequenceNumber = :loadedSub");
                    values.push((":loadedSub", n(sub as i64)));
                }
                None => remove.push(LOADED_SUB_SEQUENCE),
            }
        }
    }
}

fn update_expression(set: &[&str], remove: &[&str]) -> String {
    let mut expression = format!("SET {}", set.join(", "));
    if !remove.is_empty() {
        expression.push_str(&format!(" REMOVE {}", remove.join(", ")));
    }
    expression
}

fn checkpoint_of(shard: &str, item: &Item) -> Result<Checkpoint, LeaseError> {
    let position = match string(item, "sequenceNumber") {
        None => None,
        Some(seq) if seq.chars().all(|c| c.is_ascii_digit()) && !seq.is_empty() => {
            Some(Position::new(seq, number(item, "subSequenceNumber")))
        }
        Some(other) => {
            return Err(LeaseError::Malformed {
                shard: shard.to_owned(),
                message: format!("sequenceNumber '{other}' is not a number"),
            })
        }
    };
    let ended = matches!(item.get("shardEnd"), Some(AttributeValue::Bool(true)));
    Ok(match (ended, position) {
        (true, p) => Checkpoint::ShardEnd(p),
        (false, Some(p)) => Checkpoint::At(p),
        (false, None) => Checkpoint::None,
    })
}

fn string(item: &Item, name: &str) -> Option<String> {
    item.get(name).and_then(|v| v.as_s().ok()).cloned()
}

fn number(item: &Item, name: &str) -> Option<u64> {
    item.get(name).and_then(|v| v.as_n().ok()).and_then(|v| v.parse().ok())
}

/// How the store reads a shard's row (the fuzz targets check that migrated rows read back as they
/// were written); not part of the product's API.
#[cfg(feature = "test-support")]
pub fn read_lease_row(shard_id: String, item: &Item) -> Result<LeaseRow, LeaseError> {
    lease_row(shard_id, item)
}
