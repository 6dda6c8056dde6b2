//! Turns a FlowFile into the rows PutSnowflake sends: JSON objects whose first-level keys are the
//! columns, each with the offset token of the record it came from.
//!
//! Content may be one JSON object, a JSON array of objects, or newline-delimited objects (what
//! ConsumeKinesis writes). A `kinesisMetadata` object is added from the FlowFile's attributes when
//! the rows do not carry one; in Iceberg mode it always holds every declared field, null where
//! unknown, because a structured OBJECT column rejects missing fields. Anything that is not a JSON
//! object makes the whole FlowFile invalid, before a byte is sent.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::offset::{sharded_sequence_number, OffsetToken};

pub const ATTR_STREAM: &str = "aws.kinesis.stream.name";
pub const ATTR_SHARD: &str = "aws.kinesis.shard.id";
pub const ATTR_PARTITION_KEY: &str = "aws.kinesis.partition.key";
pub const ATTR_LAST_SEQUENCE: &str = "aws.kinesis.last.sequence.number";
pub const ATTR_LAST_SUB: &str = "aws.kinesis.last.subsequence.number";
pub const ATTR_ARRIVAL_MS: &str = "aws.kinesis.approximate.arrival.timestamp.ms";
pub const ATTR_RECORD_COUNT: &str = "record.count";
/// The shard's parents (comma-separated) when it was created by a split or merge.
pub const ATTR_PARENT_SHARDS: &str = "aws.kinesis.parent.shard.ids";

/// The attributes PutSnowflake reads; Java passes only these across JNI.
pub const ATTRIBUTES: &[&str] =
    &[ATTR_STREAM, ATTR_SHARD, ATTR_PARTITION_KEY, ATTR_LAST_SEQUENCE, ATTR_LAST_SUB, ATTR_ARRIVAL_MS, ATTR_RECORD_COUNT, ATTR_PARENT_SHARDS];

pub const METADATA_KEY: &str = "kinesisMetadata";
/// The fields of `kinesisMetadata`, as NiFi's ConsumeKinesis and Openflow's Kinesis connector name them.
pub const METADATA_FIELDS: &[&str] =
    &["stream", "shardId", "approximateArrival", "partitionKey", "sequenceNumber", "subSequenceNumber", "shardedSequenceNumber"];

/// One FlowFile as Java hands it over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowFileIn {
    pub id: i64,
    pub attributes: HashMap<String, String>,
    pub content: Vec<u8>,
}

