//! A position inside a shard, exact to the KPL sub-record, and how positions compare.

use std::cmp::Ordering;

/// The last record (or sub-record) that has been delivered and committed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Position {
    pub sequence_number: String,
    /// `None` for a record that was not aggregated (the whole record is covered).
    pub sub_sequence_number: Option<u64>,
}

impl Position {
    pub fn new(sequence_number: impl Into<String>, sub_sequence_number: Option<u64>) -> Self {
        Self { sequence_number: sequence_number.into(), sub_sequence_number }
    }

    /// True when the (sub-)record at `sequence_number`/`sub` is covered by this position, so a
    /// resumed reader must drop it.
    pub fn covers(&self, sequence_number: &str, sub: Option<u64>) -> bool {
        match compare_sequence_numbers(sequence_number, &self.sequence_number) {
            Ordering::Less => true,
            Ordering::Greater => false,
            Ordering::Equal => match (self.sub_sequence_number, sub) {
                (None, _) => true,
                (Some(_), None) => true,
                (Some(done), Some(sub)) => sub <= done,
            },
        }
    }
}

/// Sequence numbers are decimal strings of up to 128 digits: compare them as numbers.
/// True when `a` lies after `b` (a whole-record position is after any of its sub-records).
pub fn is_after(a: &Position, b: &Position) -> bool {
    match compare_sequence_numbers(&a.sequence_number, &b.sequence_number) {
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Less => false,
        std::cmp::Ordering::Equal => match (a.sub_sequence_number, b.sub_sequence_number) {
            (None, Some(_)) => true,
            (Some(x), Some(y)) => x > y,
            (_, None) => false,
        },
    }
}

pub fn compare_sequence_numbers(a: &str, b: &str) -> Ordering {
    let a = a.trim_start_matches('0');
    let b = b.trim_start_matches('0');
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_not_lexical_order() {
        assert_eq!(compare_sequence_numbers("9", "10"), Ordering::Less);
        assert_eq!(compare_sequence_numbers("0010", "10"), Ordering::Equal);
        assert_eq!(
            compare_sequence_numbers(
                "49590338271490256608559692538361571095921575989136588898",
                "49590338271490256608559692538361571095921575989136588899"
            ),
            Ordering::Less
        );
    }

    #[test]
    fn covers_is_exact_to_the_sub_record() {
        let plain = Position::new("100", None);
        assert!(plain.covers("99", None));
        assert!(plain.covers("100", None));
        assert!(plain.covers("100", Some(5)), "a whole-record checkpoint covers all its sub-records");
        assert!(!plain.covers("101", None));
        let sub = Position::new("100", Some(3));
        assert!(sub.covers("100", Some(3)));
        assert!(!sub.covers("100", Some(4)), "the rest of a partly delivered aggregate is read again");
        assert!(!sub.covers("101", Some(0)));
    }
}
