//! The compact binary layout in which one batch crosses JNI in a single call: the FlowFiles to
//! write, grouped by shard, with what their attributes are made of. Java only copies content and
//! sets attributes; every decision about content was made in Rust.
//!
//! Big-endian (Java's `ByteBuffer` default):
//!
//! ```text
//! batch    := magic:i32 ("KNB7") length:i32 batchId:i64 link:str16 shardCount:i32 shard*
//!             (length: the whole batch's bytes, magic included; the buffer that carries it may be
//!              longer, since Java hands a previous batch's buffer back to be filled again)
//!             (link: the stream's ARN when the consumer tracks what Snowflake has, Failover
//!              Position SNOWFLAKE_COMMIT; empty otherwise)
//! shard    := shardId:str16 parentShardIds:str16 (comma-separated, empty if none)
//!             millisBehind:i64 tenure:i64 (the lease counter with a link, -1 without)
//!             flowFileCount:i32 flowFile*
//! flowFile := route:u8 (0 success, 1 parse.failure) recordCount:i32
//!             firstSequence:str16 firstSub:i64 lastSequence:str16 lastSub:i64   (sub -1 = not aggregated)
//!             previousSequence:str16 previousSub:i64  (the record read before the first in the same
//!                                                      lease; empty when none)
//!             partitionKey:str32 arrivalMs:i64 error:str16 contentLength:i32 content
//! str16    := length:u16 utf8
//! str32    := length:i32 utf8   (partition keys: a KPL aggregate's key table may hold keys of any
//!                                length, far beyond Kinesis's own 256 characters)
//! ```
//! The encoder writes into any [`Sink`]: a `Vec` for tests, or straight into the memory of a
//! direct `ByteBuffer` (see `exports::hand_over`), so a batch is copied once on its way to Java.
//! The decoder is `io.kinesnow.nifi.nativebridge.RecordBatch`. Every other text is short by
//! construction (shard ids, sequence numbers) or cut (errors).

use crate::component::outgoing::OutgoingBatch;
use crate::config::consume_kinesis::{OutputStrategy, ProcessingStrategy};
use crate::consumer::output::{FlowFileOut, Layout, ShardFlowFiles};
use crate::kinesis::record::{KinesisRecord, ShardRecords};

pub use crate::contract::wire::BATCH_MAGIC as MAGIC;
const MAX_ERROR_BYTES: usize = 4096;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BatchError {
    #[error("{what} of {len} bytes is longer than the batch layout allows ({max})")]
    TooLong { what: &'static str, len: usize, max: usize },
    #[error("a buffer of {capacity} bytes cannot hold a batch of {len}")]
    BufferTooSmall { len: usize, capacity: usize },
}

impl crate::error::Classify for BatchError {
    /// Bytes the shim wrote that do not follow the layout: a defect of ours.
    fn class(&self) -> crate::error::ErrorClass {
        crate::error::ErrorClass::Fatal
    }
}

/// Where the encoder writes.
pub trait Sink {
    fn put(&mut self, bytes: &[u8]);
}

impl Sink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// A fixed buffer filled from its start. Writing past its end is remembered, not a panic.
pub struct SliceSink<'a> {
    buf: &'a mut [u8],
    written: usize,
    overflowed: bool,
}

impl<'a> SliceSink<'a> {
    pub fn new(buf: &'a mut [u8]) -> Self {
        SliceSink { buf, written: 0, overflowed: false }
    }
}

impl Sink for SliceSink<'_> {
    fn put(&mut self, bytes: &[u8]) {
        match self.buf.get_mut(self.written..self.written + bytes.len()) {
            Some(dst) if !self.overflowed => {
                dst.copy_from_slice(bytes);
                self.written += bytes.len();
            }
            _ => self.overflowed = true,
        }
    }
}

/// Exact encoded size, so the buffer is allocated once.
pub fn encoded_len(shards: &[ShardFlowFiles]) -> usize {
    encoded_len_linked("", shards)
}

pub fn encoded_len_linked(link: &str, shards: &[ShardFlowFiles]) -> usize {
    4 + 4
        + 8
        + 2
        + link.len()
        + 4
        + shards
            .iter()
            .map(|s| {
                2 + s.shard_id.len()
                    + 2
                    + s.parent_shard_ids.join(",").len()
                    + 8
                    + 8
                    + 4
                    + s.flow_files.iter().map(flow_file_len).sum::<usize>()
            })
            .sum::<usize>()
}

