//! The records of the stream, computed from the spec and its seed: each shard's hash-key range, every
//! record's data, partition key, sequence number and arrival time, and which records are KPL aggregates.
//! Nothing is stored per record: a record is rebuilt on demand (cheaply: a short header plus a slice of a
//! pseudo-random pool made once), so a stream of any length costs the same memory and a test or `--dump`
//! can recompute every byte the server sends.
//!
//! A user record's data depends on the payload (`--payload`), each `record_size` bytes (or its record's turn of
//! `record_sizes`), the filler always a slice of the pool (letters, digits, `-_`: nothing JSON would escape), or
//! with the `repeat` filler the first KiB of that slice repeated:
//! - `ascii`: `<shard>.<index>.<sub>:` followed by filler; printable ASCII, so a consumer printing it as text
//!   shows it exactly;
//! - `json`: `{"shard":S,"index":I,"sub":U,"data":"<filler>"}`;
//! - `avro`: a bare Avro binary datum of [`AVRO_SCHEMA`]: zigzag varints for `shard`, `index` (longs) and `sub`
//!   (int), then `data` as a length (a zigzag varint long) and the filler. When the filler's length sits on a
//!   varint boundary (its length field could be neither 1 nor 2 bytes long, e.g. 63/64 bytes) the record is
//!   one byte shorter than `record_size`; at 1 KiB it never does.

use std::io::Write;

use md5::{Digest, Md5};

use crate::kpl;
use crate::sequence::{SequenceLayout, SequenceNumber};
use crate::spec::{Filler, KeyScheme, Payload, StreamSpec, REPEAT_PERIOD};

/// The writer's schema of the `avro` payload (what an AvroReader's Schema Text needs); `--avro-schema` prints it.
pub const AVRO_SCHEMA: &str = r#"{"type":"record","name":"BenchRecord","namespace":"kinesnow.bench","fields":[{"name":"shard","type":"long"},{"name":"index","type":"long"},{"name":"sub","type":"int"},{"name":"data","type":"string"}]}"#;

/// The window of pool offsets a record's filler starts from; the pool is this long plus a record.
const POOL_WINDOW: usize = 1 << 16;
const POOL_ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// A SplitMix64 step over two words: the deterministic hash behind every choice the generator makes.
pub fn mix(a: u64, b: u64) -> u64 {
    let mut z = a ^ b.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(0x6A09_E667_F3BC_C909);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `shardId-000000000007`, as Kinesis names the shards of a new stream.
pub fn shard_id(shard: u32) -> String {
    format!("shardId-{shard:012}")
}

/// The shard index of a shard id of that form.
pub fn parse_shard_id(id: &str) -> Option<u32> {
    let digits = id.strip_prefix("shardId-")?;
    if digits.len() != 12 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// A shard's inclusive range of 128-bit hash keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashRange {
    pub start: u128,
    pub end: u128,
}

/// The ranges Kinesis gives the shards of a new stream: 2^128 split evenly, the last shard to the top.
pub fn hash_ranges(shards: u32) -> Vec<HashRange> {
    let n = shards as u128;
    // 2^128 / n without overflowing: u128::MAX = q*n + r, so 2^128 = q*n + r + 1
    let (q, r) = (u128::MAX / n, u128::MAX % n);
    let width = if r + 1 == n { q + 1 } else { q };
    (0..n)
        .map(|i| HashRange { start: i * width, end: if i + 1 == n { u128::MAX } else { (i + 1) * width - 1 } })
        .collect()
}

/// The hash key of a partition key: its MD5 as a big-endian 128-bit number.
pub fn partition_key_hash(key: &str) -> u128 {
    u128::from_be_bytes(Md5::digest(key.as_bytes()).into())
}

fn shard_of_hash(ranges: &[HashRange], hash: u128) -> usize {
    ranges.partition_point(|r| r.end < hash)
}

/// One user record as a consumer should see it after de-aggregation (what `--dump` prints).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedRecord {
    pub shard: u32,
    /// The Kinesis record's index in its shard.
    pub index: u64,
    /// Position inside an aggregate (KCL's subsequence number); 0 for a plain record.
    pub sub: u32,
    pub aggregated: bool,
    pub sequence_number: SequenceNumber,
    pub partition_key: String,
    pub data: Vec<u8>,
    pub arrival_ms: u64,
}

