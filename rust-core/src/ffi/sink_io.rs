//! The layouts in which PutSnowflake's FlowFiles cross JNI into the core, and their outcomes
//! cross back. Big-endian, as Java's `DataOutputStream` and `ByteBuffer` write and read:
//!
//! ```text
//! flowFiles := magic:i32 ("KSF1") count:i32 flowFile*
//! flowFile  := id:i64 attributes contentLength:i32 content
//! attributes := count:i32 (name:str32 value:str32)*
//! candidates := magic:i32 ("KSC1") count:i32 (size:i64 attributes)*   (the queue, as PutSnowflake saw it)
//! outcomes  := magic:i32 ("KSO1") count:i32 outcome*
//! outcome   := id:i64 route:u8 (0 success, 1 invalid, 2 failure, 3 empty, 4 reload, 5 retry) rowsSent:i32 rowsSkipped:i32
//!              channel:str32 offsetToken:str32 message:str32
//! str32     := length:i32 utf8
//! ```
//! The Java side is `io.kinesnow.nifi.nativebridge.SinkBatch`.

use std::collections::HashMap;

use super::wire::{Reader, WireError};
use crate::snowflake::take_order::Candidate;
use crate::snowflake::{FlowFileIn, Outcome};

pub use crate::contract::wire::{CANDIDATES_MAGIC, FLOW_FILES_MAGIC, OUTCOMES_MAGIC};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SinkIoError {
    #[error("the FlowFile batch is cut short at byte {0}")]
    Truncated(usize),
    #[error("the FlowFile batch does not start with {0}")]
    BadMagic(&'static str),
    #[error("an attribute of the FlowFile batch is not UTF-8")]
    NotUtf8,
}

impl crate::error::Classify for SinkIoError {
    /// Bytes the shim wrote that do not follow the layout: a defect of ours.
    fn class(&self) -> crate::error::ErrorClass {
        crate::error::ErrorClass::Fatal
    }
}

impl From<WireError> for SinkIoError {
    fn from(e: WireError) -> Self {
        match e {
            WireError::Truncated(at) => Self::Truncated(at),
            WireError::NotUtf8 => Self::NotUtf8,
        }
    }
}

pub fn decode_flow_files(bytes: &[u8]) -> Result<Vec<FlowFileIn>, SinkIoError> {
    let mut r = Reader::new(bytes);
    if r.i32()? != FLOW_FILES_MAGIC {
        return Err(SinkIoError::BadMagic("KSF1"));
    }
    let count = r.len()?;
    let mut out = Vec::with_capacity(count.min(100_000));
    for _ in 0..count {
        let id = r.i64()?;
        let attributes = read_attributes(&mut r)?;
        let n = r.len()?;
        let content = bytes::Bytes::copy_from_slice(r.take(n)?);
        out.push(FlowFileIn { id, attributes, content });
    }
    Ok(out)
}

/// The queued FlowFiles PutSnowflake may take, in the queue's order (see `take_order`).
pub fn decode_candidates(bytes: &[u8]) -> Result<Vec<Candidate>, SinkIoError> {
    let mut r = Reader::new(bytes);
    if r.i32()? != CANDIDATES_MAGIC {
        return Err(SinkIoError::BadMagic("KSC1"));
    }
    let count = r.len()?;
    let mut out = Vec::with_capacity(count.min(100_000));
    for _ in 0..count {
        let size = r.i64()?.max(0) as u64;
        out.push(Candidate { size, attributes: read_attributes(&mut r)? });
    }
    Ok(out)
}

fn read_attributes(r: &mut Reader<'_>) -> Result<HashMap<String, String>, SinkIoError> {
    let count = r.len()?;
    let mut attributes = HashMap::with_capacity(count.min(64));
    for _ in 0..count {
        let name = r.str32()?;
        let value = r.str32()?;
        attributes.insert(name, value);
    }
    Ok(attributes)
}

pub fn encode_outcomes(outcomes: &[Outcome]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + outcomes.len() * 96);
    out.extend_from_slice(&OUTCOMES_MAGIC.to_be_bytes());
    out.extend_from_slice(&(outcomes.len() as i32).to_be_bytes());
    for o in outcomes {
        out.extend_from_slice(&o.flow_file_id.to_be_bytes());
        out.push(o.route as u8);
        out.extend_from_slice(&(o.rows_sent as i32).to_be_bytes());
        out.extend_from_slice(&(o.rows_skipped as i32).to_be_bytes());
        for s in [&o.channel, &o.offset_token, &o.message] {
            out.extend_from_slice(&(s.len() as i32).to_be_bytes());
            out.extend_from_slice(s.as_bytes());
        }
    }
    out
}

/// Encodes FlowFiles as Java does (tests and the benchmark).
pub fn encode_flow_files(flow_files: &[FlowFileIn]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&FLOW_FILES_MAGIC.to_be_bytes());
    out.extend_from_slice(&(flow_files.len() as i32).to_be_bytes());
    for f in flow_files {
        out.extend_from_slice(&f.id.to_be_bytes());
        write_attributes(&mut out, &f.attributes);
        out.extend_from_slice(&(f.content.len() as i32).to_be_bytes());
        out.extend_from_slice(&f.content);
    }
    out
}

/// Encodes candidates as Java does (tests).
pub fn encode_candidates(candidates: &[Candidate]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&CANDIDATES_MAGIC.to_be_bytes());
    out.extend_from_slice(&(candidates.len() as i32).to_be_bytes());
    for c in candidates {
        out.extend_from_slice(&(c.size as i64).to_be_bytes());
        write_attributes(&mut out, &c.attributes);
    }
    out
}

fn write_attributes(out: &mut Vec<u8>, attributes: &HashMap<String, String>) {
    out.extend_from_slice(&(attributes.len() as i32).to_be_bytes());
    for (k, v) in attributes {
        for s in [k, v] {
            out.extend_from_slice(&(s.len() as i32).to_be_bytes());
            out.extend_from_slice(s.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_files_round_trip_and_truncation_is_an_error() {
        let ff = FlowFileIn {
            id: 42,
            attributes: [("a".to_string(), "ü".to_string())].into(),
            content: bytes::Bytes::from_static(b"{\"x\":1}"),
        };
        let bytes = encode_flow_files(std::slice::from_ref(&ff));
        assert_eq!(decode_flow_files(&bytes).unwrap(), vec![ff]);
        assert_eq!(decode_flow_files(&bytes[..bytes.len() - 1]), Err(SinkIoError::Truncated(bytes.len() - 7)));
        assert_eq!(decode_flow_files(b"NOPE\0\0\0\0"), Err(SinkIoError::BadMagic("KSF1")));
    }

    #[test]
    fn candidates_round_trip_and_truncation_is_an_error() {
        let c = Candidate {
            size: 1234,
            attributes: [("aws.kinesis.shard.id".to_string(), "shardId-0".to_string())].into(),
        };
        let bytes = encode_candidates(std::slice::from_ref(&c));
        let back = decode_candidates(&bytes).unwrap();
        assert_eq!((back[0].size, &back[0].attributes), (c.size, &c.attributes));
        assert!(matches!(decode_candidates(&bytes[..bytes.len() - 1]), Err(SinkIoError::Truncated(_))));
        assert_eq!(decode_candidates(&encode_flow_files(&[])).unwrap_err(), SinkIoError::BadMagic("KSC1"));
    }
}