fn flow_file_len(f: &FlowFileOut) -> usize {
    1 + 4
        + (2 + f.first_sequence.len() + 8)
        + (2 + f.last_sequence.len() + 8)
        + (2 + f.previous.as_ref().map_or(0, |p| p.sequence_number.len()) + 8)
        + (4 + f.partition_key.len())
        + 8
        + (2 + error_text(&f.error).len())
        + 4
        + f.content.len()
}

pub fn encode(batch_id: i64, shards: &[ShardFlowFiles]) -> Result<Vec<u8>, BatchError> {
    encode_linked(batch_id, "", shards)
}

/// With `link` (the stream's ARN; see the layout above).
pub fn encode_linked(batch_id: i64, link: &str, shards: &[ShardFlowFiles]) -> Result<Vec<u8>, BatchError> {
    let len = encoded_len_linked(link, shards);
    let mut out = Vec::with_capacity(len);
    write_batch(&mut out, len, batch_id, link, shards)?;
    Ok(out)
}

/// Writes the batch at the start of `out`, which must hold at least
/// [`encoded_len_linked`] bytes; bytes after it are left as they were. Returns its length.
pub fn encode_linked_into(
    batch_id: i64,
    link: &str,
    shards: &[ShardFlowFiles],
    out: &mut [u8],
) -> Result<usize, BatchError> {
    let len = encoded_len_linked(link, shards);
    if out.len() < len {
        return Err(BatchError::BufferTooSmall { len, capacity: out.len() });
    }
    let mut sink = SliceSink::new(out);
    write_batch(&mut sink, len, batch_id, link, shards)?;
    if sink.overflowed || sink.written != len {
        // encoded_len_linked and write_batch disagree: a defect, reported rather than handed on.
        return Err(BatchError::BufferTooSmall { len: sink.written.max(len), capacity: len });
    }
    Ok(len)
}

/// Bytes of `batch` in this layout.
pub fn outgoing_len(batch: &OutgoingBatch) -> usize {
    encoded_len_linked(batch.link(), batch.shards())
}

/// Writes `batch` at the start of `out` (see [`encode_linked_into`]); the length written.
pub fn encode_outgoing_into(batch: &OutgoingBatch, out: &mut [u8]) -> Result<usize, BatchError> {
    encode_linked_into(batch.id(), batch.link(), batch.shards(), out)
}

/// `batch` in this layout, handed over; nacked (dropped) if it cannot be encoded.
pub fn outgoing_bytes(batch: OutgoingBatch) -> Result<Vec<u8>, BatchError> {
    let bytes = encode_linked(batch.id(), batch.link(), batch.shards())?;
    batch.handed_over();
    Ok(bytes)
}

fn write_batch(
    out: &mut impl Sink,
    len: usize,
    batch_id: i64,
    link: &str,
    shards: &[ShardFlowFiles],
) -> Result<(), BatchError> {
    out.put(&MAGIC.to_be_bytes());
    out.put(&len_i32("batch", len)?.to_be_bytes());
    out.put(&batch_id.to_be_bytes());
    put_str16(out, "link", link)?;
    out.put(&len_i32("shard count", shards.len())?.to_be_bytes());
    for shard in shards {
        put_str16(out, "shard id", &shard.shard_id)?;
        put_str16(out, "parent shard ids", &shard.parent_shard_ids.join(","))?;
        out.put(&shard.millis_behind.to_be_bytes());
        out.put(&shard.tenure.map_or(-1, |t| t as i64).to_be_bytes());
        out.put(&len_i32("FlowFile count", shard.flow_files.len())?.to_be_bytes());
        for f in &shard.flow_files {
            write_flow_file(out, f)?;
        }
    }
    Ok(())
}

