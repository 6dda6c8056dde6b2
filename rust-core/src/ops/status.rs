//! `status`: one row per shard of a stream and Application Name (owner, lease counter, checkpoint,
//! loaded position, lag to the tip), and what the lease table holds besides (our nodes' heartbeat
//! rows, NiFi's node rows, tombstones, other rows). Reads: one Query of the lease table through
//! [`LeaseStore::scan`], one raw Query for the rows `scan` leaves out, ListShards, and, with lag
//! asked for, one GetShardIterator and one GetRecords (limit 1) per open shard.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_kinesis::types::ShardIteratorType;
use serde::Serialize;

use super::{OpsError, Stream};
use crate::kinesis::address::ForStream;
use crate::kinesis::position::Position;
use crate::kinesis::shards::{list_shards, ShardInfo};
use crate::lease::table::{service_error, HASH_KEY, RANGE_KEY};
use crate::lease::tombstone::REMOVED_AT;
use crate::lease::{Checkpoint, LeaseRow, LeaseStore, Loaded, TableView};

/// Where a shard stands in the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ShardState {
    Open,
    Closed,
    /// The lease table has a row, ListShards no longer lists the shard (past retention).
    NotInStream,
}

/// One shard as `status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShardStatus {
    pub shard_id: String,
    pub state: ShardState,
    pub parents: Vec<String>,
    /// `leaseOwner`; `None`: nobody holds the lease (or the shard has no row).
    pub owner: Option<String>,
    /// The heartbeat row the owner beats on, when it is a node of ours that is running.
    pub owner_node_row: Option<String>,
    /// `leaseCounter` (fencing token; `None` for a row no node of ours took).
    pub lease_counter: Option<u64>,
    /// `none`, `<sequence>[/<sub>]`, or `SHARD_END[ <sequence>]`.
    pub checkpoint: String,
    /// What Snowflake has of the shard as the lease row says (Failover Position `SNOWFLAKE_COMMIT`):
    /// `None` when the row does not track it.
    pub loaded: Option<String>,
    /// MillisBehindLatest one record after the checkpoint; `None` when not asked, not applicable
    /// (a finished shard) or not known.
    pub millis_behind_latest: Option<i64>,
    /// Whether the shard has a row in the lease table.
    pub has_row: bool,
}

/// A removed row (see `lease::tombstone`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Tombstone {
    pub shard_id: String,
    pub removed_at_ms: i64,
}

/// A heartbeat row of one of our nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeRow {
    pub row: String,
    pub owner: String,
    pub heartbeat: u64,
    /// Leases this node holds.
    pub leases: usize,
}

/// The rows `LeaseStore::scan` leaves out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct OtherRows {
    pub tombstones: Vec<Tombstone>,
    /// NiFi's own ConsumeKinesis' node rows (`__node__#<uuid>`).
    pub nifi_nodes: Vec<String>,
    /// Other `__` rows (NiFi's `__migration__` marker, our migration lock).
    pub markers: Vec<String>,
}

/// Everything `status` reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StatusReport {
    pub stream: String,
    /// The stream's ARN, when the stream was named by it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_arn: Option<String>,
    pub application: String,
    pub shards: Vec<ShardStatus>,
    pub nodes: Vec<NodeRow>,
    #[serde(flatten)]
    pub other: OtherRows,
    /// Shard rows that cannot be read: (shard, what is wrong).
    pub malformed: Vec<(String, String)>,
}

/// Where a command finds the stream and its lease table.
pub struct Target<'a> {
    pub kinesis: &'a aws_sdk_kinesis::Client,
    pub dynamodb: &'a aws_sdk_dynamodb::Client,
    pub stream: &'a Stream,
    /// The Application Name: the lease table's name.
    pub application: &'a str,
}

/// Reads the lease table and the stream; with `lag`, asks Kinesis how far each open shard's
/// checkpoint is behind the tip.
pub async fn read(target: &Target<'_>, lag: bool) -> Result<StatusReport, OpsError> {
    let name = target.stream.name.as_str();
    let store = LeaseStore::new(target.dynamodb.clone(), target.application, name);
    let view = store.scan().await?;
    let other = other_rows(target.dynamodb, target.application, name).await?;
    let shards = list_shards(target.kinesis, target.stream.reference()).await?;
    let mut report = assemble(name, target.application, &shards, view, other);
    report.stream_arn = target.stream.arn.as_ref().map(ToString::to_string);
    if lag {
        for shard in report.shards.iter_mut().filter(|s| s.state == ShardState::Open) {
            shard.millis_behind_latest = millis_behind(target, shard).await?;
        }
    }
    Ok(report)
}

