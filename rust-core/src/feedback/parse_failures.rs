//! Records that never load, for PutSnowflake in the same JVM: those ConsumeKinesis routed to
//! `parse.failure` (they never reach PutSnowflake; noted before NiFi commits the batch, so
//! PutSnowflake never sees the later FlowFile first) and those of FlowFiles PutSnowflake itself sent
//! to `invalid`, `empty` or `failure` as rows no append can carry. A FlowFile that names one of them
//! as the record before it (see `snowflake::book`, `Follows`) follows on from the record before
//! *that* one, at once, instead of waiting Order Wait for a record that never comes.
//!
//! Notes belong to the flow that made them ([`Scope`]: Application Name, region and stream), so a
//! same-named stream of another region, or another Application Name reading the same stream, never
//! passes over a record on the strength of this flow's note. A noted record that is repaired
//! downstream (ReplaceText, Jolt) and comes after all with its attributes ([`ParseFailures::noted`])
//! is not skipped: PutSnowflake sends it back for the at-least-once channels, since the channel may
//! have gone on past it (a LINE_DELIMITED FlowFile's tokens span a record it lost to `parse.failure`).
//!
//! Memory: at most [`MAX_NOTED`] records across every stream and shard of the JVM; the oldest is
//! forgotten first, which can only make a FlowFile wait for a record that never comes (the channel
//! then passes over the gap after its order wait), never skip one.

use std::borrow::Borrow;
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
#[cfg(test)]
use std::sync::LazyLock;

use crate::kinesis::position::Position;

pub const MAX_NOTED: usize = 65_536;

/// The flow a note belongs to: the consumer's Application Name (empty when the FlowFile does not
/// name one), region (empty when unknown) and stream name.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    pub application: String,
    pub region: String,
    pub stream: String,
}

impl Scope {
    pub fn new(application: &str, region: &str, stream: &str) -> Self {
        Self { application: application.to_owned(), region: region.to_owned(), stream: stream.to_owned() }
    }
}

/// A flow's parts, owned ([`Scope`]) or borrowed ([`ScopeRef`]): notes are looked up by either,
/// so a lookup copies nothing.
pub trait ScopeKey {
    /// Application Name, region, stream.
    fn parts(&self) -> (&str, &str, &str);
}

/// A [`Scope`] by borrowed parts.
#[derive(Debug, Clone, Copy)]
pub struct ScopeRef<'a> {
    pub application: &'a str,
    pub region: &'a str,
    pub stream: &'a str,
}

impl ScopeKey for Scope {
    fn parts(&self) -> (&str, &str, &str) {
        (&self.application, &self.region, &self.stream)
    }
}

impl ScopeKey for ScopeRef<'_> {
    fn parts(&self) -> (&str, &str, &str) {
        (self.application, self.region, self.stream)
    }
}

impl<'a> Borrow<dyn ScopeKey + 'a> for Scope {
    fn borrow(&self) -> &(dyn ScopeKey + 'a) {
        self
    }
}

impl Hash for dyn ScopeKey + '_ {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.parts().hash(state)
    }
}

impl PartialEq for dyn ScopeKey + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for dyn ScopeKey + '_ {}

// Hashed and compared as its parts, as `Borrow` requires.
impl Hash for Scope {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.parts().hash(state)
    }
}

impl PartialEq for Scope {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for Scope {}

/// A noted record: its flow, shard and position (oldest first, for the bound).
type Noted = (Scope, String, Position);

#[derive(Default)]
pub struct ParseFailures {
    /// Per flow and shard, each record that never loads -> the record read before it (`None`: none).
    before: HashMap<Scope, HashMap<String, HashMap<Position, Option<Position>>>>,
    order: VecDeque<Noted>,
}

impl ParseFailures {
    /// The records of `shard` after `previous` up to `last` never load (`previous` was read just
    /// before them; `None`: none, from the shard's start).
    pub fn note(&mut self, scope: &dyn ScopeKey, shard: &str, previous: Option<Position>, last: &Position) {
        let (application, region, stream) = scope.parts();
        let scope = Scope::new(application, region, stream);
        let shards = self.before.entry(scope.clone()).or_default();
        if shards.entry(shard.to_owned()).or_default().insert(last.clone(), previous).is_none() {
            self.order.push_back((scope, shard.to_owned(), last.clone()));
        }
        while self.order.len() > MAX_NOTED {
            if let Some(old) = self.order.pop_front() {
                self.forget(&old);
            }
        }
    }

    fn forget(&mut self, (scope, shard, last): &Noted) {
        let Some(shards) = self.before.get_mut(scope) else { return };
        if let Some(records) = shards.get_mut(shard) {
            records.remove(last);
            if records.is_empty() {
                shards.remove(shard);
            }
        }
        if shards.is_empty() {
            self.before.remove(scope);
        }
    }

