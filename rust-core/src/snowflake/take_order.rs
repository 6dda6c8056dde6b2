//! Which queued FlowFiles PutSnowflake takes when its queue holds more than Max In-Flight Size
//! lets in. Pure: Java shows what the queue would hand out (each FlowFile's size and attributes,
//! in the queue's order) and takes the FlowFiles named here.
//!
//! The rule: the queue's order decides how many FlowFiles each shard gets, and within a shard the
//! records read first go first. Walking the queue in its order, each FlowFile of a shard takes a
//! place that is filled with that shard's earliest FlowFile not yet chosen (by its first record's
//! sequence number); any other FlowFile (not from a shard, without a first sequence number, or
//! marked for the at-least-once channels) fills its own place. Places are filled until the room
//! is used (always at least one).
//!
//! Why: a FlowFile waits in its channel until the records before it are there (see `book`), and
//! waiting FlowFiles hold the budget. Taken in the queue's order, a queue that hands out newer
//! FlowFiles first (Newest FlowFile First, or no prioritizer, whose order follows content claims)
//! and is longer than the budget fills it with FlowFiles that all wait; they then go back
//! penalized, and loading moved on about once per Penalty Duration. Taken by this rule, what the
//! budget holds of a shard is the part its line continues with.

use std::collections::HashMap;

use super::offset::OffsetToken;
use super::rows::{first_record_token, marked_at_least_once_by, source_of, Source};

/// One FlowFile in PutSnowflake's queue, as the queue would hand it out.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Its content's size, in bytes (what the budget is first measured in).
    pub size: u64,
    pub attributes: HashMap<String, String>,
}

/// The FlowFiles to take, as indexes into `candidates` (in the order their places came), up to
/// `room` bytes of content and at least one.
pub fn choose(candidates: &[Candidate], room: u64) -> Vec<usize> {
    let keys: Vec<Option<(Source, OffsetToken)>> = candidates.iter().map(|c| shard_position(&c.attributes)).collect();
    let mut by_shard: HashMap<&Source, Vec<usize>> = HashMap::new();
    for (i, key) in keys.iter().enumerate() {
        if let Some((source, _)) = key {
            by_shard.entry(source).or_default().push(i);
        }
    }
    for indexes in by_shard.values_mut() {
        // Stable: FlowFiles with the same first record (cut by a split processor) keep the queue's order.
        indexes.sort_by(|a, b| token_of(&keys, *a).cmp(token_of(&keys, *b)));
    }
    let mut next: HashMap<&Source, usize> = HashMap::new();
    let mut chosen = Vec::new();
    let mut taken = 0u64;
    for (i, key) in keys.iter().enumerate() {
        let pick = match key {
            None => i,
            Some((source, _)) => {
                let at = next.entry(source).or_default();
                *at += 1;
                by_shard[source][*at - 1]
            }
        };
        let size = candidates[pick].size;
        if !chosen.is_empty() && taken.saturating_add(size) > room {
            break;
        }
        chosen.push(pick);
        taken = taken.saturating_add(size);
    }
    chosen
}

fn token_of(keys: &[Option<(Source, OffsetToken)>], i: usize) -> &OffsetToken {
    &keys[i].as_ref().expect("only keyed FlowFiles are grouped by shard").1
}

/// The FlowFile's shard and first record, when its rows go to a channel in shard order.
fn shard_position(attributes: &HashMap<String, String>) -> Option<(Source, OffsetToken)> {
    if marked_at_least_once_by(attributes) {
        return None;
    }
    let source @ Source::Shard { .. } = source_of(attributes) else { return None };
    Some((source, first_record_token(attributes)?))
}

#[cfg(test)]
mod tests;
