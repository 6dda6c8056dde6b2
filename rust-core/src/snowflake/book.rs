//! The bookkeeping of one channel, apart from its I/O: the FlowFiles queued on it, which of their
//! rows are sent, skipped or committed, and which FlowFiles are done. The channel writer
//! (`channel`) makes the calls and tells the book what happened; the book decides, so a model test
//! can drive it with every order of events.
//!
//! The rules:
//! - Rows go out in queue order, and a row is sent only if its token is above every token
//!   committed, queued or sent on the channel before it. A re-delivery that arrives while the
//!   original still waits sends nothing and completes with it; tokens sent only grow, so an
//!   append's token (its highest row's) never goes below an earlier one's.
//! - A FlowFile is done once the committed token reaches its highest token: tokens sent only grow,
//!   so every row at or below a committed token went out in a committed append.
//! - Opening (and every reopen) forgets what was sent since the last open, because Snowflake
//!   discards what it did not commit, and lines the queue up again from the committed token, in
//!   the order of the FlowFiles' first tokens. A committed token lower than one already seen is a
//!   stale answer and changes nothing.
//! - This is exact as long as each FlowFile of a shard holds a contiguous run of the shard's
//!   records (what ConsumeKinesis writes, or a split of it), whatever their order of arrival while
//!   they wait. A FlowFile whose rows fall between two rows of another FlowFile (records of one
//!   shard partitioned or filtered into several FlowFiles) cannot be told from a replay once the
//!   higher row is queued or committed, and is skipped: keep such processors away from the
//!   exact tokens (see PutSnowflake's additionalDetails).
//! - On an at-least-once channel the book gives each row a fresh token above every token it knows
//!   of once the channel is open, so such rows are never skipped.
//! - A FlowFile without rows is done at once (`empty`): it has no token to wait for.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

use super::offset::OffsetToken;
use super::rows::{Delivery, Row};

/// Snowflake REST allows ten append requests a second per channel.
pub const MIN_APPEND_SPACING: Duration = Duration::from_millis(100);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Success = 0,
    Invalid = 1,
    Failure = 2,
    /// No rows in the content: nothing was sent.
    Empty = 3,
}

/// What happened to a FlowFile, for Java to route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub flow_file_id: i64,
    pub route: Route,
    pub channel: String,
    pub offset_token: String,
    pub message: String,
    /// Rows this run sent (rows already committed or queued before are not counted).
    pub rows_sent: u32,
    pub rows_skipped: u32,
}

/// A FlowFile's rows handed to a channel.
pub struct Work {
    pub flow_file_id: i64,
    pub rows: Vec<Row>,
    pub bytes: u64,
}

/// A FlowFile's outcome and the in-flight bytes it gives back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Done {
    pub outcome: Outcome,
    pub bytes: u64,
}

struct Pending {
    id: i64,
    rows: Vec<Row>,
    bytes: u64,
    /// Rows before this index were sent since the last open, or need not be sent.
    next_row: usize,
    /// Rows before `next_row` that need not be sent (committed, or queued by an earlier FlowFile).
    skipped: u32,
    received: Instant,
    row_error: Option<String>,
    /// False while an at-least-once FlowFile waits for the channel to give its rows tokens.
    tokens_assigned: bool,
}

impl Pending {
    /// Tokens grow within a FlowFile, so its last row's is its highest.
    fn highest(&self) -> &OffsetToken {
        &self.rows.last().expect("the book keeps only FlowFiles with rows").token
    }

    fn unsent(&self) -> &[Row] {
        if self.tokens_assigned {
            &self.rows[self.next_row..]
        } else {
            &[]
        }
    }
}

struct Append {
    end: OffsetToken,
    sent: Instant,
    flow_files: Vec<i64>,
}

/// One channel's state.
pub struct ChannelBook {
    name: String,
    delivery: Delivery,
    open: bool,
    /// The highest committed token Snowflake reported.
    committed: Option<OffsetToken>,
    /// The highest token committed, queued or sent since the last open.
    high: Option<OffsetToken>,
    /// The highest token this book assigned (at-least-once channels), over its whole life.
    assigned: Option<OffsetToken>,
    pending: VecDeque<Pending>,
    appends: VecDeque<Append>,
    last_append: Option<Instant>,
    errors_seen: u64,
}

