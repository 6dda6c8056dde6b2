//! Reading the KPL messages ([`super::kpl_messages`]) in place, without decoding them into owned
//! structures: the entries of an `AggregatedRecord` body in wire order, and the fields of one
//! `Record`, as slices of the aggregate's bytes. Nothing here allocates, so the de-aggregator can
//! count what an aggregate would expand to before it materialises anything.
//!
//! Decoding follows prost's rules, with prost's own wire primitives (the functions its derived
//! code calls): a known field with the wrong wire type is an error, unknown fields (groups
//! included) are skipped, a repeated scalar keeps its last value, and a missing required field
//! reads as its default. One deliberate difference from decoding a whole [`Record`] with prost: its
//! tags (field 4) are skipped unread, since the consumer does not deliver them, so a malformed
//! tag no longer rejects the aggregate that carries it.
//!
//! [`Record`]: super::kpl_messages::Record

use prost::encoding::{check_wire_type, decode_key, decode_varint, skip_field, DecodeContext, WireType};
use prost::DecodeError;

/// One top-level entry of an `AggregatedRecord` body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry<'a> {
    /// An entry of the partition key table (field 1).
    PartitionKey(&'a [u8]),
    /// An entry of the explicit hash key table (field 2).
    ExplicitHashKey(&'a [u8]),
    /// One user record's encoded `Record` message (field 3).
    Record(&'a [u8]),
}

/// The entries of an `AggregatedRecord` body in wire order; it stops after the first error.
pub fn entries(body: &[u8]) -> Entries<'_> {
    Entries { rest: body, failed: false }
}

pub struct Entries<'a> {
    rest: &'a [u8],
    failed: bool,
}

impl<'a> Iterator for Entries<'a> {
    type Item = Result<Entry<'a>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.failed && !self.rest.is_empty() {
            match next_entry(&mut self.rest) {
                Ok(Some(entry)) => return Some(Ok(entry)),
                Ok(None) => continue, // an unknown field, skipped
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
        None
    }
}

fn next_entry<'a>(buf: &mut &'a [u8]) -> Result<Option<Entry<'a>>, DecodeError> {
    let (tag, wire_type) = decode_key(buf)?;
    let entry = match tag {
        1 => Entry::PartitionKey(length_delimited(wire_type, tag, buf)?),
        2 => Entry::ExplicitHashKey(length_delimited(wire_type, tag, buf)?),
        3 => Entry::Record(length_delimited(wire_type, tag, buf)?),
        _ => {
            skip_field(wire_type, tag, buf, DecodeContext::default())?;
            return Ok(None);
        }
    };
    Ok(Some(entry))
}

/// The fields of one `Record` the consumer uses, borrowed from the aggregate's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecordView<'a> {
    pub partition_key_index: u64,
    pub explicit_hash_key_index: Option<u64>,
    pub data: &'a [u8],
}

impl<'a> RecordView<'a> {
    /// Reads one encoded `Record` message.
    pub fn parse(mut buf: &'a [u8]) -> Result<Self, DecodeError> {
        let mut view = RecordView::default();
        while !buf.is_empty() {
            let (tag, wire_type) = decode_key(&mut buf)?;
            match tag {
                1 => view.partition_key_index = varint(wire_type, &mut buf)?,
                2 => view.explicit_hash_key_index = Some(varint(wire_type, &mut buf)?),
                3 => view.data = length_delimited(wire_type, tag, &mut buf)?,
                _ => skip_field(wire_type, tag, &mut buf, DecodeContext::default())?,
            }
        }
        Ok(view)
    }
}

fn varint(wire_type: WireType, buf: &mut &[u8]) -> Result<u64, DecodeError> {
    check_wire_type(WireType::Varint, wire_type)?;
    decode_varint(buf)
}

