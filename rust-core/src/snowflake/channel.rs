//! One channel: the rows of one source shard, appended in order and tracked until Snowflake
//! reports them committed.
//!
//! The writer owns the FlowFiles routed to its channel until their outcome is known. It appends
//! at most ten requests a second, each at most Max Batch Size before and 4 MB after zstd, with the
//! offset token of its last row. A FlowFile succeeds once `last_committed_offset_token` reaches its
//! last row. Opening (and every reopen, after a stale continuation token, a vanished channel, a
//! pipe failover or a commit that never came) reads the committed token and skips every row at or
//! below it, so a replay never loads a row twice.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::{error, info, warn};

use super::api::{ApiError, ChannelStatus, SnowflakeApi, MAX_COMPRESSED_REQUEST, MAX_UNCOMPRESSED_REQUEST};
use super::offset::OffsetToken;
use super::rows::Row;
use super::status::StatusWatch;
use crate::kinesis::limiter::Backoff;

/// Snowflake REST allows ten append requests a second per channel.
const MIN_APPEND_SPACING: Duration = Duration::from_millis(100);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Success = 0,
    Invalid = 1,
    Failure = 2,
}

/// What happened to a FlowFile, for Java to route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub flow_file_id: i64,
    pub route: Route,
    pub channel: String,
    pub offset_token: String,
    pub message: String,
    /// Rows this run sent (rows already committed before are not counted).
    pub rows_sent: u32,
    pub rows_skipped: u32,
}

/// A FlowFile's rows handed to the channel.
pub struct Work {
    pub flow_file_id: i64,
    pub rows: Vec<Row>,
    pub bytes: u64,
}

#[derive(Clone)]
pub struct ChannelSettings {
    pub component: u64,
    pub max_batch_bytes: usize,
    pub max_latency: Duration,
    pub commit_timeout: Duration,
}

struct Pending {
    id: i64,
    rows: Vec<Row>,
    /// Rows before this index are appended (or were committed before).
    next_row: usize,
    skipped: u32,
    bytes: u64,
    received: Instant,
    row_error: Option<String>,
}

impl Pending {
    fn last_token(&self) -> &OffsetToken {
        &self.rows.last().expect("a FlowFile has rows").token
    }
}

struct Append {
    end: OffsetToken,
    sent: Instant,
    flow_files: Vec<i64>,
}

struct Opened {
    continuation: String,
    errors_seen: u64,
}

pub struct ChannelWriter {
    name: String,
    api: Arc<SnowflakeApi>,
    settings: ChannelSettings,
    work: mpsc::UnboundedReceiver<Work>,
    outcomes: mpsc::UnboundedSender<Outcome>,
    in_flight_bytes: Arc<AtomicU64>,
    status: StatusWatch,
    opened: Option<Opened>,
    committed: Option<OffsetToken>,
    pending: VecDeque<Pending>,
    appends: VecDeque<Append>,
    last_append: Option<Instant>,
    backoff: Backoff,
}

impl ChannelWriter {
    pub fn new(
        name: String,
        api: Arc<SnowflakeApi>,
        settings: ChannelSettings,
        work: mpsc::UnboundedReceiver<Work>,
        outcomes: mpsc::UnboundedSender<Outcome>,
        in_flight_bytes: Arc<AtomicU64>,
        status: StatusWatch,
    ) -> Self {
        Self {
            name,
            api,
            settings,
            work,
            outcomes,
            in_flight_bytes,
            status,
            opened: None,
            committed: None,
            pending: VecDeque::new(),
            appends: VecDeque::new(),
            last_append: None,
            backoff: Backoff::new(Duration::from_millis(500), Duration::from_secs(30)),
        }
    }

