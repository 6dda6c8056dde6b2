//! Keeps one shard's GetRecords within Kinesis' limits (5 calls/s and 2 MiB/s per shard), and the
//! back-off with jitter used after throttling and errors.

use std::time::Duration;

use tokio::time::Instant;

pub const CALLS_PER_SECOND: u32 = 5;
pub const BYTES_PER_SECOND: u64 = 2 * 1024 * 1024;

/// Paces GetRecords for one shard. A large response is paid for afterwards ("debt"): the next call
/// waits until the shard's byte budget has refilled.
#[derive(Debug)]
pub struct ShardLimiter {
    next_call: Instant,
}

impl Default for ShardLimiter {
    fn default() -> Self {
        Self { next_call: Instant::now() }
    }
}

impl ShardLimiter {
    /// Waits until the next call is allowed.
    pub async fn ready(&self) {
        tokio::time::sleep_until(self.next_call).await;
    }

    /// Records a call made now that returned `bytes` of records.
    pub fn record_call(&mut self, bytes: u64) {
        let now = Instant::now();
        let call_gap = Duration::from_secs(1) / CALLS_PER_SECOND;
        let byte_gap = Duration::from_secs_f64(bytes as f64 / BYTES_PER_SECOND as f64);
        self.next_call = now + call_gap.max(byte_gap);
    }

    /// Pushes the next call at least `delay` into the future (after throttling or an empty read).
    pub fn delay(&mut self, delay: Duration) {
        self.next_call = self.next_call.max(Instant::now() + delay);
    }
}

/// `base` doubled `times` times (at most 16), capped at `cap`: the one schedule of the engine's
/// retries ([`Backoff`] draws its jitter under it; a failed engine start waits it exactly).
pub fn doubled(base: Duration, times: u32, cap: Duration) -> Duration {
    base.saturating_mul(1u32 << times.min(16)).min(cap)
}

/// Exponential back-off with full jitter: attempt n waits a random time in [base*2^n / 2, base*2^n],
/// capped.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    cap: Duration,
    attempt: u32,
}

impl Backoff {
    pub fn new(base: Duration, cap: Duration) -> Self {
        Self { base, cap, attempt: 0 }
    }

    pub fn next_delay(&mut self) -> Duration {
        let ceiling = doubled(self.base, self.attempt, self.cap);
        self.attempt = self.attempt.saturating_add(1);
        let factor = 0.5 + rand::random::<f64>() * 0.5;
        ceiling.mul_f64(factor)
    }

    pub fn reset(&mut self) {
        self.attempt = 0;
    }

    pub fn attempts(&self) -> u32 {
        self.attempt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn at_most_five_calls_per_second() {
        let mut limiter = ShardLimiter::default();
        let start = Instant::now();
        for _ in 0..10 {
            limiter.ready().await;
            limiter.record_call(100);
        }
        // Ten small calls: the tenth may start 9 x 200 ms after the first.
        assert_eq!(Instant::now() - start, Duration::from_millis(1800));
    }

    #[tokio::test(start_paused = true)]
    async fn a_large_response_is_paid_for_before_the_next_call() {
        let mut limiter = ShardLimiter::default();
        limiter.ready().await;
        let start = Instant::now();
        limiter.record_call(10 * 1024 * 1024);
        limiter.ready().await;
        assert_eq!(Instant::now() - start, Duration::from_secs(5), "10 MiB at 2 MiB/s");
    }

    #[tokio::test(start_paused = true)]
    async fn delay_never_shortens_the_wait() {
        let mut limiter = ShardLimiter::default();
        let start = Instant::now();
        limiter.record_call(4 * 1024 * 1024);
        limiter.delay(Duration::from_millis(500));
        limiter.ready().await;
        assert_eq!(Instant::now() - start, Duration::from_secs(2));
    }

    #[test]
    fn backoff_grows_with_jitter_and_is_capped() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(2));
        let first = b.next_delay();
        assert!(first >= Duration::from_millis(50) && first <= Duration::from_millis(100), "{first:?}");
        let second = b.next_delay();
        assert!(second >= Duration::from_millis(100) && second <= Duration::from_millis(200), "{second:?}");
        for _ in 0..20 {
            assert!(b.next_delay() <= Duration::from_secs(2));
        }
        b.reset();
        assert_eq!(b.attempts(), 0);
        assert!(b.next_delay() <= Duration::from_millis(100));
    }

    #[test]
    fn jitter_spreads_delays() {
        let mut seen = std::collections::HashSet::new();
        for _ in 0..20 {
            let mut b = Backoff::new(Duration::from_millis(1000), Duration::from_secs(10));
            seen.insert(b.next_delay().as_micros());
        }
        assert!(seen.len() > 10, "delays should differ: {seen:?}");
    }
}
