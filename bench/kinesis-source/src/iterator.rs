//! Shard iterators: opaque strings (base64 of a small binary layout) that carry the shard and the index
//! of the next record to return, tied to this stream by a tag so another stream's iterator is refused.
//! They do not expire (real ones do after 5 minutes).

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

use crate::generate::mix;

const VERSION: u8 = 1;
const LEN: usize = 1 + 8 + 4 + 8 + 8; // version, stream tag, shard, position, check

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardIterator {
    pub shard: u32,
    /// Index of the next Kinesis record the iterator returns.
    pub position: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IteratorCodec {
    stream_tag: u64,
}

impl IteratorCodec {
    /// `stream_tag` tells this stream's iterators from others (a hash of its name, seed and creation).
    pub fn new(stream_tag: u64) -> Self {
        IteratorCodec { stream_tag }
    }

    pub fn encode(&self, it: ShardIterator) -> String {
        let mut raw = [0u8; LEN];
        raw[0] = VERSION;
        raw[1..9].copy_from_slice(&self.stream_tag.to_be_bytes());
        raw[9..13].copy_from_slice(&it.shard.to_be_bytes());
        raw[13..21].copy_from_slice(&it.position.to_be_bytes());
        raw[21..29].copy_from_slice(&self.check(it).to_be_bytes());
        STANDARD.encode(raw)
    }

    /// None for anything this codec did not write.
    pub fn decode(&self, text: &str) -> Option<ShardIterator> {
        let raw = STANDARD.decode(text).ok()?;
        if raw.len() != LEN || raw[0] != VERSION || raw[1..9] != self.stream_tag.to_be_bytes() {
            return None;
        }
        let shard = u32::from_be_bytes(raw[9..13].try_into().ok()?);
        let position = u64::from_be_bytes(raw[13..21].try_into().ok()?);
        let it = ShardIterator { shard, position };
        (raw[21..29] == self.check(it).to_be_bytes()).then_some(it)
    }

    fn check(&self, it: ShardIterator) -> u64 {
        mix(mix(self.stream_tag, it.shard as u64), it.position)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_others() {
        let c = IteratorCodec::new(99);
        let it = ShardIterator { shard: 3, position: 1234 };
        let text = c.encode(it);
        assert_eq!(c.decode(&text), Some(it));
        assert_eq!(IteratorCodec::new(98).decode(&text), None);
        assert_eq!(c.decode("not an iterator"), None);
        let mut raw = STANDARD.decode(&text).unwrap();
        raw[20] ^= 1; // another position without a matching check
        assert_eq!(c.decode(&STANDARD.encode(raw)), None);
    }
}