    /// Runs until the engine drops the sender and nothing is left to track.
    pub async fn run(mut self) {
        loop {
            if self.pending.is_empty() {
                match self.work.recv().await {
                    Some(work) => self.accept(work),
                    None => return,
                }
            }
            while let Ok(work) = self.work.try_recv() {
                self.accept(work);
            }
            if self.opened.is_none() && !self.open().await {
                continue;
            }
            if let Some(wait) = self.next_append_in() {
                if wait.is_zero() {
                    self.append().await;
                    continue;
                }
                self.wait(Some(wait)).await;
            } else {
                self.wait(None).await;
            }
            self.check_commit_timeout();
        }
    }

    fn accept(&mut self, work: Work) {
        let mut pending = Pending {
            id: work.flow_file_id,
            rows: work.rows,
            next_row: 0,
            skipped: 0,
            bytes: work.bytes,
            received: Instant::now(),
            row_error: None,
        };
        if self.opened.is_some() {
            skip_committed(&mut pending, self.committed.as_ref());
        }
        self.pending.push_back(pending);
        if self.opened.is_some() {
            self.complete_committed();
        }
    }

    /// Opens the channel and lines every pending FlowFile up to be sent again from the committed
    /// token on. Returns false (after a pause) when it could not.
    async fn open(&mut self) -> bool {
        match self.api.open_channel(&self.name).await {
            Ok(opened) => {
                self.backoff.reset();
                self.committed = opened.status.last_committed_offset_token.as_deref().and_then(OffsetToken::parse);
                self.opened = Some(Opened {
                    continuation: opened.continuation_token,
                    errors_seen: opened.status.rows_error_count.unwrap_or(0),
                });
                self.appends.clear();
                for p in &mut self.pending {
                    p.next_row = 0;
                    p.skipped = 0;
                    skip_committed(p, self.committed.as_ref());
                }
                info!(
                    component = self.settings.component,
                    "channel {} opened on pipe {}; last committed offset token {}",
                    self.name,
                    self.api.pipe(),
                    self.committed.as_ref().map(ToString::to_string).unwrap_or_else(|| "none".into())
                );
                self.complete_committed();
                true
            }
            Err(e) => {
                self.on_error("open", e).await;
                false
            }
        }
    }

    /// How long until the next append is due; `None` when nothing waits to be sent.
    fn next_append_in(&self) -> Option<Duration> {
        let first = self.pending.iter().find(|p| p.next_row < p.rows.len())?;
        let waiting_bytes: usize = self.pending.iter().map(|p| p.rows[p.next_row..].iter().map(|r| r.json.len() + 1).sum::<usize>()).sum();
        let now = Instant::now();
        let linger_until = if waiting_bytes >= self.settings.max_batch_bytes { now } else { first.received + self.settings.max_latency };
        let spacing_until = self.last_append.map_or(now, |t| t + MIN_APPEND_SPACING);
        Some(linger_until.max(spacing_until).saturating_duration_since(now))
    }

    /// Sends one request with the oldest unsent rows.
    async fn append(&mut self) {
        let limit = self.settings.max_batch_bytes.min(MAX_UNCOMPRESSED_REQUEST);
        let mut take = self.rows_fitting(limit);
        loop {
            let (body, end) = self.body(take);
            let compressed = zstd::bulk::compress(&body, 3).expect("zstd compresses in memory");
            if compressed.len() > MAX_COMPRESSED_REQUEST && take > 1 {
                take /= 2;
                continue;
            }
            let continuation = self.opened.as_ref().expect("open before append").continuation.clone();
            self.last_append = Some(Instant::now());
            match self.api.append_rows(&self.name, &continuation, &end.to_string(), compressed, body.len()).await {
                Ok(next) => {
                    self.backoff.reset();
                    if let Some(opened) = &mut self.opened {
                        opened.continuation = next;
                    }
                    let flow_files = self.mark_sent(take);
                    self.appends.push_back(Append { end, sent: Instant::now(), flow_files });
                    self.status.set_awaiting(true);
                }
                Err(e) => self.on_error("append", e).await,
            }
            return;
        }
    }

