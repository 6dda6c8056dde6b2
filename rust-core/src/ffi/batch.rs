//! The compact binary layout in which one batch of records crosses JNI in a single call.
//!
//! Big-endian (Java's `ByteBuffer` default), grouped by shard so the Java side can write one
//! FlowFile per shard without re-sorting:
//!
//! ```text
//! batch  := magic:i32 ("KNB1") batchId:i64 shardCount:i32 shard*
//! shard  := shardId:str16 millisBehind:i64 recordCount:i32 record*
//! record := arrivalMs:i64 subSequence:i64 (-1 = not aggregated) sequence:str16 partitionKey:str16
//!           dataLength:i32 data
//! str16  := length:u16 utf8
//! ```
//! The decoder is `io.kinesnow.nifi.nativebridge.RecordBatch`.

use crate::kinesis::record::{KinesisRecord, ShardRecords};

pub const MAGIC: i32 = 0x4B4E_4231; // "KNB1"

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BatchError {
    #[error("{what} of {len} bytes is longer than the batch layout allows ({max})")]
    TooLong { what: &'static str, len: usize, max: usize },
}

/// Exact encoded size, so the buffer is allocated once.
pub fn encoded_len(shards: &[ShardRecords]) -> usize {
    4 + 8 + 4
        + shards
            .iter()
            .map(|s| 2 + s.shard_id.len() + 8 + 4 + s.records.iter().map(record_len).sum::<usize>())
            .sum::<usize>()
}

fn record_len(r: &KinesisRecord) -> usize {
    8 + 8 + 2 + r.sequence_number.len() + 2 + r.partition_key.len() + 4 + r.data.len()
}

pub fn encode(batch_id: i64, shards: &[ShardRecords]) -> Result<Vec<u8>, BatchError> {
    let mut out = Vec::with_capacity(encoded_len(shards));
    out.extend_from_slice(&MAGIC.to_be_bytes());
    out.extend_from_slice(&batch_id.to_be_bytes());
    out.extend_from_slice(&len_i32("shard count", shards.len())?.to_be_bytes());
    for shard in shards {
        put_str16(&mut out, "shard id", &shard.shard_id)?;
        out.extend_from_slice(&shard.millis_behind.to_be_bytes());
        out.extend_from_slice(&len_i32("record count", shard.records.len())?.to_be_bytes());
        for r in &shard.records {
            out.extend_from_slice(&r.approximate_arrival_ms.to_be_bytes());
            let sub = r.sub_sequence_number.map_or(-1, |s| s as i64);
            out.extend_from_slice(&sub.to_be_bytes());
            put_str16(&mut out, "sequence number", &r.sequence_number)?;
            put_str16(&mut out, "partition key", &r.partition_key)?;
            out.extend_from_slice(&len_i32("record data", r.data.len())?.to_be_bytes());
            out.extend_from_slice(&r.data);
        }
    }
    Ok(out)
}

fn put_str16(out: &mut Vec<u8>, what: &'static str, s: &str) -> Result<(), BatchError> {
    let len = u16::try_from(s.len()).map_err(|_| BatchError::TooLong { what, len: s.len(), max: u16::MAX as usize })?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(s.as_bytes());
    Ok(())
}

fn len_i32(what: &'static str, len: usize) -> Result<i32, BatchError> {
    i32::try_from(len).map_err(|_| BatchError::TooLong { what, len, max: i32::MAX as usize })
}

/// Deterministic records for the hand-off benchmark and the cross-language codec test: payload
/// byte `i` of record `n` is `(n + i) % 251`.
pub fn synthetic(shards: usize, records_per_shard: usize, payload_bytes: usize) -> Vec<ShardRecords> {
    (0..shards)
        .map(|s| ShardRecords {
            shard_id: format!("shardId-{s:012}"),
            millis_behind: s as i64 * 10,
            records: (0..records_per_shard)
                .map(|n| KinesisRecord {
                    sequence_number: format!("4963{:052}", s * records_per_shard + n),
                    sub_sequence_number: (n % 2 == 1).then_some(n as u64),
                    partition_key: format!("key-{n}"),
                    approximate_arrival_ms: 1_764_000_000_000 + n as i64,
                    data: (0..payload_bytes).map(|i| ((n + i) % 251) as u8).collect(),
                })
                .collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_as_documented() {
        let shards = vec![ShardRecords {
            shard_id: "s1".into(),
            millis_behind: 5,
            records: vec![KinesisRecord {
                sequence_number: "9".into(),
                sub_sequence_number: None,
                partition_key: "k".into(),
                approximate_arrival_ms: 258,
                data: vec![0xAB],
            }],
        }];
        let bytes = encode(7, &shards).unwrap();
        let mut expected = vec![];
        expected.extend_from_slice(b"KNB1");
        expected.extend_from_slice(&7i64.to_be_bytes());
        expected.extend_from_slice(&1i32.to_be_bytes());
        expected.extend_from_slice(&[0, 2, b's', b'1']);
        expected.extend_from_slice(&5i64.to_be_bytes());
        expected.extend_from_slice(&1i32.to_be_bytes());
        expected.extend_from_slice(&258i64.to_be_bytes());
        expected.extend_from_slice(&(-1i64).to_be_bytes());
        expected.extend_from_slice(&[0, 1, b'9', 0, 1, b'k']);
        expected.extend_from_slice(&1i32.to_be_bytes());
        expected.push(0xAB);
        assert_eq!(bytes, expected);
        assert_eq!(bytes.len(), encoded_len(&shards));
    }

    #[test]
    fn size_is_exact_for_synthetic_batches() {
        let shards = synthetic(3, 17, 100);
        assert_eq!(encode(1, &shards).unwrap().len(), encoded_len(&shards));
    }

    #[test]
    fn rejects_an_overlong_partition_key() {
        let mut shards = synthetic(1, 1, 1);
        shards[0].records[0].partition_key = "x".repeat(70_000);
        assert_eq!(
            encode(1, &shards).unwrap_err(),
            BatchError::TooLong { what: "partition key", len: 70_000, max: 65_535 }
        );
    }
}
