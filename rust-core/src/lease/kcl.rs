//! Reads the lease items of a legacy KCL table (KCL 1.x-3.x, as written by NiFi's
//! ConsumeKinesisStream or the earlier KCL-based connector) and turns them into rows of our own
//! table: checkpoints exact to the KPL sub-record, SHARD_END as our shard-end marker, parent shard
//! ids, and KCL's TRIM_HORIZON/LATEST sentinels kept as the shard's start position.

use std::collections::{BTreeMap, HashMap, HashSet};

use aws_sdk_dynamodb::types::AttributeValue;

use super::now_ms;
use super::table::{HASH_KEY, RANGE_KEY};

/// KCL's key attribute: a shard id, or `account:stream:creationEpoch:shardId` in multi-stream mode.
pub const KCL_KEY: &str = "leaseKey";

pub type Item = HashMap<String, AttributeValue>;

/// Where a shard without a checkpoint starts, as its row's `startPosition` says: KCL's sentinel
/// checkpoints, a child read from its start, or the time the first LATEST read was pinned to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartHint {
    TrimHorizon,
    Latest,
    /// `AT_TIMESTAMP:<ms since the epoch>`: the first owner's LATEST, kept so that every later
    /// owner without a checkpoint starts where it did (see `consumer::keeper`).
    AtTimestamp(i64),
}

const AT_TIMESTAMP_PREFIX: &str = "AT_TIMESTAMP:";

impl StartHint {
    pub fn text(self) -> String {
        match self {
            Self::TrimHorizon => "TRIM_HORIZON".to_owned(),
            Self::Latest => "LATEST".to_owned(),
            Self::AtTimestamp(ms) => format!("{AT_TIMESTAMP_PREFIX}{ms}"),
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "TRIM_HORIZON" => Some(Self::TrimHorizon),
            "LATEST" => Some(Self::Latest),
            _ => text.strip_prefix(AT_TIMESTAMP_PREFIX).and_then(|ms| ms.parse().ok()).map(Self::AtTimestamp),
        }
    }
}

/// One shard's position carried over from KCL, in our terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigratedRow {
    pub stream: String,
    pub shard_id: String,
    /// Last processed record: (sequence number, sub-sequence number).
    pub position: Option<(String, u64)>,
    pub shard_end: bool,
    pub parents: Vec<String>,
    pub start: Option<StartHint>,
    /// The KCL lease key it came from, or why it was added (a parent KCL had already deleted).
    pub source: String,
}

/// Converts every KCL item; one that cannot be understood stops the migration before anything is
/// deleted (the message names its lease key).
pub fn convert(items: &[Item], default_stream: &str) -> Result<Vec<MigratedRow>, String> {
    let mut rows = items.iter().map(|item| from_item(item, default_stream)).collect::<Result<Vec<_>, _>>()?;
    rows.extend(finished_parents(&rows));
    Ok(rows)
}

fn from_item(item: &Item, default_stream: &str) -> Result<MigratedRow, String> {
    let key = string(item, KCL_KEY).ok_or_else(|| format!("an item has no string '{KCL_KEY}'"))?;
    let (stream, shard_id) = split_key(&key, default_stream)?;
    let mut row = MigratedRow {
        stream,
        shard_id,
        position: None,
        shard_end: false,
        parents: parents(item),
        start: None,
        source: key.clone(),
    };
    match string(item, "checkpoint").as_deref() {
        Some("SHARD_END") => row.shard_end = true,
        Some("AT_TIMESTAMP") | None => {}
        Some(sentinel @ ("TRIM_HORIZON" | "LATEST")) => row.start = StartHint::parse(sentinel),
        Some(seq) if !seq.is_empty() && seq.chars().all(|c| c.is_ascii_digit()) => {
            let sub = number(item, "checkpointSubSequenceNumber").unwrap_or(0);
            row.position = Some((seq.to_owned(), sub));
        }
        Some(other) => {
            return Err(format!(
                "lease '{key}' has checkpoint '{other}', which is not a sequence number or a KCL sentinel"
            ))
        }
    }
    Ok(row)
}

/// `shardId-000000000001`, or `123456789012:my-stream:1700000000:shardId-000000000001`.
fn split_key(key: &str, default_stream: &str) -> Result<(String, String), String> {
    let parts: Vec<&str> = key.split(':').collect();
    match parts.as_slice() {
        [shard] if !shard.is_empty() => Ok((default_stream.to_owned(), (*shard).to_owned())),
        [_account, stream, _created, shard] if !stream.is_empty() && !shard.is_empty() => {
            Ok(((*stream).to_owned(), (*shard).to_owned()))
        }
        _ => Err(format!("lease key '{key}' is neither a shard id nor account:stream:creationEpoch:shardId")),
    }
}

