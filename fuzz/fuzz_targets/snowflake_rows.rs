//! PutSnowflake's row mapping (`snowflake::rows::Mapping::prepare`) of arbitrary FlowFile content
//! and attributes (input layout `rows` in `fuzz/src/lib.rs`).
//!
//! Checked for every input, besides "no panic":
//! - the outcome does not depend on anything but the input (a second call gives the same);
//! - the source is the FlowFile's shard exactly when it has both the stream and the shard attribute;
//! - a FlowFile that is rows has at least one (check `empty-rows`: issue 15, item 4, the channel's
//!   writer panics on a FlowFile without rows);
//! - every row is one line of JSON holding an object; from a shard, it carries `kinesisMetadata`, and
//!   in Iceberg mode that object has every declared field;
//! - the rows' offset tokens strictly increase, the last one is not a part (it completes the
//!   FlowFile), each reads back from its text, and a direct FlowFile ends at its counter token;
//! - a FlowFile that is not rows says why.

#![no_main]

use kinesnow_core::snowflake::offset::OffsetToken;
use kinesnow_core::snowflake::rows::{Mapping, Prepared, Source, ATTR_SHARD, ATTR_STREAM, METADATA_FIELDS, METADATA_KEY};
use kinesnow_fuzz::{rows_case, skipped, trace};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};

const COUNTER: u64 = 7;

fuzz_target!(|input: &[u8]| {
    let case = rows_case(input);
    let mapping = Mapping { iceberg: case.iceberg };
    let mut counter_calls = 0;
    let prepared = mapping.prepare(&case.flow_file, || {
        counter_calls += 1;
        COUNTER
    });
    assert!(counter_calls <= 1, "the direct counter was drawn {counter_calls} times for one FlowFile");
    assert_eq!(mapping.prepare(&case.flow_file, || COUNTER), prepared, "the same FlowFile prepared twice differs");
    let attrs = &case.flow_file.attributes;
    trace(|| format!("iceberg {} attributes {attrs:?} content {:?}: {prepared:?}", case.iceberg, String::from_utf8_lossy(&case.flow_file.content)));
    #[allow(unreachable_patterns)]
    match prepared {
        Prepared::Rows { source, rows, .. } => {
            let expected = match (attrs.get(ATTR_STREAM), attrs.get(ATTR_SHARD)) {
                (Some(stream), Some(shard_id)) => Source::Shard { stream: stream.clone(), shard_id: shard_id.clone() },
                _ => Source::Direct,
            };
            assert_eq!(source, expected, "the FlowFile's source is not what its attributes say");
            if rows.is_empty() {
                assert!(skipped("empty-rows"), "a FlowFile prepared as rows has none (content {:?})", String::from_utf8_lossy(&case.flow_file.content));
                return;
            }
            for (i, row) in rows.iter().enumerate() {
                check_row(i, &row.json, &source, case.iceberg);
            }
            check_tokens(rows.iter().map(|r| &r.token).collect(), &source);
        }
        Prepared::Invalid(reason) => assert!(!reason.is_empty(), "an invalid FlowFile without a reason"),
        _ => {}
    }
});

fn check_row(i: usize, json: &[u8], source: &Source, iceberg: bool) {
    assert!(!json.contains(&b'\n'), "row {i} is more than one line: {:?}", String::from_utf8_lossy(json));
    let object: Map<String, Value> =
        serde_json::from_slice(json).unwrap_or_else(|e| panic!("row {i} is not a JSON object ({e}): {:?}", String::from_utf8_lossy(json)));
    if let Source::Shard { .. } = source {
        let metadata = object.get(METADATA_KEY).unwrap_or_else(|| panic!("row {i} of a shard has no {METADATA_KEY}"));
        if let (true, Value::Object(m)) = (iceberg, metadata) {
            for field in METADATA_FIELDS {
                assert!(m.contains_key(*field), "row {i}'s Iceberg {METADATA_KEY} lacks {field}");
            }
        }
    }
}

fn check_tokens(tokens: Vec<&OffsetToken>, source: &Source) {
    for pair in tokens.windows(2) {
        assert!(pair[0] < pair[1], "offset tokens do not increase: {} then {}", pair[0], pair[1]);
    }
    for token in &tokens {
        assert_eq!(OffsetToken::parse(&token.to_string()).as_ref(), Some(*token), "token {token} does not read back");
    }
    let last = tokens.last().expect("rows");
    assert!(!last.is_part(), "the last row's token {last} is a part: the FlowFile would never complete");
    if *source == Source::Direct {
        assert_eq!(**last, OffsetToken::from_counter(COUNTER), "a direct FlowFile must end at its counter token");
    }
}
