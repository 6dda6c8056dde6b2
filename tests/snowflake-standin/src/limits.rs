//! Snowflake's per-channel limits, always on unless turned off in the settings: "Request rate: 10
//! requests per second" and "Named Channel throughput: 20 MB/s (uncompressed)", enforced defaults
//! (the high-performance architecture's limitations page). An append that would put more than either
//! in the second before it (counted from the appends this stand-in accepted, by arrival) is refused
//! with 429; a refused append does not count. Snowflake does not document the code it answers then:
//! `ERR_TOO_MANY_REQUESTS` is the stand-in's choice (and what its `rate_limit` fault answers).
//!
//! An append larger than the whole throughput limit is accepted when nothing else was in the second
//! before it: otherwise no client could ever send it.

use axum::http::StatusCode;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::error::ApiError;

/// Snowflake's default request rate per channel.
pub const SNOWFLAKE_REQUESTS_PER_SECOND: u32 = 10;
/// Snowflake's default throughput per channel, bytes of rows before compression.
pub const SNOWFLAKE_BYTES_PER_SECOND: u64 = 20_000_000;

const WINDOW: Duration = Duration::from_secs(1);

/// The limits in force (0 turns one off).
#[derive(Debug, Clone, Copy)]
pub struct ChannelLimits {
    pub requests_per_second: u32,
    pub bytes_per_second: u64,
}

/// The appends each channel had accepted in the last second: (arrival, uncompressed bytes).
#[derive(Default)]
pub struct ChannelWindows {
    windows: Mutex<HashMap<String, VecDeque<(Instant, u64)>>>,
}

impl ChannelWindows {
    /// Admits an append of `bytes` (uncompressed) to the channel `key` arriving `now`, or refuses it.
    pub fn admit(&self, key: &str, now: Instant, bytes: u64, limits: ChannelLimits) -> Result<(), ApiError> {
        if limits.requests_per_second == 0 && limits.bytes_per_second == 0 {
            return Ok(());
        }
        let mut windows = self.windows.lock().unwrap();
        let window = windows.entry(key.to_string()).or_default();
        while window.front().is_some_and(|&(at, _)| now.duration_since(at) >= WINDOW) {
            window.pop_front();
        }
        if limits.requests_per_second > 0 && window.len() >= limits.requests_per_second as usize {
            return Err(too_many(format!(
                "Channel request rate limit exceeded: at most {} requests per second.",
                limits.requests_per_second
            )));
        }
        let counted: u64 = window.iter().map(|&(_, b)| b).sum();
        if limits.bytes_per_second > 0 && !window.is_empty() && counted + bytes > limits.bytes_per_second {
            return Err(too_many(format!(
                "Channel throughput limit exceeded: at most {} bytes (uncompressed) per second.",
                limits.bytes_per_second
            )));
        }
        window.push_back((now, bytes));
        Ok(())
    }

    /// Forgets every channel's window (`DELETE /admin/faults`).
    pub fn clear(&self) {
        self.windows.lock().unwrap().clear();
    }
}

fn too_many(message: String) -> ApiError {
    ApiError::new(StatusCode::TOO_MANY_REQUESTS, "ERR_TOO_MANY_REQUESTS", message)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SNOWFLAKE: ChannelLimits = ChannelLimits {
        requests_per_second: SNOWFLAKE_REQUESTS_PER_SECOND,
        bytes_per_second: SNOWFLAKE_BYTES_PER_SECOND,
    };

    #[test]
    fn the_eleventh_request_in_a_second_is_refused_and_a_second_later_admitted() {
        let w = ChannelWindows::default();
        let t0 = Instant::now();
        for i in 0..10 {
            w.admit("c", t0 + Duration::from_millis(i * 90), 10, SNOWFLAKE).unwrap();
        }
        let e = w.admit("c", t0 + Duration::from_millis(950), 10, SNOWFLAKE).unwrap_err();
        assert_eq!(e.status, StatusCode::TOO_MANY_REQUESTS);
        assert!(e.message.contains("request rate"), "{}", e.message);
        // The refused one did not count; the first leaves the window at t0 + 1 s.
        w.admit("c", t0 + Duration::from_millis(1000), 10, SNOWFLAKE).unwrap();
        w.admit("other", t0 + Duration::from_millis(950), 10, SNOWFLAKE).unwrap();
    }

    #[test]
    fn bytes_over_twenty_megabytes_in_a_second_are_refused() {
        let w = ChannelWindows::default();
        let t0 = Instant::now();
        w.admit("c", t0, 15_000_000, SNOWFLAKE).unwrap();
        w.admit("c", t0 + Duration::from_millis(100), 5_000_000, SNOWFLAKE).unwrap();
        let e = w.admit("c", t0 + Duration::from_millis(200), 1, SNOWFLAKE).unwrap_err();
        assert!(e.message.contains("throughput"), "{}", e.message);
        // At t0 + 1 s the 15 MB append leaves the window: 5 MB counted, 15 MB more fit.
        w.admit("c", t0 + Duration::from_millis(1000), 15_000_000, SNOWFLAKE).unwrap();
        assert!(w.admit("c", t0 + Duration::from_millis(1050), 1, SNOWFLAKE).is_err());
    }

    #[test]
    fn an_append_larger_than_the_limit_alone_passes_an_empty_window() {
        let w = ChannelWindows::default();
        let t0 = Instant::now();
        w.admit("c", t0, 25_000_000, SNOWFLAKE).unwrap();
        assert!(w.admit("c", t0 + Duration::from_millis(999), 1, SNOWFLAKE).is_err());
    }

    #[test]
    fn zero_turns_a_limit_off() {
        let w = ChannelWindows::default();
        let t0 = Instant::now();
        let off = ChannelLimits { requests_per_second: 0, bytes_per_second: 0 };
        for _ in 0..100 {
            w.admit("c", t0, 20_000_000, off).unwrap();
        }
        let rate_only = ChannelLimits { requests_per_second: 10, bytes_per_second: 0 };
        for _ in 0..10 {
            w.admit("d", t0, 20_000_000, rate_only).unwrap();
        }
        assert!(w.admit("d", t0, 1, rate_only).is_err());
    }
}
