//! Turns a shard's records into FlowFile contents, following the Processing Strategy (one FlowFile
//! per record; one FlowFile per shard with the records joined by a demarcator, a newline for
//! LINE_DELIMITED; or, for RECORD, one entry per record that the shim's Record Reader and Writer
//! turn into FlowFiles) and the Output Strategy (bytes as they are, wrapped, or with
//! `kinesisMetadata` injected, spliced in by `inject`). A record that must be JSON and is not goes
//! to `parse.failure` whole, with the reason; nothing is dropped.
//!
//! A demarcator is not escaped: a record that contains it is written as it is, and a split on the
//! demarcator downstream cuts that record in pieces.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::config::consume_kinesis::{OutputStrategy, ProcessingStrategy};
use crate::contract::metadata as meta;
use crate::kinesis::position::Position;
use crate::kinesis::record::{KinesisRecord, ShardRecords};

mod inject;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Success = crate::contract::wire::BATCH_ROUTE_SUCCESS as isize,
    ParseFailure = crate::contract::wire::BATCH_ROUTE_PARSE_FAILURE as isize,
}

/// One FlowFile to write: its content and what its attributes are made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowFileOut {
    pub route: Route,
    pub record_count: u32,
    pub first_sequence: String,
    pub first_sub: Option<u64>,
    pub last_sequence: String,
    pub last_sub: Option<u64>,
    /// The shard's record read just before this FlowFile's first one in the same lease (whatever
    /// FlowFile that record went to), or `None` when its first record is the first the lease read
    /// from the shard's start; see [`ShardRecords::previous`].
    pub previous: Option<Position>,
    /// The first record's key, shared with it (not copied).
    pub partition_key: Arc<str>,
    pub arrival_ms: i64,
    pub error: String,
    pub content: Vec<u8>,
}

/// The FlowFiles of one shard in one batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardFlowFiles {
    pub shard_id: String,
    pub parent_shard_ids: Vec<String>,
    pub millis_behind: i64,
    pub flow_files: Vec<FlowFileOut>,
    /// See [`ShardRecords::tenure`].
    pub tenure: Option<u64>,
}

pub struct Layout<'a> {
    pub stream: &'a str,
    pub processing: &'a ProcessingStrategy,
    pub output: OutputStrategy,
}

