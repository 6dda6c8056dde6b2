//! Spans of a lease's records that never reach PutSnowflake (routed to `parse.failure`, or sent to
//! `invalid`/`empty`): each is the record before it and its last record. A chain keeps them in
//! record order, so passing over them or letting them go costs a lookup, not a scan, and it joins
//! spans that touch or overlap, so a run of malformed records costs one span however long it is.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use crate::kinesis::position::{compare_sequence_numbers, Position};

/// Records after the first (`None`: from the lease's start) through the second.
pub type Span = (Option<Position>, Position);

/// Where a span starts: the record before its first one, `None` before every record.
#[derive(Debug, Clone)]
struct Start(Option<Position>);

/// Record order (as `position::is_after`): a whole record comes after its sub-records.
fn order(a: &Position, b: &Position) -> Ordering {
    compare_sequence_numbers(&a.sequence_number, &b.sequence_number).then_with(|| {
        match (a.sub_sequence_number, b.sub_sequence_number) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Greater,
            (Some(_), None) => Ordering::Less,
            (Some(x), Some(y)) => x.cmp(&y),
        }
    })
}

impl Ord for Start {
    fn cmp(&self, other: &Self) -> Ordering {
        match (&self.0, &other.0) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Less,
            (Some(_), None) => Ordering::Greater,
            (Some(a), Some(b)) => order(a, b),
        }
    }
}

impl PartialOrd for Start {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Start {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Start {}

/// Whether every record up to `previous` is at or before `end` (`None`: nothing is).
pub fn reaches(previous: Option<&Position>, end: Option<&Position>) -> bool {
    match (previous, end) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(p), Some(end)) => order(p, end) != Ordering::Greater,
    }
}

/// A lease's spans, in record order, with touching and overlapping spans joined.
#[derive(Debug, Clone, Default)]
pub struct Spans {
    by_start: BTreeMap<Start, Position>,
}

impl Spans {
    pub fn len(&self) -> usize {
        self.by_start.len()
    }

    /// Adds a span, joined with those it touches or overlaps. Returns how many spans the set
    /// holds more than before (0 when it joined one, less when it joined several).
    pub fn insert(&mut self, (previous, last): Span) -> isize {
        let before = self.by_start.len() as isize;
        let mut start = Start(previous);
        let mut last = last;
        // A span ending at or after this one's start (the one starting just before it).
        let joined_before = self
            .by_start
            .range(..=start.clone())
            .next_back()
            .filter(|(_, end)| reaches(start.0.as_ref(), Some(end)))
            .map(|(s, _)| s.clone());
        if let Some(s) = joined_before {
            let end = self.by_start.remove(&s).expect("just found");
            if order(&end, &last) == Ordering::Greater {
                last = end;
            }
            start = s;
        }
        // Spans starting within this one.
        while let Some((s, _)) = self
            .by_start
            .range(start.clone()..)
            .next()
            .filter(|(s, _)| reaches(s.0.as_ref(), Some(&last)))
            .map(|(s, e)| (s.clone(), e.clone()))
        {
            let end = self.by_start.remove(&s).expect("just found");
            if order(&end, &last) == Ordering::Greater {
                last = end;
            }
        }
        self.by_start.insert(start, last);
        self.by_start.len() as isize - before
    }

    /// Takes the first span if it follows on from `end` (its record before is at or before it).
    pub fn take_reached(&mut self, end: Option<&Position>) -> Option<Span> {
        let (start, _) = self.by_start.first_key_value()?;
        if !reaches(start.0.as_ref(), end) {
            return None;
        }
        self.by_start.pop_first().map(|(s, last)| (s.0, last))
    }

    /// Takes every span whose last record lies after `end`.
    pub fn take_ending_after(&mut self, end: Option<&Position>) -> Vec<Span> {
        let after: Vec<Start> = self
            .by_start
            .iter()
            .filter(|(_, last)| end.is_none_or(|e| order(last, e) == Ordering::Greater))
            .map(|(s, _)| s.clone())
            .collect();
        after.into_iter().filter_map(|s| self.by_start.remove(&s).map(|last| (s.0, last))).collect()
    }

    /// Takes every span.
    pub fn take_all(&mut self) -> Vec<Span> {
        std::mem::take(&mut self.by_start).into_iter().map(|(s, last)| (s.0, last)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seq: u64) -> Position {
        Position::new(seq.to_string(), None)
    }

    fn span(previous: u64, last: u64) -> Span {
        (Some(at(previous)), at(last))
    }

    #[test]
    fn a_run_of_touching_spans_is_one_span() {
        let mut s = Spans::default();
        for n in 10..1_000 {
            s.insert(span(n, n + 1));
        }
        assert_eq!(s.len(), 1);
        assert_eq!(s.take_reached(Some(&at(10))), Some(span(10, 1_000)));
    }

    #[test]
    fn spans_with_records_between_them_stay_apart_and_are_taken_in_record_order() {
        let mut s = Spans::default();
        s.insert(span(30, 31));
        s.insert(span(10, 11));
        s.insert(span(20, 21));
        assert_eq!(s.len(), 3);
        assert_eq!(s.take_reached(Some(&at(9))), None, "record 10 is not in yet");
        assert_eq!(s.take_reached(Some(&at(10))), Some(span(10, 11)));
        assert_eq!(s.take_reached(Some(&at(11))), None, "records 12 to 20 are not in yet");
        assert_eq!(s.take_reached(Some(&at(25))), Some(span(20, 21)));
        assert_eq!(s.take_ending_after(Some(&at(30))), vec![span(30, 31)]);
        assert_eq!(s.len(), 0);
    }

    #[test]
    fn overlapping_and_repeated_spans_join_and_a_span_joining_two_counts_minus_one() {
        let mut s = Spans::default();
        assert_eq!(s.insert(span(10, 12)), 1);
        assert_eq!(s.insert(span(10, 12)), 0, "the same span noted twice");
        assert_eq!(s.insert(span(11, 13)), 0, "overlapping");
        assert_eq!(s.insert(span(20, 22)), 1);
        assert_eq!(s.insert(span(13, 20)), -1, "it joins both");
        assert_eq!(s.take_all(), vec![span(10, 22)]);
        assert_eq!(s.insert((None, at(5))), 1);
        assert_eq!(s.insert(span(5, 6)), 0, "from the lease's start");
        assert_eq!(s.take_reached(None), Some((None, at(6))));
    }

    #[test]
    fn sub_records_order_before_their_whole_record() {
        let sub = |n| Position::new("100", Some(n));
        let mut s = Spans::default();
        s.insert((Some(sub(1)), sub(2)));
        s.insert((Some(sub(4)), at(100)));
        assert_eq!(s.len(), 2, "sub-record 3 lies between them");
        assert_eq!(s.take_reached(Some(&sub(1))), Some((Some(sub(1)), sub(2))));
        assert_eq!(s.take_reached(Some(&sub(3))), None);
        assert_eq!(s.take_reached(Some(&sub(4))), Some((Some(sub(4)), at(100))));
    }
}