    /// The record a FlowFile whose record before is `previous` really follows on from: back over
    /// every record routed to `parse.failure` (`None`: none before it).
    pub fn before_failures(&self, scope: &dyn ScopeKey, shard: &str, previous: Position) -> Option<Position> {
        let Some(records) = self.before.get(scope).and_then(|shards| shards.get(shard)) else {
            return Some(previous);
        };
        let mut current = previous;
        for _ in 0..=MAX_NOTED {
            match records.get(&current) {
                Some(Some(earlier)) => current = earlier.clone(),
                Some(None) => return None,
                None => return Some(current),
            }
        }
        Some(current)
    }

    /// Whether `last` was noted as never arriving, read just after `previous` (compared by sequence
    /// and sub-sequence number, a missing sub-sequence number being 0): a FlowFile naming both brings
    /// the noted records after all (repaired downstream).
    pub fn noted(&self, scope: &dyn ScopeKey, shard: &str, previous: Option<&Position>, last: &Position) -> bool {
        let same = |a: &Position, b: &Position| {
            a.sequence_number == b.sequence_number
                && a.sub_sequence_number.unwrap_or(0) == b.sub_sequence_number.unwrap_or(0)
        };
        // A record not aggregated may be named with sub-sequence number 0 or without one.
        let other = Position::new(last.sequence_number.clone(), last.sub_sequence_number.map_or(Some(0), |_| None));
        let unaggregated = last.sub_sequence_number.unwrap_or(0) == 0;
        let Some(records) = self.before.get(scope).and_then(|shards| shards.get(shard)) else { return false };
        let noted = records.get(last).or_else(|| unaggregated.then(|| records.get(&other)).flatten());
        noted.is_some_and(|noted| match (noted, previous) {
            (Some(a), Some(b)) => same(a, b),
            (None, None) => true,
            _ => false,
        })
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

    fn scope(stream: &str) -> Scope {
        Scope::new("app", "us-east-1", stream)
    }

    #[test]
    fn a_flow_file_after_failed_records_follows_the_record_before_them() {
        let mut f = ParseFailures::default();
        f.note(&scope("s"), "shard-1", Some(at("10")), &at("11"));
        f.note(&scope("s"), "shard-1", Some(at("11")), &at("12"));
        assert_eq!(f.before_failures(&scope("s"), "shard-1", at("12")), Some(at("10")));
        assert_eq!(f.before_failures(&scope("s"), "shard-1", at("13")), Some(at("13")), "13 reached PutSnowflake");
        assert_eq!(f.before_failures(&scope("s"), "shard-2", at("12")), Some(at("12")), "another shard");
        assert_eq!(f.before_failures(&scope("t"), "shard-1", at("12")), Some(at("12")), "another stream");
        let other_app = Scope::new("other-app", "us-east-1", "s");
        assert_eq!(f.before_failures(&other_app, "shard-1", at("12")), Some(at("12")), "another Application Name");
        let other_region = Scope::new("app", "eu-west-1", "s");
        assert_eq!(f.before_failures(&other_region, "shard-1", at("12")), Some(at("12")), "another region");
        f.note(&scope("s"), "shard-1", None, &at("1"));
        assert_eq!(
            f.before_failures(&scope("s"), "shard-1", at("1")),
            None,
            "the lease's first record failed: nothing before"
        );
    }

    #[test]
    fn a_noted_record_is_known_by_its_record_before_whatever_its_sub_sequence_spelling() {
        let mut f = ParseFailures::default();
        f.note(&scope("s"), "shard-1", Some(at("10")), &at("11"));
        f.note(&scope("s"), "shard-1", None, &Position::new("1", Some(0)));
        assert!(f.noted(&scope("s"), "shard-1", Some(&at("10")), &at("11")));
        assert!(f.noted(&scope("s"), "shard-1", Some(&Position::new("10", Some(0))), &Position::new("11", Some(0))));
        assert!(
            !f.noted(&scope("s"), "shard-1", Some(&at("9")), &at("11")),
            "another record before: not that FlowFile"
        );
        assert!(!f.noted(&scope("s"), "shard-1", None, &at("11")));
        assert!(!f.noted(&scope("t"), "shard-1", Some(&at("10")), &at("11")), "another flow's note");
        assert!(!f.noted(&scope("s"), "shard-1", Some(&at("11")), &at("12")), "not noted");
        assert!(f.noted(&scope("s"), "shard-1", None, &at("1")));
        assert!(!f.noted(&scope("s"), "shard-1", None, &Position::new("11", Some(3))), "another user record");
    }

    #[test]
    fn memory_is_bounded_and_the_oldest_is_forgotten() {
        let mut f = ParseFailures::default();
        for n in 0..(MAX_NOTED as u64 + 10) {
            f.note(&scope("s"), "shard-1", Some(at(&n.to_string())), &at(&(n + 1).to_string()));
        }
        assert_eq!(f.len(), MAX_NOTED);
        assert_eq!(
            f.before_failures(&scope("s"), "shard-1", at("5")),
            Some(at("5")),
            "forgotten: it waits, never skips"
        );
        let last = (MAX_NOTED as u64 + 10).to_string();
        assert_eq!(f.before_failures(&scope("s"), "shard-1", at(&last)), Some(at("10")));
    }
}
