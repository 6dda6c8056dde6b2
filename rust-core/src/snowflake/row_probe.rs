//! The fast path of row mapping. NDJSON whose every line already carries this shard's
//! `kinesisMetadata` with strictly increasing `shardedSequenceNumber`s (what ConsumeKinesis writes
//! with Inject Metadata) is sent line for line, without building a JSON tree of any row: serde_json
//! reads each line as the general way does (numbers parsed, strings and their escapes checked,
//! nesting counted against its recursion limit, only JSON whitespace around the line) but keeps
//! nothing of it but `kinesisMetadata`'s `stream`, `shardId` and `shardedSequenceNumber` (borrowed
//! from the line unless they hold escapes).
//!
//! Anything else returns `None` and `rows.rs` maps the FlowFile the general way: a line that is not
//! one JSON object on its own line, a line serde_json refuses, a carriage return inside a line, a
//! key serde_json's `Value` reads specially (its raw-value and number tokens), metadata that is
//! absent, not an object, named twice, naming another stream or shard, or tokens that do not grow.
//! Where the fast path answers, it answers what the general way would
//! (`rows::tests::the_fast_path_agrees_with_the_general_way` and `..._on_random_json`).
//!
//! Its rows are slices of the FlowFile's content, not copies: each keeps the content's one buffer
//! alive, which `rows::held_bytes` counts against Max In-Flight Size.

use std::borrow::Cow;
use std::fmt;

use bytes::Bytes;
use serde::de::{self, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use super::offset::OffsetToken;
use super::row::Row;
use crate::contract::metadata::KEY as METADATA_KEY;

/// The rows of `content` sent as they came, with their own exact tokens, when every line qualifies:
/// each row is a slice of `content` (no copy). `text` is `content` read as text (`rows.rs` checks
/// the FlowFile's UTF-8 once for both ways), so serde_json does not check each string's UTF-8
/// again; it must be `content`'s own bytes, not a copy of them (a row outside `content` panics).
pub fn passthrough(content: &Bytes, text: &str, stream: &str, shard_id: &str) -> Option<Vec<Row>> {
    let mut rows: Vec<Row> = Vec::new();
    for line in text.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.bytes().all(|b| b.is_ascii_whitespace()) {
            continue;
        }
        // No carriage return inside a line: where the content is one object, the general way
        // writes such a row out again instead of sending it as it came.
        if line.contains('\r') {
            return None;
        }
        // The whole line, as the general way reads it: serde_json allows only JSON whitespace
        // around the object, so trimming what it allowed gives the general way's row.
        let metadata = serde_json::from_str::<Line>(line).ok()?.metadata?;
        if metadata.stream.names_other(stream) || metadata.shard_id.names_other(shard_id) {
            return None;
        }
        let token = metadata.sharded.text().and_then(OffsetToken::parse).filter(|t| !t.is_part())?;
        if rows.last().is_some_and(|last| last.token >= token) {
            return None;
        }
        rows.push(Row { json: content.slice_ref(line.trim_ascii().as_bytes()), token });
    }
    (!rows.is_empty()).then_some(rows)
}

/// A row line: only its `kinesisMetadata`, when it has exactly one that is an object.
struct Line<'a> {
    metadata: Option<Metadata<'a>>,
}

#[derive(Default)]
struct Metadata<'a> {
    stream: Field<'a>,
    shard_id: Field<'a>,
    sharded: Field<'a>,
}

/// A metadata field: absent, a string, or anything else (null included).
#[derive(Default)]
enum Field<'a> {
    #[default]
    Absent,
    Text(Cow<'a, str>),
    Other,
}

impl Field<'_> {
    /// Present, and not `ours` (a non-string names something else too).
    fn names_other(&self, ours: &str) -> bool {
        match self {
            Field::Absent => false,
            Field::Text(text) => text != ours,
            Field::Other => true,
        }
    }

    fn text(&self) -> Option<&str> {
        match self {
            Field::Text(text) => Some(text),
            _ => None,
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Line<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(LineVisitor)
    }
}

