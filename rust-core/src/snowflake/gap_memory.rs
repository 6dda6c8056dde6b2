//! The gaps PutSnowflake's channels passed over, kept across a restart of the processor or of NiFi.
//!
//! A channel that passed over a gap (`book`) commits tokens above records it never got; a FlowFile
//! that brings them later must go to the at-least-once channels, never be skipped as a replay. The
//! book remembers its gaps while its writer runs; this memory holds every channel's, so a writer
//! started again (a stop and start of the processor, a retired writer) begins with them, and the
//! engine hands them to Java as one entry of the processor's local state ([`STATE_KEY`]), written
//! with View State every few seconds and when the processor stops, and given back at the next start
//! (the fact [`FACT`]). Each gap is kept for `book::GAP_MEMORY` after it was passed, at most
//! [`MAX_SAVED_GAPS`] over all channels (the oldest are forgotten first).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

pub use super::book::PassedGap;
use super::book::GAP_MEMORY;
use super::offset::OffsetToken;
use crate::runtime::lock;

/// The local-state entry (and View State line) holding the gaps.
pub const STATE_KEY: &str = "passed.gaps";
/// The fact Java passes at the start with the entry's value as the state held it.
pub use crate::config::put_snowflake::PASSED_GAPS as FACT;
/// Gaps kept over all channels.
pub const MAX_SAVED_GAPS: usize = 4_096;

/// What the local state holds: per channel, `[after, before, passed at (ms since the epoch)]`.
#[derive(Serialize, Deserialize, Default)]
struct Saved(HashMap<String, Vec<(Option<String>, String, u64)>>);

#[derive(Debug, thiserror::Error)]
pub enum GapMemoryError {
    #[error("the gaps kept in PutSnowflake's local state ({STATE_KEY}) cannot be read: {0}")]
    Unreadable(String),
}

/// Per channel, each gap: after, before, and when it was passed (ms since the epoch).
type Channels = HashMap<String, Vec<(Option<OffsetToken>, OffsetToken, u64)>>;

/// Every channel's gaps (see the module comment).
#[derive(Default)]
pub struct GapMemory {
    channels: Mutex<Channels>,
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

impl GapMemory {
    /// The gaps as the local state kept them (empty: none); those older than `GAP_MEMORY` are
    /// dropped.
    pub fn restore(saved: &str) -> Result<Self, GapMemoryError> {
        if saved.trim().is_empty() {
            return Ok(Self::default());
        }
        let Saved(channels) = serde_json::from_str(saved).map_err(|e| GapMemoryError::Unreadable(e.to_string()))?;
        let token = |t: &str| OffsetToken::parse(t).ok_or_else(|| GapMemoryError::Unreadable(format!("token {t:?}")));
        let mut kept = HashMap::new();
        for (channel, gaps) in channels {
            let mut parsed = Vec::with_capacity(gaps.len());
            for (after, before, at) in gaps {
                parsed.push((after.as_deref().map(token).transpose()?, token(&before)?, at));
            }
            kept.insert(channel, parsed);
        }
        let memory = Self { channels: Mutex::new(kept) };
        memory.forget_old(now_ms());
        Ok(memory)
    }

    /// The gaps of `channel` (a writer starting).
    pub fn of(&self, channel: &str) -> Vec<PassedGap> {
        let now = now_ms();
        let channels = self.lock();
        let Some(gaps) = channels.get(channel) else { return Vec::new() };
        gaps.iter()
            .map(|(after, before, at)| PassedGap {
                after: after.clone(),
                before: before.clone(),
                age: Duration::from_millis(now.saturating_sub(*at)),
            })
            .collect()
    }

    /// `channel`'s gaps now (its book's, after it passed over one).
    pub fn record(&self, channel: &str, gaps: Vec<PassedGap>) {
        let now = now_ms();
        let gaps: Vec<_> =
            gaps.into_iter().map(|g| (g.after, g.before, now.saturating_sub(g.age.as_millis() as u64))).collect();
        {
            let mut channels = self.lock();
            if gaps.is_empty() {
                channels.remove(channel);
            } else {
                channels.insert(channel.to_owned(), gaps);
            }
        }
        self.forget_old(now);
    }

