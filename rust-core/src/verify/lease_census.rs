//! Whose is the lease table named after the Application Name? A pure reading of what
//! DescribeTable and a Query of the stream's rows returned: absent, this processor's, NiFi's own
//! ConsumeKinesis's (same key; shard rows with `leaseOwner`/`leaseExpiry` and no `leaseCounter`,
//! node rows `__node__#<uuid>` with `nodeHeartbeat`, a `__migration__` marker), a KCL table that the
//! first start migrates (key `leaseKey`, as `lease::migration` recognises it), or a foreign one
//! that the start refuses.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use super::Step;
use crate::lease::tombstone::is_tombstone;

pub type Item = HashMap<String, AttributeValue>;

/// The step's name.
pub const STEP: &str = "Lease Table";

/// A table's key schema and status, as DescribeTable told it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableShape {
    Absent,
    /// Not ACTIVE (being created, updated or deleted): its status.
    Busy(String),
    /// `streamName` (HASH) + `shardId` (RANGE): this processor's key, and NiFi's ConsumeKinesis's.
    StreamAndShard,
    /// `leaseKey` (HASH): a KCL lease table.
    Kcl,
    /// Any other key schema, as text.
    Foreign(String),
}

/// Node rows of NiFi's ConsumeKinesis start with this (ours are `__node__<owner>`).
pub const NIFI_NODE_PREFIX: &str = "__node__#";
const OUR_NODE_PREFIX: &str = "__node__";
const NIFI_MIGRATION_MARKER: &str = "__migration__";

/// What the stream's rows say about who wrote them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Census {
    /// Shard rows with a `leaseCounter` (only this processor writes one).
    pub ours_shards: usize,
    /// Shard rows with a `leaseExpiry` and no `leaseCounter` (NiFi's ConsumeKinesis).
    pub nifi_shards: usize,
    /// Of those, leases whose expiry is still ahead: NiFi's processor may still be running.
    pub nifi_live_leases: usize,
    /// Shard rows with neither (free rows either side writes, or rows migrated from KCL).
    pub free_shards: usize,
    /// Shard rows holding a checkpoint (`sequenceNumber` or `shardEnd`).
    pub checkpoints: usize,
    pub ours_nodes: usize,
    pub nifi_nodes: usize,
    /// NiFi's `__migration__` marker row.
    pub nifi_marker: bool,
}

impl Census {
    /// Counts `items` (the stream's rows), `now_ms` deciding which of NiFi's leases are live.
    pub fn of(items: &[Item], now_ms: i64) -> Self {
        let mut c = Self::default();
        for item in items.iter().filter(|i| !is_tombstone(i)) {
            let Some(id) = text(item, "shardId") else { continue };
            if id.starts_with(NIFI_NODE_PREFIX) {
                c.nifi_nodes += 1;
            } else if id.starts_with(OUR_NODE_PREFIX) {
                c.ours_nodes += 1;
            } else if id == NIFI_MIGRATION_MARKER {
                c.nifi_marker = true;
            } else if !id.starts_with("__") {
                c.count_shard(item, now_ms);
            }
        }
        c
    }

    fn count_shard(&mut self, item: &Item, now_ms: i64) {
        if item.contains_key("sequenceNumber") || matches!(item.get("shardEnd"), Some(AttributeValue::Bool(true))) {
            self.checkpoints += 1;
        }
        if item.contains_key("leaseCounter") {
            self.ours_shards += 1;
        } else if let Some(expiry) = item.get("leaseExpiry") {
            self.nifi_shards += 1;
            let live = expiry.as_n().ok().and_then(|n| n.parse::<i64>().ok()).is_some_and(|at| at > now_ms);
            if live && item.contains_key("leaseOwner") {
                self.nifi_live_leases += 1;
            }
        } else {
            self.free_shards += 1;
        }
    }

    fn shards(&self) -> usize {
        self.ours_shards + self.nifi_shards + self.free_shards
    }

