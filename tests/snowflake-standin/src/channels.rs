//! Channel state: client and row sequencers behind continuation tokens
//! (`<client>_<row>`), appended-but-uncommitted batches, committed offset
//! tokens and the counters reported by channel status. Reopening bumps the
//! client sequencer (older tokens go stale) and discards uncommitted batches.
//! The `ELASTIC` channel needs no open and carries no tokens.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Instant;

use crate::catalog::ObjectName;
use crate::error::ApiError;

pub const ELASTIC: &str = "ELASTIC";

/// One NDJSON line of an append.
#[derive(Debug, Clone)]
pub enum ParsedRow {
    Row(Map<String, Value>),
    /// Bench mode: a line that looks like a JSON object, counted and not parsed.
    Counted,
    /// Not a JSON object: kept as text with the parse error.
    Bad {
        raw: String,
        error: String,
    },
}

/// An accepted append waiting for its commit.
#[derive(Debug)]
pub struct PendingBatch {
    pub rows: Vec<ParsedRow>,
    pub start_offset: Option<String>,
    pub end_offset: Option<String>,
    pub due: Instant,
    pub accepted_ms: i64,
}

/// What committing one batch did, applied back to the channel.
#[derive(Debug, Default)]
pub struct BatchOutcome {
    pub parsed: u64,
    pub inserted: u64,
    pub errors: u64,
    pub end_offset: Option<String>,
    pub first_error: Option<String>,
    pub accepted_ms: i64,
}

/// A due batch handed to the committer.
pub struct DueBatch {
    pub key: String,
    pub pipe: ObjectName,
    pub channel: String,
    pub batch: PendingBatch,
}

/// The persisted part of a channel.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ChannelRecord {
    pub pipe: Option<ObjectName>,
    pub name: String,
    pub client_seq: u64,
    pub created_on_ms: i64,
    pub committed_offset: Option<String>,
    pub rows_inserted: u64,
    pub rows_parsed: u64,
    pub rows_error_count: u64,
    pub last_error_offset_upper_bound: Option<String>,
    pub last_error_message: Option<String>,
    pub last_error_timestamp_ms: Option<i64>,
}

#[derive(Debug)]
struct Channel {
    rec: ChannelRecord,
    pipe: ObjectName,
    row_seq: u64,
    pending: VecDeque<PendingBatch>,
    in_flight: usize,
    opening: bool,
    last_request: Option<(String, String)>,
    latency_total_ms: i64,
    latency_batches: i64,
}

