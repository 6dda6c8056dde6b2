//! What the fuzz targets share: a small byte format, read with `arbitrary`'s [`Unstructured`], that
//! turns fuzz input into the structured values the code under test takes (FlowFile attributes,
//! DynamoDB items, KPL aggregates built from instructions), with names and values drawn from the
//! dictionaries in `words.json` so that libFuzzer's mutations reach the branches that look for
//! them; the KPL trailer; and the switches for defects that are known and being fixed elsewhere.
//!
//! The format, written by `fuzz/seed.py` for the seeds (keep the two in step):
//!
//! ```text
//! byte   := u8 (0 once the input is used up)
//! text   := tag:byte   tag < dictionary length: that word
//!                      tag = 0xFE: length:u16be bytes     otherwise: length:byte bytes
//!           (bytes read as lossy UTF-8; a length past the end takes what is left)
//! rows   := flags:byte (bit 0: Iceberg) attributeCount:byte%16 (name:text value:text)* content:rest
//! kcl    := defaultStream:text (empty: the first of `streams`) itemCount:byte%9 item*
//! item   := attributeCount:byte%16 (name:text value)*
//! value  := kind:byte%10 then 0 S:text 1 N:text 2 BOOL:byte&1 3 NULL 4 SS:list(text) 5 NS:list(text)
//!           6 L:list(value) 7 M:list(name:text value) 8 B:text 9 BS:list(text); L and M nest at
//!           most 3 deep (deeper, kind 6 and 7 read as BS); list := count:byte%5 element*
//! ```

use std::collections::HashMap;
use std::sync::OnceLock;

use arbitrary::{Arbitrary, Unstructured};
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use kinesnow_core::kinesis::deaggregate::KPL_MAGIC;
use kinesnow_core::lease::kcl::Item;
use kinesnow_core::snowflake::FlowFileIn;
use md5::{Digest, Md5};

/// Tag of a text whose length is a big-endian u16.
pub const LONG_TEXT: u8 = 0xFE;

/// The dictionaries of `words.json`.
pub struct Words {
    pub rows_names: Vec<String>,
    pub rows_values: Vec<String>,
    pub kcl_names: Vec<String>,
    pub kcl_values: Vec<String>,
    pub streams: Vec<String>,
}

pub fn words() -> &'static Words {
    static WORDS: OnceLock<Words> = OnceLock::new();
    WORDS.get_or_init(|| {
        let json: serde_json::Value = serde_json::from_str(include_str!("../words.json")).expect("words.json is JSON");
        let list = |name: &str| -> Vec<String> {
            let words: Vec<String> = json[name]
                .as_array()
                .unwrap_or_else(|| panic!("words.json has no list '{name}'"))
                .iter()
                .map(|w| w.as_str().expect("words are strings").to_owned())
                .collect();
            assert!(words.len() < usize::from(LONG_TEXT), "words.json '{name}' is too long for a tag byte");
            words
        };
        Words {
            rows_names: list("rows_names"),
            rows_values: list("rows_values"),
            kcl_names: list("kcl_names"),
            kcl_values: list("kcl_values"),
            streams: list("streams"),
        }
    })
}

/// Fuzz input read front to back; reading past the end yields zeros and empty slices.
pub struct Input<'a> {
    u: Unstructured<'a>,
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Self { u: Unstructured::new(data) }
    }

    pub fn byte(&mut self) -> u8 {
        u8::arbitrary(&mut self.u).unwrap_or(0)
    }

    pub fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.byte(), self.byte()])
    }

    /// Up to `n` bytes (fewer when the input ends first).
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.u.len());
        self.u.bytes(n).unwrap_or_default()
    }

    pub fn text(&mut self, dictionary: &[String]) -> String {
        let tag = self.byte();
        if let Some(word) = dictionary.get(usize::from(tag)) {
            return word.clone();
        }
        let len = if tag == LONG_TEXT { usize::from(self.u16()) } else { usize::from(self.byte()) };
        String::from_utf8_lossy(self.bytes(len)).into_owned()
    }

    pub fn is_empty(&self) -> bool {
        self.u.is_empty()
    }

    pub fn rest(self) -> &'a [u8] {
        self.u.take_rest()
    }
}