impl ChannelBook {
    pub fn new(name: String, delivery: Delivery) -> Self {
        Self {
            name,
            delivery,
            open: false,
            committed: None,
            high: None,
            assigned: None,
            pending: VecDeque::new(),
            appends: VecDeque::new(),
            last_append: None,
            errors_seen: 0,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn is_open(&self) -> bool {
        self.open
    }

    /// Nothing queued: the channel's writer may retire.
    pub fn is_idle(&self) -> bool {
        self.pending.is_empty()
    }

    /// FlowFiles queued and without an outcome.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    pub fn committed(&self) -> Option<&OffsetToken> {
        self.committed.as_ref()
    }

    /// Whether appends wait for Snowflake to commit them (the status poller asks for this channel).
    pub fn awaiting_commit(&self) -> bool {
        !self.appends.is_empty()
    }

    /// Queues a FlowFile's rows; returns what is done already (an empty FlowFile, or rows that
    /// were all committed before).
    pub fn accept(&mut self, work: Work, now: Instant) -> Vec<Done> {
        if work.rows.is_empty() {
            return vec![self.done_without_rows(work)];
        }
        let mut p = Pending {
            id: work.flow_file_id,
            rows: work.rows,
            bytes: work.bytes,
            next_row: 0,
            skipped: 0,
            received: now,
            row_error: None,
            tokens_assigned: self.delivery == Delivery::ExactlyOnce,
        };
        if self.open {
            line_up(&mut p, &mut self.high, &mut self.assigned);
        }
        self.pending.push_back(p);
        if self.open {
            self.complete()
        } else {
            Vec::new()
        }
    }

    /// The channel was opened and Snowflake reported `reported` as its committed token.
    pub fn opened(&mut self, reported: Option<OffsetToken>, errors_seen: u64) -> Vec<Done> {
        if reported > self.committed {
            self.committed = reported;
        }
        self.open = true;
        self.errors_seen = errors_seen;
        self.appends.clear();
        self.high = self.committed.clone();
        if self.delivery == Delivery::ExactlyOnce {
            // Line up by first token: a re-delivery queued behind newer rows (its original failed
            // meanwhile) must send its rows, not find them covered by the newer ones.
            self.pending.make_contiguous().sort_by(|a, b| a.rows[0].token.cmp(&b.rows[0].token));
        }
        for p in &mut self.pending {
            p.next_row = 0;
            p.skipped = 0;
            line_up(p, &mut self.high, &mut self.assigned);
        }
        self.complete()
    }

    /// The channel must be opened again before anything more is sent (stale continuation token,
    /// channel gone, pipe failover, commit timeout).
    pub fn close(&mut self) {
        self.open = false;
        self.appends.clear();
    }

    /// How long until the next append is due; `None` when nothing waits to be sent.
    pub fn next_append_in(&self, now: Instant, max_latency: Duration, max_batch_bytes: usize) -> Option<Duration> {
        if !self.open {
            return None;
        }
        let first = self.pending.iter().find(|p| !p.unsent().is_empty())?;
        let waiting_bytes: usize =
            self.pending.iter().map(|p| p.unsent().iter().map(|r| r.json.len() + 1).sum::<usize>()).sum();
        let linger_until = if waiting_bytes >= max_batch_bytes { now } else { first.received + max_latency };
        let spacing_until = self.last_append.map_or(now, |t| t + MIN_APPEND_SPACING);
        Some(linger_until.max(spacing_until).saturating_duration_since(now))
    }

    /// How many unsent rows fit in `limit` bytes of NDJSON (at least one when any waits).
    pub fn rows_fitting(&self, limit: usize) -> usize {
        let mut bytes = 0;
        let mut n = 0;
        for row in self.pending.iter().flat_map(|p| p.unsent()) {
            if n > 0 && bytes + row.json.len() + 1 > limit {
                return n;
            }
            bytes += row.json.len() + 1;
            n += 1;
        }
        n
    }

    /// NDJSON of the next `take` unsent rows, and the highest of their tokens; `None` when no row waits.
    pub fn body(&self, take: usize) -> Option<(Vec<u8>, OffsetToken)> {
        let mut body = Vec::new();
        let mut end: Option<&OffsetToken> = None;
        for row in self.pending.iter().flat_map(|p| p.unsent()).take(take) {
            body.extend_from_slice(&row.json);
            body.push(b'\n');
            if end.is_none_or(|e| row.token > *e) {
                end = Some(&row.token);
            }
        }
        end.cloned().map(|end| (body, end))
    }

    /// An append is being tried now (successful or not, it counts against the rate limit).
    pub fn attempted(&mut self, now: Instant) {
        self.last_append = Some(now);
    }

    /// Snowflake took the next `take` unsent rows with offset token `end`.
    pub fn appended(&mut self, take: usize, end: OffsetToken, now: Instant) {
        let mut left = take;
        let mut flow_files = Vec::new();
        for p in &mut self.pending {
            if left == 0 {
                break;
            }
            let n = p.unsent().len().min(left);
            if n == 0 {
                continue;
            }
            p.next_row += n;
            left -= n;
            flow_files.push(p.id);
        }
        self.appends.push_back(Append { end, sent: now, flow_files });
    }

    /// Snowflake's channel status reported `token` committed; returns the FlowFiles now done.
    pub fn commit_reported(&mut self, token: Option<OffsetToken>) -> Vec<Done> {
        if !self.open {
            return Vec::new();
        }
        if token > self.committed {
            self.committed = token;
        }
        self.complete()
    }

    /// The channel's error count is `total`; new errors mark the FlowFiles of the append named by
    /// `upper` (or, when none matches, of every append not yet committed) for `invalid`. Returns
    /// the message, when there are new errors.
    pub fn row_errors(&mut self, total: u64, upper: Option<OffsetToken>, reason: &str) -> Option<String> {
        if !self.open || total <= self.errors_seen {
            return None;
        }
        let new_errors = total - self.errors_seen;
        self.errors_seen = total;
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
        for p in self.pending.iter_mut().filter(|p| suspects.contains(&p.id)) {
            p.row_error = Some(message.clone());
        }
        Some(message)
    }

    /// The token of the oldest append not committed within `timeout`, if any.
    pub fn commit_overdue(&self, now: Instant, timeout: Duration) -> Option<&OffsetToken> {
        self.appends.front().filter(|a| now.saturating_duration_since(a.sent) > timeout).map(|a| &a.end)
    }

    /// Snowflake refused the channel for good (4xx, credentials): FlowFiles with rows not yet sent
    /// (all of them, when the channel is not open) go to failure. Rows already appended may still
    /// commit, so fully sent FlowFiles stay; the channel must be reopened.
    pub fn fail_unsent(&mut self, message: &str) -> Vec<Done> {
        let open = self.open;
        let mut done = Vec::new();
        let mut kept = VecDeque::new();
        for p in self.pending.drain(..) {
            if !open || !p.tokens_assigned || p.next_row < p.rows.len() {
                let token = if p.tokens_assigned { p.highest().to_string() } else { String::new() };
                done.push(Done {
                    outcome: Outcome {
                        flow_file_id: p.id,
                        route: Route::Failure,
                        channel: self.name.clone(),
                        offset_token: token,
                        message: message.to_owned(),
                        rows_sent: 0,
                        rows_skipped: p.skipped,
                    },
                    bytes: p.bytes,
                });
            } else {
                kept.push_back(p);
            }
        }
        self.pending = kept;
        self.close();
        done
    }

    /// The outcome of every FlowFile whose highest token is committed.
    fn complete(&mut self) -> Vec<Done> {
        let Some(committed) = self.committed.clone() else { return Vec::new() };
        let mut done = Vec::new();
        let mut kept = VecDeque::with_capacity(self.pending.len());
        for p in self.pending.drain(..) {
            if p.tokens_assigned && *p.highest() <= committed {
                let (route, message) = match &p.row_error {
                    Some(m) => (Route::Invalid, m.clone()),
                    None => (Route::Success, String::new()),
                };
                // Rows never lined up (the channel committed past them meanwhile) count as skipped.
                let skipped = p.skipped + (p.rows.len() - p.next_row) as u32;
                done.push(Done {
                    outcome: Outcome {
                        flow_file_id: p.id,
                        route,
                        channel: self.name.clone(),
                        offset_token: p.highest().to_string(),
                        message,
                        rows_sent: p.rows.len() as u32 - skipped,
                        rows_skipped: skipped,
                    },
                    bytes: p.bytes,
                });
            } else {
                kept.push_back(p);
            }
        }
        self.pending = kept;
        self.appends.retain(|a| a.end > committed);
        done
    }

    fn done_without_rows(&self, work: Work) -> Done {
        Done {
            outcome: Outcome {
                flow_file_id: work.flow_file_id,
                route: Route::Empty,
                channel: self.name.clone(),
                offset_token: String::new(),
                message: "the FlowFile holds no rows; nothing was sent".into(),
                rows_sent: 0,
                rows_skipped: 0,
            },
            bytes: work.bytes,
        }
    }
}

/// Gives an at-least-once FlowFile its tokens, then moves past its rows at or below `high` (the
/// highest token committed, queued or sent before it) and raises `high` to its highest.
fn line_up(p: &mut Pending, high: &mut Option<OffsetToken>, assigned: &mut Option<OffsetToken>) {
    if !p.tokens_assigned {
        let mut last = (*high).clone().max(assigned.clone());
        for row in &mut p.rows {
            let next = last.as_ref().map_or_else(|| OffsetToken::from_counter(1), OffsetToken::successor);
            row.token = next.clone();
            last = Some(next);
        }
        *assigned = last;
        p.tokens_assigned = true;
    }
    let covered = p.rows.iter().take_while(|r| high.as_ref().is_some_and(|h| r.token <= *h)).count();
    if covered > p.next_row {
        p.skipped += (covered - p.next_row) as u32;
        p.next_row = covered;
    }
    if high.as_ref().is_none_or(|h| p.highest() > h) {
        *high = Some(p.highest().clone());
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod model;
