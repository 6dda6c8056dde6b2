//! Turns a FlowFile into the rows PutSnowflake sends: JSON objects whose first-level keys are the
//! columns, each with the offset token of the record it came from, and decides whether those tokens
//! are exact.
//!
//! Content may be one JSON object, a JSON array of objects, or newline-delimited objects (what
//! ConsumeKinesis writes). Content without any object (empty, blank, `[]`) is [`Prepared::Empty`].
//! A `kinesisMetadata` object is added from the FlowFile's attributes when the rows do not carry
//! one; in Iceberg mode it always holds every declared field, null where unknown, because a
//! structured OBJECT column rejects missing fields. Anything that is not a JSON object makes the
//! whole FlowFile invalid, before a byte is sent.
//!
//! **Record Reader content.** With PutSnowflake's Record Reader, Java reads the FlowFile with the
//! reader and hands over one JSON object per record as NDJSON, in the same submit call; the rules
//! below then apply unchanged. Java writes decimals (and integers beyond 64 bits) as JSON strings:
//! serde_json here parses numbers into `i64`/`u64`/`f64` (no `arbitrary_precision`), so a 38-digit
//! number would lose digits when a row is written out again to add `kinesisMetadata`, while a
//! string is kept exactly and Snowflake converts it to NUMBER exactly. When no record of the
//! FlowFile could be read, Java says why in [`ATTR_RECORDS_UNREADABLE`] and the FlowFile is invalid.
//!
//! **Exact tokens.** A shard's rows are loaded exactly once only when each row's token names one
//! Kinesis record and no other row anywhere has it. That holds when
//! - every row carries `kinesisMetadata.shardedSequenceNumber` of its shard, strictly increasing
//!   within the FlowFile (ConsumeKinesis' Inject Metadata and Use Wrapper), or
//! - the FlowFile is evidently one whole record as ConsumeKinesis wrote it: `record.count` is 1, no
//!   `fragment.*` attribute (SplitJson, SplitText, SplitRecord and their kin set them), and the
//!   first and last sequence numbers, when both are given, agree. Its rows then share the record's
//!   `shardedSequenceNumber` in parts (see `offset`).
//!
//! Any other FlowFile (a split child, several records without per-record metadata, missing or
//! malformed sequence attributes, not from Kinesis) is [`Delivery::AtLeastOnce`]: it goes through a
//! channel whose tokens the processor assigns itself, so it is never skipped and never moves an
//! exact channel's committed token.

use std::collections::HashMap;

use bytes::Bytes;
use serde_json::{Map, Value};

use super::offset::{sharded_sequence_number, OffsetToken};

pub use crate::contract::attributes::ARRIVAL_MS as ATTR_ARRIVAL_MS;
pub use crate::contract::attributes::AT_LEAST_ONCE;
/// Set by PutSnowflake on a FlowFile it sends back to its own queue for the at-least-once channels
/// (`book::Route::Reload`), with the value [`AT_LEAST_ONCE`].
pub use crate::contract::attributes::DELIVERY as ATTR_DELIVERY;
pub use crate::contract::attributes::FIRST_SEQUENCE as ATTR_FIRST_SEQUENCE;
pub use crate::contract::attributes::FIRST_SUB as ATTR_FIRST_SUB;
/// What NiFi's split processors set on each piece (`fragment.identifier`, `.index`, `.count`).
pub use crate::contract::attributes::FRAGMENT_PREFIX;
pub use crate::contract::attributes::LAST_SEQUENCE as ATTR_LAST_SEQUENCE;
pub use crate::contract::attributes::LAST_SUB as ATTR_LAST_SUB;
/// The shard's parents (comma-separated) when it was created by a split or merge.
pub use crate::contract::attributes::PARENT_SHARDS as ATTR_PARENT_SHARDS;
pub use crate::contract::attributes::PARTITION_KEY as ATTR_PARTITION_KEY;
/// The shard's record ConsumeKinesis read just before the FlowFile's first one in the same lease:
/// empty when there is none (read from the shard's start, or the lease's first read from LATEST or a
/// timestamp); absent when the FlowFile does not say (see `book::Follows`).
pub use crate::contract::attributes::PREVIOUS_SEQUENCE as ATTR_PREVIOUS_SEQUENCE;
pub use crate::contract::attributes::PREVIOUS_SUB as ATTR_PREVIOUS_SUB;
/// Set by PutSnowflake's Java side (never taken from the FlowFile) when its Record Reader could not
/// read any record of the FlowFile: why, for the FlowFile's `snowflake.error.message`.
pub use crate::contract::attributes::RECORDS_UNREADABLE as ATTR_RECORDS_UNREADABLE;
pub use crate::contract::attributes::RECORD_COUNT as ATTR_RECORD_COUNT;
pub use crate::contract::attributes::REGION as ATTR_REGION;
pub use crate::contract::attributes::SHARD as ATTR_SHARD;
pub use crate::contract::attributes::STREAM as ATTR_STREAM;

/// The attributes PutSnowflake reads; Java passes every `aws.kinesis.*` and `fragment.*` attribute
/// and `record.count` across JNI.
pub const ATTRIBUTES: &[&str] = &[
    ATTR_STREAM,
    ATTR_REGION,
    ATTR_SHARD,
    ATTR_PARTITION_KEY,
    ATTR_FIRST_SEQUENCE,
    ATTR_FIRST_SUB,
    ATTR_LAST_SEQUENCE,
    ATTR_LAST_SUB,
    ATTR_ARRIVAL_MS,
    ATTR_RECORD_COUNT,
    ATTR_PARENT_SHARDS,
];

use crate::contract::metadata as meta;
pub use crate::contract::metadata::KEY as METADATA_KEY;

/// The fields of `kinesisMetadata`, as NiFi's ConsumeKinesis and Openflow's Kinesis connector name them.
pub const METADATA_FIELDS: &[&str] = &[
    meta::STREAM,
    meta::SHARD_ID,
    meta::APPROXIMATE_ARRIVAL,
    meta::PARTITION_KEY,
    meta::SEQUENCE_NUMBER,
    meta::SUB_SEQUENCE_NUMBER,
    meta::SHARDED_SEQUENCE_NUMBER,
];

/// One FlowFile as Java hands it over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowFileIn {
    pub id: i64,
    pub attributes: HashMap<String, String>,
    /// One buffer (`Bytes::from` a `Vec` takes it over without a copy): the fast path's rows are
    /// slices of it, and a parked FlowFile's clone shares it.
    pub content: Bytes,
}

/// Where a FlowFile's records came from: a Kinesis shard (named by region when known, stream and
/// shard id), or anywhere else.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Source {
    Shard { region: Option<String>, stream: String, shard_id: String },
    Direct,
}

/// How a FlowFile's rows are delivered, which decides the channel they take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Delivery {
    /// The rows' tokens are exact: rows at or below the channel's tokens are not sent again.
    ExactlyOnce,
    /// The rows have no exact tokens: the channel assigns fresh ones, a replay loads them again.
    AtLeastOnce,
}