/// KCL writes a string set `parentShardId` (singular); `parentShardIds` is accepted too. An empty
/// id names no shard and is left out (a row keyed "" would be refused by DynamoDB).
fn parents(item: &Item) -> Vec<String> {
    let mut ids: Vec<String> = match item.get("parentShardId").or_else(|| item.get("parentShardIds")) {
        Some(AttributeValue::Ss(set)) => set.clone(),
        Some(AttributeValue::L(list)) => list.iter().filter_map(|v| v.as_s().ok().cloned()).collect(),
        Some(AttributeValue::S(one)) => vec![one.clone()],
        _ => Vec::new(),
    };
    ids.sort();
    // Multi-stream leases may name parents by their full lease key.
    ids.into_iter().map(|p| p.rsplit(':').next().unwrap_or(&p).to_owned()).filter(|p| !p.is_empty()).collect()
}

/// KCL deletes a parent's lease once the parent is finished and its children have started, so a
/// parent named by a child but without an item of its own was read to its end: it gets our
/// shard-end marker, or it would be read again from the Initial Stream Position.
fn finished_parents(rows: &[MigratedRow]) -> Vec<MigratedRow> {
    let present: HashSet<(&str, &str)> = rows.iter().map(|r| (r.stream.as_str(), r.shard_id.as_str())).collect();
    let mut missing: BTreeMap<(String, String), String> = BTreeMap::new();
    for row in rows {
        for parent in &row.parents {
            if !present.contains(&(row.stream.as_str(), parent.as_str())) {
                missing.entry((row.stream.clone(), parent.clone())).or_insert_with(|| row.shard_id.clone());
            }
        }
    }
    missing
        .into_iter()
        .map(|((stream, shard_id), child)| MigratedRow {
            stream,
            shard_id,
            position: None,
            shard_end: true,
            parents: Vec::new(),
            start: None,
            source: format!("parent of {child}, its KCL lease already deleted (finished)"),
        })
        .collect()
}

/// The row as an item of our table (no owner, no counter: free to be taken).
pub fn to_item(row: &MigratedRow) -> Item {
    let mut item = Item::from([
        (HASH_KEY.to_owned(), AttributeValue::S(row.stream.clone())),
        (RANGE_KEY.to_owned(), AttributeValue::S(row.shard_id.clone())),
        ("shardEnd".to_owned(), AttributeValue::Bool(row.shard_end)),
        ("lastUpdateTimestamp".to_owned(), AttributeValue::N(now_ms().to_string())),
        ("migratedFrom".to_owned(), AttributeValue::S(row.source.clone())),
    ]);
    if let Some((seq, sub)) = &row.position {
        item.insert("sequenceNumber".to_owned(), AttributeValue::S(seq.clone()));
        item.insert("subSequenceNumber".to_owned(), AttributeValue::N(sub.to_string()));
    }
    if !row.parents.is_empty() {
        item.insert(
            "parentShardIds".to_owned(),
            AttributeValue::L(row.parents.iter().cloned().map(AttributeValue::S).collect()),
        );
    }
    if let Some(start) = row.start {
        item.insert("startPosition".to_owned(), AttributeValue::S(start.text()));
    }
    item
}

fn string(item: &Item, name: &str) -> Option<String> {
    item.get(name).and_then(|v| v.as_s().ok()).cloned()
}

