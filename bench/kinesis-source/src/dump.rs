//! `--dump`: every user record the stream holds, as a consumer should see it after de-aggregation, one
//! JSON line each, shard by shard in order:
//! `{"shard","index","seq","sub","aggregated","pk","data","arrival_ms"}` (`data` is the record's bytes as
//! text: the generator only writes printable ASCII). Tests compare consumers' output with this.

use std::io::{self, Write};

use serde_json::json;

use crate::generate::{shard_id, ExpectedRecord, Generator};

pub fn line(r: &ExpectedRecord) -> String {
    json!({
        "shard": shard_id(r.shard),
        "index": r.index,
        "seq": r.sequence_number.as_str(),
        "sub": r.sub,
        "aggregated": r.aggregated,
        "pk": r.partition_key,
        "data": String::from_utf8_lossy(&r.data),
        "arrival_ms": r.arrival_ms,
    })
    .to_string()
}

pub fn write_all(generator: &Generator, out: &mut impl Write) -> io::Result<()> {
    for shard in 0..generator.shard_count() {
        for r in generator.expected_in_shard(shard) {
            writeln!(out, "{}", line(&r))?;
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
        let lines: Vec<serde_json::Value> = out.split(|&b| b == b'\n').filter(|l| !l.is_empty()).map(|l| serde_json::from_slice(l).unwrap()).collect();
        // 4 shards × 50 records, a quarter of them aggregates of 3
        assert_eq!(lines.len(), 4 * (50 - 12 + 12 * 3));
        assert_eq!(lines[0]["shard"], "shardId-000000000000");
        assert_eq!(lines[0]["data"].as_str().unwrap().len(), 100);
        assert!(lines.iter().any(|l| l["aggregated"] == true && l["sub"] == 2));
    }
}