    fn nifi_wrote(&self) -> bool {
        self.nifi_shards > 0 || self.nifi_nodes > 0 || self.nifi_marker
    }

    fn ours_wrote(&self) -> bool {
        self.ours_shards > 0 || self.ours_nodes > 0
    }
}

/// What the probes of the lease table found. `rows` is None when the table was not queried
/// (absent, busy, KCL or foreign) or the query failed (its error).
#[derive(Debug, Clone)]
pub struct LeaseFacts {
    pub table: String,
    pub main: Result<TableShape, String>,
    /// `<app>_migration`: present while a KCL migration is under way or was interrupted.
    pub copy: Result<TableShape, String>,
    pub rows: Option<Result<Vec<Item>, String>>,
    /// Items of a KCL table (a Scan with Select COUNT), when it is one.
    pub kcl_leases: Option<Result<usize, String>>,
    pub now_ms: i64,
}

/// The lease table step.
pub fn step(facts: &LeaseFacts, stream: &str) -> Step {
    let table = &facts.table;
    let main = match &facts.main {
        Ok(shape) => shape,
        Err(e) => return Step::failed(STEP, format!("DescribeTable of '{table}' failed: {e}")),
    };
    let interrupted = matches!(facts.copy, Ok(TableShape::StreamAndShard | TableShape::Busy(_)));
    let migration_note = if interrupted {
        format!(" '{table}_migration' exists: a KCL migration was started; the first start completes it.")
    } else {
        String::new()
    };
    match main {
        TableShape::Absent if interrupted => Step::successful(STEP, format!("'{table}' is absent.{migration_note}")),
        TableShape::Absent => Step::successful(
            STEP,
            format!("'{table}' is absent: the first start creates it (CreateTable) and reads from the Initial Stream Position."),
        ),
        TableShape::Busy(status) => Step::successful(STEP, format!("'{table}' is {status}: the start waits until it is ACTIVE.{migration_note}")),
        TableShape::Foreign(keys) => Step::failed(
            STEP,
            format!(
                "'{table}' has key schema {keys}: neither this processor's nor NiFi's ConsumeKinesis's (streamName + shardId) \
                 nor a KCL lease table's (leaseKey). The start refuses it; choose another Application Name."
            ),
        ),
        TableShape::Kcl => {
            let leases = match &facts.kcl_leases {
                Some(Ok(n)) => format!(" with {n} lease(s)"),
                Some(Err(e)) => format!(" (its leases could not be counted: {e})"),
                None => String::new(),
            };
            Step::successful(
                STEP,
                format!(
                    "'{table}' is a KCL lease table{leases} (NiFi's ConsumeKinesisStream or a KCL application): the first start \
                     migrates its checkpoints into a table of this processor's schema (through '{table}_migration', then \
                     DeleteTable and CreateTable of '{table}').{migration_note}"
                ),
            )
        }
        TableShape::StreamAndShard => match &facts.rows {
            Some(Ok(items)) => owned_step(table, stream, &Census::of(items, facts.now_ms), &migration_note),
            Some(Err(e)) => Step::failed(STEP, format!("'{table}' could not be read (Query of stream '{stream}'): {e}")),
            None => Step::failed(STEP, format!("'{table}' was not read")),
        },
    }
}