    /// How many unsent rows fit in `limit` bytes (at least one).
    fn rows_fitting(&self, limit: usize) -> usize {
        let mut bytes = 0;
        let mut n = 0;
        for p in &self.pending {
            for row in &p.rows[p.next_row..] {
                if n > 0 && bytes + row.json.len() + 1 > limit {
                    return n;
                }
                bytes += row.json.len() + 1;
                n += 1;
            }
        }
        n
    }

    /// NDJSON of the next `take` unsent rows, and the offset token of the last one.
    fn body(&self, take: usize) -> (Vec<u8>, OffsetToken) {
        let mut body = Vec::new();
        let mut end = None;
        let mut left = take;
        'outer: for p in &self.pending {
            for row in &p.rows[p.next_row..] {
                if left == 0 {
                    break 'outer;
                }
                body.extend_from_slice(&row.json);
                body.push(b'\n');
                end = Some(row.token.clone());
                left -= 1;
            }
        }
        (body, end.expect("at least one row to send"))
    }

    fn mark_sent(&mut self, take: usize) -> Vec<i64> {
        let mut left = take;
        let mut ids = Vec::new();
        for p in &mut self.pending {
            if left == 0 {
                break;
            }
            let unsent = p.rows.len() - p.next_row;
            if unsent == 0 {
                continue;
            }
            let n = unsent.min(left);
            p.next_row += n;
            left -= n;
            ids.push(p.id);
        }
        ids
    }

    /// Waits for a status update, new work, or `timeout`.
    async fn wait(&mut self, timeout: Option<Duration>) {
        let timeout = timeout.unwrap_or(Duration::from_secs(1));
        tokio::select! {
            changed = self.status.changed() => {
                if let Some(status) = changed {
                    self.on_status(status);
                }
            }
            work = self.work.recv() => {
                if let Some(work) = work {
                    self.accept(work);
                }
            }
            _ = tokio::time::sleep(timeout) => {}
        }
    }

    fn on_status(&mut self, status: ChannelStatus) {
        let Some(opened) = &mut self.opened else { return };
        if let Some(code) = status.channel_status_code.as_deref() {
            if code.contains("NO_LONGER_EXISTS") || code.contains("INVALID") {
                warn!(component = self.settings.component, "channel {} reports {code}; reopening it", self.name);
                self.opened = None;
                return;
            }
        }
        let errors = status.rows_error_count.unwrap_or(0);
        if errors > opened.errors_seen {
            let new_errors = errors - opened.errors_seen;
            opened.errors_seen = errors;
            self.attribute_row_errors(new_errors, &status);
        }
        if let Some(token) = status.last_committed_offset_token.as_deref().and_then(OffsetToken::parse) {
            if self.committed.as_ref().is_none_or(|c| token > *c) {
                self.committed = Some(token);
            }
        }
        self.complete_committed();
    }

    /// Marks the FlowFiles whose rows Snowflake rejected: those of the append named by
    /// `last_error_offset_upper_bound`, or, when no append matches, every append not yet committed.
    fn attribute_row_errors(&mut self, new_errors: u64, status: &ChannelStatus) {
        let reason = status.last_error_message.clone().unwrap_or_else(|| "no message".into());
        let upper = status.last_error_offset_upper_bound.as_deref().and_then(OffsetToken::parse);
        let named: Vec<&Append> = self.appends.iter().filter(|a| upper.as_ref() == Some(&a.end)).collect();
        let suspects: Vec<i64> = if named.is_empty() {
            self.appends.iter().flat_map(|a| a.flow_files.iter().copied()).collect()
        } else {
            named.iter().flat_map(|a| a.flow_files.iter().copied()).collect()
        };
        let message = format!(
            "Snowflake rejected {new_errors} row(s) sent with this FlowFile's rows (offset token {}): {reason}; rejected rows are in the table's error table when ERROR_LOGGING is on, the others were loaded",
            upper.map(|u| u.to_string()).unwrap_or_else(|| "unknown".into())
        );
        warn!(component = self.settings.component, "channel {}: {message}", self.name);
        for p in self.pending.iter_mut().filter(|p| suspects.contains(&p.id)) {
            p.row_error = Some(message.clone());
        }
    }

    /// Sends the outcome of every FlowFile whose last row is committed.
    fn complete_committed(&mut self) {
        let Some(committed) = self.committed.clone() else { return };
        while let Some(front) = self.pending.front() {
            if *front.last_token() > committed {
                break;
            }
            let p = self.pending.pop_front().expect("front exists");
            let (route, message) = match p.row_error.clone() {
                Some(m) => (Route::Invalid, m),
                None => (Route::Success, String::new()),
            };
            let sent = p.rows.len() as u32 - p.skipped;
            self.finish(p.id, p.bytes, route, p.last_token().to_string(), message, sent, p.skipped);
        }
        self.appends.retain(|a| a.end > committed);
        self.status.set_awaiting(!self.appends.is_empty());
    }

    #[allow(clippy::too_many_arguments)]
    fn finish(&self, id: i64, bytes: u64, route: Route, token: String, message: String, rows_sent: u32, rows_skipped: u32) {
        self.in_flight_bytes.fetch_sub(bytes, Ordering::AcqRel);
        let _ = self.outcomes.send(Outcome {
            flow_file_id: id,
            route,
            channel: self.name.clone(),
            offset_token: token,
            message,
            rows_sent,
            rows_skipped,
        });
    }

    /// Rows appended long ago and still not committed: Snowflake lost or withholds them; reopen
    /// (which discards what it did not commit) and send them again.
    fn check_commit_timeout(&mut self) {
        if let Some(oldest) = self.appends.front() {
            if oldest.sent.elapsed() > self.settings.commit_timeout {
                warn!(
                    component = self.settings.component,
                    "channel {}: rows up to offset token {} not committed after {:?}; reopening the channel to send them again",
                    self.name,
                    oldest.end,
                    self.settings.commit_timeout
                );
                self.opened = None;
            }
        }
    }

    async fn on_error(&mut self, call: &str, e: ApiError) {
        match e {
            ApiError::StaleContinuation(_) | ApiError::ChannelGone(_) => {
                warn!(component = self.settings.component, "channel {}: {e}; reopening it and sending uncommitted rows again", self.name);
                self.opened = None;
            }
            ApiError::PipeFailover(_) => {
                warn!(component = self.settings.component, "channel {}: {e}; reconnecting and reopening", self.name);
                self.api.reset_session().await;
                self.opened = None;
            }
            ApiError::Transient(_) | ApiError::Protocol(_) => {
                let delay = self.backoff.next_delay();
                warn!(component = self.settings.component, "channel {}: {call} failed: {e}; trying again in {delay:?}", self.name);
                tokio::time::sleep(delay).await;
            }
            ApiError::Unauthorized(_) | ApiError::Rejected { .. } | ApiError::Auth(_) => {
                error!(component = self.settings.component, "channel {} on pipe {}: {call} failed: {e}", self.name, self.api.pipe());
                self.fail_unsent(&format!("{call} failed: {e}"));
                self.opened = None;
            }
        }
    }

    /// FlowFiles with rows not yet sent go to failure; rows already appended may still commit, and
    /// a later replay skips them by offset token.
    fn fail_unsent(&mut self, message: &str) {
        let mut kept = VecDeque::new();
        while let Some(p) = self.pending.pop_front() {
            if p.next_row < p.rows.len() || self.opened.is_none() {
                let token = p.last_token().to_string();
                self.finish(p.id, p.bytes, Route::Failure, token, message.to_owned(), 0, p.skipped);
            } else {
                kept.push_back(p);
            }
        }
        self.pending = kept;
    }
}

/// Moves past the rows at or below the committed token.
fn skip_committed(p: &mut Pending, committed: Option<&OffsetToken>) {
    let Some(committed) = committed else { return };
    let already = p.rows.iter().take_while(|r| r.token <= *committed).count();
    if already > p.next_row {
        p.skipped += (already - p.next_row) as u32;
        p.next_row = already;
    }
}