/// The payload of a length-delimited field; prost's `skip_field` checks that the length fits.
fn length_delimited<'a>(wire_type: WireType, tag: u32, buf: &mut &'a [u8]) -> Result<&'a [u8], DecodeError> {
    check_wire_type(WireType::LengthDelimited, wire_type)?;
    let mut payload = *buf;
    let len = decode_varint(&mut payload)?;
    skip_field(wire_type, tag, buf, DecodeContext::default())?;
    Ok(&payload[..len as usize])
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;
    use crate::kinesis::kpl_messages::{AggregatedRecord, Record, Tag};

    #[test]
    fn entries_come_in_wire_order_and_unknown_fields_are_skipped() {
        let message = AggregatedRecord {
            partition_key_table: vec![b"a".to_vec(), b"".to_vec()],
            explicit_hash_key_table: vec![b"7".to_vec()],
            records: vec![Record {
                partition_key_index: 1,
                explicit_hash_key_index: Some(0),
                data: b"xy".to_vec(),
                tags: vec![],
            }],
        };
        let mut body = message.encode_to_vec();
        // Unknown fields of every wire type: varint 9, fixed64 10, bytes 11, group 12, fixed32 13.
        body.extend_from_slice(&[9 << 3, 0x96, 0x01]);
        body.extend_from_slice(&[(10 << 3) | 1, 1, 2, 3, 4, 5, 6, 7, 8]);
        body.extend_from_slice(&[(11 << 3) | 2, 2, 0xAA, 0xBB]);
        body.extend_from_slice(&[(12 << 3) | 3, 1 << 3, 5, (12 << 3) | 4]);
        body.extend_from_slice(&[(13 << 3) | 5, 1, 2, 3, 4]);
        let got: Vec<Entry> = entries(&body).collect::<Result<_, _>>().unwrap();
        let record = message.records[0].encode_to_vec();
        assert_eq!(
            got,
            vec![
                Entry::PartitionKey(b"a"),
                Entry::PartitionKey(b""),
                Entry::ExplicitHashKey(b"7"),
                Entry::Record(&record)
            ]
        );
        let view = RecordView::parse(&record).unwrap();
        assert_eq!(view, RecordView { partition_key_index: 1, explicit_hash_key_index: Some(0), data: b"xy" });
    }

    #[test]
    fn errors_are_prosts_and_stop_the_walk() {
        // A record that claims 100 bytes with 3 left.
        let got: Vec<_> = entries(&[0x1A, 100, 1, 2, 3]).collect();
        assert_eq!(got.len(), 1);
        let error = got[0].as_ref().unwrap_err().to_string();
        assert!(error.contains("buffer underflow"), "{error}");
        assert!(AggregatedRecord::decode(&[0x1A, 100, 1, 2, 3][..])
            .unwrap_err()
            .to_string()
            .contains("buffer underflow"));
        // Field 1 as a varint instead of bytes.
        assert!(entries(&[0x08, 1]).next().unwrap().is_err());
        assert!(AggregatedRecord::decode(&[0x08, 1][..]).is_err());
        // A key varint cut short.
        assert!(entries(&[0x80]).next().unwrap().is_err());
        // The partition key index as bytes.
        assert!(RecordView::parse(&[0x0A, 0]).is_err());
    }

    #[test]
    fn records_read_as_prost_reads_them() {
        let cases = [
            Record { partition_key_index: 3, explicit_hash_key_index: None, data: vec![], tags: vec![] },
            Record {
                partition_key_index: u64::MAX,
                explicit_hash_key_index: Some(u64::MAX),
                data: vec![0; 300],
                tags: vec![],
            },
            Record {
                partition_key_index: 0,
                explicit_hash_key_index: Some(2),
                data: b"d".to_vec(),
                tags: vec![Tag { key: "k".into(), value: Some("v".into()) }],
            },
        ];
        for r in cases {
            let bytes = r.encode_to_vec();
            let view = RecordView::parse(&bytes).unwrap();
            assert_eq!(
                (view.partition_key_index, view.explicit_hash_key_index, view.data),
                (r.partition_key_index, r.explicit_hash_key_index, &r.data[..])
            );
        }
        // Missing fields read as defaults; a repeated field keeps its last value, as in prost.
        assert_eq!(RecordView::parse(&[]).unwrap(), RecordView::default());
        let twice = [0x08, 1, 0x08, 2, 0x1A, 1, b'a', 0x1A, 1, b'b'];
        let prost = Record::decode(&twice[..]).unwrap();
        let view = RecordView::parse(&twice).unwrap();
        assert_eq!((view.partition_key_index, view.data), (prost.partition_key_index, &prost.data[..]));
    }
}
