//! How much one append request may carry, and whether a row fits in one at all. Pure decisions
//! (the compression they measure is done here too, the same way the channel's writer compresses
//! its requests); the calls are `channel`'s.
//!
//! Snowflake caps an append request at 4 MB as sent over the network, after compression
//! ([`MAX_COMPRESSED_REQUEST`]): a hard per-request cap that Snowflake does not raise on request.
//! A channel's writer halves the rows of a request until it fits; a row that does not fit even alone
//! (its NDJSON is more than [`MAX_UNCOMPRESSED_REQUEST`], or it is more than 4 MB after zstd) can
//! never be sent, and its FlowFile is refused before any of its rows is (see `sink`).

use std::cell::RefCell;
use std::fmt;

pub use super::api::{MAX_COMPRESSED_REQUEST, MAX_UNCOMPRESSED_REQUEST};

/// zstd level of append requests. Level 1 compresses NDJSON rows of about 1 KiB 1.6 times as fast as level 3 for
/// a result 0.4% larger (`zstd -b1 -e3` on `bench/sink_bench.py`'s rows), and compression was the largest part of
/// the engine's CPU per row (BENCHMARKS.md, "With the stand-in in bench mode").
pub const ZSTD_LEVEL: i32 = 1;

/// What to do with the next `take` rows of a channel, once compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    /// They fit one request: send them.
    Send,
    /// Too large after compression: try this many (half as many) instead.
    Fewer(usize),
    /// One row alone is too large after compression: it must not be sent.
    RowTooLarge,
}

/// The next `take` rows are `compressed` bytes after zstd.
pub fn next_take(take: usize, compressed: usize) -> Take {
    if compressed <= MAX_COMPRESSED_REQUEST {
        Take::Send
    } else if take > 1 {
        Take::Fewer(take / 2)
    } else {
        Take::RowTooLarge
    }
}

/// A row no append request can carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLarge {
    /// Its NDJSON line, newline included.
    pub ndjson: usize,
    /// After zstd; `None` when its NDJSON alone is over [`MAX_UNCOMPRESSED_REQUEST`] (not compressed).
    pub compressed: Option<usize>,
}

impl fmt::Display for TooLarge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.compressed {
            Some(compressed) => write!(
                f,
                "its NDJSON is {} bytes and {} bytes after zstd, over the {} bytes Snowflake takes in one append \
                 request after compression",
                thousands(self.ndjson),
                thousands(compressed),
                thousands(MAX_COMPRESSED_REQUEST)
            ),
            None => write!(
                f,
                "its NDJSON is {} bytes, over the {} bytes PutSnowflake sends in one append request before \
                 compression (Snowflake's 16 MB request payload)",
                thousands(self.ndjson),
                thousands(MAX_UNCOMPRESSED_REQUEST)
            ),
        }
    }
}

/// Whether a row whose NDJSON line (newline included) is `ndjson` bytes can be more than
/// [`MAX_COMPRESSED_REQUEST`] after zstd, so that it must be compressed to know: zstd's bound on
/// its output is over the cap.
pub fn must_measure(ndjson: usize) -> bool {
    zstd::zstd_safe::compress_bound(ndjson) > MAX_COMPRESSED_REQUEST
}

/// Whether a row of `ndjson` bytes that is `compressed` bytes after zstd (`None`: not measured,
/// because [`must_measure`] said it need not be) fits one append request alone.
pub fn fits_alone(ndjson: usize, compressed: Option<usize>) -> Result<(), TooLarge> {
    if ndjson > MAX_UNCOMPRESSED_REQUEST {
        return Err(TooLarge { ndjson, compressed: None });
    }
    match compressed {
        Some(c) if c > MAX_COMPRESSED_REQUEST => Err(TooLarge { ndjson, compressed }),
        _ => Ok(()),
    }
}

/// `body` after zstd, as a channel's writer sends it, with this thread's zstd context (kept
/// between calls: making one each time costs about a tenth of compressing 8 MB at level 1).
pub fn compress(body: &[u8]) -> std::io::Result<Vec<u8>> {
    thread_local! {
        static ZSTD: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
    }
    ZSTD.with(|cell| {
        let mut cell = cell.borrow_mut();
        let compressor = match cell.as_mut() {
            Some(c) => c,
            None => cell.insert(zstd::bulk::Compressor::new(ZSTD_LEVEL)?),
        };
        compressor.compress(body)
    })
}

/// The size of `body` after zstd, as a channel's writer sends it.
pub fn compressed_len(body: &[u8]) -> std::io::Result<usize> {
    compress(body).map(|c| c.len())
}

/// Whether the row `json` fits one append request alone: it is sent as `json` and a newline,
/// compressed as the writer compresses a request of that row alone. Only a row that could be over
/// the cap is compressed here (a few milliseconds per MB).
pub fn check_row(json: &[u8]) -> Result<(), TooLarge> {
    let ndjson = json.len() + 1;
    if ndjson > MAX_UNCOMPRESSED_REQUEST || !must_measure(ndjson) {
        return fits_alone(ndjson, None);
    }
    let mut line = Vec::with_capacity(ndjson);
    line.extend_from_slice(json);
    line.push(b'\n');
    // zstd cannot fail on a buffer in memory but for want of memory; measure it as too large then.
    let compressed = compressed_len(&line).unwrap_or(usize::MAX);
    fits_alone(ndjson, Some(compressed))
}

