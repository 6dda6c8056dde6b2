//! INJECT_METADATA by splicing: `,"kinesisMetadata":{...}` written before a JSON object record's
//! closing brace, the record's own bytes kept as they are, instead of parsing it into a
//! `serde_json::Value` and writing the whole tree out again.
//!
//! The record is still validated by serde_json's own parser, through the same `deserialize_any`
//! calls a `Value` makes (same number parsing and range errors, same string and UTF-8 checks, same
//! recursion limit), but into a scan that keeps nothing but the object keys it needs. [`splice`]
//! answers only when the result means exactly what the re-serialised record meant; in every other
//! case it returns `None` and the caller takes the old path, which then decides as it always did:
//!
//! - not JSON, or JSON that is not an object: the old path's error, word for word;
//! - a `kinesisMetadata` key already there: the old path replaces it (one key, never two);
//! - a key named twice in any object: the old path keeps the last (the row probe on the Snowflake
//!   side refuses a doubled `kinesisMetadata`, and Snowflake may refuse doubled keys);
//! - serde_json's private raw-value key, which a `Value` reads in a way of its own.
//!
//! What differs from the old output, by design: the record keeps its own key order, number text and
//! string escapes (the old path sorted keys, wrote numbers out again, losing digits beyond an f64,
//! and re-escaped strings). Whitespace before and after the object is dropped, and a record with a
//! line break anywhere (a pretty-printed one) loses all whitespace outside strings, so each record
//! stays on one line as the old output was (LINE_DELIMITED's lines are records).
//! `kinesisMetadata` itself is written byte for byte as the old path wrote it (keys sorted).
//!
//! The unit tests compare both paths over thousands of random records (whitespace around and
//! inside, doubled keys, nested objects, escapes, numbers of every shape).

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::contract::metadata as meta;

/// The key under which serde_json's `Value` reads a raw value (its `raw_value` feature).
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// The record with `,"kinesisMetadata":` + what `metadata` writes spliced before its closing
/// brace, or `None` when the old path must decide (see the module's documentation).
pub(super) fn splice(data: &[u8], metadata: impl FnOnce(&mut Vec<u8>) -> Option<()>) -> Option<Vec<u8>> {
    let shape = scan(data)?;
    if shape.has_metadata_key {
        return None;
    }
    let multi_line = data.iter().any(|&b| b == b'\n' || b == b'\r');
    let mut out = Vec::with_capacity(data.len() + 400);
    if multi_line {
        compact_into(data, &mut out);
    } else {
        out.extend_from_slice(trim(data));
    }
    // Validated as an object and trimmed: it ends with its closing brace.
    if out.pop() != Some(b'}') {
        return None;
    }
    if shape.keys > 0 {
        out.push(b',');
    }
    out.push(b'"');
    out.extend_from_slice(meta::KEY.as_bytes());
    out.extend_from_slice(b"\":");
    metadata(&mut out)?;
    out.push(b'}');
    Some(out)
}

/// Writes the `kinesisMetadata` object as the old path did: a `serde_json::Map` (sorted keys),
/// compact. The test `metadata_is_written_as_the_value_was` holds the two together.
#[allow(clippy::too_many_arguments)]
pub(super) fn write_metadata(
    out: &mut Vec<u8>,
    stream: &str,
    shard_id: &str,
    sequence_number: &str,
    sub_sequence_number: u64,
    sharded_sequence_number: &str,
    partition_key: &str,
    approximate_arrival: i64,
) -> Option<()> {
    // In the order of the names' bytes, as a BTreeMap holds them.
    out.push(b'{');
    field(out, meta::APPROXIMATE_ARRIVAL, &approximate_arrival, false)?;
    field(out, meta::PARTITION_KEY, partition_key, true)?;
    field(out, meta::SEQUENCE_NUMBER, sequence_number, true)?;
    field(out, meta::SHARD_ID, shard_id, true)?;
    field(out, meta::SHARDED_SEQUENCE_NUMBER, sharded_sequence_number, true)?;
    field(out, meta::STREAM, stream, true)?;
    field(out, meta::SUB_SEQUENCE_NUMBER, &sub_sequence_number, true)?;
    out.push(b'}');
    Some(())
}