/// Rebuilds any record of the stream.
pub struct Generator {
    spec: StreamSpec,
    layout: SequenceLayout,
    ranges: Vec<HashRange>,
    pool: Vec<u8>,
    /// Per shard, for `KeyScheme::ShardPool`: keys whose hash falls into the shard's range.
    key_pools: Vec<Vec<String>>,
}

impl Generator {
    pub fn new(spec: StreamSpec) -> Self {
        let ranges = hash_ranges(spec.shard_count);
        let pool = make_pool(spec.seed, POOL_WINDOW + spec.largest_record_size());
        let key_pools = match spec.keys {
            KeyScheme::ShardPool(k) => make_key_pools(&ranges, k as usize),
            KeyScheme::Unique => Vec::new(),
        };
        let layout = SequenceLayout::new(spec.created_at_ms, spec.seed);
        Generator { spec, layout, ranges, pool, key_pools }
    }

    pub fn spec(&self) -> &StreamSpec {
        &self.spec
    }

    pub fn layout(&self) -> &SequenceLayout {
        &self.layout
    }

    pub fn hash_range(&self, shard: u32) -> HashRange {
        self.ranges[shard as usize]
    }

    pub fn shard_count(&self) -> u32 {
        self.spec.shard_count
    }

    /// Kinesis records in the shard.
    pub fn records_in(&self, shard: u32) -> u64 {
        self.spec.records_in(shard)
    }

    pub fn sequence_number(&self, shard: u32, index: u64) -> SequenceNumber {
        self.layout.format(shard, index)
    }

    pub fn arrival_ms(&self, index: u64) -> u64 {
        self.spec.created_at_ms + index * self.spec.arrival_interval_ms
    }

    /// The first record index whose arrival is at or after `ms` (the shard's length if none is).
    pub fn first_arrival_at_or_after(&self, shard: u32, ms: u64) -> u64 {
        let count = self.records_in(shard);
        if ms <= self.spec.created_at_ms {
            return 0;
        }
        let step = self.spec.arrival_interval_ms;
        if step == 0 {
            return count;
        }
        (ms - self.spec.created_at_ms).div_ceil(step).min(count)
    }

    /// Aggregates are spread evenly: record `i` is one when `floor((i+1)·share) > floor(i·share)`.
    pub fn is_aggregate(&self, index: u64) -> bool {
        let share = self.spec.aggregate_share;
        ((index + 1) as f64 * share).floor() > (index as f64 * share).floor()
    }

    /// User records carried by Kinesis record `index`.
    pub fn user_count(&self, index: u64) -> u32 {
        if self.is_aggregate(index) {
            self.spec.records_per_aggregate
        } else {
            1
        }
    }

