//! The stream to serve, as the command line describes it, validated: shard count, records per shard,
//! record size, payload format, share of KPL aggregates, partition-key scheme, seed and timeline. Everything served is a
//! pure function of this value (see `generate`), so a test that knows the flags can recompute every byte.

use thiserror::Error;

/// The largest record any stream may hold: 10 MiB, when its `MaxRecordSizeInKiB` is 10240.
pub const MAX_RECORD_BYTES: usize = 10 * 1024 * 1024;
/// A stream's maximum record size in KiB (`MaxRecordSizeInKiB`, raised with UpdateMaxRecordSize):
/// 1024 to 10240, 1024 unless raised.
pub const MAX_RECORD_SIZE_KIB_RANGE: std::ops::RangeInclusive<u32> = 1024..=10240;
pub const DEFAULT_MAX_RECORD_SIZE_KIB: u32 = 1024;
/// The most shards a stream may have here (the sequence-number layout keeps 6 digits for the shard).
pub const MAX_SHARDS: u32 = 999_999;

/// How user records get their partition keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyScheme {
    /// Each shard draws from its own pool of this many keys, chosen so that the MD5 of every key falls
    /// into the shard's hash-key range, as on real Kinesis (a consumer that checks this, like KCL's
    /// de-aggregation, keeps every record).
    ShardPool(u32),
    /// A distinct key per user record (`pk-<shard>-<index>-<sub>`), whatever its hash. Aggregates then
    /// carry an explicit hash key inside the shard's range for each user record, so KCL keeps them.
    Unique,
}

impl KeyScheme {
    /// Parses `shard-pool:<K>`, `shard-pool` (K = 16) or `unique`.
    pub fn parse(text: &str) -> Result<Self, SpecError> {
        match text {
            "unique" => Ok(KeyScheme::Unique),
            "shard-pool" => Ok(KeyScheme::ShardPool(16)),
            _ => {
                let k = text
                    .strip_prefix("shard-pool:")
                    .and_then(|k| k.parse::<u32>().ok())
                    .filter(|k| (1..=10_000).contains(k))
                    .ok_or_else(|| SpecError::KeyScheme(text.to_string()))?;
                Ok(KeyScheme::ShardPool(k))
            }
        }
    }
}

/// What a user record's bytes are (`--payload`): all three are the same size, `record_size`, and rebuilt on
/// demand from the same pool of filler bytes (see `generate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload {
    /// `<shard>.<index>.<sub>:` then filler: printable ASCII.
    Ascii,
    /// One JSON object: `{"shard":S,"index":I,"sub":U,"data":"<filler>"}`.
    Json,
    /// A bare Avro binary datum of `generate::AVRO_SCHEMA` (no container, no schema in the record).
    Avro,
}

impl Payload {
    pub fn parse(text: &str) -> Result<Self, SpecError> {
        match text {
            "ascii" => Ok(Payload::Ascii),
            "json" => Ok(Payload::Json),
            "avro" => Ok(Payload::Avro),
            _ => Err(SpecError::Payload(text.to_string())),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Payload::Ascii => "ascii",
            Payload::Json => "json",
            Payload::Avro => "avro",
        }
    }
}

/// What fills a user record after its header (`--filler`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filler {
    /// A slice of the pseudo-random pool (64 letters, 6 bits of entropy a byte): zstd leaves about 3/4 of it.
    Random,
    /// The first [`REPEAT_PERIOD`] bytes of that slice, repeated: zstd shrinks a 10 MiB record to a few KiB.
    Repeat,
}

/// The length of the piece a `Repeat` filler repeats.
pub const REPEAT_PERIOD: usize = 1024;

impl Filler {
    pub fn parse(text: &str) -> Result<Self, SpecError> {
        match text {
            "random" => Ok(Filler::Random),
            "repeat" => Ok(Filler::Repeat),
            _ => Err(SpecError::Filler(text.to_string())),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Filler::Random => "random",
            Filler::Repeat => "repeat",
        }
    }
}

/// The smallest record size of the json and avro payloads: room for their fields with the largest values.
pub const MIN_STRUCTURED_RECORD_BYTES: usize = 80;

/// How many Kinesis records each shard holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordCount {
    PerShard(u64),
    /// Spread over the shards: shard `s` gets `total / shards`, plus one for the first `total % shards`.
    Total(u64),
}

