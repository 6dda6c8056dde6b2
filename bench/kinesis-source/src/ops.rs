//! The Kinesis operations served, on protocol-neutral inputs (the request body decoded to a JSON value by
//! `protocol`) and outputs (`Reply`, encoded back by `protocol`): ListShards, DescribeStream,
//! DescribeStreamSummary, GetShardIterator and GetRecords over the generated stream.
//!
//! The stream is fixed and every shard stays open: a drained shard answers empty batches with
//! `MillisBehindLatest` 0 and a next iterator at the same place, never a null one.

use std::ops::Range;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ApiError;
use crate::fan_out;
use crate::generate::{self, Generator};
use crate::iterator::{IteratorCodec, ShardIterator};
use crate::limits::{Limits, Throttle};
use crate::protocol::Timestamp;
use crate::sequence::SequenceNumber;

/// Kinesis' cap on one GetRecords answer's data.
pub const MAX_BATCH_BYTES: usize = 10 * 1024 * 1024;
pub const MAX_GET_RECORDS_LIMIT: i64 = 10_000;
const LIST_SHARDS_PAGE: i64 = 1000;
const DESCRIBE_STREAM_PAGE: i64 = 100;

/// The operations this server answers (by `X-Amz-Target: Kinesis_20131202.<name>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    ListShards,
    DescribeStream,
    DescribeStreamSummary,
    GetShardIterator,
    GetRecords,
    RegisterStreamConsumer,
    DescribeStreamConsumer,
    ListStreamConsumers,
    DeregisterStreamConsumer,
    SubscribeToShard,
}

impl Operation {
    pub const ALL: [Operation; 10] = [
        Operation::ListShards,
        Operation::DescribeStream,
        Operation::DescribeStreamSummary,
        Operation::GetShardIterator,
        Operation::GetRecords,
        Operation::RegisterStreamConsumer,
        Operation::DescribeStreamConsumer,
        Operation::ListStreamConsumers,
        Operation::DeregisterStreamConsumer,
        Operation::SubscribeToShard,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Operation::ListShards => "ListShards",
            Operation::DescribeStream => "DescribeStream",
            Operation::DescribeStreamSummary => "DescribeStreamSummary",
            Operation::GetShardIterator => "GetShardIterator",
            Operation::GetRecords => "GetRecords",
            Operation::RegisterStreamConsumer => "RegisterStreamConsumer",
            Operation::DescribeStreamConsumer => "DescribeStreamConsumer",
            Operation::ListStreamConsumers => "ListStreamConsumers",
            Operation::DeregisterStreamConsumer => "DeregisterStreamConsumer",
            Operation::SubscribeToShard => "SubscribeToShard",
        }
    }

    /// From an `X-Amz-Target` header value.
    pub fn from_target(target: &str) -> Result<Self, ApiError> {
        let name = target.strip_prefix("Kinesis_20131202.").unwrap_or("");
        Operation::ALL.into_iter().find(|op| op.name() == name).ok_or_else(|| {
            ApiError::UnknownOperation(format!("operation not served by this benchmark source: {target:?}"))
        })
    }

    pub fn index(self) -> usize {
        Operation::ALL.iter().position(|&op| op == self).expect("in ALL")
    }
}

