//! De-aggregation against aggregates made by a KPL-format aggregator from outside this project
//! (the aws-kinesis-agg Python package; `tests/kpl/make_fixtures.sh` regenerates them), and
//! corrupted and truncated copies of them, which must pass through whole as Invalid.

use std::path::PathBuf;

use kinesnow_core::kinesis::deaggregate::{deaggregate, InvalidAggregate, Outcome, KPL_DIGEST_LEN, KPL_MAGIC};
use kinesnow_core::kinesis::record::KinesisRecord;
use serde_json::Value;

const SEQUENCE: &str = "49590338271490256608559692538361571095921575989136588898";
const ARRIVAL_MS: i64 = 1_700_000_000_123;

struct Fixture {
    file: String,
    bytes: Vec<u8>,
    /// (partition key, data) of each user record, in aggregate order.
    expected: Vec<(String, Vec<u8>)>,
}

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kpl")
}

fn fixtures() -> Vec<Fixture> {
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(fixture_dir().join("manifest.json")).expect("manifest.json")).unwrap();
    manifest["fixtures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let file = f["file"].as_str().unwrap().to_string();
            let bytes = std::fs::read(fixture_dir().join(&file)).unwrap();
            let expected = f["records"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    (r["partition_key"].as_str().unwrap().to_string(), base64_decode(r["data_b64"].as_str().unwrap()))
                })
                .collect();
            Fixture { file, bytes, expected }
        })
        .collect()
}

fn parent(data: Vec<u8>) -> KinesisRecord {
    KinesisRecord {
        sequence_number: SEQUENCE.into(),
        sub_sequence_number: None,
        partition_key: "outer".into(),
        approximate_arrival_ms: ARRIVAL_MS,
        data,
    }
}

/// Standard base64 with padding, as Python's `base64.b64encode` writes it (no crate for one test).
fn base64_decode(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let value = |c: u8| ALPHABET.iter().position(|&a| a == c).expect("base64 character") as u32;
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    for chunk in text.as_bytes().chunks(4) {
        let digits: Vec<u32> = chunk.iter().take_while(|&&c| c != b'=').map(|&c| value(c)).collect();
        let n = digits.iter().enumerate().fold(0u32, |n, (i, d)| n | d << (18 - 6 * i));
        out.extend_from_slice(&n.to_be_bytes()[1..digits.len()]);
    }
    out
}

/// `data` must come back as the one record, unchanged, with `expected` as outcome.
fn assert_passes_through(file: &str, what: &str, data: Vec<u8>, expected: Outcome) {
    let out = deaggregate(parent(data.clone()));
    assert_eq!(out.outcome, expected, "{file} {what}");
    assert_eq!(out.records, vec![parent(data)], "{file} {what}: not passed through whole");
}

#[test]
fn base64_decoder_reads_python_output() {
    assert_eq!(base64_decode(""), b"");
    assert_eq!(base64_decode("YQ=="), b"a");
    assert_eq!(base64_decode("YWI="), b"ab");
    assert_eq!(base64_decode("YWJj"), b"abc");
    assert_eq!(base64_decode("/+8A"), [0xFF, 0xEF, 0x00]);
}

#[test]
fn the_fixtures_cover_the_promised_cases() {
    let all = fixtures();
    let count =
        |file: &str| all.iter().find(|f| f.file == file).unwrap_or_else(|| panic!("{file} missing")).expected.len();
    assert_eq!(count("single.bin"), 1);
    assert!(count("many_keys.bin") >= 100);
    assert!(count("full_1kib.bin") >= 900);
    assert_eq!(count("empty.bin"), 0);
    for file in ["explicit_hash_keys.bin", "unicode_keys.bin", "tags.bin"] {
        assert!(count(file) > 0);
    }
    let large = all.iter().find(|f| f.file == "large_record.bin").unwrap();
    assert!(large.expected.iter().any(|(_, d)| d.len() > 800_000));
    let unicode = all.iter().find(|f| f.file == "unicode_keys.bin").unwrap();
    assert!(unicode.expected.iter().any(|(k, _)| k.chars().count() == 256 && k.len() == 1024));
    assert!(all.iter().all(|f| f.bytes.starts_with(&KPL_MAGIC)));
}

#[test]
fn fixtures_deaggregate_byte_exact() {
    for f in fixtures() {
        let out = deaggregate(parent(f.bytes));
        assert_eq!(out.outcome, Outcome::Aggregated { count: f.expected.len() }, "{}", f.file);
        assert_eq!(out.records.len(), f.expected.len(), "{}", f.file);
        for (i, (r, (key, data))) in out.records.iter().zip(&f.expected).enumerate() {
            assert_eq!(&*r.partition_key, key.as_str(), "{} sub-record {i}", f.file);
            assert!(&r.data == data, "{} sub-record {i}: data differs", f.file);
            assert_eq!(r.sub_sequence_number, Some(i as u64), "{}", f.file);
            assert_eq!(r.sequence_number, SEQUENCE);
            assert_eq!(r.approximate_arrival_ms, ARRIVAL_MS);
        }
    }
}

#[test]
fn a_flipped_body_byte_passes_through() {
    for f in fixtures() {
        let body_len = f.bytes.len() - KPL_MAGIC.len() - KPL_DIGEST_LEN;
        for at in [0, body_len / 2, body_len - 1] {
            let mut bytes = f.bytes.clone();
            bytes[KPL_MAGIC.len() + at] ^= 0x20;
            let what = format!("body byte {at} flipped");
            assert_passes_through(&f.file, &what, bytes, Outcome::Invalid(InvalidAggregate::DigestMismatch));
        }
    }
}

#[test]
fn a_flipped_md5_byte_passes_through() {
    for f in fixtures() {
        for from_end in [1, KPL_DIGEST_LEN] {
            let mut bytes = f.bytes.clone();
            let at = bytes.len() - from_end;
            bytes[at] ^= 0x01;
            let what = format!("trailer byte {at} flipped");
            assert_passes_through(&f.file, &what, bytes, Outcome::Invalid(InvalidAggregate::DigestMismatch));
        }
    }
}

#[test]
fn a_truncated_aggregate_passes_through() {
    for f in fixtures() {
        let len = f.bytes.len();
        let min = KPL_MAGIC.len() + KPL_DIGEST_LEN;
        for cut in [len - 1, len - KPL_DIGEST_LEN, len / 2, min, min - 1, KPL_MAGIC.len(), 3, 0] {
            if cut >= len {
                continue;
            }
            let expected = match cut {
                c if c < KPL_MAGIC.len() => Outcome::NotAggregated,
                c if c < min => Outcome::Invalid(InvalidAggregate::TooShort { len: c }),
                _ => Outcome::Invalid(InvalidAggregate::DigestMismatch),
            };
            assert_passes_through(&f.file, &format!("cut to {cut} bytes"), f.bytes[..cut].to_vec(), expected);
        }
    }
}