/// The report of what was read: every shard ListShards lists or the table has a row for, in
/// shard order; every node with the leases it holds.
pub fn assemble(
    stream: &str,
    application: &str,
    shards: &[ShardInfo],
    view: TableView,
    other: OtherRows,
) -> StatusReport {
    let rows: BTreeMap<&str, &LeaseRow> = view.leases.iter().map(|r| (r.shard_id.as_str(), r)).collect();
    let listed: BTreeMap<&str, &ShardInfo> = shards.iter().map(|s| (s.shard_id.as_str(), s)).collect();
    let ids: BTreeSet<&str> = rows.keys().chain(listed.keys()).copied().collect();
    let node_of: BTreeMap<&str, &str> = view.nodes.iter().map(|n| (n.owner.as_str(), n.row.as_str())).collect();
    let shard_rows = ids
        .into_iter()
        .map(|id| {
            let row = rows.get(id).copied();
            let info = listed.get(id).copied();
            let owner = row.and_then(|r| r.holder.as_ref()).map(|h| h.owner.clone());
            ShardStatus {
                shard_id: id.to_owned(),
                state: match info {
                    Some(i) if i.closed => ShardState::Closed,
                    Some(_) => ShardState::Open,
                    None => ShardState::NotInStream,
                },
                parents: info
                    .map(|i| i.parent_shard_ids.clone())
                    .or_else(|| row.map(|r| r.parents.clone()))
                    .unwrap_or_default(),
                owner_node_row: owner.as_deref().and_then(|o| node_of.get(o)).map(|r| (*r).to_owned()),
                owner,
                lease_counter: row.and_then(|r| r.counter),
                checkpoint: row.map_or_else(|| "none".to_owned(), |r| checkpoint_text(&r.checkpoint)),
                loaded: row.and_then(|r| r.loaded.as_ref()).map(loaded_text),
                millis_behind_latest: None,
                has_row: row.is_some(),
            }
        })
        .collect::<Vec<_>>();
    let nodes = view
        .nodes
        .iter()
        .map(|n| NodeRow {
            row: n.row.clone(),
            owner: n.owner.clone(),
            heartbeat: n.beat,
            leases: shard_rows.iter().filter(|s| s.owner.as_deref() == Some(n.owner.as_str())).count(),
        })
        .collect();
    StatusReport {
        stream: stream.to_owned(),
        stream_arn: None,
        application: application.to_owned(),
        shards: shard_rows,
        nodes,
        other,
        malformed: view.malformed,
    }
}

fn position_text(p: &Position) -> String {
    match p.sub_sequence_number {
        Some(sub) => format!("{}/{sub}", p.sequence_number),
        None => p.sequence_number.clone(),
    }
}

/// A checkpoint as `status` prints it.
pub fn checkpoint_text(checkpoint: &Checkpoint) -> String {
    match checkpoint {
        Checkpoint::None => "none".into(),
        Checkpoint::At(p) => position_text(p),
        Checkpoint::ShardEnd(None) => "SHARD_END".into(),
        Checkpoint::ShardEnd(Some(p)) => format!("SHARD_END {}", position_text(p)),
    }
}

/// A loaded position as `status` prints it.
pub fn loaded_text(loaded: &Loaded) -> String {
    match loaded {
        Loaded::FromTrimHorizon => "TRIM_HORIZON (nothing loaded yet)".into(),
        Loaded::Through(p) => position_text(p),
    }
}

/// The rows `scan` leaves out: tombstones, NiFi's node rows and markers, read raw.
async fn other_rows(client: &aws_sdk_dynamodb::Client, table: &str, stream: &str) -> Result<OtherRows, OpsError> {
    let mut other = OtherRows::default();
    let mut start = None;
    loop {
        let out = client
            .query()
            .table_name(table)
            .consistent_read(true)
            .key_condition_expression("#k = :s")
            .expression_attribute_names("#k", HASH_KEY)
            .expression_attribute_values(":s", AttributeValue::S(stream.to_owned()))
            .set_exclusive_start_key(start.take())
            .send()
            .await
            .map_err(|e| service_error(table, e))?;
        for item in out.items() {
            let Some(AttributeValue::S(id)) = item.get(RANGE_KEY) else { continue };
            classify(&mut other, id, item.get(REMOVED_AT).and_then(|v| v.as_n().ok()).and_then(|n| n.parse().ok()));
        }
        match out.last_evaluated_key() {
            Some(k) if !k.is_empty() => start = Some(k.clone()),
            _ => return Ok(other),
        }
    }
}

