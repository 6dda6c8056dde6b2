//! Kinesis' read limits per shard, when `--limits` is on: at most 5 GetRecords calls per second, and
//! 2 MiB/s of data. Like Kinesis, a call may return more than the second's allowance (up to 10 MiB); the
//! shard then owes it, and calls are refused until the debt is paid back at 2 MiB/s (a 10 MiB answer
//! taken with a full bucket leaves 8 MiB of debt: the shard is blocked for 4 s more).
//! A refused call is a `ProvisionedThroughputExceededException`.
//!
//! The logic takes the time as an argument so it is tested without sleeping.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const CALLS_PER_SECOND: usize = 5;
pub const BYTES_PER_SECOND: f64 = 2.0 * 1024.0 * 1024.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Throttle {
    /// Already 5 GetRecords in the last second.
    Calls,
    /// The shard still owes bytes read earlier.
    Bytes,
}

/// One shard's budget.
#[derive(Debug)]
pub struct ShardBudget {
    calls: VecDeque<Instant>,
    /// Bytes that may still be read now; negative while the shard is in debt. At most one second's worth.
    tokens: f64,
    refilled_at: Instant,
}

impl ShardBudget {
    pub fn new(now: Instant) -> Self {
        ShardBudget { calls: VecDeque::with_capacity(CALLS_PER_SECOND), tokens: BYTES_PER_SECOND, refilled_at: now }
    }

    /// Admits a GetRecords call at `now`, or says why not. An admitted call counts towards the 5/s.
    pub fn admit(&mut self, now: Instant) -> Result<(), Throttle> {
        self.refill(now);
        while self.calls.front().is_some_and(|&t| now.duration_since(t) >= Duration::from_secs(1)) {
            self.calls.pop_front();
        }
        if self.calls.len() >= CALLS_PER_SECOND {
            return Err(Throttle::Calls);
        }
        if self.tokens <= 0.0 {
            return Err(Throttle::Bytes);
        }
        self.calls.push_back(now);
        Ok(())
    }

    /// Charges the data an admitted call returned.
    pub fn charge(&mut self, bytes: usize) {
        self.tokens -= bytes as f64;
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.refilled_at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * BYTES_PER_SECOND).min(BYTES_PER_SECOND);
        self.refilled_at = now;
    }
}

/// The budgets of every shard of the stream.
pub struct Limits {
    shards: Vec<Mutex<ShardBudget>>,
}

impl Limits {
    pub fn new(shards: u32) -> Self {
        let now = Instant::now();
        Limits { shards: (0..shards).map(|_| Mutex::new(ShardBudget::new(now))).collect() }
    }

    pub fn admit(&self, shard: u32) -> Result<(), Throttle> {
        self.budget(shard).admit(Instant::now())
    }

    pub fn charge(&self, shard: u32, bytes: usize) {
        self.budget(shard).charge(bytes)
    }

    fn budget(&self, shard: u32) -> std::sync::MutexGuard<'_, ShardBudget> {
        // a panic while holding the lock cannot leave the budget inconsistent: keep using it
        self.shards[shard as usize].lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(t0: Instant, ms: u64) -> Instant {
        t0 + Duration::from_millis(ms)
    }

    #[test]
    fn five_calls_per_second() {
        let t0 = Instant::now();
        let mut b = ShardBudget::new(t0);
        for i in 0..5 {
            assert_eq!(b.admit(ms(t0, i * 10)), Ok(()));
        }
        assert_eq!(b.admit(ms(t0, 100)), Err(Throttle::Calls));
        assert_eq!(b.admit(ms(t0, 999)), Err(Throttle::Calls));
        assert_eq!(b.admit(ms(t0, 1000)), Ok(())); // the first call left the window
        assert_eq!(b.admit(ms(t0, 1005)), Err(Throttle::Calls));
    }

    #[test]
    fn a_big_read_blocks_until_paid_back_at_two_mib_per_second() {
        let t0 = Instant::now();
        let mut b = ShardBudget::new(t0);
        assert_eq!(b.admit(t0), Ok(()));
        b.charge(10 * 1024 * 1024); // 10 MiB with 2 MiB in the bucket: 8 MiB of debt = 4 s
        assert_eq!(b.admit(ms(t0, 1500)), Err(Throttle::Bytes));
        assert_eq!(b.admit(ms(t0, 3900)), Err(Throttle::Bytes));
        assert_eq!(b.admit(ms(t0, 4100)), Ok(()));
    }

    #[test]
    fn sustained_two_mib_per_second_is_admitted() {
        let t0 = Instant::now();
        let mut b = ShardBudget::new(t0);
        // 4 calls a second of 512 KiB each, for 10 s: 2 MiB/s exactly
        for i in 0..40 {
            assert_eq!(b.admit(ms(t0, i * 250)), Ok(()), "call {i}");
            b.charge(512 * 1024);
        }
    }
}