/// 4000000 -> "4,000,000".
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes zstd cannot shrink, but JSON-safe: xorshift noise over 64 letters.
    fn noise(n: usize, seed: u64) -> Vec<u8> {
        const LETTERS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let mut state = seed | 1;
        (0..n)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                LETTERS[(state % 64) as usize]
            })
            .collect()
    }

    fn row(blob: &[u8]) -> Vec<u8> {
        let mut json = b"{\"blob\":\"".to_vec();
        json.extend_from_slice(blob);
        json.extend_from_slice(b"\"}");
        json
    }

    #[test]
    fn requests_are_halved_until_they_fit_and_a_single_row_over_the_cap_is_never_sent() {
        assert_eq!(next_take(10, MAX_COMPRESSED_REQUEST), Take::Send, "exactly the cap fits");
        assert_eq!(next_take(10, MAX_COMPRESSED_REQUEST + 1), Take::Fewer(5));
        assert_eq!(next_take(3, MAX_COMPRESSED_REQUEST + 1), Take::Fewer(1));
        assert_eq!(next_take(1, MAX_COMPRESSED_REQUEST), Take::Send);
        assert_eq!(next_take(1, MAX_COMPRESSED_REQUEST + 1), Take::RowTooLarge);
    }

    #[test]
    fn each_cap_is_a_boundary_a_row_may_reach_but_not_pass() {
        assert_eq!(fits_alone(MAX_UNCOMPRESSED_REQUEST, Some(MAX_COMPRESSED_REQUEST)), Ok(()));
        assert_eq!(
            fits_alone(MAX_UNCOMPRESSED_REQUEST + 1, Some(1000)),
            Err(TooLarge { ndjson: MAX_UNCOMPRESSED_REQUEST + 1, compressed: None }),
            "over the uncompressed cap however well it compresses"
        );
        assert_eq!(
            fits_alone(5_000_000, Some(MAX_COMPRESSED_REQUEST + 1)),
            Err(TooLarge { ndjson: 5_000_000, compressed: Some(MAX_COMPRESSED_REQUEST + 1) })
        );
        assert_eq!(fits_alone(5_000_000, None), Ok(()), "not measured: it cannot be over the cap");
    }

    #[test]
    fn only_rows_that_could_be_over_the_cap_are_compressed() {
        assert!(!must_measure(1_000_000));
        assert!(!must_measure(MAX_COMPRESSED_REQUEST - 20_000), "zstd's bound stays under the cap");
        assert!(must_measure(MAX_COMPRESSED_REQUEST));
        assert!(must_measure(10 * 1024 * 1024));
    }

    #[test]
    fn a_ten_mebibyte_row_of_repeated_text_fits_and_an_incompressible_one_does_not() {
        let text = b"the same words again and again, ".repeat(10 * 1024 * 1024 / 32);
        assert_eq!(check_row(&row(&text)), Ok(()), "compressible 10 MiB");
        let blob = noise(10 * 1024 * 1024, 7);
        match check_row(&row(&blob)) {
            Err(TooLarge { ndjson, compressed: Some(c) }) => {
                assert_eq!(ndjson, blob.len() + 12);
                assert!(c > MAX_COMPRESSED_REQUEST, "{c}");
            }
            other => panic!("{other:?}"),
        }
        let huge = b"a".repeat(MAX_UNCOMPRESSED_REQUEST);
        assert_eq!(
            check_row(&row(&huge)),
            Err(TooLarge { ndjson: MAX_UNCOMPRESSED_REQUEST + 12, compressed: None }),
            "over 16 MB before compression, not even compressed"
        );
    }

    /// The first length of noise whose row is over the compressed cap (lengths at or above `low`).
    fn first_over(seed: u64) -> usize {
        let size = |n: usize| {
            let mut line = row(&noise(n, seed));
            line.push(b'\n');
            compressed_len(&line).unwrap()
        };
        let (mut low, mut high) = (4_000_000usize, 6_000_000usize);
        assert!(size(low) <= MAX_COMPRESSED_REQUEST && size(high) > MAX_COMPRESSED_REQUEST);
        while high - low > 1 {
            let mid = (low + high) / 2;
            if size(mid) > MAX_COMPRESSED_REQUEST {
                high = mid;
            } else {
                low = mid;
            }
        }
        high
    }

    #[test]
    fn a_row_just_under_four_megabytes_compressed_fits_and_one_just_over_does_not() {
        let over = first_over(11);
        let under = row(&noise(over - 1, 11));
        let mut line = under.clone();
        line.push(b'\n');
        let measured = compressed_len(&line).unwrap();
        assert!(measured <= MAX_COMPRESSED_REQUEST && measured > MAX_COMPRESSED_REQUEST - 100, "{measured}");
        assert_eq!(check_row(&under), Ok(()));
        let Err(too_large) = check_row(&row(&noise(over, 11))) else { panic!("{over} bytes of noise fit") };
        let compressed = too_large.compressed.unwrap();
        assert!(compressed > MAX_COMPRESSED_REQUEST && compressed < MAX_COMPRESSED_REQUEST + 100, "{compressed}");
        let message = too_large.to_string();
        assert!(message.contains(&thousands(too_large.ndjson)), "{message}");
        assert!(message.contains(&thousands(compressed)), "{message}");
        assert!(message.contains("4,000,000 bytes"), "{message}");
    }

    #[test]
    fn sizes_are_written_with_thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(16_000_000), "16,000,000");
    }
}