fn owned_step(table: &str, stream: &str, c: &Census, migration_note: &str) -> Step {
    let writer = match (c.ours_wrote(), c.nifi_wrote()) {
        (_, _) if c.shards() == 0 && c.ours_nodes == 0 && c.nifi_nodes == 0 && !c.nifi_marker => {
            return Step::successful(
                STEP,
                format!("'{table}' has no rows for stream '{stream}': reading starts at the Initial Stream Position.{migration_note}"),
            )
        }
        (true, false) => "this processor's".to_owned(),
        (false, true) => "NiFi's own ConsumeKinesis's".to_owned(),
        (true, true) => "written by both this processor and NiFi's own ConsumeKinesis".to_owned(),
        (false, false) => "this processor's or NiFi's ConsumeKinesis's (no owner recorded)".to_owned(),
    };
    let mut text = format!(
        "'{table}' is {writer}: {} shard row(s) of stream '{stream}', {} with a checkpoint, where reading resumes",
        c.shards(),
        c.checkpoints
    );
    if c.ours_nodes > 0 {
        text.push_str(&format!("; {} node heartbeat row(s) of this processor", c.ours_nodes));
    }
    if c.nifi_wrote() {
        text.push_str(&format!(
            "; NiFi's ConsumeKinesis wrote {} shard row(s) and {} node row(s) (its node rows are ignored)",
            c.nifi_shards, c.nifi_nodes
        ));
    }
    text.push('.');
    if c.nifi_live_leases > 0 {
        text.push_str(&format!(
            " Warning: {} of NiFi's leases have not expired yet, so NiFi's ConsumeKinesis may still be running: stop it first; \
             its shards are taken once their leases expire.",
            c.nifi_live_leases
        ));
    }
    text.push_str(migration_note);
    Step::successful(STEP, text)
}