fn number(item: &Item, name: &str) -> Option<u64> {
    item.get(name).and_then(|v| v.as_n().ok()).and_then(|v| v.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kcl(key: &str, checkpoint: &str, sub: Option<u64>, parents: &[&str]) -> Item {
        let mut item = Item::from([
            (KCL_KEY.to_owned(), AttributeValue::S(key.into())),
            ("checkpoint".to_owned(), AttributeValue::S(checkpoint.into())),
            ("leaseOwner".to_owned(), AttributeValue::S("worker-1".into())),
            ("leaseCounter".to_owned(), AttributeValue::N("42".into())),
        ]);
        if let Some(sub) = sub {
            item.insert("checkpointSubSequenceNumber".into(), AttributeValue::N(sub.to_string()));
        }
        if !parents.is_empty() {
            item.insert("parentShardId".into(), AttributeValue::Ss(parents.iter().map(|p| p.to_string()).collect()));
        }
        item
    }

    #[test]
    fn checkpoints_keep_their_sub_sequence_number_and_shard_end() {
        let rows = convert(
            &[kcl("shardId-0", "4959000000000000000001", Some(3), &[]), kcl("shardId-1", "SHARD_END", Some(0), &[])],
            "s",
        )
        .unwrap();
        assert_eq!(rows[0].position, Some(("4959000000000000000001".into(), 3)));
        assert!(!rows[0].shard_end);
        assert!(rows[1].shard_end && rows[1].position.is_none());
        assert!(rows.iter().all(|r| r.stream == "s"));
    }

    #[test]
    fn sentinels_become_start_positions() {
        let rows = convert(
            &[
                kcl("a", "TRIM_HORIZON", None, &["p"]),
                kcl("b", "LATEST", None, &[]),
                kcl("c", "AT_TIMESTAMP", None, &[]),
            ],
            "s",
        )
        .unwrap();
        assert_eq!(
            rows.iter().map(|r| r.start).collect::<Vec<_>>()[..3],
            [Some(StartHint::TrimHorizon), Some(StartHint::Latest), None]
        );
        assert!(rows[..3].iter().all(|r| r.position.is_none()));
    }

    #[test]
    fn start_hints_read_back_as_written() {
        for hint in [StartHint::TrimHorizon, StartHint::Latest, StartHint::AtTimestamp(1_796_470_412_954)] {
            assert_eq!(StartHint::parse(&hint.text()), Some(hint));
        }
        assert_eq!(StartHint::parse("AT_TIMESTAMP:soon"), None);
        assert_eq!(StartHint::parse("AT_TIMESTAMP"), None, "KCL's sentinel carries no time");
    }

    #[test]
    fn multi_stream_keys_name_their_stream() {
        let rows =
            convert(&[kcl("123456789012:orders:1700000000:shardId-000000000007", "17", Some(0), &[])], "ignored")
                .unwrap();
        assert_eq!((rows[0].stream.as_str(), rows[0].shard_id.as_str()), ("orders", "shardId-000000000007"));
        assert!(convert(&[kcl("a:b", "17", None, &[])], "s").is_err());
    }

    #[test]
    fn a_parent_kcl_already_deleted_is_marked_finished() {
        let rows = convert(
            &[kcl("child", "TRIM_HORIZON", None, &["gone-parent", "kept"]), kcl("kept", "SHARD_END", None, &[])],
            "s",
        )
        .unwrap();
        let added: Vec<_> = rows.iter().filter(|r| r.source.starts_with("parent of")).collect();
        assert_eq!(added.len(), 1);
        assert_eq!(added[0].shard_id, "gone-parent");
        assert!(added[0].shard_end);
        assert_eq!(rows[0].parents, vec!["gone-parent", "kept"]);
    }

    /// Found by the kcl_convert fuzz target: an empty parent id (or a multi-stream parent key ending
    /// in ':') became a finished parent row with shard id "", which DynamoDB refuses as a key, so
    /// the migration failed at every start.
    #[test]
    fn an_empty_parent_id_names_no_parent() {
        let mut item = kcl("c", "TRIM_HORIZON", None, &[]);
        item.insert(
            "parentShardIds".into(),
            AttributeValue::L(vec![
                AttributeValue::S("p1".into()),
                AttributeValue::S("".into()),
                AttributeValue::S("1:s:2:".into()),
            ]),
        );
        let rows = convert(&[item], "s").unwrap();
        assert_eq!(rows[0].parents, vec!["p1"]);
        assert_eq!(rows.iter().map(|r| r.shard_id.as_str()).collect::<Vec<_>>(), ["c", "p1"]);
        let single = convert(&[kcl("d", "TRIM_HORIZON", None, &[""])], "s").unwrap();
        assert_eq!(single.len(), 1);
        assert!(single[0].parents.is_empty());
    }

    #[test]
    fn a_checkpoint_that_is_not_a_number_stops_the_migration() {
        let e = convert(&[kcl("shardId-9", "oops", None, &[])], "s").unwrap_err();
        assert!(e.contains("shardId-9") && e.contains("oops"), "{e}");
    }

    #[test]
    fn items_have_no_owner_and_keep_the_position() {
        let rows = convert(&[kcl("shardId-0", "100", Some(2), &["p"])], "s").unwrap();
        let item = to_item(&rows[0]);
        assert!(!item.contains_key("leaseOwner") && !item.contains_key("leaseCounter"));
        assert_eq!(item["sequenceNumber"].as_s().unwrap(), "100");
        assert_eq!(item["subSequenceNumber"].as_n().unwrap(), "2");
        assert_eq!(item[RANGE_KEY].as_s().unwrap(), "shardId-0");
    }
}
