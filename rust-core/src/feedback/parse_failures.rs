//! Records ConsumeKinesis routed to `parse.failure`, for PutSnowflake in the same JVM: they never
//! reach it, so a FlowFile that names one of them as the record before it (see `snowflake::book`,
//! `Follows`) follows on from the record before *that* one. Noted before NiFi commits the batch, so
//! PutSnowflake never sees the later FlowFile first.
//!
//! Memory: at most [`MAX_NOTED`] records across every stream and shard of the JVM; the oldest is
//! forgotten first, which can only make a FlowFile wait for a record that never comes (the channel
//! then passes over the gap after its order wait), never skip one.

use std::collections::{HashMap, VecDeque};
#[cfg(test)]
use std::sync::LazyLock;

use crate::kinesis::position::Position;

pub const MAX_NOTED: usize = 65_536;

/// A record: stream name, shard id, sequence number, sub-sequence number.
type RecordKey = (String, String, String, Option<u64>);

#[derive(Default)]
pub struct ParseFailures {
    /// Each record routed to `parse.failure` -> the record read before it (`None`: none).
    before: HashMap<RecordKey, Option<Position>>,
    order: VecDeque<RecordKey>,
}

fn key(stream: &str, shard: &str, p: &Position) -> RecordKey {
    (stream.to_owned(), shard.to_owned(), p.sequence_number.clone(), p.sub_sequence_number)
}

impl ParseFailures {
    /// Record `last` of `shard` went to `parse.failure`; `previous` was read just before it.
    pub fn note(&mut self, stream: &str, shard: &str, previous: Option<Position>, last: &Position) {
        let k = key(stream, shard, last);
        if self.before.insert(k.clone(), previous).is_none() {
            self.order.push_back(k);
        }
        while self.order.len() > MAX_NOTED {
            if let Some(old) = self.order.pop_front() {
                self.before.remove(&old);
            }
        }
    }

    /// The record a FlowFile whose record before is `previous` really follows on from: back over
    /// every record routed to `parse.failure` (`None`: none before it).
    pub fn before_failures(&self, stream: &str, shard: &str, previous: Position) -> Option<Position> {
        if self.is_empty() {
            return Some(previous);
        }
        let mut current = previous;
        for _ in 0..=MAX_NOTED {
            match self.before.get(&key(stream, shard, &current)) {
                Some(Some(earlier)) => current = earlier.clone(),
                Some(None) => return None,
                None => return Some(current),
            }
        }
        Some(current)
    }

    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}

/// The records of this process routed to `parse.failure` (tests of this crate; the engines use
/// their [`super::BoardHandle`]).
#[cfg(test)]
pub fn noted() -> std::sync::MutexGuard<'static, ParseFailures> {
    static NOTED: LazyLock<super::BoardHandle> = LazyLock::new(super::BoardHandle::process);
    NOTED.parse_failures()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seq: &str) -> Position {
        Position::new(seq, None)
    }

    #[test]
    fn a_flow_file_after_failed_records_follows_the_record_before_them() {
        let mut f = ParseFailures::default();
        f.note("s", "shard-1", Some(at("10")), &at("11"));
        f.note("s", "shard-1", Some(at("11")), &at("12"));
        assert_eq!(f.before_failures("s", "shard-1", at("12")), Some(at("10")));
        assert_eq!(f.before_failures("s", "shard-1", at("13")), Some(at("13")), "13 reached PutSnowflake");
        assert_eq!(f.before_failures("s", "shard-2", at("12")), Some(at("12")), "another shard");
        assert_eq!(f.before_failures("t", "shard-1", at("12")), Some(at("12")), "another stream");
        f.note("s", "shard-1", None, &at("1"));
        assert_eq!(f.before_failures("s", "shard-1", at("1")), None, "the lease's first record failed: nothing before");
    }

    #[test]
    fn memory_is_bounded_and_the_oldest_is_forgotten() {
        let mut f = ParseFailures::default();
        for n in 0..(MAX_NOTED as u64 + 10) {
            f.note("s", "shard-1", Some(at(&n.to_string())), &at(&(n + 1).to_string()));
        }
        assert_eq!(f.len(), MAX_NOTED);
        assert_eq!(f.before_failures("s", "shard-1", at("5")), Some(at("5")), "forgotten: it waits, never skips");
        let last = (MAX_NOTED as u64 + 10).to_string();
        assert_eq!(f.before_failures("s", "shard-1", at(&last)), Some(at("10")));
    }
}