fn field<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, name: &str, value: &T, comma: bool) -> Option<()> {
    if comma {
        out.push(b',');
    }
    json(out, name)?;
    out.push(b':');
    json(out, value)
}

/// serde_json's own text of `value` (escapes, numbers), appended.
fn json<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> Option<()> {
    value.serialize(&mut serde_json::Serializer::new(out)).ok()
}

/// JSON's whitespace, as serde_json skips it.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\t' | b'\r')
}

fn trim(data: &[u8]) -> &[u8] {
    let start = data.iter().position(|&b| !is_space(b)).unwrap_or(data.len());
    let end = data.iter().rposition(|&b| !is_space(b)).map_or(start, |i| i + 1);
    &data[start..end]
}

/// `data`, valid JSON, without whitespace outside its strings (inside a string a raw line break
/// or tab cannot occur: JSON requires them escaped).
fn compact_into(data: &[u8], out: &mut Vec<u8>) {
    let mut in_string = false;
    let mut escaped = false;
    for &b in data {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else if b == b'"' {
            in_string = true;
        } else if is_space(b) {
            continue;
        }
        out.push(b);
    }
}

/// What the scan learnt of a record that is one JSON object whose keys are all distinct.
struct Shape {
    /// Its keys, at the top level.
    keys: usize,
    has_metadata_key: bool,
}

/// `None` when the record is not JSON, not an object, names a key twice in any object, or holds
/// the raw-value key: the old path decides those.
fn scan(data: &[u8]) -> Option<Shape> {
    let mut keys = Vec::new();
    let mut plain = true;
    let mut de = serde_json::Deserializer::from_slice(data);
    let shape = Top { keys: &mut keys, plain: &mut plain }.deserialize(&mut de).ok()?;
    de.end().ok()?;
    plain.then_some(shape)
}

struct Top<'s, 'de> {
    keys: &'s mut Vec<Cow<'de, str>>,
    plain: &'s mut bool,
}

impl<'de> DeserializeSeed<'de> for Top<'_, 'de> {
    type Value = Shape;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Shape, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Top<'_, 'de> {
    type Value = Shape;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Shape, A::Error> {
        let (keys, has_metadata_key) = object(self.keys, self.plain, map)?;
        Ok(Shape { keys, has_metadata_key })
    }
}

/// Reads one object's entries; its key count and whether it holds `kinesisMetadata`. Marks the
/// record not plain when a key is named twice or is the raw-value key.
fn object<'de, A: MapAccess<'de>>(
    keys: &mut Vec<Cow<'de, str>>,
    plain: &mut bool,
    mut map: A,
) -> Result<(usize, bool), A::Error> {
    let start = keys.len();
    while let Some(key) = map.next_key_seed(Key)? {
        if key == RAW_VALUE_TOKEN {
            *plain = false;
        }
        keys.push(key);
        map.next_value_seed(Scan { keys: &mut *keys, plain: &mut *plain })?;
    }
    let own = &mut keys[start..];
    let count = own.len();
    let has_metadata_key = own.iter().any(|k| k == meta::KEY);
    if count > 1 {
        own.sort_unstable();
        if own.windows(2).any(|w| w[0] == w[1]) {
            *plain = false;
        }
    }
    keys.truncate(start);
    Ok((count, has_metadata_key))
}

/// An object key, borrowed from the record unless it holds escapes.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        // As a `Value` reads its keys.
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string key")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }
}

/// Any JSON value, read as a `Value` would read it, keeping nothing.
struct Scan<'s, 'de> {
    keys: &'s mut Vec<Cow<'de, str>>,
    plain: &'s mut bool,
}