fn write_flow_file(out: &mut impl Sink, f: &FlowFileOut) -> Result<(), BatchError> {
    out.put(&[f.route as u8]);
    out.put(&f.record_count.to_be_bytes());
    put_str16(out, "sequence number", &f.first_sequence)?;
    out.put(&sub(f.first_sub).to_be_bytes());
    put_str16(out, "sequence number", &f.last_sequence)?;
    out.put(&sub(f.last_sub).to_be_bytes());
    put_str16(out, "sequence number", f.previous.as_ref().map_or("", |p| p.sequence_number.as_str()))?;
    out.put(&sub(f.previous.as_ref().and_then(|p| p.sub_sequence_number)).to_be_bytes());
    put_str32(out, "partition key", &f.partition_key)?;
    out.put(&f.arrival_ms.to_be_bytes());
    put_str16(out, "error", error_text(&f.error))?;
    out.put(&len_i32("FlowFile content", f.content.len())?.to_be_bytes());
    out.put(&f.content);
    Ok(())
}

fn sub(s: Option<u64>) -> i64 {
    s.map_or(-1, |v| v as i64)
}

/// Error messages are cut at a character boundary to stay short.
fn error_text(e: &str) -> &str {
    if e.len() <= MAX_ERROR_BYTES {
        return e;
    }
    let mut end = MAX_ERROR_BYTES;
    while !e.is_char_boundary(end) {
        end -= 1;
    }
    &e[..end]
}

fn put_str16(out: &mut impl Sink, what: &'static str, s: &str) -> Result<(), BatchError> {
    let len = u16::try_from(s.len()).map_err(|_| BatchError::TooLong { what, len: s.len(), max: u16::MAX as usize })?;
    out.put(&len.to_be_bytes());
    out.put(s.as_bytes());
    Ok(())
}

fn put_str32(out: &mut impl Sink, what: &'static str, s: &str) -> Result<(), BatchError> {
    out.put(&len_i32(what, s.len())?.to_be_bytes());
    out.put(s.as_bytes());
    Ok(())
}

fn len_i32(what: &'static str, len: usize) -> Result<i32, BatchError> {
    i32::try_from(len).map_err(|_| BatchError::TooLong { what, len, max: i32::MAX as usize })
}

/// Reads a batch back, as `RecordBatch.java` does: for the round-trip tests and for tests that check
/// what reaches Java. `None` when the bytes are not exactly one well-formed batch.
#[cfg(any(test, feature = "test-support"))]
pub fn decode(bytes: &[u8]) -> Option<(i64, Vec<ShardFlowFiles>)> {
    decode_linked(bytes).map(|(id, _, shards)| (id, shards))
}

/// The batch id, its link and its shards.
#[cfg(any(test, feature = "test-support"))]
pub fn decode_linked(bytes: &[u8]) -> Option<(i64, String, Vec<ShardFlowFiles>)> {
    decode_wire(&mut super::wire::Reader::new(bytes)).ok().flatten()
}

#[cfg(any(test, feature = "test-support"))]
fn decode_wire(
    r: &mut super::wire::Reader<'_>,
) -> Result<Option<(i64, String, Vec<ShardFlowFiles>)>, super::wire::WireError> {
    use crate::consumer::output::Route;
    if r.i32()? != MAGIC {
        return Ok(None);
    }
    if usize::try_from(r.i32()?).ok() != Some(r.remaining() + 8) {
        return Ok(None);
    }
    let batch_id = r.i64()?;
    let link = r.str16()?;
    let mut shards = Vec::new();
    for _ in 0..r.i32()? {
        let shard_id = r.str16()?;
        let parents = r.str16()?;
        let millis_behind = r.i64()?;
        let tenure = u64::try_from(r.i64()?).ok();
        let mut flow_files = Vec::new();
        for _ in 0..r.i32()? {
            let route = match r.u8()? {
                crate::contract::wire::BATCH_ROUTE_SUCCESS => Route::Success,
                crate::contract::wire::BATCH_ROUTE_PARSE_FAILURE => Route::ParseFailure,
                _ => return Ok(None),
            };
            let record_count = r.i32()? as u32;
            let first_sequence = r.str16()?;
            let first_sub = u64::try_from(r.i64()?).ok();
            let last_sequence = r.str16()?;
            let last_sub = u64::try_from(r.i64()?).ok();
            let previous_sequence = r.str16()?;
            let previous_sub = u64::try_from(r.i64()?).ok();
            let previous = (!previous_sequence.is_empty())
                .then(|| crate::kinesis::position::Position::new(previous_sequence, previous_sub));
            let partition_key = r.str32()?;
            let arrival_ms = r.i64()?;
            let error = r.str16()?;
            let content_len = r.len()?;
            let content = r.take(content_len)?.to_vec();
            flow_files.push(FlowFileOut {
                route,
                record_count,
                first_sequence,
                first_sub,
                last_sequence,
                last_sub,
                previous,
                partition_key: partition_key.into(),
                arrival_ms,
                error,
                content,
            });
        }
        let parent_shard_ids =
            if parents.is_empty() { Vec::new() } else { parents.split(',').map(str::to_owned).collect() };
        shards.push(ShardFlowFiles { shard_id, parent_shard_ids, millis_behind, flow_files, tenure });
    }
    Ok(r.is_done().then_some((batch_id, link, shards)))
}