/// Files one raw row (`removed_at`: its tombstone mark) where it belongs, if `scan` leaves it out.
pub fn classify(other: &mut OtherRows, id: &str, removed_at: Option<i64>) {
    if let Some(at) = removed_at {
        other.tombstones.push(Tombstone { shard_id: id.to_owned(), removed_at_ms: at });
    } else if id.starts_with("__node__#") {
        other.nifi_nodes.push(id.to_owned());
    } else if id.starts_with("__") && !id.starts_with("__node__") {
        other.markers.push(id.to_owned());
    }
}

/// MillisBehindLatest of one GetRecords (limit 1) after the shard's checkpoint (from TRIM_HORIZON
/// without one); `None` for a finished shard.
async fn millis_behind(target: &Target<'_>, shard: &ShardStatus) -> Result<Option<i64>, OpsError> {
    let stream = target.stream.reference();
    let request = target.kinesis.get_shard_iterator().for_stream(stream).shard_id(&shard.shard_id);
    let request = match shard.checkpoint.as_str() {
        "none" => request.shard_iterator_type(ShardIteratorType::TrimHorizon),
        c if c.starts_with("SHARD_END") => return Ok(None),
        c => {
            let sequence = c.split('/').next().unwrap_or(c);
            request.shard_iterator_type(ShardIteratorType::AfterSequenceNumber).starting_sequence_number(sequence)
        }
    };
    let kinesis_error = |e: &(dyn std::error::Error + 'static), code: Option<&str>| {
        crate::kinesis::KinesisError::from_sdk(
            stream.as_str(),
            Some(&shard.shard_id),
            crate::kinesis::sdk_error_text(e),
            code.map(str::to_owned),
        )
    };
    let iterator = match request.send().await {
        Ok(out) => out.shard_iterator().map(str::to_owned),
        Err(e) => return Err(kinesis_error(&e, e.as_service_error().and_then(|s| s.meta().code())).into()),
    };
    let Some(iterator) = iterator else { return Ok(None) };
    match target.kinesis.get_records().shard_iterator(iterator).limit(1).for_stream(stream).send().await {
        Ok(out) => Ok(out.millis_behind_latest()),
        Err(e) => Err(kinesis_error(&e, e.as_service_error().and_then(|s| s.meta().code())).into()),
    }
}

/// ` (<arn>)` after the stream's name when it was named by its ARN.
pub fn arn_note(arn: &Option<String>) -> String {
    arn.as_ref().map_or_else(String::new, |a| format!(" ({a})"))
}

/// The report as a text table, shards first, then what else the table holds.
pub fn render(report: &StatusReport) -> String {
    let mut out =
        format!("STREAM {}{}  APPLICATION {}\n\n", report.stream, arn_note(&report.stream_arn), report.application);
    let header = ["SHARD", "STATE", "OWNER", "NODE ROW", "COUNTER", "CHECKPOINT", "LOADED", "LAG (ms)"];
    let rows: Vec<[String; 8]> = report
        .shards
        .iter()
        .map(|s| {
            [
                s.shard_id.clone(),
                match (s.state, s.has_row) {
                    (ShardState::Open, _) => "open",
                    (ShardState::Closed, _) => "closed",
                    (ShardState::NotInStream, _) => "not in stream",
                }
                .to_owned(),
                s.owner.clone().unwrap_or_else(|| "-".into()),
                s.owner_node_row.clone().unwrap_or_else(|| "-".into()),
                s.lease_counter.map_or_else(|| "-".into(), |c| c.to_string()),
                if s.has_row { s.checkpoint.clone() } else { "(no row)".into() },
                s.loaded.clone().unwrap_or_else(|| "-".into()),
                s.millis_behind_latest.map_or_else(|| "-".into(), |m| m.to_string()),
            ]
        })
        .collect();
    out.push_str(&columns(&header, &rows));
    out.push_str("\nNODES (heartbeat rows)\n");
    let nodes: Vec<[String; 4]> = report
        .nodes
        .iter()
        .map(|n| [n.row.clone(), n.owner.clone(), n.heartbeat.to_string(), n.leases.to_string()])
        .collect();
    out.push_str(&columns(&["ROW", "OWNER", "HEARTBEAT", "LEASES"], &nodes));
    let o = &report.other;
    out.push_str(&format!("\nTOMBSTONES {}", o.tombstones.len()));
    for t in &o.tombstones {
        out.push_str(&format!("\n  {} removed at {} ms", t.shard_id, t.removed_at_ms));
    }
    out.push_str(&format!("\nNIFI NODE ROWS {}", o.nifi_nodes.len()));
    for n in &o.nifi_nodes {
        out.push_str(&format!("\n  {n}"));
    }
    out.push_str(&format!("\nOTHER ROWS {}", o.markers.len()));
    for m in &o.markers {
        out.push_str(&format!("\n  {m}"));
    }
    for (shard, why) in &report.malformed {
        out.push_str(&format!("\nMALFORMED {shard}: {why}"));
    }
    out.push('\n');
    out
}

