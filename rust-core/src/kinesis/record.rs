//! A user record as the consumer hands it to NiFi, grouped by shard, and what it costs of the
//! memory budget while the engine holds it.

use std::sync::Arc;

/// Bytes of bookkeeping each held record is charged besides its data, sequence number and
/// partition key: the buffer entry (record and reservation, about 100 bytes) and the allocator's
/// headers of its data and sequence number.
pub const RECORD_OVERHEAD_BYTES: u64 = 128;

/// One user record (after KPL de-aggregation, a sub-record).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KinesisRecord {
    pub sequence_number: String,
    /// Position inside a KPL aggregate; `None` for a record that was not aggregated.
    pub sub_sequence_number: Option<u64>,
    /// Shared, not copied: the sub-records of a KPL aggregate point at their key in its table.
    pub partition_key: Arc<str>,
    pub approximate_arrival_ms: i64,
    pub data: Vec<u8>,
}

/// Bytes of the memory budget a record of these sizes holds: its data, its sequence number, its
/// partition key and [`RECORD_OVERHEAD_BYTES`]. The key counts in full for every record although
/// sub-records share it, because each FlowFile downstream carries it as an attribute of its own.
pub fn record_cost(data_len: usize, sequence_len: usize, key_len: usize) -> u64 {
    data_len as u64 + sequence_len as u64 + key_len as u64 + RECORD_OVERHEAD_BYTES
}

impl KinesisRecord {
    /// Bytes of the memory budget this record holds while the engine has it ([`record_cost`]).
    pub fn cost(&self) -> u64 {
        record_cost(self.data.len(), self.sequence_number.len(), self.partition_key.len())
    }

    /// The sequence number followed by the sub-sequence number zero-padded to 20 digits, as NiFi's
    /// `shardedSequenceNumber`: monotonic within a shard, so it can serve as an offset token.
    pub fn sharded_sequence_number(&self) -> String {
        crate::contract::exactly_once::sharded_sequence_number(
            &self.sequence_number,
            self.sub_sequence_number.unwrap_or(0),
        )
    }
}

/// The records of one shard in one batch, in shard order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardRecords {
    pub shard_id: String,
    /// The shard's parents when a split or merge created it (empty otherwise).
    pub parent_shard_ids: Vec<String>,
    /// MillisBehindLatest from the last GetRecords or fan-out event, -1 if unknown.
    pub millis_behind: i64,
    pub records: Vec<KinesisRecord>,
    /// The lease counter of the tenure that read them, when the consumer tracks what Snowflake
    /// has (Failover Position `SNOWFLAKE_COMMIT`); `None` otherwise.
    pub tenure: Option<u64>,
    /// The shard's record handed to NiFi just before these in the same lease (or where the lease
    /// resumed), `None` when the lease reads from the shard's start and handed nothing yet. It lets
    /// PutSnowflake see whether every FlowFile of a lease before one reached it (see
    /// `feedback::Board::chain`).
    pub previous: Option<crate::kinesis::position::Position>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sharded_sequence_number_pads_the_sub_sequence() {
        let r = KinesisRecord {
            sequence_number: "4960".into(),
            sub_sequence_number: Some(7),
            partition_key: "k".into(),
            approximate_arrival_ms: 0,
            data: vec![],
        };
        assert_eq!(r.sharded_sequence_number(), "496000000000000000000007");
    }
}