/// A partition key of exactly `bytes` UTF-8 bytes that is not one repeated byte (multi-byte
/// characters, digits that move), for the tests of keys beyond 64 KiB.
pub fn long_partition_key(bytes: usize) -> String {
    let mut key = String::with_capacity(bytes);
    let mut n = 0usize;
    while key.len() < bytes {
        if bytes - key.len() >= 2 && n.is_multiple_of(7) {
            key.push('é');
        } else {
            key.push(char::from(b'a' + (n % 26) as u8));
        }
        n += 1;
    }
    key
}

/// Deterministic records for the hand-off benchmark and the cross-language codec test: payload
/// byte `i` of record `n` is `(n + i) % 251`; odd records carry a sub-sequence number.
pub fn synthetic_records(shards: usize, records_per_shard: usize, payload_bytes: usize) -> Vec<ShardRecords> {
    (0..shards)
        .map(|s| ShardRecords {
            shard_id: format!("shardId-{s:012}"),
            parent_shard_ids: if s % 2 == 1 { vec![format!("shardId-{:012}", s + 100)] } else { Vec::new() },
            millis_behind: s as i64 * 10,
            tenure: None,
            previous: None,
            records: (0..records_per_shard)
                .map(|n| KinesisRecord {
                    sequence_number: format!("4963{:052}", s * records_per_shard + n),
                    sub_sequence_number: (n % 2 == 1).then_some(n as u64),
                    partition_key: format!("key-{n}").into(),
                    approximate_arrival_ms: 1_764_000_000_000 + n as i64,
                    data: (0..payload_bytes).map(|i| ((n + i) % 251) as u8).collect(),
                })
                .collect(),
        })
        .collect()
}