impl Layout<'_> {
    pub fn shard(&self, shard: ShardRecords) -> ShardFlowFiles {
        let mut flow_files = Vec::new();
        let mut joined: Option<FlowFileOut> = None;
        let mut before = shard.previous;
        for mut record in shard.records {
            let previous = before.replace(Position::new(record.sequence_number.clone(), record.sub_sequence_number));
            match self.content(&shard.shard_id, &mut record) {
                Ok(content) => match self.processing {
                    ProcessingStrategy::FlowFile | ProcessingStrategy::Record => {
                        flow_files.push(single(&record, previous, Route::Success, content, String::new()))
                    }
                    ProcessingStrategy::Demarcated(demarcator) => {
                        append(&mut joined, demarcator, &record, previous, content)
                    }
                },
                Err(reason) => {
                    let data = std::mem::take(&mut record.data);
                    flow_files.push(single(&record, previous, Route::ParseFailure, data, reason))
                }
            }
        }
        flow_files.extend(joined);
        ShardFlowFiles {
            shard_id: shard.shard_id,
            parent_shard_ids: shard.parent_shard_ids,
            millis_behind: shard.millis_behind,
            flow_files,
            tenure: shard.tenure,
        }
    }

    /// The FlowFile content of one record; the record's data is moved, not copied, when used as is.
    /// RECORD hands the bytes as they are: the shim applies the Output Strategy to the records its
    /// Record Reader reads from them.
    fn content(&self, shard_id: &str, record: &mut KinesisRecord) -> Result<Vec<u8>, String> {
        if *self.processing == ProcessingStrategy::Record {
            return Ok(std::mem::take(&mut record.data));
        }
        match self.output {
            OutputStrategy::UseValue => Ok(std::mem::take(&mut record.data)),
            OutputStrategy::UseWrapper => {
                let value = parse_json(&record.data)?;
                let mut wrapper = Map::new();
                wrapper.insert("value".into(), value);
                wrapper.insert(meta::KEY.into(), self.metadata(shard_id, record));
                Ok(serde_json::to_vec(&Value::Object(wrapper)).expect("JSON values serialize"))
            }
            OutputStrategy::InjectMetadata => match inject::splice(&record.data, |out| {
                inject::write_metadata(
                    out,
                    self.stream,
                    shard_id,
                    &record.sequence_number,
                    record.sub_sequence_number.unwrap_or(0),
                    &record.sharded_sequence_number(),
                    &record.partition_key,
                    record.approximate_arrival_ms,
                )
            }) {
                Some(spliced) => Ok(spliced),
                None => self.inject_by_value(shard_id, record),
            },
        }
    }

    /// INJECT_METADATA by parsing the record into a `Value` and writing it out again: for the records
    /// [`inject::splice`] leaves to it (not an object, not JSON, a key already named, a key named
    /// twice), and the yardstick the splice is tested against.
    fn inject_by_value(&self, shard_id: &str, record: &KinesisRecord) -> Result<Vec<u8>, String> {
        match parse_json(&record.data)? {
            Value::Object(mut object) => {
                object.insert(meta::KEY.into(), self.metadata(shard_id, record));
                Ok(serde_json::to_vec(&Value::Object(object)).expect("JSON values serialize"))
            }
            _ => Err("the record is JSON but not an object, so kinesisMetadata cannot be added to it".into()),
        }
    }

    /// NiFi's `kinesisMetadata` fields.
    fn metadata(&self, shard_id: &str, record: &KinesisRecord) -> Value {
        let fields: [(&str, Value); 7] = [
            (meta::STREAM, self.stream.into()),
            (meta::SHARD_ID, shard_id.into()),
            (meta::SEQUENCE_NUMBER, record.sequence_number.as_str().into()),
            (meta::SUB_SEQUENCE_NUMBER, record.sub_sequence_number.unwrap_or(0).into()),
            (meta::SHARDED_SEQUENCE_NUMBER, record.sharded_sequence_number().into()),
            (meta::PARTITION_KEY, (*record.partition_key).into()),
            (meta::APPROXIMATE_ARRIVAL, record.approximate_arrival_ms.into()),
        ];
        Value::Object(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
    }
}

fn parse_json(data: &[u8]) -> Result<Value, String> {
    serde_json::from_slice(data).map_err(|e| format!("the record is not valid JSON: {e}"))
}

fn single(
    record: &KinesisRecord,
    previous: Option<Position>,
    route: Route,
    content: Vec<u8>,
    error: String,
) -> FlowFileOut {
    FlowFileOut {
        previous,
        route,
        record_count: 1,
        first_sequence: record.sequence_number.clone(),
        first_sub: record.sub_sequence_number,
        last_sequence: record.sequence_number.clone(),
        last_sub: record.sub_sequence_number,
        partition_key: record.partition_key.clone(),
        arrival_ms: record.approximate_arrival_ms,
        error,
        content,
    }
}

