//! Turns a shard's records into FlowFile contents, following the Processing Strategy (one FlowFile
//! per record, or one newline-delimited FlowFile per shard) and the Output Strategy (bytes as they
//! are, wrapped, or with `kinesisMetadata` injected). A record that must be JSON and is not goes to
//! `parse.failure` whole, with the reason; nothing is dropped.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::config::consume_kinesis::{OutputStrategy, ProcessingStrategy};
use crate::kinesis::position::Position;
use crate::kinesis::record::{KinesisRecord, ShardRecords};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Success = 0,
    ParseFailure = 1,
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
    pub processing: ProcessingStrategy,
    pub output: OutputStrategy,
}

impl Layout<'_> {
    pub fn shard(&self, shard: ShardRecords) -> ShardFlowFiles {
        let mut flow_files = Vec::new();
        let mut lines: Option<FlowFileOut> = None;
        let mut before = shard.previous;
        for mut record in shard.records {
            let previous = std::mem::replace(&mut before, Some(Position::new(record.sequence_number.clone(), record.sub_sequence_number)));
            match self.content(&shard.shard_id, &mut record) {
                Ok(content) => match self.processing {
                    ProcessingStrategy::FlowFile => flow_files.push(single(&record, previous, Route::Success, content, String::new())),
                    ProcessingStrategy::LineDelimited => append_line(&mut lines, &record, previous, content),
                },
                Err(reason) => {
                    let data = std::mem::take(&mut record.data);
                    flow_files.push(single(&record, previous, Route::ParseFailure, data, reason))
                }
            }
        }
        flow_files.extend(lines);
        ShardFlowFiles {
            shard_id: shard.shard_id,
            parent_shard_ids: shard.parent_shard_ids,
            millis_behind: shard.millis_behind,
            flow_files,
            tenure: shard.tenure,
        }
    }

    /// The FlowFile content of one record; the record's data is moved, not copied, when used as is.
    fn content(&self, shard_id: &str, record: &mut KinesisRecord) -> Result<Vec<u8>, String> {
        match self.output {
            OutputStrategy::UseValue => Ok(std::mem::take(&mut record.data)),
            OutputStrategy::UseWrapper => {
                let value = parse_json(&record.data)?;
                let mut wrapper = Map::new();
                wrapper.insert("value".into(), value);
                wrapper.insert("kinesisMetadata".into(), self.metadata(shard_id, record));
                Ok(serde_json::to_vec(&Value::Object(wrapper)).expect("JSON values serialize"))
            }
            OutputStrategy::InjectMetadata => match parse_json(&record.data)? {
                Value::Object(mut object) => {
                    object.insert("kinesisMetadata".into(), self.metadata(shard_id, record));
                    Ok(serde_json::to_vec(&Value::Object(object)).expect("JSON values serialize"))
                }
                _ => Err("the record is JSON but not an object, so kinesisMetadata cannot be added to it".into()),
            },
        }
    }

    /// NiFi's `kinesisMetadata` fields.
    fn metadata(&self, shard_id: &str, record: &KinesisRecord) -> Value {
        serde_json::json!({
            "stream": self.stream,
            "shardId": shard_id,
            "sequenceNumber": record.sequence_number,
            "subSequenceNumber": record.sub_sequence_number.unwrap_or(0),
            "shardedSequenceNumber": record.sharded_sequence_number(),
            "partitionKey": &*record.partition_key,
            "approximateArrival": record.approximate_arrival_ms,
        })
    }
}

fn parse_json(data: &[u8]) -> Result<Value, String> {
    serde_json::from_slice(data).map_err(|e| format!("the record is not valid JSON: {e}"))
}

fn single(record: &KinesisRecord, previous: Option<Position>, route: Route, content: Vec<u8>, error: String) -> FlowFileOut {
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

fn append_line(lines: &mut Option<FlowFileOut>, record: &KinesisRecord, previous: Option<Position>, content: Vec<u8>) {
    match lines {
        None => *lines = Some(single(record, previous, Route::Success, content, String::new())),
        Some(ff) => {
            ff.content.push(b'\n');
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
        ShardRecords { shard_id: "shardId-000000000001".into(), parent_shard_ids: Vec::new(), millis_behind: 42, records, tenure: None, previous: None }
    }

    #[test]
    fn each_flow_file_names_the_record_read_before_its_first() {
        let at = |seq: &str, sub| Some(Position::new(seq, sub));
        let mut s = shard(vec![record("5", Some(0), "{}"), record("5", Some(1), "oops"), record("6", None, "{}")]);
        s.previous = at("4", None);
        let layout = Layout { stream: "s", processing: ProcessingStrategy::FlowFile, output: OutputStrategy::InjectMetadata };
        let out = layout.shard(s.clone());
        let previous: Vec<_> = out.flow_files.iter().map(|f| (f.route, f.previous.clone())).collect();
        assert_eq!(previous, vec![(Route::Success, at("4", None)), (Route::ParseFailure, at("5", Some(0))), (Route::Success, at("5", Some(1)))]);
        let layout = Layout { processing: ProcessingStrategy::LineDelimited, ..layout };
        let out = layout.shard(s);
        let lines = out.flow_files.iter().find(|f| f.route == Route::Success).unwrap();
        assert_eq!((lines.previous.clone(), lines.record_count), (at("4", None), 2), "the lines' FlowFile starts after the batch's previous record");
    }

    #[test]
    fn line_delimited_joins_a_shards_records_in_order() {
        let layout = Layout { stream: "s", processing: ProcessingStrategy::LineDelimited, output: OutputStrategy::UseValue };
        let out = layout.shard(shard(vec![record("1", None, "a"), record("2", Some(0), "b"), record("2", Some(1), "c")]));
        assert_eq!(out.flow_files.len(), 1);
        let ff = &out.flow_files[0];
        assert_eq!(ff.content, b"a\nb\nc");
        assert_eq!((ff.record_count, ff.first_sequence.as_str(), ff.last_sequence.as_str(), ff.last_sub), (3, "1", "2", Some(1)));
    }

    #[test]
    fn inject_metadata_adds_nifis_fields() {
        let layout = Layout { stream: "orders", processing: ProcessingStrategy::FlowFile, output: OutputStrategy::InjectMetadata };
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
        let layout = Layout { stream: "s", processing: ProcessingStrategy::FlowFile, output: OutputStrategy::UseWrapper };
        let out = layout.shard(shard(vec![record("1", None, "[1,2]")]));
        let v: Value = serde_json::from_slice(&out.flow_files[0].content).unwrap();
        assert_eq!(v["value"], serde_json::json!([1, 2]));
    }

    #[test]
    fn non_json_goes_to_parse_failure_whole_and_the_rest_continues() {
        let layout = Layout { stream: "s", processing: ProcessingStrategy::LineDelimited, output: OutputStrategy::InjectMetadata };
        let out = layout.shard(shard(vec![record("1", None, "{\"a\":1}"), record("2", None, "\u{0}not json"), record("3", None, "5")]));
        let failures: Vec<_> = out.flow_files.iter().filter(|f| f.route == Route::ParseFailure).collect();
        assert_eq!(failures.len(), 2);
        assert_eq!(failures[0].content, b"\0not json");
        assert!(failures[0].error.contains("not valid JSON"));
        assert!(failures[1].error.contains("not an object"));
        let ok: Vec<_> = out.flow_files.iter().filter(|f| f.route == Route::Success).collect();
        assert_eq!(ok.len(), 1);
        assert_eq!(ok[0].record_count, 1);
    }
}