struct LineVisitor;

impl<'de> Visitor<'de> for LineVisitor {
    type Value = Line<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut metadata = None;
        let mut seen = false;
        while let Some(key) = map.next_key::<Key>()? {
            if key != Key::Metadata {
                map.next_value::<Checked>()?;
                continue;
            }
            if seen {
                return Err(A::Error::custom("kinesisMetadata named twice"));
            }
            seen = true;
            metadata = Some(map.next_value::<Metadata>()?);
        }
        Ok(Line { metadata })
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Metadata<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(MetadataVisitor)
    }
}

struct MetadataVisitor;

impl<'de> Visitor<'de> for MetadataVisitor {
    type Value = Metadata<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a kinesisMetadata object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut metadata = Metadata::default();
        while let Some(key) = map.next_key::<Key>()? {
            let slot = match key {
                Key::Stream => &mut metadata.stream,
                Key::ShardId => &mut metadata.shard_id,
                Key::Sharded => &mut metadata.sharded,
                Key::Metadata | Key::Other => {
                    map.next_value::<Checked>()?;
                    continue;
                }
            };
            if !matches!(slot, Field::Absent) {
                return Err(A::Error::custom("a kinesisMetadata field named twice"));
            }
            *slot = map.next_value::<Field>()?;
        }
        Ok(metadata)
    }
}

/// The keys serde_json's `Value` does not read as keys: with its `raw_value` feature (ours) an object
/// whose first key is `RAW_VALUE_TOKEN` is read as the JSON text its value holds, with
/// `arbitrary_precision` one whose first key is `NUMBER_TOKEN` as a number. A line holding either
/// anywhere goes the general way.
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// An object key, compared where it lies (no copy unless it holds escapes).
#[derive(PartialEq, Eq)]
enum Key {
    Metadata,
    Stream,
    ShardId,
    Sharded,
    Other,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(match v {
            RAW_VALUE_TOKEN | NUMBER_TOKEN => return Err(E::custom("a key serde_json's Value reads specially")),
            METADATA_KEY => Key::Metadata,
            "stream" => Key::Stream,
            "shardId" => Key::ShardId,
            "shardedSequenceNumber" => Key::Sharded,
            _ => Key::Other,
        })
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Field<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(FieldVisitor)
    }
}

struct FieldVisitor;

impl<'de> Visitor<'de> for FieldVisitor {
    type Value = Field<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Field::Text(Cow::Borrowed(v)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Field::Text(Cow::Owned(v.to_owned())))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Field::Other)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Field::Other)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Field::Other)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Field::Other)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Field::Other)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<Checked>()?.is_some() {}
        Ok(Field::Other)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Checked::visit_entries(map)?;
        Ok(Field::Other)
    }
}

/// Any JSON value, read through and kept nowhere. Unlike serde's `IgnoredAny` (which serde_json
/// skips without parsing numbers, checking escapes or counting nesting), it asks serde_json for the
/// value as `Value` does (`deserialize_any`), so serde_json refuses what it would refuse there: a
/// number out of f64's range, a lone escaped surrogate, nesting past its recursion limit.
struct Checked;

impl Checked {
    fn visit_entries<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
        while map.next_key::<Key>()?.is_some() {
            map.next_value::<Checked>()?;
        }
        Ok(())
    }
}

impl<'de> Deserialize<'de> for Checked {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(CheckedVisitor)
    }
}

struct CheckedVisitor;

impl<'de> Visitor<'de> for CheckedVisitor {
    type Value = Checked;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_borrowed_str<E: de::Error>(self, _: &'de str) -> Result<Self::Value, E> {
        Ok(Checked)
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Checked)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Checked)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Checked)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Checked)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Checked)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Checked)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<Checked>()?.is_some() {}
        Ok(Checked)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Checked::visit_entries(map)?;
        Ok(Checked)
    }
}
