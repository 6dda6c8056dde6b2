//! A KPL de-aggregator written for the tests from the format's description (amazon-kinesis-producer's
//! aggregation-format.md), independent of the server's `kpl` module: magic `F3 89 9A C2`, a protobuf
//! `AggregatedRecord`, the MD5 of that protobuf. A plain record comes back as itself.

use md5::{Digest, Md5};
use prost::Message;

#[derive(Clone, PartialEq, prost::Message)]
pub struct AggregatedRecord {
    #[prost(string, repeated, tag = "1")]
    pub partition_key_table: Vec<String>,
    #[prost(string, repeated, tag = "2")]
    pub explicit_hash_key_table: Vec<String>,
    #[prost(message, repeated, tag = "3")]
    pub records: Vec<Record>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Record {
    #[prost(uint64, required, tag = "1")]
    pub partition_key_index: u64,
    #[prost(uint64, optional, tag = "2")]
    pub explicit_hash_key_index: Option<u64>,
    #[prost(bytes = "vec", required, tag = "3")]
    pub data: Vec<u8>,
}

/// One user record: (subsequence number, partition key, explicit hash key, data).
pub type UserRecord = (u32, String, Option<String>, Vec<u8>);

/// The user records in one Kinesis record (itself, sub 0, if it is no aggregate).
pub fn deaggregate(partition_key: &str, data: &[u8]) -> Vec<UserRecord> {
    const MAGIC: [u8; 4] = [0xF3, 0x89, 0x9A, 0xC2];
    if data.len() < 20 || data[..4] != MAGIC {
        return vec![(0, partition_key.to_string(), None, data.to_vec())];
    }
    let (body, digest) = data[4..].split_at(data.len() - 20);
    assert_eq!(Md5::digest(body).as_slice(), digest, "the aggregate's MD5 trailer does not match");
    let agg = AggregatedRecord::decode(body).expect("a KPL AggregatedRecord");
    agg.records
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            let pk = agg.partition_key_table[r.partition_key_index as usize].clone();
            let ehk = r.explicit_hash_key_index.map(|e| agg.explicit_hash_key_table[e as usize].clone());
            (i as u32, pk, ehk, r.data)
        })
        .collect()
}