/// A FlowFile for PutSnowflake's row mapping, and whether the table is Iceberg.
pub struct RowsCase {
    pub iceberg: bool,
    pub flow_file: FlowFileIn,
}

pub fn rows_case(data: &[u8]) -> RowsCase {
    let w = words();
    let mut input = Input::new(data);
    let iceberg = input.byte() & 1 == 1;
    let count = input.byte() % 16;
    let mut attributes = HashMap::new();
    for _ in 0..count {
        let name = input.text(&w.rows_names);
        let value = input.text(&w.rows_values);
        attributes.insert(name, value);
    }
    let content = input.rest().to_vec();
    RowsCase { iceberg, flow_file: FlowFileIn { id: 1, attributes, content: content.into() } }
}

/// The items of a KCL lease table, and the stream a single-stream lease key belongs to.
pub struct KclCase {
    pub default_stream: String,
    pub items: Vec<Item>,
}

pub fn kcl_case(data: &[u8]) -> KclCase {
    let w = words();
    let mut input = Input::new(data);
    let mut default_stream = input.text(&w.streams);
    if default_stream.is_empty() {
        // ConsumeKinesis' configuration requires a stream name.
        default_stream.clone_from(&w.streams[0]);
    }
    let count = input.byte() % 9;
    let items = (0..count).map(|_| item(&mut input)).collect();
    KclCase { default_stream, items }
}

fn item(input: &mut Input) -> Item {
    let w = words();
    let count = input.byte() % 16;
    let mut item = Item::new();
    for _ in 0..count {
        let name = input.text(&w.kcl_names);
        let value = attribute_value(input, 0);
        item.insert(name, value);
    }
    item
}

fn attribute_value(input: &mut Input, depth: u8) -> AttributeValue {
    let values = &words().kcl_values;
    match input.byte() % 10 {
        0 => AttributeValue::S(input.text(values)),
        1 => AttributeValue::N(input.text(values)),
        2 => AttributeValue::Bool(input.byte() & 1 == 1),
        3 => AttributeValue::Null(true),
        4 => AttributeValue::Ss(list(input, |i| i.text(values))),
        5 => AttributeValue::Ns(list(input, |i| i.text(values))),
        6 if depth < 3 => AttributeValue::L(list(input, |i| attribute_value(i, depth + 1))),
        7 if depth < 3 => AttributeValue::M(
            list(input, |i| (i.text(&words().kcl_names), attribute_value(i, depth + 1))).into_iter().collect(),
        ),
        8 => AttributeValue::B(Blob::new(input.text(values).into_bytes())),
        _ => AttributeValue::Bs(list(input, |i| Blob::new(i.text(values).into_bytes()))),
    }
}

fn list<T>(input: &mut Input, mut element: impl FnMut(&mut Input) -> T) -> Vec<T> {
    let count = input.byte() % 5;
    (0..count).map(|_| element(input)).collect()
}

/// Frames a protobuf body as a KPL aggregate: magic, body, MD5 of the body.
pub fn seal(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(KPL_MAGIC.len() + body.len() + 16);
    out.extend_from_slice(&KPL_MAGIC);
    out.extend_from_slice(body);
    out.extend_from_slice(&Md5::digest(body));
    out
}

/// Whether `KINESNOW_FUZZ_SKIP` (comma-separated) names this check of a defect that is known and
/// being fixed elsewhere, so that a short run can look past it (`bench/fuzz.sh` passes it on; unset,
/// every check runs).
pub fn skipped(check: &str) -> bool {
    static SKIP: OnceLock<Vec<String>> = OnceLock::new();
    SKIP.get_or_init(|| {
        std::env::var("KINESNOW_FUZZ_SKIP")
            .unwrap_or_default()
            .split(',')
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect()
    })
    .iter()
    .any(|s| s == check)
}

/// With `KINESNOW_FUZZ_TRACE` set, prints what a target made of its input (to check what a seed or
/// an artifact decodes to: run the target binary on the files).
pub fn trace(line: impl FnOnce() -> String) {
    static ON: OnceLock<bool> = OnceLock::new();
    if *ON.get_or_init(|| std::env::var_os("KINESNOW_FUZZ_TRACE").is_some()) {
        eprintln!("{}", line());
    }
}
