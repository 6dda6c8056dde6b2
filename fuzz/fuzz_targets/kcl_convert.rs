//! The conversion of a legacy KCL lease table's items into rows of our own table
//! (`lease::kcl::convert` and `to_item`), fed DynamoDB items built from arbitrary bytes (input layout
//! `kcl` in `fuzz/src/lib.rs`).
//!
//! Checked for every input, besides "no panic":
//! - the conversion does not depend on anything but the input (a second call gives the same);
//! - when it succeeds: one row per item first, in item order, each from its item's `leaseKey`, then
//!   the finished parents it added; every stream, shard and parent id is non-empty (DynamoDB refuses
//!   an empty key); a position is a decimal sequence number; every parent a row names has a row;
//! - each row, written as an item of our table, has non-empty string keys and reads back through the
//!   lease store's own reader with the same checkpoint, parents and start position, and no holder;
//! - when it fails, it says why.

#![no_main]

use aws_sdk_dynamodb::types::AttributeValue;
use kinesnow_core::kinesis::position::Position;
use kinesnow_core::lease::kcl::{convert, to_item, MigratedRow, KCL_KEY};
use kinesnow_core::lease::store::read_lease_row;
use kinesnow_core::lease::table::{HASH_KEY, RANGE_KEY};
use kinesnow_core::lease::Checkpoint;
use kinesnow_fuzz::{kcl_case, trace};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let case = kcl_case(input);
    let converted = convert(&case.items, &case.default_stream);
    assert_eq!(convert(&case.items, &case.default_stream), converted, "the same items converted twice differ");
    trace(|| format!("stream {:?} items {:?}: {converted:?}", case.default_stream, case.items));
    match converted {
        Ok(rows) => {
            check_rows(&case.items, &rows);
            for row in &rows {
                check_item(row);
            }
        }
        Err(reason) => assert!(!reason.is_empty(), "a failed conversion without a reason"),
    }
});

fn check_rows(items: &[kinesnow_core::lease::kcl::Item], rows: &[MigratedRow]) {
    assert!(rows.len() >= items.len(), "{} items became {} rows", items.len(), rows.len());
    for (i, (item, row)) in items.iter().zip(rows).enumerate() {
        let key = item.get(KCL_KEY).and_then(|v| v.as_s().ok());
        assert_eq!(key, Some(&row.source), "row {i} does not come from item {i}'s lease key");
    }
    for row in rows {
        assert!(!row.stream.is_empty() && !row.shard_id.is_empty(), "a row without a stream or shard id: {row:?}");
        assert!(row.parents.iter().all(|p| !p.is_empty()), "a row names an empty parent id: {row:?}");
        if let Some((sequence, _)) = &row.position {
            assert!(
                !sequence.is_empty() && sequence.bytes().all(|b| b.is_ascii_digit()),
                "position {sequence:?} is not a sequence number"
            );
        }
        for parent in &row.parents {
            assert!(
                rows.iter().any(|r| r.stream == row.stream && &r.shard_id == parent),
                "{}'s parent {parent} has no row: it would be read again from the start",
                row.shard_id
            );
        }
    }
    for added in &rows[items.len()..] {
        assert!(
            added.shard_end && added.position.is_none() && added.parents.is_empty(),
            "an added parent row is not a finished shard: {added:?}"
        );
    }
}

fn check_item(row: &MigratedRow) {
    let item = to_item(row);
    for key in [HASH_KEY, RANGE_KEY] {
        match item.get(key) {
            Some(AttributeValue::S(s)) if !s.is_empty() => {}
            other => panic!("key {key} of {row:?} is {other:?}, which DynamoDB refuses"),
        }
    }
    let read = read_lease_row(row.shard_id.clone(), &item)
        .unwrap_or_else(|e| panic!("our store cannot read the row migrated from {row:?}: {e}"));
    let position = row.position.as_ref().map(|(sequence, sub)| Position::new(sequence.clone(), Some(*sub)));
    let expected = match (row.shard_end, position) {
        (true, p) => Checkpoint::ShardEnd(p),
        (false, Some(p)) => Checkpoint::At(p),
        (false, None) => Checkpoint::None,
    };
    assert_eq!(read.checkpoint, expected, "the checkpoint of {row:?} reads back differently");
    assert_eq!(read.parents, row.parents, "the parents of {row:?} read back differently");
    assert_eq!(read.start, row.start, "the start position of {row:?} reads back differently");
    assert!(read.holder.is_none(), "a migrated row has an owner: {row:?}");
}