/// A commit lag drawn uniformly from `low..=high` ms (`low` when the range is empty).
pub fn draw_lag_ms((low, high): (u64, u64)) -> u64 {
    if high <= low {
        return low;
    }
    // uuid's v4 is 122 random bits from the OS: enough for a test server's draw, with no RNG crate.
    low + (uuid::Uuid::new_v4().as_u128() % u128::from(high - low + 1)) as u64
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

impl Channel {
    fn new(pipe: &ObjectName, name: &str) -> Self {
        Channel {
            rec: ChannelRecord {
                pipe: Some(pipe.clone()),
                name: name.to_string(),
                created_on_ms: now_ms(),
                ..Default::default()
            },
            pipe: pipe.clone(),
            row_seq: 0,
            pending: VecDeque::new(),
            in_flight: 0,
            opening: false,
            last_request: None,
            latency_total_ms: 0,
            latency_batches: 0,
        }
    }

    fn token(&self) -> String {
        format!("{}_{}", self.rec.client_seq, self.row_seq)
    }

    fn has_uncommitted(&self) -> bool {
        !self.pending.is_empty() || self.in_flight > 0
    }

    fn status(&self) -> Value {
        let r = &self.rec;
        let avg = if self.latency_batches > 0 { Some(self.latency_total_ms / self.latency_batches) } else { None };
        json!({
            "database_name": self.pipe.database,
            "schema_name": self.pipe.schema,
            "pipe_name": self.pipe.name,
            "channel_name": r.name,
            "channel_status_code": "SUCCESS",
            "last_committed_offset_token": r.committed_offset,
            "created_on_ms": r.created_on_ms,
            "rows_inserted": r.rows_inserted,
            "rows_parsed": r.rows_parsed,
            "rows_error_count": r.rows_error_count,
            "last_error_offset_upper_bound": r.last_error_offset_upper_bound,
            "last_error_message": r.last_error_message,
            "last_error_timestamp_ms": r.last_error_timestamp_ms,
            "snowflake_avg_processing_latency_ms": avg,
            "last_refreshed_on_ms": now_ms(),
        })
    }
}

/// All channels of all pipes.
#[derive(Default)]
pub struct Channels {
    map: Mutex<HashMap<String, Channel>>,
}

/// Channel names are matched case-insensitively.
pub fn channel_key(pipe: &ObjectName, channel: &str) -> String {
    format!("{}\u{1}{}", pipe.key(), channel.to_uppercase())
}

/// Parses `<client>_<row>`.
fn parse_token(token: &str) -> Option<(u64, u64)> {
    let (c, r) = token.split_once('_')?;
    Some((c.parse().ok()?, r.parse().ok()?))
}

impl Channels {
    /// Restores persisted channels (at start).
    pub fn restore(&self, records: Vec<ChannelRecord>) {
        let mut map = self.map.lock().unwrap();
        for rec in records {
            let Some(pipe) = rec.pipe.clone() else { continue };
            let mut ch = Channel::new(&pipe, &rec.name);
            ch.rec = rec;
            map.insert(channel_key(&pipe, &ch.rec.name), ch);
        }
    }

    /// First half of an open: refuses a concurrent open (409 in progress) and,
    /// with `fail_on_uncommitted_rows`, a channel with uncommitted rows.
    pub fn begin_open(&self, pipe: &ObjectName, name: &str, fail_on_uncommitted: bool) -> Result<(), ApiError> {
        let mut map = self.map.lock().unwrap();
        let ch = map.entry(channel_key(pipe, name)).or_insert_with(|| Channel::new(pipe, name));
        if ch.opening {
            return Err(ApiError::open_in_progress(name));
        }
        if fail_on_uncommitted && ch.has_uncommitted() {
            return Err(ApiError::uncommitted_rows(name));
        }
        ch.opening = true;
        Ok(())
    }

    /// Second half of an open: bumps the client sequencer, discards uncommitted
    /// batches, optionally sets the offset token. Returns (token, status, record).
    pub fn finish_open(
        &self,
        pipe: &ObjectName,
        name: &str,
        offset_token: Option<String>,
    ) -> (String, Value, ChannelRecord) {
        let mut map = self.map.lock().unwrap();
        let ch = map.entry(channel_key(pipe, name)).or_insert_with(|| Channel::new(pipe, name));
        ch.opening = false;
        ch.rec.client_seq += 1;
        ch.row_seq = 0;
        ch.pending.clear();
        ch.last_request = None;
        if offset_token.is_some() {
            ch.rec.committed_offset = offset_token;
        }
        (ch.token(), ch.status(), ch.rec.clone())
    }

    /// Whether a batch of the channel is being inserted by the committer right now.
    pub fn inserting(&self, pipe: &ObjectName, name: &str) -> bool {
        self.map.lock().unwrap().get(&channel_key(pipe, name)).is_some_and(|c| c.in_flight > 0)
    }

    pub fn abort_open(&self, pipe: &ObjectName, name: &str) {
        if let Some(ch) = self.map.lock().unwrap().get_mut(&channel_key(pipe, name)) {
            ch.opening = false;
        }
    }

    /// Queues an append. Checks the continuation token (not for ELASTIC); a retry
    /// of the last request (same `requestId`) is answered again without appending.
    pub fn append(
        &self,
        pipe: &ObjectName,
        name: &str,
        continuation: Option<&str>,
        request_id: Option<&str>,
        batch: PendingBatch,
    ) -> Result<String, ApiError> {
        let mut map = self.map.lock().unwrap();
        let key = channel_key(pipe, name);
        let elastic = name.eq_ignore_ascii_case(ELASTIC);
        if elastic && !map.contains_key(&key) {
            map.insert(key.clone(), Channel::new(pipe, ELASTIC));
        }
        let ch = map.get_mut(&key).ok_or_else(|| ApiError::channel_not_found(name))?;
        if !elastic {
            let token = continuation.ok_or_else(|| ApiError::bad_request("continuationToken is required"))?;
            let (client, _row) = parse_token(token)
                .ok_or_else(|| ApiError::bad_request(format!("malformed continuationToken '{token}'")))?;
            if client != ch.rec.client_seq || ch.opening {
                return Err(ApiError::stale_token(name));
            }
            if let (Some(id), Some((last_id, last_token))) = (request_id, &ch.last_request) {
                if id == last_id {
                    return Ok(last_token.clone());
                }
            }
        }
        // Commits come in append order: an append never commits before the one before it, whatever lag it drew.
        let mut batch = batch;
        if let Some(previous) = ch.pending.back() {
            batch.due = batch.due.max(previous.due);
        }
        ch.pending.push_back(batch);
        ch.row_seq += 1;
        let token = ch.token();
        if let Some(id) = request_id {
            ch.last_request = Some((id.to_string(), token.clone()));
        }
        Ok(token)
    }

    /// Makes the channel's current continuation token stale (fault injection).
    pub fn invalidate(&self, pipe: &ObjectName, name: &str) {
        if let Some(ch) = self.map.lock().unwrap().get_mut(&channel_key(pipe, name)) {
            ch.rec.client_seq += 1;
            ch.pending.clear();
        }
    }

    /// Status of the named channels; unknown channels are omitted (ELASTIC always answers).
    pub fn statuses(&self, pipe: &ObjectName, names: &[String]) -> Map<String, Value> {
        let mut map = self.map.lock().unwrap();
        let mut out = Map::new();
        for name in names {
            let key = channel_key(pipe, name);
            if name.eq_ignore_ascii_case(ELASTIC) && !map.contains_key(&key) {
                map.insert(key.clone(), Channel::new(pipe, ELASTIC));
            }
            if let Some(ch) = map.get(&key) {
                out.insert(name.clone(), ch.status());
            }
        }
        out
    }

    /// Drops a channel (uncommitted rows are lost); returns its committed token.
    pub fn drop_channel(&self, pipe: &ObjectName, name: &str) -> Result<Option<String>, ApiError> {
        let ch = self
            .map
            .lock()
            .unwrap()
            .remove(&channel_key(pipe, name))
            .ok_or_else(|| ApiError::channel_not_found(name))?;
        Ok(ch.rec.committed_offset)
    }

    /// Takes every batch whose commit time has come, in order per channel.
    pub fn take_due(&self, now: Instant, withheld: impl Fn(&str) -> bool) -> Vec<DueBatch> {
        let mut map = self.map.lock().unwrap();
        let mut out = vec![];
        for (key, ch) in map.iter_mut() {
            // No batch of a channel being opened starts committing: the open discards them.
            if ch.pending.is_empty() || ch.opening || withheld(&ch.rec.name) {
                continue;
            }
            while ch.pending.front().is_some_and(|b| b.due <= now) {
                let batch = ch.pending.pop_front().unwrap();
                ch.in_flight += 1;
                out.push(DueBatch { key: key.clone(), pipe: ch.pipe.clone(), channel: ch.rec.name.clone(), batch });
            }
        }
        out
    }

    /// Applies a committed batch to its channel; false if the channel is gone (dropped meanwhile).
    pub fn complete(&self, key: &str, outcome: BatchOutcome) -> bool {
        let mut map = self.map.lock().unwrap();
        let Some(ch) = map.get_mut(key) else { return false };
        ch.in_flight = ch.in_flight.saturating_sub(1);
        let r = &mut ch.rec;
        r.rows_parsed += outcome.parsed;
        r.rows_inserted += outcome.inserted;
        r.rows_error_count += outcome.errors;
        if outcome.end_offset.is_some() {
            r.committed_offset = outcome.end_offset.clone();
        }
        if let Some(msg) = outcome.first_error {
            r.last_error_message = Some(msg);
            r.last_error_offset_upper_bound = outcome.end_offset.clone();
            r.last_error_timestamp_ms = Some(now_ms());
        }
        ch.latency_total_ms += now_ms() - outcome.accepted_ms;
        ch.latency_batches += 1;
        true
    }

    /// The current records of the channels with these keys (those still open), to persist.
    pub fn records(&self, keys: &[String]) -> Vec<ChannelRecord> {
        let map = self.map.lock().unwrap();
        keys.iter().filter_map(|k| map.get(k)).map(|ch| ch.rec.clone()).collect()
    }

    /// Every channel's status (admin view).
    pub fn all(&self) -> Vec<Value> {
        let map = self.map.lock().unwrap();
        let mut v: Vec<Value> = map
            .values()
            .map(|c| {
                let mut s = c.status();
                s["pending_batches"] = json!(c.pending.len() + c.in_flight);
                s["client_sequencer"] = json!(c.rec.client_seq);
                s
            })
            .collect();
        v.sort_by(|a, b| a["channel_name"].as_str().cmp(&b["channel_name"].as_str()));
        v
    }

    /// Reschedules all pending batches of all channels to commit now (admin).
    pub fn commit_now(&self) {
        let now = Instant::now();
        for ch in self.map.lock().unwrap().values_mut() {
            for b in ch.pending.iter_mut() {
                b.due = now;
            }
        }
    }

    /// Number of rows appended but not yet committed, over all channels.
    pub fn uncommitted_batches(&self) -> usize {
        self.map.lock().unwrap().values().map(|c| c.pending.len() + c.in_flight).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn batch(due: Instant, end: u64) -> PendingBatch {
        PendingBatch { rows: vec![], start_offset: None, end_offset: Some(end.to_string()), due, accepted_ms: now_ms() }
    }

    /// A later append that drew a shorter lag commits no sooner than the append before it, and `take_due` hands
    /// each channel's batches over in append order.
    #[test]
    fn a_shorter_draw_never_commits_before_the_append_before_it() {
        let channels = Channels::default();
        let pipe = ObjectName::new("DB", "PUBLIC", "T-STREAMING");
        channels.begin_open(&pipe, "c", false).unwrap();
        let (mut token, _, _) = channels.finish_open(&pipe, "c", None);
        let t0 = Instant::now();
        // Lags drawn 900, 100, 500, 50 ms: the commit times must be 900, 900, 900, 900.
        for (i, lag) in [900u64, 100, 500, 50].into_iter().enumerate() {
            token = channels
                .append(&pipe, "c", Some(&token), None, batch(t0 + Duration::from_millis(lag), i as u64 + 1))
                .unwrap();
        }
        let dues: Vec<Duration> =
            channels.map.lock().unwrap()[&channel_key(&pipe, "c")].pending.iter().map(|b| b.due - t0).collect();
        assert_eq!(dues, [Duration::from_millis(900); 4], "each commits at the later of its draw and the one before");
        assert!(channels.take_due(t0 + Duration::from_millis(600), |_| false).is_empty(), "nothing before 900 ms");
        let due = channels.take_due(t0 + Duration::from_millis(900), |_| false);
        let ends: Vec<_> = due.iter().map(|d| d.batch.end_offset.clone().unwrap()).collect();
        assert_eq!(ends, ["1", "2", "3", "4"], "all four at 900 ms, in append order");
        // A draw longer than the one before it keeps its own time.
        channels.append(&pipe, "c", Some(&token), None, batch(t0 + Duration::from_millis(2000), 5)).unwrap();
        assert!(channels.take_due(t0 + Duration::from_millis(1999), |_| false).is_empty());
        assert_eq!(channels.take_due(t0 + Duration::from_millis(2000), |_| false).len(), 1);
    }

    /// Draws stay in the range and spread over it (not one value, not only its ends).
    #[test]
    fn lags_are_drawn_over_the_whole_range() {
        assert_eq!(draw_lag_ms((700, 700)), 700);
        assert_eq!(draw_lag_ms((700, 0)), 700, "a high end below the low end is a fixed lag");
        let draws: Vec<u64> = (0..4000).map(|_| draw_lag_ms((4000, 10000))).collect();
        assert!(draws.iter().all(|d| (4000..=10000).contains(d)));
        let quarter = |q: u64| draws.iter().filter(|d| (4000 + q * 1500..4000 + (q + 1) * 1500).contains(*d)).count();
        for q in 0..4 {
            // 1,000 expected in each quarter; 800 is more than six standard deviations below.
            assert!(quarter(q) > 800, "quarter {q} of the range got {} of 4000 draws", quarter(q));
        }
    }
}