/// The validated description of the served stream.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamSpec {
    pub stream_name: String,
    pub account_id: String,
    pub region: String,
    pub shard_count: u32,
    pub records: RecordCount,
    /// Bytes of data of every user record (a plain record, or each user record inside an aggregate).
    pub record_size: usize,
    /// When not empty, Kinesis record `i` of every shard has `record_sizes[i % len]` bytes instead of
    /// `record_size` (`--record-sizes`; plain records only, no aggregates).
    pub record_sizes: Vec<usize>,
    /// What fills each user record after its header.
    pub filler: Filler,
    /// Share (0..=1) of the Kinesis records that are KPL aggregates, spread evenly along each shard.
    pub aggregate_share: f64,
    /// User records in each aggregate.
    pub records_per_aggregate: u32,
    pub keys: KeyScheme,
    pub payload: Payload,
    pub seed: u64,
    /// The stream's creation time and the arrival time of every shard's first record (epoch ms).
    pub created_at_ms: u64,
    /// Arrival times step by this much from one record to the next of a shard.
    pub arrival_interval_ms: u64,
    /// The stream's `MaxRecordSizeInKiB` (DescribeStreamSummary): no record's data (a plain record's,
    /// or a whole KPL aggregate's) is longer than this many KiB.
    pub max_record_size_kib: u32,
}

#[derive(Debug, Error, PartialEq)]
pub enum SpecError {
    #[error("shard count must be 1..={MAX_SHARDS}, not {0}")]
    ShardCount(u32),
    #[error(
        "record size must be at least 1 byte and at most the stream's maximum record size ({max} bytes), not {size}"
    )]
    RecordSize { size: usize, max: usize },
    #[error("the maximum record size must be 1024..=10240 KiB (MaxRecordSizeInKiB), not {0}")]
    MaxRecordSize(u32),
    #[error("aggregate share must be within 0..=1, not {0}")]
    AggregateShare(f64),
    #[error("records per aggregate must be 1..=100000, not {0}")]
    RecordsPerAggregate(u32),
    #[error(
        "an aggregate of {records} records of {size} bytes would exceed the stream's maximum record size ({max} bytes)"
    )]
    AggregateTooLarge { records: u32, size: usize, max: usize },
    #[error("unknown partition-key scheme {0:?} (use shard-pool[:K] or unique)")]
    KeyScheme(String),
    #[error("{shards} shards × {keys} pool keys is too many keys to search for (at most 4,000,000)")]
    KeyPool { shards: u32, keys: u32 },
    #[error("--record-sizes needs plain records: an aggregate share of 0, not {0}")]
    SizesWithAggregates(f64),
    #[error("unknown filler {0:?} (use random or repeat)")]
    Filler(String),
    #[error("unknown payload {0:?} (use ascii, json or avro)")]
    Payload(String),
    #[error("the {payload} payload needs a record size of at least {MIN_STRUCTURED_RECORD_BYTES} bytes, not {size}")]
    PayloadTooSmall { payload: &'static str, size: usize },
    #[error("stream name must be 1..=128 characters of [a-zA-Z0-9_.-], not {0:?}")]
    StreamName(String),
}

/// Upper bound on the protobuf and KPL framing an aggregate adds to its user records' data.
pub fn aggregate_overhead(records: u32, keys: KeyScheme) -> usize {
    let n = records as usize;
    // Magic + MD5, then per record its message: tag and length (1 + 5), the key index (1 + 3), the
    // explicit hash key index (1 + 3) and the data's tag and length (1 + 5).
    let framing = 4 + 16 + n * 20;
    // Key-table entries (tag, length, key of at most 64 bytes): shared within a shard's pool; with unique
    // keys one per record, plus an explicit hash key (tag, length, at most 39 digits) each.
    framing
        + match keys {
            KeyScheme::ShardPool(k) => n.min(k as usize) * (2 + 64),
            KeyScheme::Unique => n * (2 + 64 + 2 + 39),
        }
}