    /// Appends user record `(shard, index, sub)`'s data to `out`, in the spec's payload format.
    pub fn user_data_into(&self, shard: u32, index: u64, sub: u32, out: &mut Vec<u8>) {
        let size = self.spec.record_size_of(index);
        let start = out.len();
        match self.spec.payload {
            Payload::Ascii => {
                write!(out, "{shard}.{index}.{sub}:").expect("writing to a Vec");
                if out.len() - start >= size {
                    out.truncate(start + size);
                    return;
                }
                let filler = size - (out.len() - start);
                self.filler_into(shard, index, sub, filler, out);
            }
            Payload::Json => {
                // validate() keeps record_size >= MIN_STRUCTURED_RECORD_BYTES, more than the fields take
                write!(out, r#"{{"shard":{shard},"index":{index},"sub":{sub},"data":""#).expect("writing to a Vec");
                let filler = size - (out.len() - start) - 2;
                self.filler_into(shard, index, sub, filler, out);
                out.extend_from_slice(b"\"}");
            }
            Payload::Avro => {
                put_zigzag(out, shard as i64);
                put_zigzag(out, index as i64);
                put_zigzag(out, sub as i64);
                let room = size - (out.len() - start);
                // the filler plus its own length field must fill the room: try length fields of 1..=4 bytes
                let filler = (1..=4)
                    .map(|k| room - k)
                    .find(|&n| zigzag_len(n as i64) == room - n)
                    .unwrap_or_else(|| room - zigzag_len((room - 1) as i64).max(2));
                put_zigzag(out, filler as i64);
                self.filler_into(shard, index, sub, filler, out);
            }
        }
    }

    /// Appends `len` bytes of the pool at the record's offset (the whole per-record cost: a hash and a slice),
    /// or with the `repeat` filler the first [`REPEAT_PERIOD`] of them again and again.
    fn filler_into(&self, shard: u32, index: u64, sub: u32, len: usize, out: &mut Vec<u8>) {
        let offset = (self.record_hash(shard, index, sub) % POOL_WINDOW as u64) as usize;
        match self.spec.filler {
            Filler::Random => out.extend_from_slice(&self.pool[offset..offset + len]),
            Filler::Repeat => {
                let piece = &self.pool[offset..offset + len.min(REPEAT_PERIOD)];
                let mut left = len;
                while left > 0 {
                    let n = left.min(piece.len());
                    out.extend_from_slice(&piece[..n]);
                    left -= n;
                }
            }
        }
    }

    pub fn partition_key(&self, shard: u32, index: u64, sub: u32) -> String {
        match self.spec.keys {
            KeyScheme::ShardPool(_) => {
                let pool = &self.key_pools[shard as usize];
                let pick = mix(self.record_hash(shard, index, sub), 0xbeef) % pool.len() as u64;
                pool[pick as usize].clone()
            }
            KeyScheme::Unique => format!("pk-{shard}-{index}-{sub}"),
        }
    }

    /// The explicit hash key an aggregated user record carries: none when its partition key already
    /// hashes into the shard, else a key inside the shard's range (KCL drops sub-records outside it).
    pub fn explicit_hash_key(&self, shard: u32, index: u64, sub: u32) -> Option<String> {
        match self.spec.keys {
            KeyScheme::ShardPool(_) => None,
            KeyScheme::Unique => {
                let r = self.ranges[shard as usize];
                let width = r.end - r.start;
                let offset = mix(self.record_hash(shard, index, sub), 0xe4c) as u128 % width.max(1);
                Some((r.start + offset).to_string())
            }
        }
    }

    /// Kinesis record `(shard, index)` as served: appends its data blob (the user record's data, or a
    /// KPL aggregate of its user records) to `data` and returns its partition key (for an aggregate,
    /// the first user record's, as the KPL does).
    pub fn kinesis_record_into(&self, shard: u32, index: u64, data: &mut Vec<u8>) -> String {
        if !self.is_aggregate(index) {
            self.user_data_into(shard, index, 0, data);
            return self.partition_key(shard, index, 0);
        }
        let users: Vec<kpl::UserRecord> = (0..self.spec.records_per_aggregate)
            .map(|sub| {
                let mut bytes = Vec::with_capacity(self.spec.record_size_of(index));
                self.user_data_into(shard, index, sub, &mut bytes);
                kpl::UserRecord {
                    partition_key: self.partition_key(shard, index, sub),
                    explicit_hash_key: self.explicit_hash_key(shard, index, sub),
                    data: bytes,
                }
            })
            .collect();
        let key = users[0].partition_key.clone();
        kpl::encode_into(&kpl::aggregated_record(users), data);
        key
    }

    /// Every user record of Kinesis record `(shard, index)`, in order.
    pub fn expected(&self, shard: u32, index: u64) -> impl Iterator<Item = ExpectedRecord> + '_ {
        let aggregated = self.is_aggregate(index);
        (0..self.user_count(index)).map(move |sub| {
            let mut data = Vec::with_capacity(self.spec.record_size_of(index));
            self.user_data_into(shard, index, sub, &mut data);
            ExpectedRecord {
                shard,
                index,
                sub,
                aggregated,
                sequence_number: self.sequence_number(shard, index),
                partition_key: self.partition_key(shard, index, sub),
                data,
                arrival_ms: self.arrival_ms(index),
            }
        })
    }

    /// Every user record of the shard, in order.
    pub fn expected_in_shard(&self, shard: u32) -> impl Iterator<Item = ExpectedRecord> + '_ {
        (0..self.records_in(shard)).flat_map(move |index| self.expected(shard, index))
    }

    fn record_hash(&self, shard: u32, index: u64, sub: u32) -> u64 {
        mix(mix(mix(self.spec.seed, shard as u64), index), sub as u64)
    }
}

