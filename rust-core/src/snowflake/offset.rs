//! Offset tokens: what the channel's `last_committed_offset_token` is compared with.
//!
//! A row's token is its record's `shardedSequenceNumber` (the sequence number followed by the
//! sub-sequence number zero-padded to 20 digits), so tokens grow within a shard. Rows of a FlowFile
//! that carry no per-record metadata (newline-delimited content without `kinesisMetadata`) share
//! the FlowFile's last `shardedSequenceNumber`; the part of such a FlowFile that an append covers
//! is written `<shardedSequenceNumber>:<rows done>`, which sorts before the whole FlowFile.
//! Tokens are compared as numbers, never as text.

use std::cmp::Ordering;
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OffsetToken {
    /// Decimal digits without leading zeros ("0" for zero).
    number: String,
    /// Rows done of a FlowFile whose rows share `number`; `None` once the FlowFile is complete.
    part: Option<u64>,
}

impl OffsetToken {
    /// Parses a token this processor wrote, or any plain decimal token; `None` for anything else
    /// (a token written by another client into the same channel).
    pub fn parse(text: &str) -> Option<Self> {
        let (number, part) = match text.split_once(':') {
            Some((n, p)) => (n, Some(p.parse::<u64>().ok()?)),
            None => (text, None),
        };
        if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let trimmed = number.trim_start_matches('0');
        Some(Self { number: if trimmed.is_empty() { "0".into() } else { trimmed.into() }, part })
    }

    /// `shardedSequenceNumber` of a record: sequence number + sub-sequence padded to 20 digits;
    /// `None` unless the sequence number is decimal digits (a ':' in it would make a part token,
    /// an empty one the token of the padding alone).
    pub fn sharded(sequence: &str, sub_sequence: u64) -> Option<Self> {
        if sequence.is_empty() || !sequence.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Self::parse(&sharded_sequence_number(sequence, sub_sequence))
    }

    pub fn from_counter(n: u64) -> Self {
        Self { number: n.to_string(), part: None }
    }

    /// The token of the first `rows_done` rows of a FlowFile whose rows all carry `self`.
    pub fn part(&self, rows_done: u64) -> Self {
        Self { number: self.number.clone(), part: Some(rows_done) }
    }

    pub fn is_part(&self) -> bool {
        self.part.is_some()
    }

    /// The smallest whole token above this one (the number plus one): what a channel whose
    /// tokens the processor assigns itself uses next.
    pub fn successor(&self) -> Self {
        let mut digits = self.number.clone().into_bytes();
        let mut i = digits.len();
        loop {
            if i == 0 {
                digits.insert(0, b'1');
                break;
            }
            i -= 1;
            if digits[i] == b'9' {
                digits[i] = b'0';
            } else {
                digits[i] += 1;
                break;
            }
        }
        Self { number: String::from_utf8(digits).expect("ASCII digits"), part: None }
    }
}

pub use crate::contract::exactly_once::sharded_sequence_number;

impl Ord for OffsetToken {
    fn cmp(&self, other: &Self) -> Ordering {
        let by_number = self.number.len().cmp(&other.number.len()).then_with(|| self.number.cmp(&other.number));
        by_number.then_with(|| match (self.part, other.part) {
            (None, None) => Ordering::Equal,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some(a), Some(b)) => a.cmp(&b),
        })
    }
}

impl PartialOrd for OffsetToken {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for OffsetToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.part {
            Some(p) => write!(f, "{}:{p}", self.number),
            None => f.write_str(&self.number),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> OffsetToken {
        OffsetToken::parse(s).unwrap()
    }

    #[test]
    fn compares_as_numbers_not_text() {
        assert!(t("9") < t("10"));
        assert!(t("0010") == t("10"));
        assert!(
            t("49590338271490256608559692538361571095921575989136588898")
                > t("4959033827149025660855969253836157109592157598913658889")
        );
    }

    #[test]
    fn a_part_sorts_before_its_whole_flow_file_and_after_the_previous_one() {
        assert!(t("100:3") < t("100"));
        assert!(t("100:3") < t("100:4"));
        assert!(t("99") < t("100:1"));
        assert_eq!(t("100").part(3).to_string(), "100:3");
    }

    #[test]
    fn sharded_sequence_numbers_order_sub_records() {
        let a = OffsetToken::sharded("4959", 2).unwrap();
        let b = OffsetToken::sharded("4959", 10).unwrap();
        let c = OffsetToken::sharded("4960", 0).unwrap();
        assert!(a < b && b < c);
        assert_eq!(sharded_sequence_number("4959", 2), "495900000000000000000002");
    }

    #[test]
    fn a_successor_is_the_next_whole_number() {
        assert_eq!(t("0").successor(), t("1"));
        assert_eq!(t("199").successor(), t("200"));
        assert_eq!(t("999").successor().to_string(), "1000");
        assert_eq!(t("100:3").successor(), t("101"));
        let big = t("49590338271490256608559692538361571095921575989136588898");
        assert!(big.successor() > big);
    }

    #[test]
    fn foreign_tokens_are_not_ours() {
        for s in ["", "abc", "12a", "1:x", ":3", "-1"] {
            assert!(OffsetToken::parse(s).is_none(), "{s}");
        }
    }

    /// Found by the snowflake_rows fuzz target: "4959:" followed by the padded sub-sequence number
    /// read as the part token "4959:0", which sorts before the FlowFile's own rows.
    #[test]
    fn a_sequence_number_that_is_not_decimal_gives_no_sharded_token() {
        for sequence in ["4959:", "4959:1", ":", "", "4959 ", "-4959", "+4959", "49\u{0660}"] {
            assert_eq!(OffsetToken::sharded(sequence, 0), None, "{sequence:?}");
        }
        assert_eq!(OffsetToken::sharded("0004959", 0).unwrap().to_string(), "495900000000000000000000");
    }
}