pub use super::row::Row;

#[derive(Debug, Clone, PartialEq)]
pub enum Prepared {
    Rows {
        source: Source,
        delivery: Delivery,
        rows: Vec<Row>,
    },
    /// No JSON object at all (empty, blank or `[]`): nothing to send.
    Empty,
    /// Not sent: why the content is not rows.
    Invalid(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mapping {
    pub iceberg: bool,
}

impl Mapping {
    pub fn prepare(&self, flow_file: &FlowFileIn) -> Prepared {
        if let Some(reason) = flow_file.attributes.get(ATTR_RECORDS_UNREADABLE) {
            return Prepared::Invalid(reason.clone());
        }
        let Ok(text) = std::str::from_utf8(&flow_file.content) else {
            return Prepared::Invalid("the content is not UTF-8 text, so it is not JSON".into());
        };
        let source = source_of(&flow_file.attributes);
        let prepared = match (self.iceberg, &source) {
            // Rows that already carry this shard's metadata pass through as they came (row_probe).
            (false, Source::Shard { stream, shard_id, .. }) => {
                match super::row_probe::passthrough(&flow_file.content, text, stream, shard_id) {
                    Some(rows) => Prepared::Rows { source, delivery: Delivery::ExactlyOnce, rows },
                    None => self.prepare_general(flow_file, source),
                }
            }
            _ => self.prepare_general(flow_file, source),
        };
        match prepared {
            Prepared::Rows { source, delivery: Delivery::ExactlyOnce, rows } if marked_at_least_once(flow_file) => {
                let rows = rows.into_iter().map(|r| Row { token: OffsetToken::from_counter(0), ..r }).collect();
                Prepared::Rows { source, delivery: Delivery::AtLeastOnce, rows }
            }
            other => other,
        }
    }

    /// Every FlowFile the general way: each row parsed into a JSON tree, completed and written out
    /// again when it changed. The content is UTF-8 (`prepare` checked it once for both ways).
    fn prepare_general(&self, flow_file: &FlowFileIn, source: Source) -> Prepared {
        let mut objects = match objects(&flow_file.content) {
            Ok(objects) if objects.is_empty() => return Prepared::Empty,
            Ok(objects) => objects,
            Err(reason) => return Prepared::Invalid(reason),
        };
        let attrs = &flow_file.attributes;
        let (delivery, tokens) = tokens(&source, attrs, &objects);
        let single = objects.len() == 1;
        let mut rows = Vec::with_capacity(objects.len());
        for (parsed, token) in objects.iter_mut().zip(tokens) {
            let changed = self.add_metadata(&mut parsed.object, &source, attrs, single);
            // A row that needs no change is sent as it came, without writing it out again. Either
            // way it owns its text (a copy of the line): the content is not kept for the rows.
            let json = match parsed.line {
                Some(line) if !changed => Bytes::copy_from_slice(line),
                _ => Bytes::from(serde_json::to_vec(&parsed.object).expect("JSON objects serialize")),
            };
            rows.push(Row { json, token });
        }
        Prepared::Rows { source, delivery, rows }
    }

    /// Adds or completes `kinesisMetadata`; returns whether the object changed.
    fn add_metadata(
        &self,
        object: &mut Map<String, Value>,
        source: &Source,
        attrs: &HashMap<String, String>,
        single: bool,
    ) -> bool {
        let Source::Shard { stream, shard_id, .. } = source else { return false };
        let mut changed = !object.contains_key(METADATA_KEY);
        let metadata = object.entry(METADATA_KEY).or_insert_with(|| {
            let mut m = Map::new();
            m.insert(meta::STREAM.into(), Value::from(stream.as_str()));
            m.insert(meta::SHARD_ID.into(), Value::from(shard_id.as_str()));
            // Per-record fields are known only when the FlowFile holds a single record.
            if single {
                if let Some(arrival) = attrs.get(ATTR_ARRIVAL_MS).and_then(|a| a.parse::<i64>().ok()) {
                    m.insert(meta::APPROXIMATE_ARRIVAL.into(), Value::from(arrival));
                }
                if let Some(key) = attrs.get(ATTR_PARTITION_KEY) {
                    m.insert(meta::PARTITION_KEY.into(), Value::from(key.as_str()));
                }
                if let Some(sequence) = attrs.get(ATTR_LAST_SEQUENCE) {
                    let sub = attrs.get(ATTR_LAST_SUB).and_then(|s| s.parse::<u64>().ok());
                    m.insert(meta::SEQUENCE_NUMBER.into(), Value::from(sequence.as_str()));
                    m.insert(meta::SUB_SEQUENCE_NUMBER.into(), Value::from(sub.unwrap_or(0)));
                    m.insert(
                        meta::SHARDED_SEQUENCE_NUMBER.into(),
                        Value::from(sharded_sequence_number(sequence, sub.unwrap_or(0))),
                    );
                }
            }
            Value::Object(m)
        });
        if self.iceberg {
            if let Value::Object(m) = metadata {
                for field in METADATA_FIELDS {
                    if !m.contains_key(*field) {
                        m.insert((*field).to_owned(), Value::Null);
                        changed = true;
                    }
                }
            }
        }
        changed
    }
}

/// The bytes `rows`, prepared from `flow_file`, keep in memory until they are dropped, for Max
/// In-Flight Size: a row that owns its text holds its NDJSON line (text and newline), and rows that
/// are slices of the content (the fast path, `row_probe`) hold the content's whole buffer, counted
/// once, however few of its bytes they send. The rows of one FlowFile are queued, held and dropped
/// together (`book::Pending`), so the buffer goes when its count goes back.
pub fn held_bytes(flow_file: &FlowFileIn, rows: &[Row]) -> u64 {
    let buffer = flow_file.content.as_ptr_range();
    let (mut owned, mut slices) = (0, false);
    for row in rows {
        if buffer.contains(&row.json.as_ptr()) {
            slices = true;
        } else {
            owned += row.json.len() as u64 + 1;
        }
    }
    owned + if slices { flow_file.content.len() as u64 } else { 0 }
}

/// Where the FlowFile's records came from, by its attributes.
pub(super) fn source_of(attrs: &HashMap<String, String>) -> Source {
    match (attrs.get(ATTR_STREAM), attrs.get(ATTR_SHARD)) {
        (Some(stream), Some(shard)) => Source::Shard {
            region: attrs.get(ATTR_REGION).map(|r| r.trim().to_owned()).filter(|r| !r.is_empty()),
            stream: stream.clone(),
            shard_id: shard.clone(),
        },
        _ => Source::Direct,
    }
}

/// The rows' delivery and tokens (see the module comment for the rule).
fn tokens(source: &Source, attrs: &HashMap<String, String>, objects: &[Parsed<'_>]) -> (Delivery, Vec<OffsetToken>) {
    if let Source::Shard { stream, shard_id, .. } = source {
        if let Some(tokens) = row_tokens(objects, stream, shard_id) {
            return (Delivery::ExactlyOnce, tokens);
        }
        if let Some(record) = whole_record_token(attrs) {
            let count = objects.len() as u64;
            let tokens =
                (1..=count).map(|done| if done == count { record.clone() } else { record.part(done) }).collect();
            return (Delivery::ExactlyOnce, tokens);
        }
    }
    (Delivery::AtLeastOnce, vec![OffsetToken::from_counter(0); objects.len()])
}

/// PutSnowflake sent the FlowFile back for the at-least-once channels.
fn marked_at_least_once(flow_file: &FlowFileIn) -> bool {
    marked_at_least_once_by(&flow_file.attributes)
}

pub(super) fn marked_at_least_once_by(attrs: &HashMap<String, String>) -> bool {
    attrs.get(ATTR_DELIVERY).is_some_and(|v| v.trim() == AT_LEAST_ONCE)
}

/// The token of the FlowFile's first record, by `aws.kinesis.first.sequence.number` (and its
/// sub-sequence number): `None` when absent or malformed.
pub(super) fn first_record_token(attrs: &HashMap<String, String>) -> Option<OffsetToken> {
    let sequence = attrs.get(ATTR_FIRST_SEQUENCE)?.trim();
    let sub = match attrs.get(ATTR_FIRST_SUB).map(|s| s.trim()).filter(|s| !s.is_empty()) {
        Some(sub) => sub.parse::<u64>().ok()?,
        None => 0,
    };
    OffsetToken::sharded(sequence, sub)
}

/// What the FlowFile says of the record ConsumeKinesis read before its first one: `None` when it
/// does not say, `Some(None)` when there was none, and `None` too when the attribute is malformed.
pub fn previous_record(attrs: &HashMap<String, String>) -> Option<Option<crate::kinesis::position::Position>> {
    let sequence = attrs.get(ATTR_PREVIOUS_SEQUENCE)?.trim();
    if sequence.is_empty() {
        return Some(None);
    }
    if !sequence.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let sub = match attrs.get(ATTR_PREVIOUS_SUB).map(|s| s.trim()).filter(|s| !s.is_empty()) {
        Some(sub) => Some(sub.parse::<u64>().ok()?),
        None => None,
    };
    Some(Some(crate::kinesis::position::Position::new(sequence, sub)))
}

/// The token of the one record a FlowFile holds, when its attributes show it whole as
/// ConsumeKinesis wrote it: `record.count` 1, no `fragment.*`, first and last sequence agreeing.
fn whole_record_token(attrs: &HashMap<String, String>) -> Option<OffsetToken> {
    if attrs.keys().any(|k| k.starts_with(FRAGMENT_PREFIX)) {
        return None;
    }
    if attrs.get(ATTR_RECORD_COUNT).and_then(|c| c.trim().parse::<u64>().ok()) != Some(1) {
        return None;
    }
    let last = attrs.get(ATTR_LAST_SEQUENCE)?;
    let last_sub = match attrs.get(ATTR_LAST_SUB) {
        Some(s) => s.parse::<u64>().ok()?,
        None => 0,
    };
    if let Some(first) = attrs.get(ATTR_FIRST_SEQUENCE) {
        let first_sub = match attrs.get(ATTR_FIRST_SUB) {
            Some(s) => s.parse::<u64>().ok()?,
            None => 0,
        };
        if first != last || first_sub != last_sub {
            return None;
        }
    }
    OffsetToken::sharded(last, last_sub)
}

/// Per-row tokens when every row carries `kinesisMetadata.shardedSequenceNumber` of this shard
/// (a `stream` or `shardId` it names must be this FlowFile's) and they grow.
fn row_tokens(objects: &[Parsed<'_>], stream: &str, shard_id: &str) -> Option<Vec<OffsetToken>> {
    let mut tokens: Vec<OffsetToken> = Vec::with_capacity(objects.len());
    for parsed in objects {
        let metadata = parsed.object.get(METADATA_KEY)?;
        let names_other = |field: &str, ours: &str| metadata.get(field).is_some_and(|v| v.as_str() != Some(ours));
        if names_other(meta::STREAM, stream) || names_other(meta::SHARD_ID, shard_id) {
            return None;
        }
        let text = metadata.get(meta::SHARDED_SEQUENCE_NUMBER)?.as_str()?;
        let token = OffsetToken::parse(text).filter(|t| !t.is_part())?;
        if tokens.last().is_some_and(|last| *last >= token) {
            return None;
        }
        tokens.push(token);
    }
    Some(tokens)
}

/// A parsed object, and its text when that text can be sent as one NDJSON line unchanged.
struct Parsed<'a> {
    object: Map<String, Value>,
    line: Option<&'a [u8]>,
}

/// The JSON objects of the content (none for empty, blank or `[]` content): one object, an array
/// of objects, or one object per line.
fn objects(content: &[u8]) -> Result<Vec<Parsed<'_>>, String> {
    if let Ok(value) = serde_json::from_slice::<Value>(content) {
        let whole = content.trim_ascii();
        let line = (!whole.contains(&b'\n') && !whole.contains(&b'\r')).then_some(whole);
        return match value {
            Value::Object(object) => Ok(vec![Parsed { object, line }]),
            Value::Array(items) => items
                .into_iter()
                .enumerate()
                .map(|(i, item)| match item {
                    Value::Object(object) => Ok(Parsed { object, line: None }),
                    other => Err(format!("array element {} is a JSON {}, not an object", i + 1, kind(&other))),
                })
                .collect(),
            other => Err(format!("the content is a JSON {}, not an object", kind(&other))),
        };
    }
    let mut objects = Vec::new();
    for (n, line) in content.split(|&b| b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Value>(line) {
            Ok(Value::Object(object)) => objects.push(Parsed { object, line: Some(line.trim_ascii()) }),
            Ok(other) => return Err(format!("line {} is a JSON {}, not an object", n + 1, kind(&other))),
            Err(e) => return Err(format!("line {} is not JSON: {e}", n + 1)),
        }
    }
    Ok(objects)
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow_file(content: &str, attrs: &[(&str, &str)]) -> FlowFileIn {
        FlowFileIn {
            id: 1,
            attributes: attrs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            content: Bytes::copy_from_slice(content.as_bytes()),
        }
    }

    /// The fast path on `content` alone, as `prepare` calls it.
    fn passthrough(content: &str, stream: &str, shard_id: &str) -> Option<Vec<Row>> {
        let content = Bytes::copy_from_slice(content.as_bytes());
        let text = std::str::from_utf8(&content).expect("UTF-8");
        super::super::row_probe::passthrough(&content, text, stream, shard_id)
    }

    const SHARD: &[(&str, &str)] = &[
        (ATTR_STREAM, "orders"),
        (ATTR_SHARD, "shardId-000000000001"),
        (ATTR_PARTITION_KEY, "pk-7"),
        (ATTR_LAST_SEQUENCE, "4960"),
        (ATTR_LAST_SUB, "3"),
        (ATTR_ARRIVAL_MS, "1700000000000"),
        (ATTR_RECORD_COUNT, "1"),
    ];

    fn rows(p: Prepared) -> (Source, Vec<(Value, String)>) {
        match p {
            Prepared::Rows { source, rows, delivery } => {
                assert_eq!(delivery, Delivery::ExactlyOnce, "{source:?}");
                (
                    source,
                    rows.into_iter().map(|r| (serde_json::from_slice(&r.json).unwrap(), r.token.to_string())).collect(),
                )
            }
            other => panic!("expected rows, got {other:?}"),
        }
    }

    fn delivery(p: Prepared) -> Delivery {
        match p {
            Prepared::Rows { delivery, .. } => delivery,
            other => panic!("expected rows, got {other:?}"),
        }
    }

    fn invalid(p: Prepared) -> String {
        match p {
            Prepared::Invalid(reason) => reason,
            other => panic!("expected invalid, got {other:?}"),
        }
    }

    const PLAIN: Mapping = Mapping { iceberg: false };

    #[test]
    fn a_single_record_gets_its_metadata_and_token_from_the_attributes() {
        let (source, rows) = rows(PLAIN.prepare(&flow_file(r#"{"id":1}"#, SHARD)));
        assert_eq!(
            source,
            Source::Shard { region: None, stream: "orders".into(), shard_id: "shardId-000000000001".into() }
        );
        let (row, token) = &rows[0];
        assert_eq!(token, "496000000000000000000003");
        assert_eq!(row["kinesisMetadata"]["partitionKey"], "pk-7");
        assert_eq!(row["kinesisMetadata"]["shardedSequenceNumber"], "496000000000000000000003");
        assert_eq!(row["kinesisMetadata"]["approximateArrival"], 1700000000000i64);
        assert_eq!(row["id"], 1);
    }

    #[test]
    fn lines_with_their_own_metadata_keep_it_and_use_its_tokens() {
        let content = "{\"a\":1,\"kinesisMetadata\":{\"shardedSequenceNumber\":\"495900000000000000000000\"}}\r\n\n{\"a\":2,\"kinesisMetadata\":{\"shardedSequenceNumber\":\"496000000000000000000003\"}}\n";
        let (_, rows) = rows(PLAIN.prepare(&flow_file(content, SHARD)));
        let tokens: Vec<_> = rows.iter().map(|r| r.1.as_str()).collect();
        assert_eq!(tokens, ["495900000000000000000000", "496000000000000000000003"]);
        assert!(
            rows[0].0["kinesisMetadata"].get("partitionKey").is_none(),
            "attributes of the first record must not be copied"
        );
    }

    #[test]
    fn rows_needing_no_change_are_sent_as_they_came() {
        let line = r#"{"z":1,"a":2.50,"kinesisMetadata":{"shardedSequenceNumber":"495900000000000000000000"}}"#;
        let content = format!("{line}\r\n{{\"b\":1}}\n");
        match PLAIN.prepare(&flow_file(&content, SHARD)) {
            Prepared::Rows { rows, .. } => {
                assert_eq!(rows[0].json, line.as_bytes(), "key order and number text kept");
                assert_ne!(rows[1].json, br#"{"b":1}"#.to_vec(), "metadata was added to the second");
            }
            other => panic!("{other:?}"),
        }
        let pretty = "{\n  \"a\": 1\n}";
        match PLAIN.prepare(&flow_file(pretty, &[])) {
            Prepared::Rows { rows, .. } => {
                assert_eq!(rows[0].json, br#"{"a":1}"#.to_vec(), "a multi-line object is written on one line")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn lines_without_metadata_share_the_flow_file_token_in_parts() {
        let (_, rows) = rows(PLAIN.prepare(&flow_file("{\"a\":1}\n{\"a\":2}\n{\"a\":3}", SHARD)));
        let tokens: Vec<_> = rows.iter().map(|r| r.1.as_str()).collect();
        assert_eq!(tokens, ["496000000000000000000003:1", "496000000000000000000003:2", "496000000000000000000003"]);
        assert_eq!(
            rows[1].0["kinesisMetadata"],
            serde_json::json!({"stream":"orders","shardId":"shardId-000000000001"})
        );
    }

    #[test]
    fn iceberg_metadata_carries_every_field() {
        let (_, rows) = rows(Mapping { iceberg: true }.prepare(&flow_file("{\"a\":1}\n{\"a\":2}", SHARD)));
        let metadata = rows[0].0["kinesisMetadata"].as_object().unwrap();
        for field in METADATA_FIELDS {
            assert!(metadata.contains_key(*field), "{field}");
        }
        assert_eq!(metadata["sequenceNumber"], Value::Null);
    }

    #[test]
    fn other_flow_files_are_direct_at_least_once_and_without_metadata() {
        match PLAIN.prepare(&flow_file(r#"[{"a":1},{"b":2}]"#, &[])) {
            Prepared::Rows { source, delivery, rows } => {
                assert_eq!(source, Source::Direct);
                assert_eq!(delivery, Delivery::AtLeastOnce);
                assert_eq!(rows.len(), 2);
                assert!(!rows[0].json.windows(15).any(|w| w == b"kinesisMetadata"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn pretty_printed_objects_are_one_row() {
        match PLAIN.prepare(&flow_file("{\n  \"a\": 1\n}\n", &[])) {
            Prepared::Rows { rows, .. } => assert_eq!(rows.len(), 1),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn non_objects_make_the_flow_file_invalid_with_the_place() {
        assert_eq!(invalid(PLAIN.prepare(&flow_file("42", &[]))), "the content is a JSON number, not an object");
        assert_eq!(invalid(PLAIN.prepare(&flow_file("{\"a\":1}\n[1]", &[]))), "line 2 is a JSON array, not an object");
        assert!(invalid(PLAIN.prepare(&flow_file("{\"a\":1}\n{oops", &[]))).starts_with("line 2 is not JSON"));
        let bad = FlowFileIn { id: 1, attributes: HashMap::new(), content: Bytes::from_static(b"{\xff}") };
        assert_eq!(invalid(PLAIN.prepare(&bad)), "the content is not UTF-8 text, so it is not JSON");
        assert_eq!(
            invalid(PLAIN.prepare(&flow_file(r#"[{"a":1},2]"#, &[]))),
            "array element 2 is a JSON number, not an object"
        );
    }

    /// Issue 15, defect 4: `[]` used to become a FlowFile of no rows, which the channel writer
    /// panicked on.
    #[test]
    fn content_without_any_object_is_empty_not_rows() {
        for content in ["[]", " [ ]\n", "", "\n \r\n"] {
            assert_eq!(PLAIN.prepare(&flow_file(content, SHARD)), Prepared::Empty, "{content:?}");
            assert_eq!(PLAIN.prepare(&flow_file(content, &[])), Prepared::Empty, "{content:?}");
        }
    }

    /// Found by the snowflake_rows fuzz target: a sequence attribute ending in ':' gave the FlowFile
    /// the part token "4959:0", so its last row's token came before its other rows' ("4959:1") and
    /// the FlowFile never completed. Such a FlowFile has no exact token: it is loaded at least once.
    #[test]
    fn a_sequence_attribute_that_is_not_decimal_gives_no_exact_token() {
        let attrs =
            &[(ATTR_STREAM, "s"), (ATTR_SHARD, "shardId-0"), (ATTR_LAST_SEQUENCE, "4959:"), (ATTR_RECORD_COUNT, "1")];
        assert_eq!(delivery(PLAIN.prepare(&flow_file("{\"a\":1}", attrs))), Delivery::AtLeastOnce);
        assert_eq!(delivery(PLAIN.prepare(&flow_file("{\"a\":1}\n{\"a\":2}", attrs))), Delivery::AtLeastOnce);
    }

    #[test]
    fn a_shard_flow_file_without_usable_sequence_attributes_is_at_least_once() {
        let attrs = &[(ATTR_STREAM, "s"), (ATTR_SHARD, "shardId-0"), (ATTR_RECORD_COUNT, "1")];
        assert_eq!(delivery(PLAIN.prepare(&flow_file("{}", attrs))), Delivery::AtLeastOnce);
        let mut bad: Vec<_> = SHARD.to_vec();
        bad.retain(|(k, _)| *k != ATTR_LAST_SEQUENCE);
        bad.push((ATTR_LAST_SEQUENCE, "49x"));
        assert_eq!(delivery(PLAIN.prepare(&flow_file("{}", &bad))), Delivery::AtLeastOnce);
    }

    /// Issue 15, defect 6: the children of SplitJson/SplitText/SplitRecord all carry the parent's
    /// last sequence number; each used to get that same token, so all but the first were skipped.
    #[test]
    fn split_children_and_multi_record_flow_files_without_metadata_are_at_least_once() {
        let mut child: Vec<_> = SHARD.to_vec();
        child.extend([("fragment.identifier", "f1"), ("fragment.index", "1"), ("fragment.count", "3")]);
        assert_eq!(delivery(PLAIN.prepare(&flow_file(r#"{"a":1}"#, &child))), Delivery::AtLeastOnce);
        // Several records, no per-record metadata: ConsumeKinesis may batch them differently on a replay.
        let mut batch: Vec<_> = SHARD.iter().copied().filter(|(k, _)| *k != ATTR_RECORD_COUNT).collect();
        batch.push((ATTR_RECORD_COUNT, "2"));
        assert_eq!(delivery(PLAIN.prepare(&flow_file("{\"a\":1}\n{\"a\":2}", &batch))), Delivery::AtLeastOnce);
        // record.count missing: not evidently as ConsumeKinesis wrote it.
        let unknown: Vec<_> = SHARD.iter().copied().filter(|(k, _)| *k != ATTR_RECORD_COUNT).collect();
        assert_eq!(delivery(PLAIN.prepare(&flow_file(r#"{"a":1}"#, &unknown))), Delivery::AtLeastOnce);
        // One record according to record.count, but first and last sequence numbers differ.
        let mut span: Vec<_> = SHARD.to_vec();
        span.push((ATTR_FIRST_SEQUENCE, "4950"));
        assert_eq!(delivery(PLAIN.prepare(&flow_file(r#"{"a":1}"#, &span))), Delivery::AtLeastOnce);
        let mut same: Vec<_> = SHARD.to_vec();
        same.extend([(ATTR_FIRST_SEQUENCE, "4960"), (ATTR_FIRST_SUB, "3")]);
        assert_eq!(delivery(PLAIN.prepare(&flow_file(r#"{"a":1}"#, &same))), Delivery::ExactlyOnce);
    }

    #[test]
    fn split_children_with_their_own_metadata_keep_exact_tokens() {
        let mut child: Vec<_> = SHARD.to_vec();
        child.extend([("fragment.index", "2"), ("fragment.count", "3")]);
        let line = r#"{"a":2,"kinesisMetadata":{"shardId":"shardId-000000000001","shardedSequenceNumber":"495800000000000000000000"}}"#;
        let (_, rows) = rows(PLAIN.prepare(&flow_file(line, &child)));
        assert_eq!(rows[0].1, "495800000000000000000000");
        // Metadata of another shard is not this shard's token.
        let other = r#"{"a":2,"kinesisMetadata":{"shardId":"shardId-000000000009","shardedSequenceNumber":"495800000000000000000000"}}"#;
        assert_eq!(delivery(PLAIN.prepare(&flow_file(other, &child))), Delivery::AtLeastOnce);
    }

    #[test]
    fn the_region_names_the_source_when_known() {
        let mut attrs: Vec<_> = SHARD.to_vec();
        attrs.push((ATTR_REGION, "eu-west-1"));
        let (source, _) = rows(PLAIN.prepare(&flow_file("{}", &attrs)));
        assert_eq!(
            source,
            Source::Shard {
                region: Some("eu-west-1".into()),
                stream: "orders".into(),
                shard_id: "shardId-000000000001".into()
            }
        );
    }

    /// What PutSnowflake's Record Reader path hands over when no record could be read.
    #[test]
    fn a_flow_file_whose_records_could_not_be_read_is_invalid_with_javas_reason() {
        let mut attrs: Vec<_> = SHARD.to_vec();
        attrs.push((ATTR_RECORDS_UNREADABLE, "the Record Reader cannot read the FlowFile: bad header"));
        assert_eq!(
            invalid(PLAIN.prepare(&flow_file("", &attrs))),
            "the Record Reader cannot read the FlowFile: bad header"
        );
    }

    const DECIMAL_38: &str = "12345678901234567890123456789012345678";

    /// The Record Reader path writes decimals as strings: kept digit for digit even when the row is
    /// written out again to add `kinesisMetadata` (a number would not be, see the next test).
    #[test]
    fn a_38_digit_decimal_written_as_a_string_survives_metadata_injection() {
        let line = format!(r#"{{"amount":"{DECIMAL_38}","small":"0.000000000000000000000000000000000001"}}"#);
        for attrs in [SHARD, &[]] {
            match PLAIN.prepare(&flow_file(&format!("{line}\n{line}\n"), attrs)) {
                Prepared::Rows { rows, .. } => {
                    for row in rows {
                        let text = String::from_utf8(row.json.to_vec()).unwrap();
                        assert!(text.contains(&format!(r#""amount":"{DECIMAL_38}""#)), "{text}");
                        assert!(text.contains(r#""small":"0.000000000000000000000000000000000001""#), "{text}");
                    }
                }
                other => panic!("{other:?}"),
            }
        }
    }

    /// Why decimals are strings: serde_json without `arbitrary_precision` reads a 38-digit number as
    /// an f64, and a row written out again (metadata added) no longer holds the same number.
    #[test]
    fn a_38_digit_number_would_lose_digits_when_the_row_is_written_again() {
        let (_, rows) = rows(PLAIN.prepare(&flow_file(&format!(r#"{{"amount":{DECIMAL_38}}}"#), SHARD)));
        assert_ne!(rows[0].0["amount"].to_string(), DECIMAL_38);
    }

    /// Records read by a Record Reader from ConsumeKinesis' Inject Metadata output: `kinesisMetadata`
    /// as Java writes it (approximateArrival in epoch milliseconds as the JSON path has it, or an
    /// ISO-8601 text) gives exact per-record tokens and is sent as it came.
    #[test]
    fn record_reader_rows_with_their_metadata_use_its_tokens_whatever_the_arrival_format() {
        let meta = |seq: &str, arrival: &str| {
            format!(
                r#"{{"id":1,"kinesisMetadata":{{"stream":"orders","shardId":"shardId-000000000001","sequenceNumber":"{seq}","subSequenceNumber":0,"shardedSequenceNumber":"{seq}00000000000000000000","partitionKey":"k","approximateArrival":{arrival}}}}}"#
            )
        };
        let first = meta("4958", "1700000000000");
        let second = meta("4959", r#""2023-11-14T22:13:20.123Z""#);
        let mut attrs: Vec<_> = SHARD.iter().copied().filter(|(k, _)| *k != ATTR_RECORD_COUNT).collect();
        attrs.push((ATTR_RECORD_COUNT, "2"));
        match PLAIN.prepare(&flow_file(&format!("{first}\n{second}\n"), &attrs)) {
            Prepared::Rows { delivery, rows, .. } => {
                assert_eq!(delivery, Delivery::ExactlyOnce);
                assert_eq!(rows[0].token.to_string(), "495800000000000000000000");
                assert_eq!(rows[1].token.to_string(), "495900000000000000000000");
                assert_eq!(rows[0].json, first.as_bytes());
                assert_eq!(rows[1].json, second.as_bytes());
            }
            other => panic!("{other:?}"),
        }
    }

    /// ConsumeKinesis' Use Wrapper records keep their shape: columns `value` and `kinesisMetadata`.
    #[test]
    fn wrapped_records_are_rows_with_a_value_column() {
        let line = r#"{"value":{"id":7},"kinesisMetadata":{"shardId":"shardId-000000000001","shardedSequenceNumber":"495800000000000000000000"}}"#;
        let (_, rows) = rows(PLAIN.prepare(&flow_file(line, SHARD)));
        assert_eq!(rows[0].0["value"]["id"], 7);
        assert_eq!(rows[0].1, "495800000000000000000000");
    }

    /// A `kinesisMetadata` field's JSON text (None: absent), drawn from what a row may carry.
    fn field(name: &'static str) -> impl proptest::strategy::Strategy<Value = Option<String>> {
        use proptest::prelude::*;
        let ours = if name == "stream" { "orders" } else { "shardId-000000000001" };
        prop_oneof![
            3 => Just(None),
            6 => Just(Some(format!("\"{ours}\""))),
            1 => Just(Some("\"other\"".to_string())),
            1 => Just(Some("null".to_string())),
            1 => Just(Some("7".to_string())),
            1 => Just(Some("{\"a\":[1]}".to_string())),
            1 => Just(Some(format!("\"{}\"", ours.replace('s', "\\u0073")))),
        ]
    }

    /// One line of content: usually a row with metadata, sometimes anything that must take the general way.
    fn line() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let sharded = prop_oneof![
            8 => (4950u32..4960, 0u32..3).prop_map(|(s, sub)| Some(format!("\"{s}00000000000000000000{sub}\""))),
            1 => Just(None),
            1 => Just(Some("\"4955000000000000000000001:2\"".to_string())),
            1 => Just(Some("\"not a token\"".to_string())),
            1 => Just(Some("4955".to_string())),
        ];
        let metadata = (field("stream"), field("shardId"), sharded, proptest::bool::weighted(0.05)).prop_map(
            |(stream, shard, sharded, twice)| {
                let mut parts = Vec::new();
                for (k, v) in [("stream", stream), ("shardId", shard), ("shardedSequenceNumber", sharded)] {
                    if let Some(v) = v {
                        parts.push(format!("\"{k}\":{v}"));
                    }
                }
                if twice {
                    parts.push("\"stream\":\"orders\"".to_string());
                }
                parts.push("\"partitionKey\":\"k\\n1\"".to_string());
                format!("{{{}}}", parts.join(","))
            },
        );
        prop_oneof![
            10 => (metadata, 0u32..1000, proptest::bool::weighted(0.05)).prop_map(|(m, id, twice)| {
                let dup = if twice { format!(",\"kinesisMetadata\":{m}") } else { String::new() };
                format!("{{\"id\":{id},\"n\":12345678901234567890123,\"s\":\"a\\\"b\",\"kinesisMetadata\":{m}{dup}}}")
            }),
            1 => Just("{\"id\":1}".to_string()),
            1 => Just("{\"id\":1,\"kinesisMetadata\":null}".to_string()),
            1 => Just("{\"id\":1,\"kinesisMetadata\":\"x\"}".to_string()),
            1 => Just("[{\"id\":1}]".to_string()),
            1 => Just("{\"id\":\r1,\"kinesisMetadata\":{\"shardedSequenceNumber\":\"495900000000000000000000\"}}".to_string()),
            1 => Just("not json".to_string()),
            1 => Just("   ".to_string()),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]
        /// Whatever the content, the fast path (row_probe) answers exactly what the general way does.
        #[test]
        fn the_fast_path_agrees_with_the_general_way(
            lines in proptest::collection::vec(line(), 0..6),
            crlf in proptest::bool::ANY,
            from_shard in proptest::bool::weighted(0.9),
        ) {
            let content = lines.join(if crlf { "\r\n" } else { "\n" });
            let attrs: &[(&str, &str)] = if from_shard { SHARD } else { &[] };
            let ff = flow_file(&content, attrs);
            let general = PLAIN.prepare_general(&ff, source_of(&ff.attributes));
            proptest::prop_assert_eq!(PLAIN.prepare(&ff), general, "content {:?}", content);
        }
    }

    /// Random JSON-ish rows, mostly what ConsumeKinesis writes, often with one of the ways a line can
    /// differ from what serde_json reads (issue 38: the fast path took `1e400`, lone escaped
    /// surrogates, nesting beyond serde_json's limit and a form feed around a row, which the general
    /// way refuses).
    struct JsonFuzz {
        state: u64,
        /// While set, every choice is the usual one (a row as ConsumeKinesis writes it).
        calm: bool,
    }

    impl JsonFuzz {
        fn next(&mut self) -> u64 {
            self.state ^= self.state << 13;
            self.state ^= self.state >> 7;
            self.state ^= self.state << 17;
            self.state
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }

        fn one<'a>(&mut self, choices: &[&'a str]) -> &'a str {
            choices[self.below(choices.len())]
        }

        /// Usually clean; one time in `odds` anything (never while calm).
        fn odd(&mut self, odds: usize) -> bool {
            !self.calm && self.below(odds) == 0
        }

        fn ws(&mut self) -> &'static str {
            if self.odd(4) {
                self.one(&[" ", "\t", "  ", " \t", "\r", "\u{c}", "\u{b}", "\r\n", "\u{a0}"])
            } else {
                ""
            }
        }

        fn number(&mut self) -> String {
            if self.calm {
                return self.one(&["0", "7", "-12", "3.25", "1391.97", "1e5", "2.5E-3"]).into();
            }
            if self.odd(3) {
                let exponent = self.one(&["e", "E", "e+", "e-", "E-"]);
                let magnitude = self.one(&[
                    "0", "5", "0005", "298", "299", "300", "301", "307", "308", "309", "400", "99999", "123456",
                ]);
                let mantissa = self.one(&["1", "-1", "0", "-0", "0.001", "1.5", "12", "999", "0.0"]);
                return format!("{mantissa}{exponent}{magnitude}");
            }
            match self.below(12) {
                0 => "1".repeat(299),
                1 => format!("-{}", "9".repeat(300)),
                2 => "9".repeat(301),
                3 => "1".repeat(310),
                4 => self
                    .one(&["01", "1.", "-", ".5", "1e", "1e+", "+1", "0x1", "1..2", "--1", "1.e5", "NaN", "Infinity"])
                    .into(),
                _ => self
                    .one(&[
                        "0",
                        "-0",
                        "7",
                        "-12",
                        "3.25",
                        "1391.97",
                        "12345678901234567890123",
                        "18446744073709551616",
                        "-9223372036854775809",
                        "0.1e1",
                    ])
                    .into(),
            }
        }

        fn string(&mut self) -> String {
            let mut out = String::from("\"");
            for _ in 0..self.below(6) {
                let piece = if self.odd(5) {
                    self.one(&[
                        "\\\"",
                        "\\\\",
                        "\\/",
                        "\\b",
                        "\\f",
                        "\\n",
                        "\\r",
                        "\\t",
                        "\\u0041",
                        "\\u00e9",
                        "\\uD83D\\uDE00",
                        "\\ud800",
                        "\\uDC00",
                        "\\uDBFF",
                        "\\uD800x",
                        "\\u+123",
                        "\\u12",
                        "\\x",
                        "\\'",
                        "\u{1}",
                        "\t",
                        "\u{1f}",
                        "\u{7f}",
                        "é",
                        "😀",
                        "\\u0000",
                        "\\uFFFF",
                        "\\uFFFE",
                        "$serde_json::private::RawValue",
                    ])
                } else {
                    self.one(&[
                        "a",
                        "order",
                        " ",
                        "shardId",
                        "Mozilla/5.0 (X11; Linux x86_64)",
                        "12",
                        "kinesisMetadata",
                    ])
                };
                out.push_str(piece);
            }
            if !self.odd(60) {
                out.push('"');
            }
            out
        }

        fn value(&mut self, depth: usize) -> String {
            let pick = if depth > 4 || (self.calm && depth > 2) { 3 + self.below(5) } else { self.below(9) };
            match pick {
                0 => {
                    let n = self.below(4);
                    let members: Vec<String> = (0..n)
                        .map(|_| {
                            let (key, ws, value) = (self.string(), self.ws(), self.value(depth + 1));
                            format!("{key}{ws}:{}{value}", self.ws())
                        })
                        .collect();
                    let trailing = if self.odd(40) { "," } else { "" };
                    format!("{{{}{}{trailing}}}", self.ws(), members.join(","))
                }
                1 => {
                    let n = self.below(4);
                    let items: Vec<String> = (0..n).map(|_| self.value(depth + 1)).collect();
                    format!("[{}]", items.join(&format!("{},", self.ws())))
                }
                2 if self.odd(8) => {
                    let n = [1, 50, 98, 99, 100, 101, 125, 126, 127, 128, 129, 200][self.below(12)];
                    let (open, close) = if self.odd(2) { ("[", "]") } else { ("{\"a\":", "}") };
                    format!("{}1{}", open.repeat(n), close.repeat(n))
                }
                3 | 4 => self.string(),
                5 | 6 => self.number(),
                _ => self.one(&["true", "false", "null", "tru", "nul", "falsey", "True"]).into(),
            }
        }

        fn metadata(&mut self, sequence: u64) -> String {
            let mut parts = Vec::new();
            let sharded = if self.odd(12) { self.value(2) } else { format!("\"{sequence}00000000000000000000\"") };
            for (key, value) in [
                ("stream", if self.odd(12) { self.value(2) } else { "\"orders\"".into() }),
                ("shardId", if self.odd(12) { self.value(2) } else { "\"shardId-000000000001\"".into() }),
                ("sequenceNumber", format!("\"{sequence}\"")),
                ("subSequenceNumber", "0".into()),
                ("shardedSequenceNumber", sharded),
                ("partitionKey", self.string()),
                ("approximateArrival", self.number()),
            ] {
                if !self.odd(15) {
                    parts.push(format!("\"{key}\":{}{value}", self.ws()));
                }
            }
            if self.odd(20) {
                parts.push(
                    self.one(&["\"stream\":\"orders\"", "\"str\\u0065am\":\"orders\"", "\"extra\":[1,{\"b\":null}]"])
                        .into(),
                );
            }
            let n = parts.len();
            parts.swap(self.below(n.max(1)).min(n.saturating_sub(1)), n.saturating_sub(1));
            format!("{{{}}}", parts.join(","))
        }

        fn line(&mut self, sequence: u64) -> String {
            let mut members = vec![
                format!("\"eventId\":\"000-{sequence}\""),
                format!("\"amount\":{}", self.number()),
                format!("\"items\":{}", self.value(1)),
                format!("\"note\":{}", self.string()),
            ];
            let metadata = if self.odd(15) { self.value(1) } else { self.metadata(sequence) };
            let key = if self.odd(30) { "kinesis\\u004detadata" } else { "kinesisMetadata" };
            members.insert(self.below(5), format!("\"{key}\":{}{metadata}", self.ws()));
            if self.odd(30) {
                members.push(format!("\"kinesisMetadata\":{}", self.metadata(sequence)));
            }
            let close = if self.odd(50) { "}}" } else { "}" };
            format!("{}{{{}{}{close}{}", self.ws(), self.ws(), members.join(&format!("{},", self.ws())), self.ws())
        }
    }

    #[test]
    fn the_fast_path_agrees_with_the_general_way_on_random_json() {
        let mut fuzz = JsonFuzz { state: 0x9E37_79B9_7F4A_7C15, calm: false };
        let (mut fast, cases) = (0, 20_000);
        for _ in 0..cases {
            let mut sequence = 4950 + fuzz.below(5) as u64;
            let lines: Vec<String> = (0..1 + fuzz.below(3))
                .map(|_| {
                    fuzz.calm = false;
                    fuzz.calm = !fuzz.odd(3);
                    sequence += if fuzz.odd(20) { 0 } else { 1 };
                    if fuzz.odd(30) {
                        fuzz.one(&["", "   ", "\u{c}", "\t\r"]).to_string()
                    } else {
                        fuzz.line(sequence)
                    }
                })
                .collect();
            fuzz.calm = false;
            let content = lines.join(if fuzz.odd(4) { "\r\n" } else { "\n" });
            let ff = flow_file(&content, SHARD);
            let general = PLAIN.prepare_general(&ff, source_of(&ff.attributes));
            let got = PLAIN.prepare(&ff);
            assert_eq!(got, general, "content {content:?}");
            if passthrough(&content, "orders", "shardId-000000000001").is_some() {
                fast += 1;
            }
        }
        assert!(fast > cases / 10, "the fast path answered {fast} of {cases}: the comparison says little");
    }

    /// Issue 38: lines the fast path took though serde_json refuses them (so the FlowFile was sent
    /// instead of going to `invalid`), and lines near those edges that it takes.
    #[test]
    fn the_fast_path_declines_what_serde_json_refuses_and_takes_what_it_reads() {
        let metadata = r#""kinesisMetadata":{"shardId":"shardId-000000000001","shardedSequenceNumber":"495900000000000000000000"}"#;
        let deep = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
        let (deep_100, deep_127, deep_128) = (deep(98), deep(126), deep(127));
        let cases: &[(&str, bool, String)] = &[
            ("a number out of f64's range", false, format!("{{\"a\":1e400,{metadata}}}")),
            ("a negative one", false, format!("{{\"a\":-12.5E+400,{metadata}}}")),
            ("an integer of 310 digits", false, format!("{{\"a\":{},{metadata}}}", "1".repeat(310))),
            ("nesting of 128", false, format!("{{\"a\":{deep_128},{metadata}}}")),
            ("a lone escaped surrogate", false, format!("{{\"a\":\"\\ud800\",{metadata}}}")),
            (
                "a lone low surrogate in the metadata",
                false,
                format!("{{{},\"b\":1}}", metadata.replace("\"shardId\"", "\"x\":\"\\udc00\",\"shardId\"")),
            ),
            ("a form feed after the row", false, format!("{{{metadata}}}\u{c}")),
            ("a form feed before it", false, format!("\u{c}{{{metadata}}}")),
            ("a control character in a string", false, format!("{{\"a\":\"x\u{1}\",{metadata}}}")),
            ("a trailing comma", false, format!("{{\"a\":1,{metadata},}}")),
            ("a number that underflows to 0", true, format!("{{\"a\":1e-400,{metadata}}}")),
            ("an integer past u64", true, format!("{{\"a\":123456789012345678901234567890,{metadata}}}")),
            ("nesting of 100", true, format!("{{\"a\":{deep_100},{metadata}}}")),
            ("nesting of 127 (the general way's deepest)", true, format!("{{\"a\":{deep_127},{metadata}}}")),
            (
                "an object whose first key is serde_json's raw-value token",
                false,
                format!("{{\"a\":{{\"$serde_json::private::RawValue\":1}},{metadata}}}"),
            ),
            (
                "the token as the row's first key",
                false,
                format!("{{\"$serde_json::private::RawValue\":\"{{}}\",{metadata}}}"),
            ),
            (
                "the token escaped, holding JSON",
                false,
                format!("{{\"a\":{{\"$serde_json::private::Raw\\u0056alue\":\"[1]\",\"b\":2}},{metadata}}}"),
            ),
            (
                "escapes and a surrogate pair",
                true,
                format!("{{\"a\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\uD83D\\uDE00\",{metadata}}}"),
            ),
            ("spaces and tabs around and inside", true, format!(" \t{{ \"a\" :\t[ 1 , 2 ] , {metadata} }} \t")),
        ];
        for (what, fast, line) in cases {
            let ff = flow_file(line, SHARD);
            let general = PLAIN.prepare_general(&ff, source_of(&ff.attributes));
            assert_eq!(PLAIN.prepare(&ff), general, "{what}: {line:?}");
            let took = passthrough(line, "orders", "shardId-000000000001");
            assert_eq!(took.is_some(), *fast, "{what}: {line:?} -> {general:?}");
            if *fast {
                assert!(matches!(general, Prepared::Rows { .. }), "{what}");
            }
        }
    }

    /// The fast path's rows are slices of the content's one buffer (no copy per row) and count
    /// that whole buffer once against Max In-Flight Size; the general way's rows own their text and
    /// count their NDJSON lines.
    #[test]
    fn rows_count_what_they_hold_in_flight() {
        let content = "{\"a\":1,\"kinesisMetadata\":{\"shardedSequenceNumber\":\"495900000000000000000000\"}}\r\n\n  \
                       {\"a\":2,\"kinesisMetadata\":{\"shardedSequenceNumber\":\"496000000000000000000003\"}} \n\n";
        let ff = flow_file(content, SHARD);
        let Prepared::Rows { rows, .. } = PLAIN.prepare(&ff) else { panic!("rows") };
        assert_eq!(rows.len(), 2);
        let buffer = ff.content.as_ptr_range();
        assert!(rows.iter().all(|r| buffer.contains(&r.json.as_ptr())), "slices of the content");
        assert_eq!(&rows[1].json[..], &content.as_bytes()[content.find("  {").unwrap() + 2..content.len() - 3]);
        assert_eq!(held_bytes(&ff, &rows), content.len() as u64);
        let marked = flow_file(content, &[SHARD, &[(ATTR_DELIVERY, AT_LEAST_ONCE)]].concat());
        let Prepared::Rows { rows, .. } = PLAIN.prepare(&marked) else { panic!("rows") };
        assert_eq!(held_bytes(&marked, &rows), content.len() as u64, "sent back for at-least-once: still slices");

        let ff = flow_file("{\"a\":1}\n\n{\"a\":2}\n", SHARD);
        let Prepared::Rows { rows, .. } = PLAIN.prepare(&ff) else { panic!("rows") };
        let buffer = ff.content.as_ptr_range();
        assert!(rows.iter().all(|r| !buffer.contains(&r.json.as_ptr())), "written out again");
        assert_eq!(held_bytes(&ff, &rows), rows.iter().map(|r| r.json.len() as u64 + 1).sum::<u64>());
        assert!(held_bytes(&ff, &rows) > ff.content.len() as u64, "with kinesisMetadata added");
    }

    #[test]
    fn rows_with_this_shards_metadata_take_the_fast_path() {
        let content = "{\"a\":1,\"kinesisMetadata\":{\"shardId\":\"shardId-000000000001\",\"shardedSequenceNumber\":\"495900000000000000000000\"}}\n\
                       {\"a\":2,\"kinesisMetadata\":{\"shardedSequenceNumber\":\"496000000000000000000003\"}}\n";
        let rows = passthrough(content, "orders", "shardId-000000000001").expect("fast path");
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1].token.to_string(), "496000000000000000000003");
        assert!(passthrough(content, "orders", "shardId-000000000002").is_none());
    }
}
