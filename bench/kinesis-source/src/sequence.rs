//! Sequence numbers in Kinesis' format: 56-digit decimal strings that start with `49` and grow along a
//! shard (a real one: `49590338271490256608559692538361571095921575989136588898`).
//!
//! Layout here (digits): `49` | stream creation, epoch seconds (10) | shard index (6) | a salt from the
//! seed (18) | record index in the shard (20). The record index is the least significant part, so the
//! numbers of a shard increase with the record index; parsing gives the shard and the record index back,
//! which is how AT_/AFTER_SEQUENCE_NUMBER iterators find their position.

use thiserror::Error;

pub const DIGITS: usize = 56;

/// One formatted sequence number (ASCII digits).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SequenceNumber([u8; DIGITS]);

impl SequenceNumber {
    pub fn as_str(&self) -> &str {
        // only ASCII digits are ever written
        std::str::from_utf8(&self.0).expect("sequence numbers are ASCII digits")
    }
}

impl std::fmt::Debug for SequenceNumber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for SequenceNumber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum SequenceError {
    #[error("not a sequence number of this stream: {0:?}")]
    Foreign(String),
    #[error("sequence number {seq} belongs to shard {actual}, not to shard {expected}")]
    OtherShard { seq: String, expected: u32, actual: u32 },
}

/// The stream-wide parts of every sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SequenceLayout {
    epoch_seconds: u64,
    salt: u64,
}

const SALT_MOD: u64 = 1_000_000_000_000_000_000; // 18 digits

impl SequenceLayout {
    pub fn new(created_at_ms: u64, seed: u64) -> Self {
        SequenceLayout {
            epoch_seconds: (created_at_ms / 1000) % 10_000_000_000,
            salt: crate::generate::mix(seed, 0x5eed) % SALT_MOD,
        }
    }

    pub fn format(&self, shard: u32, index: u64) -> SequenceNumber {
        let mut out = [b'0'; DIGITS];
        out[0] = b'4';
        out[1] = b'9';
        put_digits(&mut out[2..12], self.epoch_seconds);
        put_digits(&mut out[12..18], shard as u64);
        put_digits(&mut out[18..36], self.salt);
        put_digits(&mut out[36..56], index);
        SequenceNumber(out)
    }

    /// The (shard, record index) a sequence number of this stream stands for.
    pub fn parse(&self, text: &str) -> Result<(u32, u64), SequenceError> {
        let foreign = || SequenceError::Foreign(text.to_string());
        let b = text.as_bytes();
        if b.len() != DIGITS || !b.iter().all(u8::is_ascii_digit) || &b[..2] != b"49" {
            return Err(foreign());
        }
        if read_digits(&b[2..12]) != self.epoch_seconds || read_digits(&b[18..36]) != self.salt {
            return Err(foreign());
        }
        let shard = read_digits(&b[12..18]) as u32;
        let index = read_digits(&b[36..56]);
        Ok((shard, index))
    }

    /// Like `parse`, but the number must belong to `shard`.
    pub fn parse_in(&self, shard: u32, text: &str) -> Result<u64, SequenceError> {
        let (actual, index) = self.parse(text)?;
        if actual != shard {
            return Err(SequenceError::OtherShard { seq: text.to_string(), expected: shard, actual });
        }
        Ok(index)
    }
}

fn put_digits(out: &mut [u8], mut value: u64) {
    for slot in out.iter_mut().rev() {
        *slot = b'0' + (value % 10) as u8;
        value /= 10;
    }
}

fn read_digits(digits: &[u8]) -> u64 {
    digits.iter().fold(0u64, |acc, d| acc.wrapping_mul(10).wrapping_add((d - b'0') as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> SequenceLayout {
        SequenceLayout::new(1_700_000_000_123, 42)
    }

    #[test]
    fn looks_like_kinesis_and_round_trips() {
        let l = layout();
        let s = l.format(3, 12345);
        assert_eq!(s.as_str().len(), 56);
        assert!(s.as_str().starts_with("491700000000000003"));
        assert!(s.as_str().ends_with("00000000000000012345"));
        assert_eq!(l.parse(s.as_str()), Ok((3, 12345)));
        assert_eq!(l.parse_in(3, s.as_str()), Ok(12345));
        assert_eq!(l.format(0, u64::MAX).as_str().len(), 56);
        assert_eq!(l.parse(l.format(999_999, u64::MAX).as_str()), Ok((999_999, u64::MAX)));
    }

    #[test]
    fn increase_along_a_shard_as_numbers() {
        let l = layout();
        let a: Vec<String> = [0u64, 1, 9, 10, 99_999, 1 << 40].iter().map(|&i| l.format(1, i).to_string()).collect();
        let mut sorted = a.clone();
        sorted.sort(); // same length: lexicographic order = numeric order
        assert_eq!(a, sorted);
    }

    #[test]
    fn rejects_other_streams_and_shards() {
        let l = layout();
        let other = SequenceLayout::new(1_700_000_000_123, 43);
        let s = other.format(1, 5);
        assert!(matches!(l.parse(s.as_str()), Err(SequenceError::Foreign(_))));
        assert!(matches!(
            l.parse("49590338271490256608559692538361571095921575989136588898"),
            Err(SequenceError::Foreign(_))
        ));
        assert!(matches!(l.parse("123"), Err(SequenceError::Foreign(_))));
        assert!(matches!(
            l.parse_in(2, l.format(1, 5).as_str()),
            Err(SequenceError::OtherShard { expected: 2, actual: 1, .. })
        ));
    }
}
