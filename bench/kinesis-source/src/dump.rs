//! `--dump`: every user record the stream holds, as a consumer should see it after de-aggregation, one
//! JSON line each, shard by shard in order:
//! `{"shard","index","seq","sub","aggregated","pk","data","arrival_ms"}` (`data` is the record's bytes as
//! text: the ascii and json payloads are printable ASCII). The avro payload is binary: its lines carry
//! `data_base64` (standard base64 with padding) instead of `data`. Tests compare consumers' output with this.

use std::io::{self, Write};

use base64::Engine;
use serde_json::json;

use crate::generate::{shard_id, ExpectedRecord, Generator};
use crate::spec::Payload;

/// One record's line; `binary` (the avro payload) writes `data_base64` instead of `data`.
pub fn line(r: &ExpectedRecord, binary: bool) -> String {
    let mut v = json!({
        "shard": shard_id(r.shard),
        "index": r.index,
        "seq": r.sequence_number.as_str(),
        "sub": r.sub,
        "aggregated": r.aggregated,
        "pk": r.partition_key,
        "data": String::from_utf8_lossy(&r.data),
        "arrival_ms": r.arrival_ms,
    });
    if binary {
        let map = v.as_object_mut().expect("an object");
        map.remove("data");
        map.insert("data_base64".into(), base64::engine::general_purpose::STANDARD.encode(&r.data).into());
    }
    v.to_string()
}

pub fn write_all(generator: &Generator, out: &mut impl Write) -> io::Result<()> {
    let binary = generator.spec().payload == Payload::Avro;
    for shard in 0..generator.shard_count() {
        for r in generator.expected_in_shard(shard) {
            writeln!(out, "{}", line(&r, binary))?;
        }
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::test_spec;

    #[test]
    fn one_line_per_user_record() {
        let g = Generator::new(test_spec());
        let mut out = Vec::new();
        write_all(&g, &mut out).unwrap();
        let lines: Vec<serde_json::Value> =
            out.split(|&b| b == b'\n').filter(|l| !l.is_empty()).map(|l| serde_json::from_slice(l).unwrap()).collect();
        // 4 shards × 50 records, a quarter of them aggregates of 3
        assert_eq!(lines.len(), 4 * (50 - 12 + 12 * 3));
        assert_eq!(lines[0]["shard"], "shardId-000000000000");
        assert_eq!(lines[0]["data"].as_str().unwrap().len(), 100);
        assert!(lines.iter().any(|l| l["aggregated"] == true && l["sub"] == 2));
    }

    #[test]
    fn avro_lines_carry_base64_json_lines_text() {
        use base64::Engine;
        let avro = Generator::new(crate::spec::StreamSpec { payload: Payload::Avro, ..test_spec() });
        let r = avro.expected(1, 2).next().unwrap();
        let v: serde_json::Value = serde_json::from_str(&line(&r, true)).unwrap();
        assert!(v.get("data").is_none());
        let bytes = base64::engine::general_purpose::STANDARD.decode(v["data_base64"].as_str().unwrap()).unwrap();
        assert_eq!(bytes, r.data);
        let json = Generator::new(crate::spec::StreamSpec { payload: Payload::Json, ..test_spec() });
        let mut out = Vec::new();
        write_all(&json, &mut out).unwrap();
        let first: serde_json::Value = serde_json::from_slice(out.split(|&b| b == b'\n').next().unwrap()).unwrap();
        let inner: serde_json::Value = serde_json::from_str(first["data"].as_str().unwrap()).unwrap();
        assert_eq!(inner["shard"], 0);
    }
}
