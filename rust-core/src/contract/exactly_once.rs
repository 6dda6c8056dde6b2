//! The exactly-once key of a Kinesis record, `shardedSequenceNumber`: its sequence number followed
//! by its sub-sequence number (0 when not KPL aggregated) zero-padded to 20 digits. It grows within
//! a shard, so it serves as a Snowpipe Streaming offset token, and it is the key a table is
//! deduplicated by. Java computes it too (`KinesisMetadata.shardedSequenceNumber`, for the Record
//! Writer's `kinesisMetadata`); its test checks the same cases, generated here.

/// The key of the record at `sequence` / `sub_sequence`.
pub fn sharded_sequence_number(sequence: &str, sub_sequence: u64) -> String {
    format!("{sequence}{sub_sequence:020}")
}

/// Cases Java's twin must agree on: (sequence number, sub-sequence number).
#[cfg(test)]
const CASES: &[(&str, u64)] = &[
    ("49590338271490256608559692538361571095921575989136588898", 0),
    ("49590338271490256608559692538361571095921575989136588898", 7),
    ("4959", 2),
    ("0", 0),
    ("1", 12_345),
    ("49590338271490256608559692538361571095921575989136588898", i64::MAX as u64),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The cases and their keys, as Java's test reads them (one `sequence<TAB>sub<TAB>key` per line).
    fn fixture() -> String {
        let mut out = String::from(
            "# Generated from rust-core/src/contract/exactly_once.rs by its unit test; do not edit.\n\
             # sequence number<TAB>sub-sequence number<TAB>shardedSequenceNumber as the engine computes it\n",
        );
        for (sequence, sub) in CASES {
            out.push_str(&format!("{sequence}\t{sub}\t{}\n", sharded_sequence_number(sequence, *sub)));
        }
        out
    }

    #[test]
    fn the_key_pads_the_sub_sequence_to_twenty_digits() {
        assert_eq!(sharded_sequence_number("4960", 7), "496000000000000000000007");
        assert_eq!(sharded_sequence_number("4960", 0).len(), 24);
    }

    #[test]
    fn java_checks_the_same_cases() {
        super::super::check_twin(super::super::JAVA_TEST_RESOURCES, "sharded-sequence-numbers.tsv", &fixture());
    }
}
