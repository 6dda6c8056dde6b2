//! PutSnowflake's row mapping (`snowflake::rows::Mapping::prepare`) of arbitrary FlowFile content
//! and attributes (input layout `rows` in `fuzz/src/lib.rs`).
//!
//! Checked for every input, besides "no panic":
//! - the outcome does not depend on anything but the input (a second call gives the same);
//! - the source is the FlowFile's shard exactly when it has both the stream and the shard attribute;
//! - a FlowFile that is rows has at least one (no rows at all is `Empty`: issue 15, item 4, the
//!   channel's writer panicked on a FlowFile without rows);
//! - every row is one line of JSON holding an object; from a shard, it carries `kinesisMetadata`, and
//!   in Iceberg mode that object has every declared field;
//! - only a FlowFile from a shard has exact tokens; exact tokens strictly increase, the last one is
//!   not a part (it completes the FlowFile) and each reads back from its text;
//! - a FlowFile that is not rows says why.

#![no_main]

use kinesnow_core::snowflake::offset::OffsetToken;
use kinesnow_core::snowflake::rows::{
    Delivery, Mapping, Prepared, Source, ATTR_SHARD, ATTR_STREAM, METADATA_FIELDS, METADATA_KEY,
};
use kinesnow_fuzz::{rows_case, trace};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};

fuzz_target!(|input: &[u8]| {
    let case = rows_case(input);
    let mapping = Mapping { iceberg: case.iceberg };
    let prepared = mapping.prepare(&case.flow_file);
    assert_eq!(mapping.prepare(&case.flow_file), prepared, "the same FlowFile prepared twice differs");
    let attrs = &case.flow_file.attributes;
    trace(|| {
        format!(
            "iceberg {} attributes {attrs:?} content {:?}: {prepared:?}",
            case.iceberg,
            String::from_utf8_lossy(&case.flow_file.content)
        )
    });
    match prepared {
        Prepared::Rows { source, delivery, rows } => {
            match (&source, attrs.get(ATTR_STREAM), attrs.get(ATTR_SHARD)) {
                (Source::Shard { stream, shard_id, .. }, Some(s), Some(id)) => {
                    assert_eq!((stream, shard_id), (s, id), "the FlowFile's shard is not what its attributes say")
                }
                (Source::Direct, None, _) | (Source::Direct, _, None) => {}
                (source, ..) => panic!("the FlowFile's source {source:?} is not what its attributes say"),
            }
            assert!(
                !rows.is_empty(),
                "a FlowFile prepared as rows has none (content {:?})",
                String::from_utf8_lossy(&case.flow_file.content)
            );
            for (i, row) in rows.iter().enumerate() {
                check_row(i, &row.json, &source, case.iceberg);
            }
            if delivery == Delivery::ExactlyOnce {
                assert!(matches!(source, Source::Shard { .. }), "a direct FlowFile got exact tokens");
                check_tokens(rows.iter().map(|r| &r.token).collect());
            }
        }
        Prepared::Invalid(reason) => assert!(!reason.is_empty(), "an invalid FlowFile without a reason"),
        Prepared::Empty => {}
    }
});

fn check_row(i: usize, json: &[u8], source: &Source, iceberg: bool) {
    assert!(!json.contains(&b'\n'), "row {i} is more than one line: {:?}", String::from_utf8_lossy(json));
    let object: Map<String, Value> = serde_json::from_slice(json)
        .unwrap_or_else(|e| panic!("row {i} is not a JSON object ({e}): {:?}", String::from_utf8_lossy(json)));
    if let Source::Shard { .. } = source {
        let metadata = object.get(METADATA_KEY).unwrap_or_else(|| panic!("row {i} of a shard has no {METADATA_KEY}"));
        if let (true, Value::Object(m)) = (iceberg, metadata) {
            for field in METADATA_FIELDS {
                assert!(m.contains_key(*field), "row {i}'s Iceberg {METADATA_KEY} lacks {field}");
            }
        }
    }
}

fn check_tokens(tokens: Vec<&OffsetToken>) {
    for pair in tokens.windows(2) {
        assert!(pair[0] < pair[1], "offset tokens do not increase: {} then {}", pair[0], pair[1]);
    }
    for token in &tokens {
        assert_eq!(OffsetToken::parse(&token.to_string()).as_ref(), Some(*token), "token {token} does not read back");
    }
    let last = tokens.last().expect("rows");
    assert!(!last.is_part(), "the last row's token {last} is a part: the FlowFile would never complete");
}