/// Adds a record to the shard's joined FlowFile, after the demarcator (as it is, never escaped).
fn append(
    joined: &mut Option<FlowFileOut>,
    demarcator: &[u8],
    record: &KinesisRecord,
    previous: Option<Position>,
    content: Vec<u8>,
) {
    match joined {
        None => *joined = Some(single(record, previous, Route::Success, content, String::new())),
        Some(ff) => {
            ff.content.extend_from_slice(demarcator);
            ff.content.extend_from_slice(&content);
            ff.record_count += 1;
            ff.last_sequence = record.sequence_number.clone();
            ff.last_sub = record.sub_sequence_number;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(seq: &str, sub: Option<u64>, data: &str) -> KinesisRecord {
        KinesisRecord {
            sequence_number: seq.into(),
            sub_sequence_number: sub,
            partition_key: format!("pk-{seq}").into(),
            approximate_arrival_ms: 1_700_000_000_123,
            data: data.as_bytes().to_vec(),
        }
    }

    fn shard(records: Vec<KinesisRecord>) -> ShardRecords {
        ShardRecords {
            shard_id: "shardId-000000000001".into(),
            parent_shard_ids: Vec::new(),
            millis_behind: 42,
            records,
            tenure: None,
            previous: None,
        }
    }

    #[test]
    fn each_flow_file_names_the_record_read_before_its_first() {
        let at = |seq: &str, sub| Some(Position::new(seq, sub));
        let mut s = shard(vec![record("5", Some(0), "{}"), record("5", Some(1), "oops"), record("6", None, "{}")]);
        s.previous = at("4", None);
        let layout =
            Layout { stream: "s", processing: &ProcessingStrategy::FlowFile, output: OutputStrategy::InjectMetadata };
        let out = layout.shard(s.clone());
        let previous: Vec<_> = out.flow_files.iter().map(|f| (f.route, f.previous.clone())).collect();
        assert_eq!(
            previous,
            vec![
                (Route::Success, at("4", None)),
                (Route::ParseFailure, at("5", Some(0))),
                (Route::Success, at("5", Some(1)))
            ]
        );
        let lines = ProcessingStrategy::line_delimited();
        let layout = Layout { processing: &lines, ..layout };
        let out = layout.shard(s);
        let lines = out.flow_files.iter().find(|f| f.route == Route::Success).unwrap();
        assert_eq!(
            (lines.previous.clone(), lines.record_count),
            (at("4", None), 2),
            "the lines' FlowFile starts after the batch's previous record"
        );
    }

    #[test]
    fn line_delimited_joins_a_shards_records_in_order() {
        let lines = ProcessingStrategy::line_delimited();
        let layout = Layout { stream: "s", processing: &lines, output: OutputStrategy::UseValue };
        let out =
            layout.shard(shard(vec![record("1", None, "a"), record("2", Some(0), "b"), record("2", Some(1), "c")]));
        assert_eq!(out.flow_files.len(), 1);
        let ff = &out.flow_files[0];
        assert_eq!(ff.content, b"a\nb\nc");
        assert_eq!(
            (ff.record_count, ff.first_sequence.as_str(), ff.last_sequence.as_str(), ff.last_sub),
            (3, "1", "2", Some(1))
        );
    }

    #[test]
    fn inject_metadata_adds_nifis_fields() {
        let layout = Layout {
            stream: "orders",
            processing: &ProcessingStrategy::FlowFile,
            output: OutputStrategy::InjectMetadata,
        };
        let out = layout.shard(shard(vec![record("77", Some(3), r#"{"id":1}"#)]));
        let v: Value = serde_json::from_slice(&out.flow_files[0].content).unwrap();
        assert_eq!(v["id"], 1);
        let m = &v["kinesisMetadata"];
        assert_eq!(m["stream"], "orders");
        assert_eq!(m["shardId"], "shardId-000000000001");
        assert_eq!(m["sequenceNumber"], "77");
        assert_eq!(m["subSequenceNumber"], 3);
        assert_eq!(m["shardedSequenceNumber"], "7700000000000000000003");
        assert_eq!(m["partitionKey"], "pk-77");
        assert_eq!(m["approximateArrival"], 1_700_000_000_123i64);
    }

    #[test]
    fn wrapper_keeps_any_json_value() {
        let layout =
            Layout { stream: "s", processing: &ProcessingStrategy::FlowFile, output: OutputStrategy::UseWrapper };
        let out = layout.shard(shard(vec![record("1", None, "[1,2]")]));
        let v: Value = serde_json::from_slice(&out.flow_files[0].content).unwrap();
        assert_eq!(v["value"], serde_json::json!([1, 2]));
    }

    #[test]
    fn non_json_goes_to_parse_failure_whole_and_the_rest_continues() {
        let lines = ProcessingStrategy::line_delimited();
        let layout = Layout { stream: "s", processing: &lines, output: OutputStrategy::InjectMetadata };
        let out = layout.shard(shard(vec![
            record("1", None, "{\"a\":1}"),
            record("2", None, "\u{0}not json"),
            record("3", None, "5"),
        ]));
        let failures: Vec<_> = out.flow_files.iter().filter(|f| f.route == Route::ParseFailure).collect();
        assert_eq!(failures.len(), 2);
        assert_eq!(failures[0].content, b"\0not json");
        assert!(failures[0].error.contains("not valid JSON"));
        assert!(failures[1].error.contains("not an object"));
        let ok: Vec<_> = out.flow_files.iter().filter(|f| f.route == Route::Success).collect();
        assert_eq!(ok.len(), 1);
        assert_eq!(ok[0].record_count, 1);
    }

    #[test]
    fn a_multi_byte_demarcator_joins_records_and_is_not_escaped_inside_them() {
        let demarcator = ProcessingStrategy::Demarcated("\u{1F4A5}\r\n".as_bytes().to_vec());
        let layout = Layout { stream: "s", processing: &demarcator, output: OutputStrategy::UseValue };
        let inside = "left\u{1F4A5}\r\nright";
        let out =
            layout.shard(shard(vec![record("1", None, "a"), record("2", None, inside), record("3", Some(4), "c")]));
        assert_eq!(out.flow_files.len(), 1, "one FlowFile per shard per batch");
        let ff = &out.flow_files[0];
        assert_eq!(
            ff.content,
            "a\u{1F4A5}\r\nleft\u{1F4A5}\r\nright\u{1F4A5}\r\nc".as_bytes(),
            "the record's own demarcator stays as it is"
        );
        assert_eq!(
            (ff.record_count, ff.first_sequence.as_str(), ff.last_sequence.as_str(), ff.last_sub),
            (3, "1", "3", Some(4))
        );
        let text = String::from_utf8(ff.content.clone()).unwrap();
        assert_eq!(
            text.split("\u{1F4A5}\r\n").count(),
            4,
            "a split on the demarcator downstream cuts the second record in two"
        );
    }

    #[test]
    fn a_demarcator_applies_the_output_strategy_per_record() {
        let demarcator = ProcessingStrategy::Demarcated(b"||".to_vec());
        let layout = Layout { stream: "s", processing: &demarcator, output: OutputStrategy::InjectMetadata };
        let out = layout.shard(shard(vec![
            record("1", None, r#"{"a":1}"#),
            record("2", None, "nope"),
            record("3", None, r#"{"a":3}"#),
        ]));
        let ok = out.flow_files.iter().find(|f| f.route == Route::Success).unwrap();
        let parts: Vec<Value> = String::from_utf8(ok.content.clone())
            .unwrap()
            .split("||")
            .map(|p| serde_json::from_str(p).unwrap())
            .collect();
        assert_eq!(parts.len(), 2);
        assert_eq!(
            (parts[0]["a"].clone(), parts[1]["kinesisMetadata"]["sequenceNumber"].clone()),
            (1.into(), "3".into())
        );
        assert_eq!(out.flow_files.iter().filter(|f| f.route == Route::ParseFailure).count(), 1);
    }

    #[test]
    fn record_gives_one_entry_per_record_with_its_bytes_and_previous_positions() {
        let at = |seq: &str, sub| Some(Position::new(seq, sub));
        let mut s = shard(vec![
            record("5", Some(0), "\u{0}not json"),
            record("5", Some(1), r#"{"a":1}"#),
            record("6", None, "x,y"),
        ]);
        s.previous = at("4", None);
        for output in [OutputStrategy::UseValue, OutputStrategy::UseWrapper, OutputStrategy::InjectMetadata] {
            let layout = Layout { stream: "s", processing: &ProcessingStrategy::Record, output };
            let out = layout.shard(s.clone());
            let entries: Vec<_> = out
                .flow_files
                .iter()
                .map(|f| {
                    (
                        f.route,
                        f.record_count,
                        f.first_sequence.as_str(),
                        f.last_sub,
                        f.previous.clone(),
                        f.content.as_slice(),
                    )
                })
                .collect();
            assert_eq!(
                entries,
                vec![
                    (Route::Success, 1, "5", Some(0), at("4", None), "\u{0}not json".as_bytes()),
                    (Route::Success, 1, "5", Some(1), at("5", Some(0)), br#"{"a":1}"#.as_slice()),
                    (Route::Success, 1, "6", None, at("5", Some(1)), b"x,y".as_slice()),
                ],
                "{output:?}: no JSON parsing in Rust, the shim's reader decides"
            );
            assert_eq!((&*out.flow_files[2].partition_key, out.flow_files[2].arrival_ms), ("pk-6", 1_700_000_000_123));
        }
    }
}
