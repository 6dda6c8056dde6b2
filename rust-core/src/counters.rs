//! A component's counts since the processor last drained them into NiFi's counters: one atomic
//! slot per counter the contract lists (`contract::counters`), added to by the engine's tasks
//! and taken (read and zeroed) by the processor's thread.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::contract::counters::consume_kinesis::ConsumerCounter;
use crate::contract::counters::put_snowflake::SinkCounter;

/// Counts for the counters of one processor's engine, indexed by the contract's enum `C`.
#[derive(Debug)]
pub struct Counters<C> {
    slots: Box<[AtomicU64]>,
    kind: std::marker::PhantomData<C>,
}

/// ConsumeKinesis' engine counters.
pub type ConsumerCounters = Counters<ConsumerCounter>;
/// PutSnowflake's engine counters.
pub type SinkCounters = Counters<SinkCounter>;

impl<C: Into<usize>> Counters<C> {
    /// Zeroed counts for `len` counters (the contract list's length).
    pub fn new(len: usize) -> Self {
        Self { slots: (0..len).map(|_| AtomicU64::new(0)).collect(), kind: std::marker::PhantomData }
    }

    pub fn add(&self, counter: C, n: u64) {
        if n > 0 {
            self.slots[counter.into()].fetch_add(n, Ordering::Relaxed);
        }
    }

    pub fn increment(&self, counter: C) {
        self.add(counter, 1);
    }

    /// The counts since the last call, in the contract's order; zeroes them.
    pub fn take(&self) -> Vec<u64> {
        self.slots.iter().map(|s| s.swap(0, Ordering::Relaxed)).collect()
    }
}

impl From<ConsumerCounter> for usize {
    fn from(c: ConsumerCounter) -> usize {
        c as usize
    }
}

impl From<SinkCounter> for usize {
    fn from(c: SinkCounter) -> usize {
        c as usize
    }
}

impl Default for ConsumerCounters {
    fn default() -> Self {
        Self::new(crate::contract::counters::consume_kinesis::ENGINE.len())
    }
}

impl Default for SinkCounters {
    fn default() -> Self {
        Self::new(crate::contract::counters::put_snowflake::ENGINE.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_returns_the_counts_since_the_last_take_in_the_contracts_order() {
        let counters = ConsumerCounters::default();
        counters.add(ConsumerCounter::RecordsRead, 5);
        counters.increment(ConsumerCounter::Throttles);
        counters.add(ConsumerCounter::RecordsRead, 2);
        let taken = counters.take();
        assert_eq!(taken.len(), crate::contract::counters::consume_kinesis::ENGINE.len());
        assert_eq!(taken[ConsumerCounter::RecordsRead as usize], 7);
        assert_eq!(taken[ConsumerCounter::Throttles as usize], 1);
        assert_eq!(taken.iter().sum::<u64>(), 8);
        assert!(counters.take().iter().all(|&n| n == 0), "a take zeroes the counts");
    }
}
