use std::collections::{HashMap, HashSet};

use proptest::prelude::*;

use super::*;
use crate::contract::attributes::{DELIVERY, FIRST_SEQUENCE, FIRST_SUB, SHARD, STREAM};

fn from_shard(shard: &str, sequence: u64, size: u64) -> Candidate {
    let attributes = HashMap::from([
        (STREAM.to_owned(), "orders".to_owned()),
        (SHARD.to_owned(), shard.to_owned()),
        (FIRST_SEQUENCE.to_owned(), format!("4959{sequence:012}")),
        (FIRST_SUB.to_owned(), "0".to_owned()),
    ]);
    Candidate { size, attributes }
}

fn elsewhere(size: u64) -> Candidate {
    Candidate { size, attributes: HashMap::new() }
}

#[test]
fn a_newest_first_queue_gives_each_shard_its_earliest_records() {
    // Newest first: shard 0's records 9..0 and shard 1's 9..0, interleaved.
    let queue: Vec<Candidate> =
        (0..10).rev().flat_map(|n| [from_shard("shardId-0", n, 100), from_shard("shardId-1", n, 100)]).collect();
    let chosen = choose(&queue, 800);
    let sequences: HashSet<(String, String)> = chosen
        .iter()
        .map(|&i| (queue[i].attributes[SHARD].clone(), queue[i].attributes[FIRST_SEQUENCE].clone()))
        .collect();
    let expected: HashSet<(String, String)> =
        (0..4).flat_map(|n| ["shardId-0", "shardId-1"].map(|s| (s.to_owned(), format!("4959{n:012}")))).collect();
    assert_eq!(sequences, expected);
}

#[test]
fn other_flow_files_keep_their_place_and_at_least_one_is_taken() {
    let queue = vec![elsewhere(500), from_shard("shardId-0", 2, 100), from_shard("shardId-0", 1, 100)];
    assert_eq!(choose(&queue, 10), vec![0], "one, even over the room");
    assert_eq!(choose(&queue, 600), vec![0, 2]);
    assert_eq!(choose(&queue, 700), vec![0, 2, 1]);
}

#[test]
fn flow_files_marked_for_the_at_least_once_channels_are_not_reordered() {
    let mut late = from_shard("shardId-0", 9, 100);
    late.attributes.insert(DELIVERY.to_owned(), crate::contract::attributes::AT_LEAST_ONCE.to_owned());
    let queue = vec![late, from_shard("shardId-0", 5, 100), from_shard("shardId-0", 1, 100)];
    assert_eq!(choose(&queue, 200), vec![0, 2]);
}

#[test]
fn a_malformed_first_sequence_number_is_taken_as_it_comes() {
    let mut odd = from_shard("shardId-0", 9, 100);
    odd.attributes.insert(FIRST_SEQUENCE.to_owned(), "49x".to_owned());
    let queue = vec![from_shard("shardId-0", 5, 100), odd, from_shard("shardId-0", 1, 100)];
    assert_eq!(choose(&queue, 200), vec![2, 1]);
}

/// A queue: (shard or none, sequence, size) per FlowFile, in the order the queue hands them out.
fn queues() -> impl Strategy<Value = (Vec<(Option<u8>, u16, u64)>, u64)> {
    let entry = (prop::option::weighted(0.8, 0u8..4), any::<u16>(), 1u64..400);
    (prop::collection::vec(entry, 0..60), 0u64..6000)
}

proptest! {
    /// Whatever the queue's order: within each shard the chosen FlowFiles are its earliest ones;
    /// each shard (and each other FlowFile) gets the places the queue's order gives it; the room
    /// is kept (but one is always taken) and no more would fit.
    #[test]
    fn each_shard_gets_its_earliest_records_in_the_places_the_queue_gives_it((entries, room) in queues()) {
        let queue: Vec<Candidate> = entries.iter().map(|(shard, sequence, size)| match shard {
            Some(s) => from_shard(&format!("shardId-{s}"), u64::from(*sequence), *size),
            None => elsewhere(*size),
        }).collect();
        let chosen = choose(&queue, room);
        let unique: HashSet<usize> = chosen.iter().copied().collect();
        prop_assert_eq!(unique.len(), chosen.len(), "a FlowFile chosen twice");
        prop_assert_eq!(chosen.is_empty(), queue.is_empty());
        let places = chosen.len();
        let bytes: u64 = chosen.iter().map(|&i| queue[i].size).sum();
        prop_assert!(places <= 1 || bytes <= room, "over the room: {} > {}", bytes, room);
        for shard in 0u8..4 {
            let of_shard: Vec<usize> = (0..queue.len()).filter(|&i| entries[i].0 == Some(shard)).collect();
            let places_of_shard = of_shard.iter().filter(|&&i| i < places).count();
            let mut by_sequence = of_shard.clone();
            by_sequence.sort_by_key(|&i| entries[i].1);
            let mut got: Vec<u16> = chosen.iter().filter(|&&i| entries[i].0 == Some(shard)).map(|&i| entries[i].1).collect();
            let mut earliest: Vec<u16> = by_sequence[..places_of_shard].iter().map(|&i| entries[i].1).collect();
            got.sort_unstable();
            earliest.sort_unstable();
            prop_assert_eq!(got, earliest, "shard {}", shard);
        }
        for (i, (shard, _, _)) in entries.iter().enumerate() {
            if shard.is_none() {
                prop_assert_eq!(chosen.contains(&i), i < places, "FlowFile {} from elsewhere", i);
            }
        }
        if places < queue.len() {
            // The next place's FlowFile would not have fitted.
            let mut all = choose(&queue, u64::MAX);
            all.truncate(places + 1);
            let next = queue[all[places]].size;
            prop_assert!(bytes + next > room, "room for one more: {} + {} <= {}", bytes, next, room);
        }
    }
}