/// Appends `v` as Avro writes an int or a long: zigzag, then a little-endian base-128 varint.
pub fn put_zigzag(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// Bytes `put_zigzag` writes for `v`.
fn zigzag_len(v: i64) -> usize {
    let z = ((v << 1) ^ (v >> 63)) as u64;
    (64 - z.max(1).leading_zeros() as usize).div_ceil(7)
}

fn make_pool(seed: u64, len: usize) -> Vec<u8> {
    let mut state = mix(seed, 0x9001);
    (0..len)
        .map(|_| {
            state = mix(state, 1);
            POOL_ALPHABET[(state >> 58) as usize]
        })
        .collect()
}

/// Tries `pk-0`, `pk-1`, … and gives each key to the shard its MD5 falls into, until every shard has
/// `per_shard` keys.
fn make_key_pools(ranges: &[HashRange], per_shard: usize) -> Vec<Vec<String>> {
    let mut pools: Vec<Vec<String>> = vec![Vec::with_capacity(per_shard); ranges.len()];
    let mut missing = ranges.len() * per_shard;
    let mut n: u64 = 0;
    while missing > 0 {
        let key = format!("pk-{n}");
        let pool = &mut pools[shard_of_hash(ranges, partition_key_hash(&key))];
        if pool.len() < per_shard {
            pool.push(key);
            missing -= 1;
        }
        n += 1;
    }
    pools
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{test_spec, KeyScheme, RecordCount};

    #[test]
    fn hash_ranges_split_the_key_space_evenly() {
        let r = hash_ranges(4);
        assert_eq!(r[0], HashRange { start: 0, end: (1u128 << 126) - 1 });
        assert_eq!(r[1].start, 1u128 << 126);
        assert_eq!(r[3].end, u128::MAX);
        assert_eq!(hash_ranges(1), vec![HashRange { start: 0, end: u128::MAX }]);
        let r3 = hash_ranges(3);
        assert_eq!(r3[0].start, 0);
        assert_eq!(r3[1].start, r3[0].end + 1);
        assert_eq!(r3[2].start, r3[1].end + 1);
        assert_eq!(r3[2].end, u128::MAX);
        // Kinesis' own numbers for a 4-shard stream
        assert_eq!(r[1].start.to_string(), "85070591730234615865843651857942052864");
    }

    #[test]
    fn shard_ids_round_trip() {
        assert_eq!(shard_id(7), "shardId-000000000007");
        assert_eq!(parse_shard_id("shardId-000000000007"), Some(7));
        assert_eq!(parse_shard_id("shardId-7"), None);
        assert_eq!(parse_shard_id("x"), None);
    }

    #[test]
    fn data_is_deterministic_ascii_of_the_right_size() {
        let g = Generator::new(test_spec());
        let mut a = Vec::new();
        g.user_data_into(2, 17, 1, &mut a);
        assert_eq!(a.len(), 100);
        assert!(a.starts_with(b"2.17.1:"));
        assert!(a.iter().all(|b| b.is_ascii_graphic()));
        let mut b = Vec::new();
        Generator::new(test_spec()).user_data_into(2, 17, 1, &mut b);
        assert_eq!(a, b);
        let mut c = Vec::new();
        g.user_data_into(2, 18, 1, &mut c);
        assert_ne!(a[8..], c[8..]);
        let tiny = Generator::new(StreamSpec { record_size: 3, ..test_spec() });
        let mut d = Vec::new();
        tiny.user_data_into(2, 17, 1, &mut d);
        assert_eq!(d, b"2.1");
    }

    #[test]
    fn json_payload_is_one_object_of_the_record_size() {
        for size in [80, 100, 1024, 4000] {
            let g = Generator::new(StreamSpec { payload: Payload::Json, record_size: size, ..test_spec() });
            let mut a = Vec::new();
            g.user_data_into(3, 123_456, 2, &mut a);
            assert_eq!(a.len(), size);
            let v: serde_json::Value = serde_json::from_slice(&a).unwrap();
            assert_eq!(
                (v["shard"].as_u64(), v["index"].as_u64(), v["sub"].as_u64()),
                (Some(3), Some(123_456), Some(2))
            );
            assert!(v["data"].as_str().unwrap().bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
            assert_eq!(v.as_object().unwrap().len(), 4);
        }
        // the largest values the spec allows still fit the smallest structured record
        let g = Generator::new(StreamSpec { payload: Payload::Json, record_size: 80, ..test_spec() });
        let mut b = Vec::new();
        g.user_data_into(999_999, u64::MAX, 100_000, &mut b);
        assert_eq!(b.len(), 80);
        assert!(serde_json::from_slice::<serde_json::Value>(&b).is_ok());
    }

    /// A reader of the avro payload's datum, written from the Avro specification for this test.
    fn read_avro(mut bytes: &[u8]) -> (i64, i64, i64, Vec<u8>) {
        let mut long = || {
            let (mut z, mut shift) = (0u64, 0);
            loop {
                let b = bytes[0];
                bytes = &bytes[1..];
                z |= ((b & 0x7f) as u64) << shift;
                shift += 7;
                if b < 0x80 {
                    return ((z >> 1) as i64) ^ -((z & 1) as i64);
                }
            }
        };
        let (shard, index, sub, len) = (long(), long(), long(), long());
        assert_eq!(bytes.len(), len as usize, "the string runs to the end of the datum");
        (shard, index, sub, bytes.to_vec())
    }

    #[test]
    fn avro_payload_is_a_datum_of_the_schema() {
        let schema: serde_json::Value = serde_json::from_str(AVRO_SCHEMA).unwrap();
        let names: Vec<&str> =
            schema["fields"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["shard", "index", "sub", "data"]);
        for size in 80..1200 {
            let g = Generator::new(StreamSpec { payload: Payload::Avro, record_size: size, ..test_spec() });
            let mut a = Vec::new();
            g.user_data_into(3, 70_000, 2, &mut a);
            let (shard, index, sub, data) = read_avro(&a);
            assert_eq!((shard, index, sub), (3, 70_000, 2));
            assert!(data.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_'));
            // exact, except one byte short where the string's length sits on a varint boundary (63/64)
            let boundary = data.len() == 63;
            assert_eq!(a.len() + boundary as usize, size, "size {size}");
        }
        let g = Generator::new(StreamSpec { payload: Payload::Avro, record_size: 1024, ..test_spec() });
        let mut b = Vec::new();
        g.user_data_into(999_999, i64::MAX as u64, 100_000, &mut b);
        assert_eq!(b.len(), 1024);
        assert_eq!(read_avro(&b).0, 999_999);
    }

    #[test]
    fn record_sizes_and_the_repeat_filler() {
        let spec = StreamSpec {
            payload: Payload::Json,
            record_sizes: vec![200, 5000],
            filler: Filler::Repeat,
            aggregate_share: 0.0,
            ..test_spec()
        };
        let g = Generator::new(spec.validate().unwrap());
        for (index, size) in [(0, 200), (1, 5000), (2, 200), (7, 5000)] {
            let r: Vec<ExpectedRecord> = g.expected(1, index).collect();
            assert_eq!(r.len(), 1);
            assert_eq!(r[0].data.len(), size, "record {index}");
            let mut served = Vec::new();
            g.kinesis_record_into(1, index, &mut served);
            assert_eq!(served, r[0].data, "served as dumped");
            let v: serde_json::Value = serde_json::from_slice(&r[0].data).unwrap();
            assert_eq!(v["index"].as_u64(), Some(index));
            let filler = v["data"].as_str().unwrap().as_bytes();
            // the first REPEAT_PERIOD bytes again and again (the last piece cut short)
            let piece = &filler[..filler.len().min(REPEAT_PERIOD)];
            for (i, chunk) in filler.chunks(REPEAT_PERIOD).enumerate() {
                assert_eq!(chunk, &piece[..chunk.len()], "record {index}, piece {i}");
            }
        }
        // the random filler of the same record is no repetition
        let random = Generator::new(StreamSpec { filler: Filler::Random, ..g.spec().clone() });
        let mut data = Vec::new();
        random.user_data_into(1, 1, 0, &mut data);
        assert_eq!(data.len(), 5000);
        assert_ne!(data[100..100 + REPEAT_PERIOD], data[100 + REPEAT_PERIOD..100 + 2 * REPEAT_PERIOD]);
    }

    #[test]
    fn zigzag_matches_the_avro_specification() {
        let enc = |v| {
            let mut out = Vec::new();
            put_zigzag(&mut out, v);
            assert_eq!(out.len(), zigzag_len(v));
            out
        };
        // the examples of the specification
        assert_eq!(enc(0), [0x00]);
        assert_eq!(enc(-1), [0x01]);
        assert_eq!(enc(1), [0x02]);
        assert_eq!(enc(-64), [0x7f]);
        assert_eq!(enc(64), [0x80, 0x01]);
        assert_eq!(enc(i64::MAX).len(), 10);
    }

    #[test]
    fn aggregates_have_the_configured_share() {
        let g = Generator::new(StreamSpec { aggregate_share: 0.25, ..test_spec() });
        let n = (0..1000).filter(|&i| g.is_aggregate(i)).count();
        assert_eq!(n, 250);
        let none = Generator::new(StreamSpec { aggregate_share: 0.0, ..test_spec() });
        assert!((0..1000).all(|i| !none.is_aggregate(i)));
        let all = Generator::new(StreamSpec { aggregate_share: 1.0, ..test_spec() });
        assert!((0..1000).all(|i| all.is_aggregate(i)));
    }

    #[test]
    fn pool_keys_hash_into_their_shard() {
        let g = Generator::new(test_spec());
        for shard in 0..4 {
            let r = g.hash_range(shard);
            for index in 0..20 {
                let h = partition_key_hash(&g.partition_key(shard, index, 0));
                assert!(r.start <= h && h <= r.end);
            }
        }
    }

    #[test]
    fn unique_keys_get_explicit_hash_keys_inside_the_shard() {
        let g = Generator::new(StreamSpec { keys: KeyScheme::Unique, ..test_spec() });
        assert_eq!(g.partition_key(1, 2, 3), "pk-1-2-3");
        let r = g.hash_range(1);
        let ehk: u128 = g.explicit_hash_key(1, 2, 3).unwrap().parse().unwrap();
        assert!(r.start <= ehk && ehk <= r.end);
    }

    #[test]
    fn aggregate_records_decode_to_the_expected_user_records() {
        let g = Generator::new(test_spec());
        let index = (0..50).find(|&i| g.is_aggregate(i)).unwrap();
        let mut data = Vec::new();
        let pk = g.kinesis_record_into(3, index, &mut data);
        let agg = kpl::decode(&data).unwrap();
        let expected: Vec<ExpectedRecord> = g.expected(3, index).collect();
        assert_eq!(expected.len(), 3);
        assert_eq!(pk, expected[0].partition_key);
        for (r, e) in agg.records.iter().zip(&expected) {
            assert_eq!(r.data, e.data);
            assert_eq!(agg.partition_key_table[r.partition_key_index as usize], e.partition_key);
        }
    }

    #[test]
    fn arrival_times_and_timestamp_positions() {
        let g = Generator::new(StreamSpec { records: RecordCount::PerShard(10), ..test_spec() });
        let t0 = g.spec().created_at_ms;
        assert_eq!(g.arrival_ms(3), t0 + 6);
        assert_eq!(g.first_arrival_at_or_after(0, 0), 0);
        assert_eq!(g.first_arrival_at_or_after(0, t0 + 5), 3);
        assert_eq!(g.first_arrival_at_or_after(0, t0 + 6), 3);
        assert_eq!(g.first_arrival_at_or_after(0, t0 + 1_000_000), 10);
    }

    #[test]
    fn aggregates_stay_within_the_overhead_validation_counts() {
        use crate::spec::aggregate_overhead;
        for (keys, n, size) in [(KeyScheme::ShardPool(16), 100_000u32, 80usize), (KeyScheme::Unique, 2_000, 10)] {
            let spec = StreamSpec {
                keys,
                records_per_aggregate: n,
                record_size: size,
                aggregate_share: 1.0,
                max_record_size_kib: 10240,
                ..test_spec()
            }
            .validate()
            .unwrap();
            let g = Generator::new(spec);
            let mut data = Vec::new();
            g.kinesis_record_into(3, 49, &mut data);
            assert!(
                data.len() <= n as usize * size + aggregate_overhead(n, keys),
                "{keys:?}: {} bytes, counted {}",
                data.len(),
                n as usize * size + aggregate_overhead(n, keys)
            );
            assert_eq!(kpl::decode(&data).unwrap().records.len(), n as usize);
        }
    }
}