impl<'de> DeserializeSeed<'de> for Scan<'_, 'de> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Scan<'_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Scan { keys: &mut *self.keys, plain: &mut *self.plain })?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        object(self.keys, self.plain, map).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Layout, Route};
    use super::*;
    use crate::config::consume_kinesis::{OutputStrategy, ProcessingStrategy};
    use crate::kinesis::record::KinesisRecord;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use serde_json::Value;

    const SHARD: &str = "shardId-000000000007";

    fn layout() -> Layout<'static> {
        Layout { stream: "orders", processing: &ProcessingStrategy::FlowFile, output: OutputStrategy::InjectMetadata }
    }

    fn record(data: &[u8], sub: Option<u64>, key: &str) -> KinesisRecord {
        KinesisRecord {
            sequence_number: "49650000000000000000000000000000000000000000000000000012".into(),
            sub_sequence_number: sub,
            partition_key: key.into(),
            approximate_arrival_ms: 1_764_000_000_123,
            data: data.to_vec(),
        }
    }

    /// The old output's form: parsed into a `Value` and written out again (sorted keys, compact).
    fn normalised(json: &[u8]) -> Vec<u8> {
        serde_json::to_vec(&serde_json::from_slice::<Value>(json).expect("the output is JSON")).unwrap()
    }

    /// Both paths on one record: the same error, or outputs that mean the same; the new one on one
    /// line with `kinesisMetadata` named once and no key named twice. Whether it was spliced.
    fn check(data: &[u8]) -> bool {
        let layout = layout();
        let mut by_value = record(data, Some(3), "pk\u{e9}\"\\\u{1}");
        let old = layout.inject_by_value(SHARD, &by_value);
        let new = layout.content(SHARD, &mut by_value);
        let shown = String::from_utf8_lossy(data);
        let spliced = scan(data).is_some_and(|s| !s.has_metadata_key);
        match (&old, &new) {
            (Err(a), Err(b)) => assert_eq!(a, b, "{shown}"),
            (Ok(old), Ok(new)) if !spliced => assert_eq!(new, old, "{shown}: the old path's output, byte for byte"),
            (Ok(old), Ok(new)) => {
                // Parsed from the record's own number texts on both sides, so the same f64s (a second parse of
                // the old output's shortest texts could differ in the last bit without float_roundtrip).
                assert_eq!(normalised(new), *old, "{shown} gave {}", String::from_utf8_lossy(new));
                assert!(!new.iter().any(|&b| b == b'\n' || b == b'\r'), "{shown}: not one line");
                let shape = scan(new).unwrap_or_else(|| panic!("{shown}: a key named twice in the output"));
                assert!(shape.has_metadata_key);
            }
            _ => panic!("{shown}: {old:?} against {new:?}"),
        }
        new.is_ok() && spliced
    }

    #[test]
    fn metadata_is_written_as_the_value_was() {
        let mut rng = StdRng::seed_from_u64(7);
        for n in 0..2000 {
            let text = |rng: &mut StdRng| random_text(rng);
            let stream = text(&mut rng);
            let shard = text(&mut rng);
            let key = text(&mut rng);
            let layout = Layout { stream: &stream, ..layout() };
            let mut r = record(b"{}", (n % 3 != 0).then(|| rng.random()), &key);
            r.sequence_number = text(&mut rng);
            r.approximate_arrival_ms = rng.random();
            let old = serde_json::to_vec(&layout.metadata(&shard, &r)).unwrap();
            let mut new = Vec::new();
            write_metadata(
                &mut new,
                &stream,
                &shard,
                &r.sequence_number,
                r.sub_sequence_number.unwrap_or(0),
                &r.sharded_sequence_number(),
                &r.partition_key,
                r.approximate_arrival_ms,
            )
            .unwrap();
            assert_eq!(String::from_utf8(new).unwrap(), String::from_utf8(old).unwrap());
        }
    }

    #[test]
    fn the_record_keeps_its_bytes_and_gains_the_metadata_before_its_brace() {
        let layout = layout();
        let mut r = record(br#"  {"z":1.50,"a":[1e2,{"y":"\u00e9\/"}],"n":12345678901234567890123} "#, None, "k");
        let meta = serde_json::to_vec(&layout.metadata(SHARD, &r)).unwrap();
        let out = layout.content(SHARD, &mut r).unwrap();
        let expected = [
            &br#"{"z":1.50,"a":[1e2,{"y":"\u00e9\/"}],"n":12345678901234567890123,"kinesisMetadata":"#[..],
            &meta,
            b"}",
        ]
        .concat();
        assert_eq!(String::from_utf8(out).unwrap(), String::from_utf8(expected).unwrap());
        let mut empty = record(b"{ }", None, "k");
        assert!(layout.content(SHARD, &mut empty).unwrap().starts_with(b"{ \"kinesisMetadata\":{"));
        let mut pretty = record(b"{\n  \"a\" : \"b c\\\"\\n\",\r\n\t\"d\": [ 1 , 2 ]\n}\n", None, "k");
        let out = layout.content(SHARD, &mut pretty).unwrap();
        assert!(
            out.starts_with(br#"{"a":"b c\"\n","d":[1,2],"kinesisMetadata":{"#),
            "{}",
            String::from_utf8_lossy(&out)
        );
    }

    #[test]
    fn what_the_old_path_decides_it_still_decides() {
        for (data, spliced) in [
            (&br#"{"kinesisMetadata":{"stream":"x"},"a":1}"#[..], false),
            (br#"{"a":1,"a":2}"#, false),
            (br#"{"a":{"b":1,"b":2}}"#, false),
            (br#"{"a\u0062":1,"ab":2}"#, false),
            (br#"{"$serde_json::private::RawValue":"[1]"}"#, false),
            (br#"{"x":{"$serde_json::private::RawValue":"{\"kinesisMetadata\":1}"}}"#, false),
            (b"[1,2]", false),
            (b"\"text\"", false),
            (b"{\"a\":1} {}", false),
            (b"{\"a\":1e400}", false),
            (b"{\"a\":\"\\ud800\"}", false),
            (b"{\"a\":\"\xff\"}", false),
            (b"", false),
            (b"{\"a\":1}", true),
            (b"{\"a\":[{\"a\":1},{\"a\":2}]}", true),
        ] {
            assert_eq!(check(data), spliced, "{}", String::from_utf8_lossy(data));
        }
        let deep = format!("{{\"a\":{}1{}}}", "[".repeat(200), "]".repeat(200));
        assert!(!check(deep.as_bytes()), "deeper than serde_json's recursion limit");
    }

    #[test]
    fn random_records_give_what_the_old_path_gave() {
        let mut rng = StdRng::seed_from_u64(0x6b6e);
        let (mut spliced, mut total) = (0, 0);
        for _ in 0..20_000 {
            let mut text = String::new();
            space(&mut rng, &mut text);
            if rng.random_bool(0.9) {
                object(&mut rng, &mut text, 0);
            } else {
                value(&mut rng, &mut text, 0);
            }
            space(&mut rng, &mut text);
            let mut data = text.into_bytes();
            if rng.random_bool(0.1) {
                mutate(&mut rng, &mut data);
            }
            total += 1;
            spliced += usize::from(check(&data));
        }
        assert!(spliced * 3 > total, "only {spliced} of {total} spliced: the generator misses the common case");
        assert!(spliced * 10 < total * 9, "{spliced} of {total} spliced: the generator misses the old path's cases");
    }

    fn mutate(rng: &mut StdRng, data: &mut Vec<u8>) {
        match rng.random_range(0..4) {
            0 if !data.is_empty() => data.truncate(rng.random_range(0..data.len())),
            1 if !data.is_empty() => {
                let at = rng.random_range(0..data.len());
                data[at] = rng.random();
            }
            2 => data.extend_from_slice(b"x"),
            _ => data.extend_from_slice(b" {}"),
        }
    }

    const KEYS: &[&str] =
        &["a", "b", "id", "kinesisMetadata", "a\\u0062", "ab", "\\/", "/", "\u{e9}", "\\u00e9", "x y"];

    fn space(rng: &mut StdRng, out: &mut String) {
        while rng.random_bool(0.15) {
            out.push([' ', '\t', '\n', '\r'][rng.random_range(0..4)]);
        }
    }

    fn object(rng: &mut StdRng, out: &mut String, depth: usize) {
        out.push('{');
        let n = rng.random_range(0..if depth == 0 { 8 } else { 4 });
        for i in 0..n {
            space(rng, out);
            if i > 0 {
                out.push(',');
                space(rng, out);
            }
            out.push('"');
            // Mostly distinct keys, so that most records take the splice.
            if rng.random_bool(0.08) {
                out.push_str(KEYS[rng.random_range(0..KEYS.len())]);
            } else {
                out.push_str(&format!("k{depth}_{i}"));
            }
            out.push('"');
            space(rng, out);
            out.push(':');
            space(rng, out);
            value(rng, out, depth + 1);
            space(rng, out);
        }
        out.push('}');
    }

    fn value(rng: &mut StdRng, out: &mut String, depth: usize) {
        let kinds = if depth > 4 { 3 } else { 5 };
        match rng.random_range(0..kinds) {
            0 => out.push_str(&json_string(rng)),
            1 => out.push_str(&number(rng)),
            2 => out.push_str(["true", "false", "null"][rng.random_range(0..3)]),
            3 => object(rng, out, depth),
            _ => {
                out.push('[');
                for i in 0..rng.random_range(0..4) {
                    if i > 0 {
                        out.push(',');
                    }
                    space(rng, out);
                    value(rng, out, depth + 1);
                }
                out.push(']');
            }
        }
    }

    fn number(rng: &mut StdRng) -> String {
        match rng.random_range(0..9) {
            0 => rng.random::<i64>().to_string(),
            1 => rng.random::<u64>().to_string(),
            2 => "123456789012345678901234567890".into(),
            3 => "-0".into(),
            4 => format!("{}.{}", rng.random_range(-1000..1000), rng.random_range(0..100000)),
            5 => format!("{}e{}", rng.random_range(1..10), rng.random_range(-400..400)),
            6 => "1.0E+2".into(),
            7 => "0.1".into(),
            _ => rng.random_range(0..100).to_string(),
        }
    }

    fn json_string(rng: &mut StdRng) -> String {
        let mut s = String::from('"');
        for _ in 0..rng.random_range(0..12) {
            s.push_str(
                [
                    "a",
                    " ",
                    "\\\"",
                    "\\\\",
                    "\\n",
                    "\\t",
                    "\\/",
                    "\\u00e9",
                    "\\ud83d\\ude00",
                    "\u{1f600}",
                    "\u{e9}",
                    "{",
                    "}",
                    ",",
                    ":",
                    "[",
                ][rng.random_range(0..16)],
            );
        }
        if rng.random_bool(0.01) {
            s.push_str("\\ud800"); // a lone surrogate: invalid
        }
        s.push('"');
        s
    }

    fn random_text(rng: &mut StdRng) -> String {
        (0..rng.random_range(0..12))
            .map(|_| {
                ['a', '"', '\\', '\u{1}', '\u{7f}', '\u{e9}', '\u{1f600}', '/', '\n', '0'][rng.random_range(0..10)]
            })
            .collect()
    }

    #[test]
    fn a_parse_failure_keeps_its_route_and_reason() {
        let layout = layout();
        let out = layout.shard(crate::kinesis::record::ShardRecords {
            shard_id: SHARD.into(),
            parent_shard_ids: Vec::new(),
            millis_behind: 0,
            records: vec![record(b"[1]", None, "k"), record(b"{\"a\":1}", None, "k")],
            tenure: None,
            previous: None,
        });
        assert_eq!(
            out.flow_files.iter().map(|f| f.route).collect::<Vec<_>>(),
            vec![Route::ParseFailure, Route::Success]
        );
        assert_eq!(out.flow_files[0].content, b"[1]");
    }
}
