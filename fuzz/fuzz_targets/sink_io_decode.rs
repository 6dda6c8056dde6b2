//! The decoder of the FlowFile batches Java hands to PutSnowflake over JNI
//! (`ffi::sink_io::decode_flow_files`, the only bytes the core decodes from Java), fed arbitrary bytes.
//!
//! Checked for every input, besides "no panic": the decoder errors, or what it returns re-encodes
//! (with the crate's encoder, as Java writes) into no more bytes than it read and decodes back to
//! the same FlowFiles.

#![no_main]

use kinesnow_core::ffi::sink_io::{decode_flow_files, encode_flow_files};
use kinesnow_fuzz::trace;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let decoded = decode_flow_files(input);
    trace(|| format!("{} bytes: {decoded:?}", input.len()));
    match decoded {
        Ok(flow_files) => {
            let bytes = encode_flow_files(&flow_files);
            assert!(
                bytes.len() <= input.len(),
                "{} FlowFiles decoded from {} bytes re-encode to {}",
                flow_files.len(),
                input.len(),
                bytes.len()
            );
            assert_eq!(decode_flow_files(&bytes).as_ref(), Ok(&flow_files), "decoded FlowFiles do not round-trip");
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
});
