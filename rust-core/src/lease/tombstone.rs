//! Removal without `dynamodb:DeleteItem` (Snowflake's IAM policy for the connector grants only
//! `GetItem`, `PutItem`, `UpdateItem`, `Query` and `Scan` on items): a removed row is overwritten
//! by a tombstone, a PutItem of its key and a `removedAt` time (ms) and nothing else, under the
//! same condition the delete had. Every reader treats a tombstone as an absent row, and every write
//! that would have created the row anew clears the mark, so the row comes back exactly as it would
//! after a delete: a restarted heartbeat, a new migration lock, a lease taken on a removed row.
//!
//! The cost: the key of a removed row stays in the table (a few dozen bytes), one per retired
//! shard (heartbeat rows are slots a later start takes over, see `node_row`). A tombstone also
//! carries [`EXPIRES_AT`], its removal time in seconds: a table owner who turns DynamoDB's Time to
//! Live on for that attribute has DynamoDB delete tombstones (an absent row means the same).

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

/// The attribute that marks a row as removed.
pub const REMOVED_AT: &str = "removedAt";

/// The attribute DynamoDB's Time to Live can delete tombstones by (seconds since the epoch).
pub const EXPIRES_AT: &str = "expiresAt";

/// A condition that holds on a row that is absent or a tombstone (the table's range key
/// `shardId` is in every row that exists).
pub const ABSENT: &str = "(attribute_not_exists(shardId) OR attribute_exists(removedAt))";

/// The clause a write that brings a row back adds to its update expression.
pub const REVIVE: &str = "REMOVE removedAt, expiresAt";

pub type Item = HashMap<String, AttributeValue>;

/// Whether `item` is a removed row.
pub fn is_tombstone(item: &Item) -> bool {
    item.contains_key(REMOVED_AT)
}

/// The item that replaces a removed row: its key and when it was removed, nothing else.
pub fn tombstone(key: Item, now_ms: i64) -> Item {
    let mut item = key;
    item.insert(REMOVED_AT.to_owned(), AttributeValue::N(now_ms.to_string()));
    item.insert(EXPIRES_AT.to_owned(), AttributeValue::N((now_ms / 1000).to_string()));
    item
}

/// An update expression that also clears the removal mark: `REMOVE removedAt` joins the
/// expression's own REMOVE clause, if it has one (DynamoDB allows each clause once).
pub fn reviving(expression: &str) -> String {
    match expression.find("REMOVE ") {
        Some(at) => {
            format!("{}REMOVE {REMOVED_AT}, {EXPIRES_AT}, {}", &expression[..at], &expression[at + "REMOVE ".len()..])
        }
        None => format!("{expression} {REVIVE}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> Item {
        HashMap::from([
            ("streamName".to_owned(), AttributeValue::S("s".into())),
            ("shardId".to_owned(), AttributeValue::S("__node__a".into())),
        ])
    }

    #[test]
    fn a_tombstone_keeps_only_the_key_and_the_mark() {
        let t = tombstone(key(), 42_000);
        assert!(is_tombstone(&t));
        assert_eq!(t.len(), 4);
        assert_eq!(t.get(REMOVED_AT), Some(&AttributeValue::N("42000".into())));
        assert_eq!(t.get(EXPIRES_AT), Some(&AttributeValue::N("42".into())), "seconds, as Time to Live reads them");
        assert!(!is_tombstone(&key()), "a live row is not a tombstone");
    }

    #[test]
    fn reviving_adds_one_remove_clause() {
        assert_eq!(reviving("SET a = :a ADD b :one"), "SET a = :a ADD b :one REMOVE removedAt, expiresAt");
        assert_eq!(reviving("SET a = :a REMOVE b"), "SET a = :a REMOVE removedAt, expiresAt, b");
        for e in ["SET a = :a", "SET a = :a REMOVE b, c", "ADD b :one"] {
            assert_eq!(reviving(e).matches("REMOVE").count(), 1, "{e}");
        }
    }
}