fn text(item: &Item, name: &str) -> Option<String> {
    item.get(name).and_then(|v| v.as_s().ok()).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::table::{n, s};
    use crate::verify::Outcome;

    fn item(pairs: &[(&str, AttributeValue)]) -> Item {
        let mut i: Item = pairs.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect();
        i.insert("streamName".into(), s("orders"));
        i
    }

    /// Rows as NiFi's ConsumeKinesis (KinesisShardManager) writes them: a live and an expired
    /// lease with checkpoints, a released shard, a node row and the migration marker.
    fn nifi_rows(now: i64) -> Vec<Item> {
        vec![
            item(&[
                ("shardId", s("shardId-000000000000")),
                ("leaseOwner", s("node-a")),
                ("leaseExpiry", n(now + 20_000)),
                ("sequenceNumber", s("4960")),
                ("lastUpdateTimestamp", n(now)),
            ]),
            item(&[
                ("shardId", s("shardId-000000000001")),
                ("leaseOwner", s("node-b")),
                ("leaseExpiry", n(now - 60_000)),
                ("sequenceNumber", s("4961")),
            ]),
            item(&[
                ("shardId", s("shardId-000000000002")),
                ("sequenceNumber", s("4962")),
                ("lastUpdateTimestamp", n(now)),
            ]),
            item(&[("shardId", s("__node__#5b0c7a52-0d7e-4d0c-9a55-0d7a5b0c7a52")), ("nodeHeartbeat", n(now))]),
            item(&[("shardId", s("__migration__")), ("migrationStatus", s("COMPLETE"))]),
        ]
    }

    fn our_rows() -> Vec<Item> {
        vec![
            item(&[
                ("shardId", s("shardId-000000000000")),
                ("leaseOwner", s("k1")),
                ("leaseCounter", n(3)),
                ("sequenceNumber", s("49")),
                ("subSequenceNumber", n(0)),
            ]),
            item(&[
                ("shardId", s("shardId-000000000001")),
                ("leaseCounter", n(1)),
                ("shardEnd", AttributeValue::Bool(true)),
            ]),
            item(&[("shardId", s("__node__k1")), ("heartbeat", n(12))]),
            item(&[("shardId", s("__node__gone")), ("removedAt", n(1))]),
        ]
    }

    fn facts(main: TableShape, rows: Option<Vec<Item>>, now: i64) -> LeaseFacts {
        LeaseFacts {
            table: "app".into(),
            main: Ok(main),
            copy: Ok(TableShape::Absent),
            rows: rows.map(Ok),
            kcl_leases: None,
            now_ms: now,
        }
    }

    #[test]
    fn nifis_rows_are_told_from_ours() {
        let now = 1_800_000_000_000;
        let c = Census::of(&nifi_rows(now), now);
        assert_eq!(
            (c.nifi_shards, c.nifi_live_leases, c.free_shards, c.checkpoints, c.nifi_nodes, c.ours_nodes),
            (2, 1, 1, 3, 1, 0)
        );
        assert!(c.nifi_marker && !c.ours_wrote());
        let ours = Census::of(&our_rows(), now);
        assert_eq!(
            (ours.ours_shards, ours.ours_nodes, ours.checkpoints, ours.nifi_nodes),
            (2, 1, 2, 0),
            "a tombstone is no row"
        );
        assert!(!ours.nifi_wrote());
    }

    #[test]
    fn a_table_nifi_wrote_resumes_and_warns_of_live_leases() {
        let now = 1_800_000_000_000;
        let step = step(&facts(TableShape::StreamAndShard, Some(nifi_rows(now)), now), "orders");
        assert_eq!(step.outcome, Outcome::Successful);
        assert!(step.explanation.contains("NiFi's own ConsumeKinesis"), "{}", step.explanation);
        assert!(
            step.explanation.contains("3 shard row(s)") && step.explanation.contains("3 with a checkpoint"),
            "{}",
            step.explanation
        );
        assert!(step.explanation.contains("Warning: 1 of NiFi's leases"), "{}", step.explanation);
        let later = step_at(now + 30_000);
        assert!(!later.contains("Warning"), "expired leases give no warning: {later}");
    }

    fn step_at(now: i64) -> String {
        step(&facts(TableShape::StreamAndShard, Some(nifi_rows(now - 30_000)), now), "orders").explanation
    }

    #[test]
    fn our_own_mixed_and_empty_tables() {
        let ours = step(&facts(TableShape::StreamAndShard, Some(our_rows()), 0), "orders");
        assert!(ours.explanation.contains("this processor's:"), "{}", ours.explanation);
        let mut both = our_rows();
        both.extend(nifi_rows(0));
        let mixed = step(&facts(TableShape::StreamAndShard, Some(both), 0), "orders");
        assert!(mixed.explanation.contains("both"), "{}", mixed.explanation);
        let empty = step(&facts(TableShape::StreamAndShard, Some(vec![]), 0), "orders");
        assert_eq!(empty.outcome, Outcome::Successful);
        assert!(empty.explanation.contains("no rows"), "{}", empty.explanation);
    }

    #[test]
    fn absent_kcl_busy_and_foreign_tables() {
        let absent = step(&facts(TableShape::Absent, None, 0), "orders");
        assert!(absent.outcome == Outcome::Successful && absent.explanation.contains("CreateTable"));
        let mut kcl = facts(TableShape::Kcl, None, 0);
        kcl.kcl_leases = Some(Ok(4));
        let kcl = step(&kcl, "orders");
        assert!(
            kcl.outcome == Outcome::Successful && kcl.explanation.contains("KCL lease table with 4 lease(s)"),
            "{}",
            kcl.explanation
        );
        let busy = step(&facts(TableShape::Busy("CREATING".into()), None, 0), "orders");
        assert!(busy.explanation.contains("CREATING"));
        let foreign = step(&facts(TableShape::Foreign("[id HASH]".into()), None, 0), "orders");
        assert_eq!(foreign.outcome, Outcome::Failed);
        assert!(foreign.explanation.contains("another Application Name"));
    }

    #[test]
    fn an_interrupted_migration_and_failed_probes_are_reported() {
        let mut f = facts(TableShape::Absent, None, 0);
        f.copy = Ok(TableShape::StreamAndShard);
        assert!(step(&f, "orders").explanation.contains("app_migration' exists"));
        f.main = Err("AccessDeniedException: not authorized to perform dynamodb:DescribeTable".into());
        let denied = step(&f, "orders");
        assert_eq!(denied.outcome, Outcome::Failed);
        assert!(denied.explanation.contains("dynamodb:DescribeTable"));
        let mut unread = facts(TableShape::StreamAndShard, None, 0);
        unread.rows = Some(Err("AccessDeniedException: dynamodb:Query".into()));
        assert_eq!(step(&unread, "orders").outcome, Outcome::Failed);
    }
}
