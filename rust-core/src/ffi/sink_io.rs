//! The layouts in which PutSnowflake's FlowFiles cross JNI into the core, and their outcomes
//! cross back. Big-endian, as Java's `DataOutputStream` and `ByteBuffer` write and read:
//!
//! ```text
//! flowFiles := magic:i32 ("KSF1") count:i32 flowFile*
//! flowFile  := id:i64 attributeCount:i32 (name:str32 value:str32)* contentLength:i32 content
//! outcomes  := magic:i32 ("KSO1") count:i32 outcome*
//! outcome   := id:i64 route:u8 (0 success, 1 invalid, 2 failure, 3 empty, 4 reload, 5 retry) rowsSent:i32 rowsSkipped:i32
//!              channel:str32 offsetToken:str32 message:str32
//! str32     := length:i32 utf8
//! ```
//! The Java side is `io.kinesnow.nifi.nativebridge.SinkBatch`.

use std::collections::HashMap;

use super::wire::{Reader, WireError};
use crate::snowflake::{FlowFileIn, Outcome};

pub const FLOW_FILES_MAGIC: i32 = 0x4B53_4631; // "KSF1"
pub const OUTCOMES_MAGIC: i32 = 0x4B53_4F31; // "KSO1"

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SinkIoError {
    #[error("the FlowFile batch is cut short at byte {0}")]
    Truncated(usize),
    #[error("the FlowFile batch does not start with KSF1")]
    BadMagic,
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
        return Err(SinkIoError::BadMagic);
    }
    let count = r.len()?;
    let mut out = Vec::with_capacity(count.min(100_000));
    for _ in 0..count {
        let id = r.i64()?;
        let attribute_count = r.len()?;
        let mut attributes = HashMap::with_capacity(attribute_count.min(64));
        for _ in 0..attribute_count {
            let name = r.str32()?;
            let value = r.str32()?;
            attributes.insert(name, value);
        }
        let n = r.len()?;
        let content = r.take(n)?.to_vec();
        out.push(FlowFileIn { id, attributes, content });
    }
    Ok(out)
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
        out.extend_from_slice(&(f.attributes.len() as i32).to_be_bytes());
        for (k, v) in &f.attributes {
            for s in [k, v] {
                out.extend_from_slice(&(s.len() as i32).to_be_bytes());
                out.extend_from_slice(s.as_bytes());
            }
        }
        out.extend_from_slice(&(f.content.len() as i32).to_be_bytes());
        out.extend_from_slice(&f.content);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_files_round_trip_and_truncation_is_an_error() {
        let ff = FlowFileIn {
            id: 42,
            attributes: [("a".to_string(), "ü".to_string())].into(),
            content: b"{\"x\":1}".to_vec(),
        };
        let bytes = encode_flow_files(std::slice::from_ref(&ff));
        assert_eq!(decode_flow_files(&bytes).unwrap(), vec![ff]);
        assert_eq!(decode_flow_files(&bytes[..bytes.len() - 1]), Err(SinkIoError::Truncated(bytes.len() - 7)));
        assert_eq!(decode_flow_files(b"NOPE\0\0\0\0"), Err(SinkIoError::BadMagic));
    }
}