impl StreamSpec {
    /// Checks the ranges the generator relies on.
    pub fn validate(self) -> Result<Self, SpecError> {
        if self.shard_count == 0 || self.shard_count > MAX_SHARDS {
            return Err(SpecError::ShardCount(self.shard_count));
        }
        if !MAX_RECORD_SIZE_KIB_RANGE.contains(&self.max_record_size_kib) {
            return Err(SpecError::MaxRecordSize(self.max_record_size_kib));
        }
        let max = self.max_record_bytes();
        for &size in self.sizes() {
            if size == 0 || size > max {
                return Err(SpecError::RecordSize { size, max });
            }
            if self.payload != Payload::Ascii && size < MIN_STRUCTURED_RECORD_BYTES {
                return Err(SpecError::PayloadTooSmall { payload: self.payload.name(), size });
            }
        }
        if !(0.0..=1.0).contains(&self.aggregate_share) {
            return Err(SpecError::AggregateShare(self.aggregate_share));
        }
        if !self.record_sizes.is_empty() && self.aggregate_share > 0.0 {
            return Err(SpecError::SizesWithAggregates(self.aggregate_share));
        }
        if !(1..=100_000).contains(&self.records_per_aggregate) {
            return Err(SpecError::RecordsPerAggregate(self.records_per_aggregate));
        }
        if self.aggregate_share > 0.0 {
            let n = self.records_per_aggregate;
            if n as usize * self.record_size + aggregate_overhead(n, self.keys) > max {
                return Err(SpecError::AggregateTooLarge { records: n, size: self.record_size, max });
            }
        }
        if let KeyScheme::ShardPool(k) = self.keys {
            if self.shard_count as u64 * k as u64 > 4_000_000 {
                return Err(SpecError::KeyPool { shards: self.shard_count, keys: k });
            }
        }
        let name_ok = !self.stream_name.is_empty()
            && self.stream_name.len() <= 128
            && self.stream_name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
        if !name_ok {
            return Err(SpecError::StreamName(self.stream_name));
        }
        Ok(self)
    }

    /// Kinesis records in shard `shard`.
    pub fn records_in(&self, shard: u32) -> u64 {
        match self.records {
            RecordCount::PerShard(n) => n,
            RecordCount::Total(total) => {
                let shards = self.shard_count as u64;
                total / shards + u64::from((shard as u64) < total % shards)
            }
        }
    }

    /// The record sizes in turn: `record_sizes`, or `record_size` alone.
    fn sizes(&self) -> &[usize] {
        if self.record_sizes.is_empty() {
            std::slice::from_ref(&self.record_size)
        } else {
            &self.record_sizes
        }
    }

    /// Bytes of data of each user record of Kinesis record `index` (of any shard).
    pub fn record_size_of(&self, index: u64) -> usize {
        let sizes = self.sizes();
        sizes[(index % sizes.len() as u64) as usize]
    }

    /// The largest user record of the stream.
    pub fn largest_record_size(&self) -> usize {
        self.sizes().iter().copied().max().unwrap_or(0)
    }

    /// The stream's maximum record size in bytes (`MaxRecordSizeInKiB` x 1024).
    pub fn max_record_bytes(&self) -> usize {
        self.max_record_size_kib as usize * 1024
    }

    pub fn stream_arn(&self) -> String {
        format!("arn:aws:kinesis:{}:{}:stream/{}", self.region, self.account_id, self.stream_name)
    }
}