/// Left-aligned columns two spaces apart.
fn columns<const N: usize>(header: &[&str; N], rows: &[[String; N]]) -> String {
    let mut widths = header.map(str::len);
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let text: Vec<String> = cells.iter().zip(widths).map(|(c, w)| format!("{c:<w$}")).collect();
        format!("{}\n", text.join("  ").trim_end())
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::{Holder, NodeBeat};

    fn row(shard: &str, owner: Option<&str>, counter: Option<u64>, checkpoint: Checkpoint) -> LeaseRow {
        LeaseRow {
            shard_id: shard.into(),
            checkpoint,
            holder: owner.map(|o| Holder { owner: o.into(), counter: counter.unwrap_or(0), lease_expiry: None }),
            parents: vec![],
            start: None,
            loaded: None,
            counter,
        }
    }

    fn shard(id: &str, closed: bool) -> ShardInfo {
        ShardInfo { shard_id: id.into(), parent_shard_ids: vec![], closed }
    }

    #[test]
    fn every_listed_shard_and_every_row_gets_one_line() {
        let mut held = row("shardId-1", Some("node-a"), Some(3), Checkpoint::At(Position::new("4960", Some(2))));
        held.loaded = Some(Loaded::Through(Position::new("4959", None)));
        let view = TableView {
            leases: vec![held, row("shardId-9", None, Some(1), Checkpoint::ShardEnd(None))],
            nodes: vec![NodeBeat { owner: "node-a".into(), row: "slot0".into(), beat: 12 }],
            malformed: vec![],
        };
        let report =
            assemble("s", "app", &[shard("shardId-1", false), shard("shardId-2", true)], view, OtherRows::default());
        let ids: Vec<&str> = report.shards.iter().map(|s| s.shard_id.as_str()).collect();
        assert_eq!(ids, ["shardId-1", "shardId-2", "shardId-9"]);
        let first = &report.shards[0];
        assert_eq!(
            (first.owner.as_deref(), first.owner_node_row.as_deref(), first.lease_counter, first.checkpoint.as_str()),
            (Some("node-a"), Some("slot0"), Some(3), "4960/2")
        );
        assert_eq!(first.loaded.as_deref(), Some("4959"));
        assert_eq!((report.shards[1].state, report.shards[1].has_row), (ShardState::Closed, false));
        assert_eq!(
            (report.shards[2].state, report.shards[2].checkpoint.as_str()),
            (ShardState::NotInStream, "SHARD_END")
        );
        assert_eq!(report.nodes[0].leases, 1);
        let text = render(&report);
        assert!(text.contains("shardId-1") && text.contains("(no row)") && text.contains("slot0"), "{text}");
    }

    #[test]
    fn raw_rows_are_filed_by_kind() {
        let mut other = OtherRows::default();
        classify(&mut other, "shardId-3", Some(42));
        classify(&mut other, "__node__#0a1b", None);
        classify(&mut other, "__migration__", None);
        classify(&mut other, "__node__slot0", None);
        classify(&mut other, "shardId-4", None);
        assert_eq!(other.tombstones, [Tombstone { shard_id: "shardId-3".into(), removed_at_ms: 42 }]);
        assert_eq!(
            (other.nifi_nodes.as_slice(), other.markers.as_slice()),
            (&["__node__#0a1b".to_owned()][..], &["__migration__".to_owned()][..])
        );
    }
}