/// Where a FlowFile's records came from: a Kinesis shard (exactly-once by offset token), or
/// anywhere else (tokens from a counter: at-least-once across replays).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Source {
    Shard { stream: String, shard_id: String },
    Direct,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub json: Vec<u8>,
    pub token: OffsetToken,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Prepared {
    Rows { source: Source, rows: Vec<Row> },
    /// Not sent: why the content is not rows.
    Invalid(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mapping {
    pub iceberg: bool,
}

impl Mapping {
    /// `direct_token` is the next counter value, used only when the FlowFile is not from a shard.
    pub fn prepare(&self, flow_file: &FlowFileIn, direct_token: impl FnOnce() -> u64) -> Prepared {
        let objects = match objects(&flow_file.content) {
            Ok(objects) => objects,
            Err(reason) => return Prepared::Invalid(reason),
        };
        let attrs = &flow_file.attributes;
        let source = match (attrs.get(ATTR_STREAM), attrs.get(ATTR_SHARD)) {
            (Some(stream), Some(shard)) => Source::Shard { stream: stream.clone(), shard_id: shard.clone() },
            _ => Source::Direct,
        };
        let flow_file_token = match &source {
            Source::Shard { .. } => match shard_token(attrs) {
                Ok(token) => token,
                Err(reason) => return Prepared::Invalid(reason),
            },
            Source::Direct => OffsetToken::from_counter(direct_token()),
        };
        let single = objects.len() == 1;
        let mut objects = objects;
        let own_tokens = match &source {
            Source::Shard { .. } => row_tokens(&objects),
            Source::Direct => None,
        };
        let count = objects.len() as u64;
        let mut rows = Vec::with_capacity(objects.len());
        for (i, parsed) in objects.iter_mut().enumerate() {
            let changed = self.add_metadata(&mut parsed.object, &source, attrs, single);
            let token = match &own_tokens {
                Some(tokens) => tokens[i].clone(),
                None if i as u64 + 1 == count => flow_file_token.clone(),
                None => flow_file_token.part(i as u64 + 1),
            };
            // A row that needs no change is sent as it came, without writing it out again.
            let json = match parsed.line {
                Some(line) if !changed => line.to_vec(),
                _ => serde_json::to_vec(&parsed.object).expect("JSON objects serialize"),
            };
            rows.push(Row { json, token });
        }
        Prepared::Rows { source, rows }
    }

    /// Adds or completes `kinesisMetadata`; returns whether the object changed.
    fn add_metadata(&self, object: &mut Map<String, Value>, source: &Source, attrs: &HashMap<String, String>, single: bool) -> bool {
        let Source::Shard { stream, shard_id } = source else { return false };
        let mut changed = !object.contains_key(METADATA_KEY);
        let metadata = object.entry(METADATA_KEY).or_insert_with(|| {
            let mut m = Map::new();
            m.insert("stream".into(), Value::from(stream.as_str()));
            m.insert("shardId".into(), Value::from(shard_id.as_str()));
            // Per-record fields are known only when the FlowFile holds a single record.
            if single {
                if let Some(arrival) = attrs.get(ATTR_ARRIVAL_MS).and_then(|a| a.parse::<i64>().ok()) {
                    m.insert("approximateArrival".into(), Value::from(arrival));
                }
                if let Some(key) = attrs.get(ATTR_PARTITION_KEY) {
                    m.insert("partitionKey".into(), Value::from(key.as_str()));
                }
                if let Some(sequence) = attrs.get(ATTR_LAST_SEQUENCE) {
                    let sub = attrs.get(ATTR_LAST_SUB).and_then(|s| s.parse::<u64>().ok());
                    m.insert("sequenceNumber".into(), Value::from(sequence.as_str()));
                    m.insert("subSequenceNumber".into(), Value::from(sub.unwrap_or(0)));
                    m.insert("shardedSequenceNumber".into(), Value::from(sharded_sequence_number(sequence, sub.unwrap_or(0))));
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

/// The FlowFile's last `shardedSequenceNumber`, from ConsumeKinesis' attributes.
fn shard_token(attrs: &HashMap<String, String>) -> Result<OffsetToken, String> {
    let sequence = attrs
        .get(ATTR_LAST_SEQUENCE)
        .ok_or_else(|| format!("the FlowFile names a shard but has no {ATTR_LAST_SEQUENCE} attribute"))?;
    let sub = match attrs.get(ATTR_LAST_SUB) {
        Some(s) => s.parse::<u64>().map_err(|_| format!("{ATTR_LAST_SUB} '{s}' is not a number"))?,
        None => 0,
    };
    OffsetToken::sharded(sequence, sub).ok_or_else(|| format!("{ATTR_LAST_SEQUENCE} '{sequence}' is not a Kinesis sequence number"))
}

/// Per-row tokens when every row carries `kinesisMetadata.shardedSequenceNumber` and they grow.
fn row_tokens(objects: &[Parsed<'_>]) -> Option<Vec<OffsetToken>> {
    let mut tokens: Vec<OffsetToken> = Vec::with_capacity(objects.len());
    for parsed in objects {
        let text = parsed.object.get(METADATA_KEY)?.get("shardedSequenceNumber")?.as_str()?;
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

/// The JSON objects of the content: one object, an array of objects, or one object per line.
fn objects(content: &[u8]) -> Result<Vec<Parsed<'_>>, String> {
    if std::str::from_utf8(content).is_err() {
        return Err("the content is not UTF-8 text, so it is not JSON".into());
    }
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
    if objects.is_empty() {
        return Err("the content holds no JSON object".into());
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
            content: content.as_bytes().to_vec(),
        }
    }

    const SHARD: &[(&str, &str)] = &[
        (ATTR_STREAM, "orders"),
        (ATTR_SHARD, "shardId-000000000001"),
        (ATTR_PARTITION_KEY, "pk-7"),
        (ATTR_LAST_SEQUENCE, "4960"),
        (ATTR_LAST_SUB, "3"),
        (ATTR_ARRIVAL_MS, "1700000000000"),
    ];

    fn rows(p: Prepared) -> (Source, Vec<(Value, String)>) {
        match p {
            Prepared::Rows { source, rows } => {
                (source, rows.into_iter().map(|r| (serde_json::from_slice(&r.json).unwrap(), r.token.to_string())).collect())
            }
            Prepared::Invalid(reason) => panic!("invalid: {reason}"),
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
        let (source, rows) = rows(PLAIN.prepare(&flow_file(r#"{"id":1}"#, SHARD), || unreachable!()));
        assert_eq!(source, Source::Shard { stream: "orders".into(), shard_id: "shardId-000000000001".into() });
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
        let (_, rows) = rows(PLAIN.prepare(&flow_file(content, SHARD), || unreachable!()));
        let tokens: Vec<_> = rows.iter().map(|r| r.1.as_str()).collect();
        assert_eq!(tokens, ["495900000000000000000000", "496000000000000000000003"]);
        assert!(rows[0].0["kinesisMetadata"].get("partitionKey").is_none(), "attributes of the first record must not be copied");
    }

    #[test]
    fn rows_needing_no_change_are_sent_as_they_came() {
        let line = r#"{"z":1,"a":2.50,"kinesisMetadata":{"shardedSequenceNumber":"495900000000000000000000"}}"#;
        let content = format!("{line}\r\n{{\"b\":1}}\n");
        match PLAIN.prepare(&flow_file(&content, SHARD), || unreachable!()) {
            Prepared::Rows { rows, .. } => {
                assert_eq!(rows[0].json, line.as_bytes(), "key order and number text kept");
                assert_ne!(rows[1].json, br#"{"b":1}"#.to_vec(), "metadata was added to the second");
            }
            other => panic!("{other:?}"),
        }
        let pretty = "{\n  \"a\": 1\n}";
        match PLAIN.prepare(&flow_file(pretty, &[]), || 5) {
            Prepared::Rows { rows, .. } => assert_eq!(rows[0].json, br#"{"a":1}"#.to_vec(), "a multi-line object is written on one line"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn lines_without_metadata_share_the_flow_file_token_in_parts() {
        let (_, rows) = rows(PLAIN.prepare(&flow_file("{\"a\":1}\n{\"a\":2}\n{\"a\":3}", SHARD), || unreachable!()));
        let tokens: Vec<_> = rows.iter().map(|r| r.1.as_str()).collect();
        assert_eq!(tokens, ["496000000000000000000003:1", "496000000000000000000003:2", "496000000000000000000003"]);
        assert_eq!(rows[1].0["kinesisMetadata"], serde_json::json!({"stream":"orders","shardId":"shardId-000000000001"}));
    }

    #[test]
    fn iceberg_metadata_carries_every_field() {
        let (_, rows) = rows(Mapping { iceberg: true }.prepare(&flow_file("{\"a\":1}\n{\"a\":2}", SHARD), || unreachable!()));
        let metadata = rows[0].0["kinesisMetadata"].as_object().unwrap();
        for field in METADATA_FIELDS {
            assert!(metadata.contains_key(*field), "{field}");
        }
        assert_eq!(metadata["sequenceNumber"], Value::Null);
    }

    #[test]
    fn other_flow_files_are_direct_with_counter_tokens_and_no_metadata() {
        let (source, rows) = rows(PLAIN.prepare(&flow_file(r#"[{"a":1},{"b":2}]"#, &[]), || 77));
        assert_eq!(source, Source::Direct);
        assert_eq!(rows[0].1, "77:1");
        assert_eq!(rows[1].1, "77");
        assert!(rows[0].0.get("kinesisMetadata").is_none());
    }

    #[test]
    fn pretty_printed_objects_are_one_row() {
        let (_, rows) = rows(PLAIN.prepare(&flow_file("{\n  \"a\": 1\n}\n", &[]), || 1));
        assert_eq!(rows.len(), 1);
    }

    #[test]
    fn non_objects_make_the_flow_file_invalid_with_the_place() {
        assert_eq!(invalid(PLAIN.prepare(&flow_file("42", &[]), || 1)), "the content is a JSON number, not an object");
        assert_eq!(invalid(PLAIN.prepare(&flow_file("{\"a\":1}\n[1]", &[]), || 1)), "line 2 is a JSON array, not an object");
        assert!(invalid(PLAIN.prepare(&flow_file("{\"a\":1}\n{oops", &[]), || 1)).starts_with("line 2 is not JSON"));
        assert_eq!(invalid(PLAIN.prepare(&flow_file("\n \n", &[]), || 1)), "the content holds no JSON object");
        let bad = FlowFileIn { id: 1, attributes: HashMap::new(), content: vec![b'{', 0xff, b'}'] };
        assert_eq!(invalid(PLAIN.prepare(&bad, || 1)), "the content is not UTF-8 text, so it is not JSON");
        assert_eq!(invalid(PLAIN.prepare(&flow_file(r#"[{"a":1},2]"#, &[]), || 1)), "array element 2 is a JSON number, not an object");
    }

    /// Found by the snowflake_rows fuzz target: a sequence attribute ending in ':' gave the FlowFile
    /// the part token "4959:0", so its last row's token came before its other rows' ("4959:1") and
    /// the FlowFile never completed.
    #[test]
    fn a_sequence_attribute_that_is_not_decimal_makes_the_flow_file_invalid() {
        let attrs = &[(ATTR_STREAM, "s"), (ATTR_SHARD, "shardId-0"), (ATTR_LAST_SEQUENCE, "4959:")];
        let reason = invalid(PLAIN.prepare(&flow_file("{\"a\":1}\n{\"a\":2}", attrs), || unreachable!()));
        assert_eq!(reason, "aws.kinesis.last.sequence.number '4959:' is not a Kinesis sequence number");
    }

    #[test]
    fn a_shard_flow_file_without_sequence_attributes_is_invalid() {
        let attrs = &[(ATTR_STREAM, "s"), (ATTR_SHARD, "shardId-0")];
        assert!(invalid(PLAIN.prepare(&flow_file("{}", attrs), || 1)).contains(ATTR_LAST_SEQUENCE));
    }
}