#[cfg(test)]
pub(crate) fn test_spec() -> StreamSpec {
    StreamSpec {
        stream_name: "bench".into(),
        account_id: "000000000000".into(),
        region: "us-east-1".into(),
        shard_count: 4,
        records: RecordCount::PerShard(50),
        record_size: 100,
        record_sizes: Vec::new(),
        filler: Filler::Random,
        aggregate_share: 0.25,
        records_per_aggregate: 3,
        keys: KeyScheme::ShardPool(8),
        payload: Payload::Ascii,
        seed: 7,
        created_at_ms: 1_700_000_000_000,
        arrival_interval_ms: 2,
        max_record_size_kib: DEFAULT_MAX_RECORD_SIZE_KIB,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_schemes_parse() {
        assert_eq!(KeyScheme::parse("unique"), Ok(KeyScheme::Unique));
        assert_eq!(KeyScheme::parse("shard-pool"), Ok(KeyScheme::ShardPool(16)));
        assert_eq!(KeyScheme::parse("shard-pool:3"), Ok(KeyScheme::ShardPool(3)));
        assert!(KeyScheme::parse("shard-pool:0").is_err());
        assert!(KeyScheme::parse("random").is_err());
    }

    #[test]
    fn payloads_parse() {
        for p in [Payload::Ascii, Payload::Json, Payload::Avro] {
            assert_eq!(Payload::parse(p.name()), Ok(p));
        }
        assert!(Payload::parse("xml").is_err());
    }

    #[test]
    fn record_sizes_take_turns_and_are_checked_each() {
        let spec = StreamSpec {
            record_sizes: vec![100, MAX_RECORD_BYTES, 300],
            aggregate_share: 0.0,
            max_record_size_kib: 10240,
            ..test_spec()
        };
        let sizes: Vec<usize> = (0..7).map(|i| spec.record_size_of(i)).collect();
        assert_eq!(sizes, [100, MAX_RECORD_BYTES, 300, 100, MAX_RECORD_BYTES, 300, 100]);
        assert_eq!(spec.largest_record_size(), MAX_RECORD_BYTES);
        assert!(spec.clone().validate().is_ok());
        assert_eq!(test_spec().record_size_of(5), 100, "without --record-sizes, every record is record_size");
        assert_eq!(
            StreamSpec { max_record_size_kib: 1024, ..spec.clone() }.validate(),
            Err(SpecError::RecordSize { size: MAX_RECORD_BYTES, max: 1024 * 1024 })
        );
        assert_eq!(
            StreamSpec { aggregate_share: 0.5, ..spec.clone() }.validate(),
            Err(SpecError::SizesWithAggregates(0.5))
        );
        assert_eq!(
            StreamSpec { payload: Payload::Json, record_sizes: vec![1000, 79], ..spec.clone() }.validate(),
            Err(SpecError::PayloadTooSmall { payload: "json", size: 79 })
        );
        assert_eq!(
            StreamSpec { record_sizes: vec![5, 0], ..spec }.validate(),
            Err(SpecError::RecordSize { size: 0, max: MAX_RECORD_BYTES })
        );
    }

    #[test]
    fn fillers_parse() {
        for f in [Filler::Random, Filler::Repeat] {
            assert_eq!(Filler::parse(f.name()), Ok(f));
        }
        assert!(Filler::parse("zeros").is_err());
    }

    #[test]
    fn total_records_spread_over_shards() {
        let spec = StreamSpec { records: RecordCount::Total(10), ..test_spec() };
        let per: Vec<u64> = (0..4).map(|s| spec.records_in(s)).collect();
        assert_eq!(per, vec![3, 3, 2, 2]);
    }

    #[test]
    fn validation_rejects_out_of_range_values() {
        assert_eq!(StreamSpec { shard_count: 0, ..test_spec() }.validate(), Err(SpecError::ShardCount(0)));
        assert!(StreamSpec { aggregate_share: 1.5, ..test_spec() }.validate().is_err());
        assert!(StreamSpec { record_size: 0, ..test_spec() }.validate().is_err());
        assert!(StreamSpec { record_size: 600_000, records_per_aggregate: 2, ..test_spec() }.validate().is_err());
        // no aggregates: a record may then use the whole 1 MiB
        assert!(StreamSpec { record_size: 1024 * 1024, aggregate_share: 0.0, ..test_spec() }.validate().is_ok());
        assert!(StreamSpec { stream_name: "a b".into(), ..test_spec() }.validate().is_err());
        assert!(StreamSpec { payload: Payload::Json, record_size: 79, ..test_spec() }.validate().is_err());
        assert!(StreamSpec { payload: Payload::Avro, record_size: 80, ..test_spec() }.validate().is_ok());
        assert!(StreamSpec { payload: Payload::Ascii, record_size: 1, ..test_spec() }.validate().is_ok());
        assert!(test_spec().validate().is_ok());
    }

    #[test]
    fn records_may_be_as_large_as_the_streams_maximum_record_size() {
        let plain = |size, kib| {
            StreamSpec { record_size: size, max_record_size_kib: kib, aggregate_share: 0.0, ..test_spec() }.validate()
        };
        let mib = 1024 * 1024;
        assert!(plain(mib, 1024).is_ok(), "exactly 1 MiB in a stream of the default maximum");
        assert_eq!(plain(mib + 1, 1024), Err(SpecError::RecordSize { size: mib + 1, max: mib }));
        assert!(plain(mib + 1, 1025).is_ok());
        assert!(plain(MAX_RECORD_BYTES, 10240).is_ok(), "10 MiB once raised to 10240 KiB");
        assert_eq!(
            plain(MAX_RECORD_BYTES + 1, 10240),
            Err(SpecError::RecordSize { size: MAX_RECORD_BYTES + 1, max: MAX_RECORD_BYTES })
        );
        assert_eq!(plain(100, 1023), Err(SpecError::MaxRecordSize(1023)));
        assert_eq!(plain(100, 10241), Err(SpecError::MaxRecordSize(10241)));
        // a 10 MiB stream holds an aggregate of 100,000 user records of 80 bytes, a 1 MiB one does not
        let aggregates = |kib| {
            StreamSpec {
                record_size: 80,
                records_per_aggregate: 100_000,
                aggregate_share: 1.0,
                keys: KeyScheme::ShardPool(16),
                max_record_size_kib: kib,
                ..test_spec()
            }
            .validate()
        };
        assert!(aggregates(10240).is_ok());
        assert!(matches!(aggregates(1024), Err(SpecError::AggregateTooLarge { .. })));
    }
}