/// The synthetic records as FlowFiles, one per record.
pub fn synthetic(shards: usize, records_per_shard: usize, payload_bytes: usize) -> Vec<ShardFlowFiles> {
    let layout =
        Layout { stream: "synthetic", processing: &ProcessingStrategy::FlowFile, output: OutputStrategy::UseValue };
    synthetic_records(shards, records_per_shard, payload_bytes).into_iter().map(|s| layout.shard(s)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consumer::output::Route;
    use crate::kinesis::position::Position;
    use rand::{Rng, SeedableRng};

    #[test]
    fn layout_is_as_documented() {
        let shards = vec![ShardFlowFiles {
            shard_id: "s1".into(),
            parent_shard_ids: vec!["p1".into(), "p2".into()],
            millis_behind: 5,
            tenure: Some(3),
            flow_files: vec![FlowFileOut {
                route: Route::ParseFailure,
                record_count: 1,
                first_sequence: "9".into(),
                first_sub: None,
                last_sequence: "9".into(),
                last_sub: Some(2),
                previous: Some(Position::new("8", Some(4))),
                partition_key: "k".into(),
                arrival_ms: 258,
                error: "e".into(),
                content: vec![0xAB],
            }],
        }];
        let bytes = encode_linked(7, "a", &shards).unwrap();
        let mut expected = vec![];
        expected.extend_from_slice(b"KNB7");
        expected.extend_from_slice(&113i32.to_be_bytes());
        expected.extend_from_slice(&7i64.to_be_bytes());
        expected.extend_from_slice(&[0, 1, b'a']);
        expected.extend_from_slice(&1i32.to_be_bytes());
        expected.extend_from_slice(&[0, 2, b's', b'1']);
        expected.extend_from_slice(&[0, 5, b'p', b'1', b',', b'p', b'2']);
        expected.extend_from_slice(&5i64.to_be_bytes());
        expected.extend_from_slice(&3i64.to_be_bytes());
        expected.extend_from_slice(&1i32.to_be_bytes());
        expected.push(1);
        expected.extend_from_slice(&1i32.to_be_bytes());
        expected.extend_from_slice(&[0, 1, b'9']);
        expected.extend_from_slice(&(-1i64).to_be_bytes());
        expected.extend_from_slice(&[0, 1, b'9']);
        expected.extend_from_slice(&2i64.to_be_bytes());
        expected.extend_from_slice(&[0, 1, b'8']);
        expected.extend_from_slice(&4i64.to_be_bytes());
        expected.extend_from_slice(&[0, 0, 0, 1, b'k']);
        expected.extend_from_slice(&258i64.to_be_bytes());
        expected.extend_from_slice(&[0, 1, b'e']);
        expected.extend_from_slice(&1i32.to_be_bytes());
        expected.push(0xAB);
        assert_eq!(expected.len(), 113);
        assert_eq!(bytes, expected);
        assert_eq!(bytes.len(), encoded_len_linked("a", &shards));
    }

    #[test]
    fn a_batch_written_into_a_longer_buffer_is_the_same_bytes_and_leaves_the_rest() {
        let shards = synthetic(3, 17, 100);
        let expected = encode_linked(9, "arn", &shards).unwrap();
        let mut buf = vec![0x55u8; expected.len() + 1000];
        assert_eq!(encode_linked_into(9, "arn", &shards, &mut buf), Ok(expected.len()));
        assert_eq!(&buf[..expected.len()], &expected[..]);
        assert!(buf[expected.len()..].iter().all(|&b| b == 0x55), "bytes after the batch are untouched");
        let mut short = vec![0u8; expected.len() - 1];
        assert_eq!(
            encode_linked_into(9, "arn", &shards, &mut short),
            Err(BatchError::BufferTooSmall { len: expected.len(), capacity: expected.len() - 1 })
        );
    }

    #[test]
    fn a_slice_sink_remembers_an_overflow_instead_of_panicking() {
        let mut buf = [0u8; 4];
        let mut sink = SliceSink::new(&mut buf);
        sink.put(&[1, 2, 3]);
        sink.put(&[4, 5]);
        sink.put(&[6]);
        assert!(sink.overflowed);
        assert_eq!(sink.written, 3);
    }

    #[test]
    fn size_is_exact_for_synthetic_batches() {
        let shards = synthetic(3, 17, 100);
        assert_eq!(encode(1, &shards).unwrap().len(), encoded_len(&shards));
    }

    #[test]
    fn carries_a_partition_key_beyond_64_kib_and_cuts_long_errors() {
        let mut shards = synthetic(1, 2, 1);
        let key = long_partition_key(70_000);
        assert_eq!(key.len(), 70_000);
        shards[0].flow_files[0].partition_key = key.clone().into();
        let bytes = encode(1, &shards).unwrap();
        assert_eq!(bytes.len(), encoded_len(&shards));
        let (_, decoded) = decode(&bytes).unwrap();
        assert_eq!(&*decoded[0].flow_files[0].partition_key, key.as_str());
        assert_eq!(decoded, shards, "the record after it is intact too");
        assert_eq!(error_text(&"é".repeat(5000)).len(), 4096);
    }

    #[test]
    fn any_batch_reads_back_as_it_was_written() {
        // A seeded search over shapes: keys of every length class, empty and large contents,
        // aggregated and plain records, both routes, parents or none.
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x4B4E_4234);
        for _ in 0..200 {
            let shard_count = rng.random_range(0..4);
            let shards: Vec<ShardFlowFiles> = (0..shard_count)
                .map(|s| ShardFlowFiles {
                    shard_id: format!("shardId-{s:012}"),
                    parent_shard_ids: (0..rng.random_range(0..3)).map(|p| format!("shardId-{p:012}")).collect(),
                    millis_behind: rng.random_range(-1..1_000_000),
                    tenure: rng.random_bool(0.5).then(|| rng.random_range(1..1_000_000)),
                    flow_files: (0..rng.random_range(0..5))
                        .map(|_| FlowFileOut {
                            route: if rng.random_bool(0.2) { Route::ParseFailure } else { Route::Success },
                            record_count: rng.random_range(1..100),
                            first_sequence: format!("4963{:052}", rng.random::<u32>()),
                            first_sub: rng.random_bool(0.5).then(|| rng.random_range(0..1000)),
                            last_sequence: format!("4963{:052}", rng.random::<u32>()),
                            last_sub: rng.random_bool(0.5).then(|| rng.random_range(0..1000)),
                            previous: rng.random_bool(0.5).then(|| {
                                Position::new(
                                    format!("4963{:052}", rng.random::<u32>()),
                                    rng.random_bool(0.5).then(|| rng.random_range(0..1000)),
                                )
                            }),
                            partition_key: long_partition_key(
                                [0, 1, 256, 65_535, 65_536, 200_000][rng.random_range(0..6)],
                            )
                            .into(),
                            arrival_ms: rng.random(),
                            error: if rng.random_bool(0.2) { "not JSON".into() } else { String::new() },
                            content: (0..rng.random_range(0..3000)).map(|_| rng.random()).collect(),
                        })
                        .collect(),
                })
                .collect();
            let id = rng.random();
            let bytes = encode(id, &shards).unwrap();
            assert_eq!(bytes.len(), encoded_len(&shards));
            assert_eq!(decode(&bytes), Some((id, shards.clone())));
            let link = if rng.random_bool(0.5) { "arn:aws:kinesis:us-east-1:123456789012:stream/s" } else { "" };
            assert_eq!(
                decode_linked(&encode_linked(id, link, &shards).unwrap()),
                Some((id, link.to_owned(), shards.clone()))
            );
            assert_eq!(encode_linked(id, link, &shards).unwrap().len(), encoded_len_linked(link, &shards));
            assert_eq!(
                decode(&bytes[..bytes.len().saturating_sub(1)]).filter(|_| !bytes.is_empty()),
                None,
                "a cut batch is refused"
            );
        }
    }

    #[test]
    fn a_text_the_layout_cannot_hold_is_an_error() {
        let mut shards = synthetic(1, 1, 1);
        shards[0].shard_id = "s".repeat(70_000);
        assert_eq!(encode(1, &shards).unwrap_err(), BatchError::TooLong { what: "shard id", len: 70_000, max: 65_535 });
    }

    mod outgoing {
        use super::super::*;
        use std::sync::{Arc, Mutex};

        fn outgoing(id: i64, shards: Vec<ShardFlowFiles>) -> (OutgoingBatch, Arc<Mutex<Vec<i64>>>) {
            let nacked = Arc::new(Mutex::new(vec![]));
            let seen = nacked.clone();
            let batch = OutgoingBatch::new(id, String::new(), shards, move |id| {
                seen.lock().unwrap().push(id);
                Ok(())
            });
            (batch, nacked)
        }

        #[test]
        fn a_batch_that_cannot_be_encoded_is_nacked() {
            let mut shards = synthetic(2, 3, 10);
            shards[1].shard_id = "s".repeat(70_000);
            let (batch, nacked) = outgoing(42, shards);
            let err = outgoing_bytes(batch).unwrap_err();
            assert!(matches!(err, BatchError::TooLong { what: "shard id", .. }), "{err}");
            assert_eq!(*nacked.lock().unwrap(), vec![42]);
        }

        #[test]
        fn an_encoded_batch_stays_in_flight_until_nifi_settles_it() {
            let (batch, nacked) = outgoing(43, synthetic(1, 1, 1));
            let bytes = outgoing_bytes(batch).unwrap();
            assert_eq!(bytes, encode(43, &synthetic(1, 1, 1)).unwrap());
            assert!(nacked.lock().unwrap().is_empty());
        }

        #[test]
        fn a_batch_dropped_before_it_is_handed_over_is_nacked_once() {
            let (batch, nacked) = outgoing(44, synthetic(2, 2, 4));
            let mut small = vec![0u8; outgoing_len(&batch) - 1];
            assert!(matches!(encode_outgoing_into(&batch, &mut small), Err(BatchError::BufferTooSmall { .. })));
            drop(batch);
            assert_eq!(*nacked.lock().unwrap(), vec![44]);
            let (batch, nacked) = outgoing(45, synthetic(2, 2, 4));
            let mut room = vec![0u8; outgoing_len(&batch)];
            assert_eq!(encode_outgoing_into(&batch, &mut room).unwrap(), room.len());
            batch.handed_over();
            assert!(nacked.lock().unwrap().is_empty());
        }
    }
}
