//! KPL aggregates in the real format of the Kinesis Producer Library: the magic bytes `F3 89 9A C2`, a
//! protobuf `AggregatedRecord` (encoded with prost), and the MD5 of that protobuf (the md-5 crate).
//!
//! ```proto
//! message AggregatedRecord {
//!   repeated string partition_key_table     = 1;
//!   repeated string explicit_hash_key_table = 2;
//!   repeated Record records                 = 3;
//! }
//! message Record {
//!   required uint64 partition_key_index     = 1;
//!   optional uint64 explicit_hash_key_index = 2;
//!   required bytes  data                    = 3;
//!   repeated Tag    tags                    = 4;
//! }
//! message Tag { required string key = 1; optional string value = 2; }
//! ```

use md5::{Digest, Md5};
use prost::Message;

pub const MAGIC: [u8; 4] = [0xF3, 0x89, 0x9A, 0xC2];
pub const DIGEST_LEN: usize = 16;

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
    #[prost(message, repeated, tag = "4")]
    pub tags: Vec<Tag>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Tag {
    #[prost(string, required, tag = "1")]
    pub key: String,
    #[prost(string, optional, tag = "2")]
    pub value: Option<String>,
}

/// One user record to aggregate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserRecord {
    pub partition_key: String,
    pub explicit_hash_key: Option<String>,
    pub data: Vec<u8>,
}

/// Builds an `AggregatedRecord`, sharing key-table entries between user records as the KPL does.
pub fn aggregated_record(records: Vec<UserRecord>) -> AggregatedRecord {
    let mut out = AggregatedRecord {
        partition_key_table: Vec::new(),
        explicit_hash_key_table: Vec::new(),
        records: Vec::with_capacity(records.len()),
    };
    for r in records {
        let pk = table_index(&mut out.partition_key_table, r.partition_key);
        let ehk = r.explicit_hash_key.map(|k| table_index(&mut out.explicit_hash_key_table, k));
        out.records.push(Record {
            partition_key_index: pk,
            explicit_hash_key_index: ehk,
            data: r.data,
            tags: Vec::new(),
        });
    }
    out
}

fn table_index(table: &mut Vec<String>, key: String) -> u64 {
    match table.iter().position(|k| *k == key) {
        Some(i) => i as u64,
        None => {
            table.push(key);
            (table.len() - 1) as u64
        }
    }
}

/// Appends the aggregate's bytes (magic, protobuf, MD5 of the protobuf) to `out`.
pub fn encode_into(aggregate: &AggregatedRecord, out: &mut Vec<u8>) {
    out.reserve(MAGIC.len() + aggregate.encoded_len() + DIGEST_LEN);
    out.extend_from_slice(&MAGIC);
    let start = out.len();
    aggregate.encode(out).expect("a Vec grows as needed");
    let digest = Md5::digest(&out[start..]);
    out.extend_from_slice(&digest);
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum DecodeError {
    #[error("not a KPL aggregate (no magic bytes or too short)")]
    NotAggregate,
    #[error("the MD5 trailer does not match the protobuf")]
    Digest,
    #[error("the protobuf does not decode: {0}")]
    Protobuf(String),
}

/// Decodes an aggregate (for tests and `--dump` checks); `NotAggregate` for a plain record.
pub fn decode(bytes: &[u8]) -> Result<AggregatedRecord, DecodeError> {
    if bytes.len() < MAGIC.len() + DIGEST_LEN || bytes[..4] != MAGIC {
        return Err(DecodeError::NotAggregate);
    }
    let body = &bytes[4..bytes.len() - DIGEST_LEN];
    if Md5::digest(body).as_slice() != &bytes[bytes.len() - DIGEST_LEN..] {
        return Err(DecodeError::Digest);
    }
    AggregatedRecord::decode(body).map_err(|e| DecodeError::Protobuf(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(pk: &str, ehk: Option<&str>, data: &[u8]) -> UserRecord {
        UserRecord { partition_key: pk.into(), explicit_hash_key: ehk.map(Into::into), data: data.to_vec() }
    }

    #[test]
    fn shares_key_table_entries() {
        let agg = aggregated_record(vec![user("a", None, b"1"), user("b", None, b"2"), user("a", None, b"3")]);
        assert_eq!(agg.partition_key_table, vec!["a", "b"]);
        assert_eq!(agg.records.iter().map(|r| r.partition_key_index).collect::<Vec<_>>(), vec![0, 1, 0]);
        assert!(agg.explicit_hash_key_table.is_empty());
    }

    #[test]
    fn encodes_magic_protobuf_and_md5() {
        let agg = aggregated_record(vec![user("k", Some("5"), b"hello"), user("k", Some("5"), b"")]);
        let mut out = vec![0xAA]; // appends after what is there
        encode_into(&agg, &mut out);
        assert_eq!(out[0], 0xAA);
        assert_eq!(out[1..5], MAGIC);
        // field 1 (partition_key_table), wire type 2, length 1, "k": the first protobuf bytes
        assert_eq!(out[5..8], [0x0A, 0x01, b'k']);
        let decoded = decode(&out[1..]).unwrap();
        assert_eq!(decoded, agg);
        assert_eq!(decoded.explicit_hash_key_table, vec!["5"]);
    }

    #[test]
    fn decode_checks_digest_and_magic() {
        let mut out = Vec::new();
        encode_into(&aggregated_record(vec![user("k", None, b"x")]), &mut out);
        let last = out.len() - 1;
        out[last] ^= 1;
        assert_eq!(decode(&out), Err(DecodeError::Digest));
        assert_eq!(decode(b"plain record data, long enough"), Err(DecodeError::NotAggregate));
    }
}
