//! A user record as the consumer hands it to NiFi, grouped by shard.

/// One user record (after KPL de-aggregation, a sub-record).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KinesisRecord {
    pub sequence_number: String,
    /// Position inside a KPL aggregate; `None` for a record that was not aggregated.
    pub sub_sequence_number: Option<u64>,
    pub partition_key: String,
    pub approximate_arrival_ms: i64,
    pub data: Vec<u8>,
}

impl KinesisRecord {
    /// The sequence number followed by the sub-sequence number zero-padded to 20 digits, as NiFi's
    /// `shardedSequenceNumber`: monotonic within a shard, so it can serve as an offset token.
    pub fn sharded_sequence_number(&self) -> String {
        format!("{}{:020}", self.sequence_number, self.sub_sequence_number.unwrap_or(0))
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