    /// The value of the local-state entry: every gap not yet forgotten.
    pub fn to_state(&self) -> String {
        self.forget_old(now_ms());
        let channels = self.lock();
        let saved = Saved(
            channels
                .iter()
                .map(|(channel, gaps)| {
                    let gaps = gaps.iter().map(|(a, b, at)| (a.as_ref().map(|t| t.to_string()), b.to_string(), *at));
                    (channel.clone(), gaps.collect())
                })
                .collect(),
        );
        serde_json::to_string(&saved).unwrap_or_default()
    }

    /// Drops the gaps passed more than `GAP_MEMORY` ago, then the oldest beyond [`MAX_SAVED_GAPS`].
    fn forget_old(&self, now: u64) {
        let mut channels = self.lock();
        let oldest = now.saturating_sub(GAP_MEMORY.as_millis() as u64);
        for gaps in channels.values_mut() {
            gaps.retain(|(_, _, at)| *at >= oldest);
        }
        channels.retain(|_, gaps| !gaps.is_empty());
        let total: usize = channels.values().map(Vec::len).sum();
        if total > MAX_SAVED_GAPS {
            let mut times: Vec<u64> = channels.values().flatten().map(|(_, _, at)| *at).collect();
            times.sort_unstable();
            let over = total - MAX_SAVED_GAPS;
            let cut = times[over - 1];
            // Every gap older than `cut` goes, and of those passed at `cut`, as many as make `over`.
            let mut ties = over - times.iter().take_while(|at| **at < cut).count();
            for gaps in channels.values_mut() {
                gaps.retain(|(_, _, at)| {
                    let tie = *at == cut && ties > 0;
                    ties -= tie as usize;
                    *at > cut || (*at == cut && !tie)
                });
            }
            channels.retain(|_, gaps| !gaps.is_empty());
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Channels> {
        lock(&self.channels)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(n: u64) -> OffsetToken {
        OffsetToken::from_counter(n)
    }

    fn gap(after: Option<u64>, before: u64, age_s: u64) -> PassedGap {
        PassedGap { after: after.map(t), before: t(before), age: Duration::from_secs(age_s) }
    }

    #[test]
    fn gaps_come_back_from_the_state_and_old_ones_are_forgotten() {
        let memory = GapMemory::default();
        memory.record("c1", vec![gap(Some(2), 6, 10), gap(None, 1, 4_000)]);
        memory.record("c2", vec![gap(Some(7), 9, 0)]);
        let state = memory.to_state();
        let again = GapMemory::restore(&state).unwrap();
        let c1 = again.of("c1");
        assert_eq!(c1.len(), 1, "a gap passed more than an hour ago is forgotten: {c1:?}");
        assert_eq!((c1[0].after.clone(), c1[0].before.clone()), (Some(t(2)), t(6)));
        assert!(c1[0].age >= Duration::from_secs(10) && c1[0].age < Duration::from_secs(60));
        assert_eq!(again.of("c2").len(), 1);
        assert!(again.of("c3").is_empty());
        memory.record("c2", Vec::new());
        assert!(memory.of("c2").is_empty(), "a channel without gaps keeps nothing");
        assert!(GapMemory::restore("").unwrap().of("c1").is_empty());
    }

    #[test]
    fn what_the_state_holds_is_bounded_and_the_oldest_go_first() {
        let memory = GapMemory::default();
        for c in 0..10u64 {
            memory.record(&format!("c{c}"), (0..1_000).map(|n| gap(Some(n), n + 1, c * 100 + 1)).collect());
        }
        let total: usize = (0..10).map(|c| memory.of(&format!("c{c}")).len()).sum();
        assert_eq!(total, MAX_SAVED_GAPS);
        assert_eq!(memory.of("c0").len(), 1_000, "the newest channel's gaps stay");
        assert!(memory.of("c9").is_empty(), "the oldest channel's go");
    }

    #[test]
    fn a_state_that_is_not_ours_is_refused_with_a_clear_error() {
        let e = GapMemory::restore("{\"c\":[[null,\"x\",1]]}").err().unwrap();
        assert!(e.to_string().contains("passed.gaps"), "{e}");
        assert!(GapMemory::restore("not json").is_err());
    }

    /// Java names the state entry and the fact as the engine does.
    #[test]
    fn java_names_the_entry_and_the_fact_as_the_engine_does() {
        let java = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../java-shim/src/main/java/io/kinesnow/nifi/processors/PutSnowflake.java"
        ))
        .unwrap();
        assert!(java.contains(&format!("PASSED_GAPS_STATE_KEY = \"{STATE_KEY}\";")));
        assert!(java.contains(&format!("PASSED_GAPS_FACT = \"{FACT}\";")));
    }
}