// ---- inputs ----

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct StreamRef {
    stream_name: Option<String>,
    #[serde(rename = "StreamARN")]
    stream_arn: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ListShardsInput {
    #[serde(flatten)]
    stream: StreamRef,
    next_token: Option<String>,
    max_results: Option<i64>,
    exclusive_start_shard_id: Option<String>,
    shard_filter: Option<ShardFilter>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ShardFilter {
    r#type: String,
    shard_id: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct DescribeStreamInput {
    #[serde(flatten)]
    stream: StreamRef,
    limit: Option<i64>,
    exclusive_start_shard_id: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct GetShardIteratorInput {
    #[serde(flatten)]
    stream: StreamRef,
    shard_id: String,
    shard_iterator_type: String,
    starting_sequence_number: Option<String>,
    /// Epoch seconds (the protocol decoders turn CBOR's epoch milliseconds into seconds).
    timestamp: Option<f64>,
}

/// Where an iterator or a subscription starts: GetShardIterator's fields, SubscribeToShard's
/// `StartingPosition`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct StartingPosition {
    pub r#type: String,
    pub sequence_number: Option<String>,
    /// Epoch seconds.
    pub timestamp: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct GetRecordsInput {
    shard_iterator: String,
    limit: Option<i64>,
}

// ---- outputs ----

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Shard {
    pub shard_id: String,
    pub hash_key_range: HashKeyRange,
    pub sequence_number_range: SequenceNumberRange,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct HashKeyRange {
    pub starting_hash_key: String,
    pub ending_hash_key: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct SequenceNumberRange {
    pub starting_sequence_number: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct ListShardsOutput {
    pub shards: Vec<Shard>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_token: Option<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct StreamModeDetails {
    pub stream_mode: &'static str,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct EnhancedMetrics {
    pub shard_level_metrics: Vec<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct StreamDescription {
    pub stream_name: String,
    #[serde(rename = "StreamARN")]
    pub stream_arn: String,
    pub stream_status: &'static str,
    pub stream_mode_details: StreamModeDetails,
    pub shards: Vec<Shard>,
    pub has_more_shards: bool,
    pub retention_period_hours: u32,
    pub stream_creation_timestamp: Timestamp,
    pub enhanced_monitoring: Vec<EnhancedMetrics>,
    pub encryption_type: &'static str,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct DescribeStreamOutput {
    pub stream_description: StreamDescription,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct StreamDescriptionSummary {
    pub stream_name: String,
    #[serde(rename = "StreamARN")]
    pub stream_arn: String,
    pub stream_status: &'static str,
    pub stream_mode_details: StreamModeDetails,
    pub retention_period_hours: u32,
    pub stream_creation_timestamp: Timestamp,
    pub enhanced_monitoring: Vec<EnhancedMetrics>,
    pub encryption_type: &'static str,
    pub open_shard_count: u32,
    pub consumer_count: u32,
    /// The stream's maximum record size (`--max-record-size-kib`), as Kinesis reports it.
    #[serde(rename = "MaxRecordSizeInKiB")]
    pub max_record_size_in_kib: u32,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct DescribeStreamSummaryOutput {
    pub stream_description_summary: StreamDescriptionSummary,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct GetShardIteratorOutput {
    pub shard_iterator: String,
}

/// One GetRecords answer: the records' data blobs and partition keys back to back in two buffers
/// (one allocation each per call, not per record), and per record where its parts are.
#[derive(Debug, Default)]
pub struct RecordBatch {
    pub data: Vec<u8>,
    pub keys: String,
    pub records: Vec<BatchRecord>,
    pub next_shard_iterator: String,
    pub millis_behind_latest: u64,
}

#[derive(Debug, Clone)]
pub struct BatchRecord {
    pub data: Range<usize>,
    pub key: Range<usize>,
    pub sequence_number: SequenceNumber,
    pub arrival_ms: u64,
}

impl RecordBatch {
    pub fn data_of(&self, r: &BatchRecord) -> &[u8] {
        &self.data[r.data.clone()]
    }

    pub fn key_of(&self, r: &BatchRecord) -> &str {
        &self.keys[r.key.clone()]
    }
}

/// What an operation answers, for `protocol` to encode.
#[derive(Debug)]
pub enum Reply {
    ListShards(ListShardsOutput),
    DescribeStream(DescribeStreamOutput),
    DescribeStreamSummary(DescribeStreamSummaryOutput),
    GetShardIterator(GetShardIteratorOutput),
    GetRecords(RecordBatch),
    RegisterStreamConsumer(fan_out::RegisterStreamConsumerOutput),
    DescribeStreamConsumer(fan_out::DescribeStreamConsumerOutput),
    ListStreamConsumers(fan_out::ListStreamConsumersOutput),
    /// DeregisterStreamConsumer: an empty object.
    Empty,
    /// SubscribeToShard: the server streams the events (`fan_out::push_events`); the body of the
    /// initial response is an empty object.
    SubscribeToShard(fan_out::Subscription),
}

/// The served stream and everything the operations need.
pub struct Source {
    generator: Generator,
    iterators: IteratorCodec,
    limits: Option<Limits>,
    consumers: fan_out::Consumers,
    live: Option<Live>,
}

/// `--live-rate`: a live stream. Record `i` of every shard arrives at `start_ms + i · 1000 / rate` (ms, rounded
/// down) and is served from then on, with that ApproximateArrivalTimestamp; until then a shard looks as if it
/// ended before it. (AT_TIMESTAMP iterators and `--dump` keep the generator's arrival times.)
#[derive(Debug, Clone, Copy)]
pub struct Live {
    pub start_ms: u64,
    /// Records per second of each shard.
    pub rate: f64,
}

impl Live {
    pub fn arrival_ms(&self, index: u64) -> u64 {
        self.start_ms + (index as f64 * 1000.0 / self.rate) as u64
    }

    /// How many records of a shard have arrived by `now_ms`.
    pub fn arrived(&self, now_ms: u64) -> u64 {
        if now_ms < self.start_ms {
            return 0;
        }
        let mut n = ((now_ms - self.start_ms + 1) as f64 * self.rate / 1000.0).ceil() as u64;
        while n > 0 && self.arrival_ms(n - 1) > now_ms {
            n -= 1;
        }
        while self.arrival_ms(n) <= now_ms {
            n += 1;
        }
        n
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

impl Source {
    pub fn new(generator: Generator, with_limits: bool) -> Self {
        let spec = generator.spec();
        let tag = generate::mix(generate::mix(spec.seed, spec.created_at_ms), name_hash(&spec.stream_name));
        let limits = with_limits.then(|| Limits::new(spec.shard_count));
        Source {
            generator,
            iterators: IteratorCodec::new(tag),
            limits,
            consumers: fan_out::Consumers::default(),
            live: None,
        }
    }

    /// Serves the stream live (`--live-rate`).
    pub fn with_live(mut self, live: Live) -> Self {
        self.live = Some(live);
        self
    }

    /// Records of `shard` served so far: all of them, or those that have arrived in a live stream.
    fn available(&self, shard: u32) -> u64 {
        let count = self.generator.records_in(shard);
        self.live.map_or(count, |l| l.arrived(now_ms()).min(count))
    }

    fn arrival_ms(&self, index: u64) -> u64 {
        self.live.map_or_else(|| self.generator.arrival_ms(index), |l| l.arrival_ms(index))
    }

    /// Whether `--limits` is on (fan-out then paces each subscription at 2 MiB/s).
    pub fn limited(&self) -> bool {
        self.limits.is_some()
    }

    pub fn generator(&self) -> &Generator {
        &self.generator
    }

    pub fn handle(&self, op: Operation, input: Value) -> Result<Reply, ApiError> {
        match op {
            Operation::ListShards => self.list_shards(parse(input)?).map(Reply::ListShards),
            Operation::DescribeStream => self.describe_stream(parse(input)?).map(Reply::DescribeStream),
            Operation::DescribeStreamSummary => {
                self.describe_stream_summary(parse(input)?).map(Reply::DescribeStreamSummary)
            }
            Operation::GetShardIterator => self.get_shard_iterator(parse(input)?).map(Reply::GetShardIterator),
            Operation::GetRecords => self.get_records(parse(input)?).map(Reply::GetRecords),
            Operation::RegisterStreamConsumer => {
                let input: fan_out::ConsumerInput = parse(input)?;
                self.check_stream_arn(input.stream_arn.as_deref())?;
                self.consumers.register(&self.generator.spec().stream_arn(), input).map(Reply::RegisterStreamConsumer)
            }
            Operation::DescribeStreamConsumer => {
                let input: fan_out::ConsumerInput = parse(input)?;
                if input.consumer_arn.is_none() {
                    self.check_stream_arn(input.stream_arn.as_deref())?;
                }
                self.consumers.describe(&self.generator.spec().stream_arn(), &input).map(Reply::DescribeStreamConsumer)
            }
            Operation::ListStreamConsumers => {
                let input: fan_out::ConsumerInput = parse(input)?;
                self.check_stream_arn(input.stream_arn.as_deref())?;
                Ok(Reply::ListStreamConsumers(self.consumers.list()))
            }
            Operation::DeregisterStreamConsumer => {
                let input: fan_out::ConsumerInput = parse(input)?;
                if input.consumer_arn.is_none() {
                    self.check_stream_arn(input.stream_arn.as_deref())?;
                }
                self.consumers.deregister(&input).map(|()| Reply::Empty)
            }
            Operation::SubscribeToShard => self.subscribe(parse(input)?).map(Reply::SubscribeToShard),
        }
    }

    fn check_stream_arn(&self, arn: Option<&str>) -> Result<(), ApiError> {
        self.check_stream(&StreamRef {
            stream_name: None,
            stream_arn: Some(arn.ok_or_else(|| ApiError::InvalidArgument("StreamARN is required".into()))?.to_string()),
        })
    }

    fn subscribe(&self, input: fan_out::SubscribeToShardInput) -> Result<fan_out::Subscription, ApiError> {
        self.consumers.find_arn(&input.consumer_arn)?;
        let shard = self.shard_index(&input.shard_id)?;
        let position = self.start_position(shard, &input.starting_position)?;
        Ok(fan_out::Subscription { consumer_arn: input.consumer_arn, shard, position })
    }

    fn check_stream(&self, r: &StreamRef) -> Result<(), ApiError> {
        let spec = self.generator.spec();
        let not_found = |what: &str| {
            ApiError::ResourceNotFound(format!("Stream {what} under account {} not found.", spec.account_id))
        };
        match (&r.stream_name, &r.stream_arn) {
            (None, None) => Err(ApiError::InvalidArgument("Either StreamName or StreamARN must be given".into())),
            (Some(name), _) if *name != spec.stream_name => Err(not_found(name)),
            (_, Some(arn)) if *arn != spec.stream_arn() => Err(not_found(arn)),
            _ => Ok(()),
        }
    }

    fn shard(&self, index: u32) -> Shard {
        let g = &self.generator;
        let range = g.hash_range(index);
        Shard {
            shard_id: generate::shard_id(index),
            hash_key_range: HashKeyRange {
                starting_hash_key: range.start.to_string(),
                ending_hash_key: range.end.to_string(),
            },
            sequence_number_range: SequenceNumberRange {
                starting_sequence_number: g.sequence_number(index, 0).to_string(),
            },
        }
    }

    /// The shard index after `id` (0 without one), for ExclusiveStartShardId.
    fn after_shard(&self, id: Option<&str>) -> Result<u32, ApiError> {
        match id {
            None => Ok(0),
            Some(id) => generate::parse_shard_id(id)
                .map(|s| s.saturating_add(1))
                .ok_or_else(|| ApiError::InvalidArgument(format!("Invalid ShardId {id:?}"))),
        }
    }

    fn shard_page(&self, from: u32, limit: i64) -> (Vec<Shard>, Option<u32>) {
        let total = self.generator.shard_count();
        let end = total.min(from.saturating_add(limit as u32));
        let shards = (from.min(total)..end).map(|s| self.shard(s)).collect();
        (shards, (end < total).then_some(end))
    }

    fn list_shards(&self, input: ListShardsInput) -> Result<ListShardsOutput, ApiError> {
        let limit = page_limit(input.max_results, LIST_SHARDS_PAGE, "maxResults")?;
        let from = match &input.next_token {
            Some(token) => self.decode_list_token(token)?,
            None => {
                self.check_stream(&input.stream)?;
                let mut from = self.after_shard(input.exclusive_start_shard_id.as_deref())?;
                if let Some(filter) = &input.shard_filter {
                    from = from.max(self.filter_start(filter)?);
                }
                from
            }
        };
        let (shards, next) = self.shard_page(from, limit);
        Ok(ListShardsOutput { shards, next_token: next.map(|n| self.encode_list_token(n)) })
    }

    /// Every shard is open from the trim horizon to now, so every filter but AFTER_SHARD_ID lists all.
    fn filter_start(&self, filter: &ShardFilter) -> Result<u32, ApiError> {
        match filter.r#type.as_str() {
            "AFTER_SHARD_ID" => self.after_shard(Some(filter.shard_id.as_deref().unwrap_or(""))),
            "AT_TRIM_HORIZON" | "FROM_TRIM_HORIZON" | "AT_LATEST" | "AT_TIMESTAMP" | "FROM_TIMESTAMP" => Ok(0),
            other => Err(ApiError::InvalidArgument(format!("Invalid ShardFilter type {other:?}"))),
        }
    }

    fn encode_list_token(&self, next: u32) -> String {
        STANDARD.encode(format!("list-shards:{}:{next}", self.generator.spec().stream_name))
    }

    fn decode_list_token(&self, token: &str) -> Result<u32, ApiError> {
        let invalid = || ApiError::InvalidArgument(format!("Invalid NextToken {token:?}"));
        let text = String::from_utf8(STANDARD.decode(token).map_err(|_| invalid())?).map_err(|_| invalid())?;
        let rest = text.strip_prefix("list-shards:").ok_or_else(invalid)?;
        let (name, next) = rest.rsplit_once(':').ok_or_else(invalid)?;
        if name != self.generator.spec().stream_name {
            return Err(invalid());
        }
        next.parse().map_err(|_| invalid())
    }

    fn describe_stream(&self, input: DescribeStreamInput) -> Result<DescribeStreamOutput, ApiError> {
        self.check_stream(&input.stream)?;
        let limit = page_limit(input.limit, DESCRIBE_STREAM_PAGE, "limit")?;
        let from = self.after_shard(input.exclusive_start_shard_id.as_deref())?;
        let (shards, next) = self.shard_page(from, limit);
        let spec = self.generator.spec();
        Ok(DescribeStreamOutput {
            stream_description: StreamDescription {
                stream_name: spec.stream_name.clone(),
                stream_arn: spec.stream_arn(),
                stream_status: "ACTIVE",
                stream_mode_details: StreamModeDetails { stream_mode: "PROVISIONED" },
                shards,
                has_more_shards: next.is_some(),
                retention_period_hours: 24,
                stream_creation_timestamp: Timestamp(spec.created_at_ms),
                enhanced_monitoring: vec![EnhancedMetrics { shard_level_metrics: Vec::new() }],
                encryption_type: "NONE",
            },
        })
    }

    fn describe_stream_summary(&self, input: StreamRef) -> Result<DescribeStreamSummaryOutput, ApiError> {
        self.check_stream(&input)?;
        let spec = self.generator.spec();
        Ok(DescribeStreamSummaryOutput {
            stream_description_summary: StreamDescriptionSummary {
                stream_name: spec.stream_name.clone(),
                stream_arn: spec.stream_arn(),
                stream_status: "ACTIVE",
                stream_mode_details: StreamModeDetails { stream_mode: "PROVISIONED" },
                retention_period_hours: 24,
                stream_creation_timestamp: Timestamp(spec.created_at_ms),
                enhanced_monitoring: vec![EnhancedMetrics { shard_level_metrics: Vec::new() }],
                encryption_type: "NONE",
                open_shard_count: spec.shard_count,
                consumer_count: 0,
                max_record_size_in_kib: spec.max_record_size_kib,
            },
        })
    }

    fn get_shard_iterator(&self, input: GetShardIteratorInput) -> Result<GetShardIteratorOutput, ApiError> {
        self.check_stream(&input.stream)?;
        let shard = self.shard_index(&input.shard_id)?;
        let start = StartingPosition {
            r#type: input.shard_iterator_type,
            sequence_number: input.starting_sequence_number,
            timestamp: input.timestamp,
        };
        let position = self.start_position(shard, &start)?;
        Ok(GetShardIteratorOutput { shard_iterator: self.iterators.encode(ShardIterator { shard, position }) })
    }

    pub(crate) fn shard_index(&self, id: &str) -> Result<u32, ApiError> {
        generate::parse_shard_id(id).filter(|&s| s < self.generator.shard_count()).ok_or_else(|| {
            let spec = self.generator.spec();
            ApiError::ResourceNotFound(format!(
                "Shard {id} in stream {} under account {} does not exist",
                spec.stream_name, spec.account_id
            ))
        })
    }

    /// The index of the first record an iterator of this type returns.
    pub(crate) fn start_position(&self, shard: u32, input: &StartingPosition) -> Result<u64, ApiError> {
        let g = &self.generator;
        let count = g.records_in(shard);
        let sequence = || -> Result<u64, ApiError> {
            let seq = input.sequence_number.as_deref().ok_or_else(|| {
                ApiError::InvalidArgument(format!("StartingSequenceNumber is required for {}", input.r#type))
            })?;
            g.layout()
                .parse_in(shard, seq)
                .map_err(|e| ApiError::InvalidArgument(format!("Invalid StartingSequenceNumber: {e}")))
        };
        let position = match input.r#type.as_str() {
            "TRIM_HORIZON" => 0,
            "LATEST" => self.available(shard),
            "AT_SEQUENCE_NUMBER" => sequence()?,
            "AFTER_SEQUENCE_NUMBER" => sequence()?.saturating_add(1),
            "AT_TIMESTAMP" => {
                let seconds = input
                    .timestamp
                    .ok_or_else(|| ApiError::InvalidArgument("Timestamp is required for AT_TIMESTAMP".into()))?;
                g.first_arrival_at_or_after(shard, (seconds.max(0.0) * 1000.0).ceil() as u64)
            }
            other => return Err(ApiError::InvalidArgument(format!("Invalid ShardIteratorType {other:?}"))),
        };
        Ok(position.min(count))
    }

    fn get_records(&self, input: GetRecordsInput) -> Result<RecordBatch, ApiError> {
        let it = self
            .iterators
            .decode(&input.shard_iterator)
            .filter(|it| it.shard < self.generator.shard_count())
            .ok_or_else(|| ApiError::InvalidArgument(format!("Invalid ShardIterator {:?}", input.shard_iterator)))?;
        let limit = match input.limit {
            None => MAX_GET_RECORDS_LIMIT,
            Some(l) if (1..=MAX_GET_RECORDS_LIMIT).contains(&l) => l,
            Some(l) => return Err(ApiError::InvalidArgument(format!(
                "1 validation error detected: Value '{l}' at 'limit' failed to satisfy constraint: Member must have value between 1 and {MAX_GET_RECORDS_LIMIT}"
            ))),
        };
        if let Some(limits) = &self.limits {
            limits.admit(it.shard).map_err(|t| self.throttled(it.shard, t))?;
        }
        let batch = self.read_batch(it, limit as u64, MAX_BATCH_BYTES);
        if let Some(limits) = &self.limits {
            limits.charge(it.shard, batch.data.len());
        }
        Ok(batch)
    }

    fn throttled(&self, shard: u32, why: Throttle) -> ApiError {
        let spec = self.generator.spec();
        let what = match why {
            Throttle::Calls => "GetRecords calls per second",
            Throttle::Bytes => "read bytes per second",
        };
        ApiError::ProvisionedThroughputExceeded(format!(
            "Rate exceeded for shard {} in stream {} under account {} ({what}).",
            generate::shard_id(shard),
            spec.stream_name,
            spec.account_id
        ))
    }

    /// Up to `limit` records from the iterator's position whose data stays within `max_bytes`, and at
    /// least one record if any remains: a record that alone is larger (a 10 MiB record in a 2 MiB
    /// fan-out event) goes alone.
    pub fn read_batch(&self, it: ShardIterator, limit: u64, max_bytes: usize) -> RecordBatch {
        let g = &self.generator;
        let count = self.available(it.shard);
        let end = count.min(it.position.saturating_add(limit));
        let mut batch = RecordBatch::default();
        let wanted = (end.saturating_sub(it.position)) as usize;
        batch.records.reserve(wanted);
        batch.data.reserve(
            wanted.saturating_mul(g.spec().largest_record_size()).min(max_bytes.max(g.spec().max_record_bytes())),
        );
        let mut next = it.position;
        while next < end && batch.data.len() < max_bytes {
            let data_start = batch.data.len();
            let key = g.kinesis_record_into(it.shard, next, &mut batch.data);
            if batch.data.len() > max_bytes && !batch.records.is_empty() {
                batch.data.truncate(data_start); // over the cap: it opens the next answer
                break;
            }
            let key_start = batch.keys.len();
            batch.keys.push_str(&key);
            batch.records.push(BatchRecord {
                data: data_start..batch.data.len(),
                key: key_start..batch.keys.len(),
                sequence_number: g.sequence_number(it.shard, next),
                arrival_ms: self.arrival_ms(next),
            });
            next += 1;
        }
        batch.next_shard_iterator = self.iterators.encode(ShardIterator { shard: it.shard, position: next });
        batch.millis_behind_latest = if next >= count {
            0
        } else {
            // how far the next unread record is behind the shard's last one; at least 1 while records remain
            (self.arrival_ms(count - 1) - self.arrival_ms(next)).max(1)
        };
        batch
    }
}

fn parse<T: for<'de> Deserialize<'de>>(input: Value) -> Result<T, ApiError> {
    serde_json::from_value(input).map_err(|e| ApiError::Serialization(format!("invalid request: {e}")))
}

fn page_limit(given: Option<i64>, page: i64, field: &str) -> Result<i64, ApiError> {
    match given {
        None => Ok(page),
        Some(n) if (1..=10_000).contains(&n) => Ok(n.min(page)),
        Some(n) => Err(ApiError::InvalidArgument(format!(
            "1 validation error detected: Value '{n}' at '{field}' failed to satisfy constraint: Member must have value between 1 and 10000"
        ))),
    }
}

fn name_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{test_spec, RecordCount, StreamSpec};
    use serde_json::json;

    fn source() -> Source {
        Source::new(Generator::new(test_spec()), false)
    }

    fn iterator(s: &Source, body: Value) -> Result<ShardIterator, ApiError> {
        match s.handle(Operation::GetShardIterator, body)? {
            Reply::GetShardIterator(out) => Ok(s.iterators.decode(&out.shard_iterator).unwrap()),
            other => panic!("{other:?}"),
        }
    }

    fn records(s: &Source, it: &str, limit: i64) -> RecordBatch {
        match s.handle(Operation::GetRecords, json!({"ShardIterator": it, "Limit": limit})).unwrap() {
            Reply::GetRecords(b) => b,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn targets_map_to_operations() {
        assert_eq!(Operation::from_target("Kinesis_20131202.GetRecords"), Ok(Operation::GetRecords));
        assert!(matches!(Operation::from_target("Kinesis_20131202.PutRecord"), Err(ApiError::UnknownOperation(_))));
        assert!(matches!(Operation::from_target("GetRecords"), Err(ApiError::UnknownOperation(_))));
    }

    #[test]
    fn list_shards_pages_with_next_token() {
        let s = Source::new(Generator::new(StreamSpec { shard_count: 5, ..test_spec() }), false);
        let Reply::ListShards(first) =
            s.handle(Operation::ListShards, json!({"StreamName": "bench", "MaxResults": 2})).unwrap()
        else {
            panic!()
        };
        assert_eq!(
            first.shards.iter().map(|s| s.shard_id.as_str()).collect::<Vec<_>>(),
            ["shardId-000000000000", "shardId-000000000001"]
        );
        let token = first.next_token.unwrap();
        let Reply::ListShards(rest) = s.handle(Operation::ListShards, json!({"NextToken": token})).unwrap() else {
            panic!()
        };
        assert_eq!(rest.shards.len(), 3);
        assert!(rest.next_token.is_none());
        let Reply::ListShards(after) = s
            .handle(Operation::ListShards, json!({"StreamName": "bench", "ShardFilter": {"Type": "AFTER_SHARD_ID", "ShardId": "shardId-000000000003"}}))
            .unwrap() else { panic!() };
        assert_eq!(after.shards.len(), 1);
        assert!(matches!(
            s.handle(Operation::ListShards, json!({"StreamName": "other"})),
            Err(ApiError::ResourceNotFound(_))
        ));
        assert!(matches!(
            s.handle(Operation::ListShards, json!({"NextToken": "bad"})),
            Err(ApiError::InvalidArgument(_))
        ));
    }

    #[test]
    fn iterator_types_find_their_position() {
        let s = source();
        let g = s.generator();
        let seq = g.sequence_number(1, 7).to_string();
        let base = json!({"StreamName": "bench", "ShardId": "shardId-000000000001"});
        let with = |extra: Value| {
            let mut b = base.clone();
            b.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            iterator(&s, b).map(|it| it.position)
        };
        assert_eq!(with(json!({"ShardIteratorType": "TRIM_HORIZON"})), Ok(0));
        assert_eq!(with(json!({"ShardIteratorType": "LATEST"})), Ok(50));
        assert_eq!(with(json!({"ShardIteratorType": "AT_SEQUENCE_NUMBER", "StartingSequenceNumber": seq})), Ok(7));
        assert_eq!(with(json!({"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "StartingSequenceNumber": seq})), Ok(8));
        let t = (g.arrival_ms(9) as f64) / 1000.0;
        assert_eq!(with(json!({"ShardIteratorType": "AT_TIMESTAMP", "Timestamp": t})), Ok(9));
        // another shard's sequence number
        let other = g.sequence_number(2, 7).to_string();
        assert!(matches!(
            with(json!({"ShardIteratorType": "AT_SEQUENCE_NUMBER", "StartingSequenceNumber": other})),
            Err(ApiError::InvalidArgument(_))
        ));
        assert!(matches!(with(json!({"ShardIteratorType": "SOMEWHERE"})), Err(ApiError::InvalidArgument(_))));
        let missing = json!({"StreamName": "bench", "ShardId": "shardId-000000000009", "ShardIteratorType": "LATEST"});
        assert!(matches!(iterator(&s, missing), Err(ApiError::ResourceNotFound(_))));
    }

    #[test]
    fn get_records_honours_limit_and_drains_to_zero_behind() {
        let s = Source::new(Generator::new(StreamSpec { records: RecordCount::PerShard(5), ..test_spec() }), false);
        let it = s.iterators.encode(ShardIterator { shard: 2, position: 0 });
        let first = records(&s, &it, 3);
        assert_eq!(first.records.len(), 3);
        assert!(first.millis_behind_latest > 0);
        let second = records(&s, &first.next_shard_iterator, 10);
        assert_eq!(second.records.len(), 2);
        assert_eq!(second.millis_behind_latest, 0);
        assert_eq!(second.records[0].sequence_number, s.generator().sequence_number(2, 3));
        let drained = records(&s, &second.next_shard_iterator, 10);
        assert!(drained.records.is_empty());
        assert_eq!(drained.millis_behind_latest, 0);
        assert_eq!(drained.next_shard_iterator, second.next_shard_iterator);
        assert!(matches!(
            s.handle(Operation::GetRecords, json!({"ShardIterator": it, "Limit": 0})),
            Err(ApiError::InvalidArgument(_))
        ));
        assert!(matches!(
            s.handle(Operation::GetRecords, json!({"ShardIterator": "AAAA"})),
            Err(ApiError::InvalidArgument(_))
        ));
        assert!(matches!(s.handle(Operation::GetRecords, json!({"Limit": 1})), Err(ApiError::Serialization(_))));
    }

    #[test]
    fn batches_stop_after_ten_mib() {
        let spec = StreamSpec {
            record_size: 1024 * 1024,
            aggregate_share: 0.0,
            records: RecordCount::PerShard(30),
            ..test_spec()
        };
        let s = Source::new(Generator::new(spec), false);
        let batch = s.read_batch(ShardIterator { shard: 0, position: 0 }, 10_000, MAX_BATCH_BYTES);
        assert_eq!(batch.records.len(), 10);
    }

    #[test]
    fn an_answer_stays_within_its_cap_but_always_holds_a_record() {
        let spec = |size| StreamSpec {
            record_size: size,
            aggregate_share: 0.0,
            records: RecordCount::PerShard(4),
            max_record_size_kib: 10240,
            ..test_spec()
        };
        let s = Source::new(Generator::new(spec(1024 * 1024 + 1)), false);
        let batch = s.read_batch(ShardIterator { shard: 0, position: 0 }, 10_000, MAX_BATCH_BYTES);
        assert_eq!(batch.records.len(), 4, "4 MiB and 4 bytes fit in 10 MiB");
        let s = Source::new(Generator::new(spec(4 * 1024 * 1024)), false);
        let batch = s.read_batch(ShardIterator { shard: 0, position: 0 }, 10_000, MAX_BATCH_BYTES);
        assert_eq!((batch.records.len(), batch.data.len()), (2, 8 * 1024 * 1024), "a third would exceed 10 MiB");
        let s = Source::new(Generator::new(spec(MAX_BATCH_BYTES)), false);
        for position in 0..4 {
            let batch = s.read_batch(ShardIterator { shard: 1, position }, 10_000, MAX_BATCH_BYTES);
            assert_eq!((batch.records.len(), batch.data.len()), (1, MAX_BATCH_BYTES), "a 10 MiB record per answer");
        }
        let event = s.read_batch(ShardIterator { shard: 1, position: 0 }, 10_000, fan_out::EVENT_MAX_BYTES);
        assert_eq!(event.records.len(), 1, "a record larger than a fan-out event's 2 MiB goes alone");
        let Reply::DescribeStreamSummary(summary) =
            s.handle(Operation::DescribeStreamSummary, json!({"StreamName": "bench"})).unwrap()
        else {
            panic!()
        };
        assert_eq!(summary.stream_description_summary.max_record_size_in_kib, 10240);
    }

    #[test]
    fn answers_of_mixed_record_sizes_stay_within_their_cap() {
        let spec = StreamSpec {
            record_sizes: vec![100, 1024 * 1024, 100, MAX_BATCH_BYTES],
            aggregate_share: 0.0,
            records: RecordCount::PerShard(8),
            max_record_size_kib: 10240,
            ..test_spec()
        };
        let s = Source::new(Generator::new(spec), false);
        let mut position = 0;
        let mut answers = Vec::new();
        while position < 8 {
            let batch = s.read_batch(ShardIterator { shard: 0, position }, 10_000, MAX_BATCH_BYTES);
            let sizes: Vec<usize> = batch.records.iter().map(|r| r.data.len()).collect();
            position += sizes.len() as u64;
            answers.push(sizes);
        }
        let (mib, max) = (1024 * 1024, MAX_BATCH_BYTES);
        assert_eq!(answers, [vec![100, mib, 100], vec![max], vec![100, mib, 100], vec![max]]);
    }

    #[test]
    fn limits_mode_throttles_the_sixth_call_in_a_second() {
        let s = Source::new(Generator::new(test_spec()), true);
        let it = s.iterators.encode(ShardIterator { shard: 0, position: 0 });
        for _ in 0..5 {
            records(&s, &it, 1);
        }
        let err = s.handle(Operation::GetRecords, json!({"ShardIterator": it, "Limit": 1})).unwrap_err();
        assert_eq!(err.type_name(), "ProvisionedThroughputExceededException");
        // another shard has its own budget
        let other = s.iterators.encode(ShardIterator { shard: 1, position: 0 });
        assert_eq!(records(&s, &other, 1).records.len(), 1);
    }

    #[test]
    fn a_live_stream_serves_only_records_that_have_arrived() {
        let live = Live { start_ms: now_ms() - 1_000, rate: 20.0 }; // record i arrives at start + 50 ms · i
        assert_eq!((live.arrival_ms(0), live.arrival_ms(3)), (live.start_ms, live.start_ms + 150));
        assert_eq!(
            (live.arrived(live.start_ms - 1), live.arrived(live.start_ms), live.arrived(live.start_ms + 149)),
            (0, 1, 3)
        );
        assert_eq!(Live { start_ms: 0, rate: 3.0 }.arrived(1_000), 4); // 0, 333, 666 and 1000 ms
        let s = Source::new(Generator::new(test_spec()), false).with_live(live);
        let batch = s.read_batch(ShardIterator { shard: 0, position: 0 }, 10_000, MAX_BATCH_BYTES);
        let n = batch.records.len();
        assert!((21..=23).contains(&n), "about a second's worth at 20/s: {n}");
        assert_eq!(batch.records[5].arrival_ms, live.start_ms + 250);
        assert_eq!(batch.millis_behind_latest, 0);
        let later = s.read_batch(ShardIterator { shard: 0, position: 40 }, 10_000, MAX_BATCH_BYTES);
        assert!(later.records.is_empty(), "not arrived yet");
        let latest = s.handle(
            Operation::GetShardIterator,
            json!({"StreamName": "bench", "ShardId": "shardId-000000000000", "ShardIteratorType": "LATEST"}),
        );
        assert!(latest.is_ok());
    }
}
