//! The layout in which ConsumeKinesis tells the core, once per batch, which Kinesis records its
//! Record Reader sent to `parse.failure` (Processing Strategy RECORD: Java decides those after the
//! batch left Rust). Big-endian, as Java's `DataOutputStream` writes:
//!
//! ```text
//! skips := magic:i32 ("KNS1") count:i32 skip*
//! skip  := shardId:str16 tenure:i64 (the lease counter; -1: no tracking lease)
//!          previousSequence:str16 previousSub:i64   (the record read before it in the lease;
//!                                                    empty when none)
//!          lastSequence:str16 lastSub:i64           (the record itself; sub -1 = not aggregated)
//! str16 := length:u16 utf8
//! ```
//! The Java side is `io.kinesnow.nifi.nativebridge.SkippedRecords`.

use super::wire::{Reader, WireError};
use crate::feedback::Skip;
use crate::kinesis::position::Position;

pub use crate::contract::wire::SKIPS_MAGIC as MAGIC;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SkipsError {
    #[error("the skipped records are cut short at byte {0}")]
    Truncated(usize),
    #[error("the skipped records do not start with KNS1")]
    BadMagic,
    #[error("a shard id or sequence number of the skipped records is not UTF-8")]
    NotUtf8,
    #[error("the skipped records have {0} trailing bytes")]
    Trailing(usize),
}

impl crate::error::Classify for SkipsError {
    /// Bytes the shim wrote that do not follow the layout: a defect of ours.
    fn class(&self) -> crate::error::ErrorClass {
        crate::error::ErrorClass::Fatal
    }
}

impl From<WireError> for SkipsError {
    fn from(e: WireError) -> Self {
        match e {
            WireError::Truncated(at) => Self::Truncated(at),
            WireError::NotUtf8 => Self::NotUtf8,
        }
    }
}

/// The skips (a tenure only for tracking leases).
pub fn decode(bytes: &[u8]) -> Result<Vec<Skip>, SkipsError> {
    let mut r = Reader::new(bytes);
    if r.i32()? != MAGIC {
        return Err(SkipsError::BadMagic);
    }
    let count = r.len()?;
    let mut skips = Vec::with_capacity(count.min(10_000));
    for _ in 0..count {
        let shard = r.str16()?;
        let tenure = r.i64()?;
        let previous = position(&mut r)?;
        let last = position(&mut r)?;
        if let Some(last) = last {
            skips.push(Skip { shard, tenure: u64::try_from(tenure).ok(), previous, last });
        }
    }
    match r.remaining() {
        0 => Ok(skips),
        n => Err(SkipsError::Trailing(n)),
    }
}

/// `sequence:str16 sub:i64`; an empty sequence is no position, a negative sub none.
fn position(r: &mut Reader) -> Result<Option<Position>, SkipsError> {
    let sequence = r.str16()?;
    let sub = u64::try_from(r.i64()?).ok();
    Ok((!sequence.is_empty()).then(|| Position::new(sequence, sub)))
}

/// Encodes skips as Java does (tests).
#[cfg(any(test, feature = "test-support"))]
pub fn encode(skips: &[(&str, i64, Option<Position>, Position)]) -> Vec<u8> {
    fn str16(out: &mut Vec<u8>, s: &str) {
        out.extend_from_slice(&(s.len() as u16).to_be_bytes());
        out.extend_from_slice(s.as_bytes());
    }
    fn position(out: &mut Vec<u8>, p: Option<&Position>) {
        str16(out, p.map_or("", |p| p.sequence_number.as_str()));
        out.extend_from_slice(&p.and_then(|p| p.sub_sequence_number).map_or(-1, |s| s as i64).to_be_bytes());
    }
    let mut out = Vec::new();
    out.extend_from_slice(&MAGIC.to_be_bytes());
    out.extend_from_slice(&(skips.len() as i32).to_be_bytes());
    for (shard, tenure, previous, last) in skips {
        str16(&mut out, shard);
        out.extend_from_slice(&tenure.to_be_bytes());
        position(&mut out, previous.as_ref());
        position(&mut out, Some(last));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skips_round_trip_with_or_without_a_tracking_lease() {
        let at = |seq: &str, sub| Position::new(seq, sub);
        let bytes = encode(&[
            ("shard-1", 7, Some(at("11", None)), at("12", None)),
            ("shard-1", 7, None, at("5", Some(2))),
            ("shard-2", -1, Some(at("1", None)), at("2", None)),
        ]);
        assert_eq!(
            decode(&bytes).unwrap(),
            vec![
                Skip { shard: "shard-1".into(), tenure: Some(7), previous: Some(at("11", None)), last: at("12", None) },
                Skip { shard: "shard-1".into(), tenure: Some(7), previous: None, last: at("5", Some(2)) },
                Skip { shard: "shard-2".into(), tenure: None, previous: Some(at("1", None)), last: at("2", None) },
            ]
        );
        assert!(matches!(decode(&bytes[..bytes.len() - 1]), Err(SkipsError::Truncated(_))));
        assert_eq!(decode(b"NOPE\0\0\0\0"), Err(SkipsError::BadMagic));
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(decode(&longer), Err(SkipsError::Trailing(1)));
    }
}
