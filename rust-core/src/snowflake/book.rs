//! The bookkeeping of one channel, apart from its I/O: the FlowFiles queued on it, which of their
//! rows are sent, skipped or committed, and which FlowFiles are done. The channel writer
//! (`channel`) makes the calls and tells the book what happened; the book decides, so a model test
//! (`model`) can drive it with every order of events.
//!
//! The rules:
//! - **Order is restored, not assumed.** NiFi hands FlowFiles over in any order (no prioritizer,
//!   several ConsumeKinesis tasks, rollbacks, penalties, `failure` sent back). A FlowFile with exact
//!   tokens names the shard's record read just before its first row ([`Follows`]); it *waits*
//!   until the line reaches that record (every token up to it is committed, queued or sent since
//!   the last open), and is then *lined up*: rows at or below the line's end are records the line
//!   holds already and are not sent again, the rest go out after it. So rows go out in shard order
//!   and the committed token never passes a record that has not arrived. A FlowFile that names no
//!   record before it (`Follows::Nothing`, `Follows::Unknown`) is lined up as it comes.
//! - **A gap nobody fills.** When FlowFiles have waited [`ORDER_WAIT`] with nothing lined up (the
//!   records before them went elsewhere: another node, a FlowFile the user dropped), the lowest
//!   one is lined up anyway and the gap is remembered; a FlowFile that brings records of a
//!   remembered gap later goes back to NiFi for the at-least-once channels ([`Route::Reload`]): its
//!   rows cannot go below the channel's token, and are never skipped either.
//! - Tokens sent only grow, so an append's token (its highest row's) never goes below an earlier one's.
//! - A FlowFile is done once the committed token reaches its highest token: tokens sent only grow,
//!   so every row at or below a committed token went out in a committed append.
//! - Opening (and every reopen) forgets what was sent since the last open, because Snowflake
//!   discards what it did not commit, and lines every FlowFile up again from the committed token.
//!   A committed token lower than one already seen is a stale answer and changes nothing; one above
//!   the line's end was committed by another writer (another node, on a shard's shared channel): the
//!   line's end rises to it and the FlowFiles waiting for records up to it line up.
//! - The committed token found at the first open is taken as it is: rows at or below it are skipped
//!   (a replay of what this channel committed before a restart).
//! - On an at-least-once channel the book gives each row a fresh token above every token it knows
//!   of once the channel is open, so such rows are never skipped.
//! - A FlowFile without rows is done at once (`empty`): it has no token to wait for.
//! - **Rows are held while they are being appended, not while Snowflake commits them.** Once every
//!   row of a FlowFile is in an append Snowflake accepted, the book drops the rows and keeps what it
//!   decides by (the FlowFile's lowest and highest token and its row count); their bytes go back to
//!   the in-flight budget ([`ChannelBook::appended`]). Snowflake takes 5-10 s to commit, so holding
//!   rows until then would bound PutSnowflake's rate by Max In-Flight Size ÷ commit time. When the
//!   channel reopens before such a FlowFile's rows are committed (Snowflake discarded them), the
//!   FlowFile is lined up again without its rows, *awaiting* them: the line sends nothing past it
//!   until its rows come back. The writer asks Java for them ([`ChannelBook::resends_due`], the
//!   FlowFile is still held in its NiFi session, its content in the content repository) as the
//!   budget allows, at least one FlowFile of the channel at a time; Java reads the content again and
//!   the same rows come back ([`ChannelBook::refill`]), with the same tokens.
//! - Waiting FlowFiles count against PutSnowflake's in-flight budget. Java takes each shard's
//!   earliest queued records first (`take_order`), so what waits is mostly what the queue did not
//!   hold yet; when the budget is full, the writer gives waiting FlowFiles back to NiFi's queue,
//!   penalized ([`Route::Retry`]), so the FlowFile they wait for can come in.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use tokio::time::Instant;

use super::offset::OffsetToken;
use super::rows::{Delivery, Row};
use crate::contract::wire;

/// Snowflake REST allows ten append requests a second per channel ("Request rate: 10 requests per
/// second", <https://docs.snowflake.com/en/user-guide/snowpipe-streaming/snowpipe-streaming-high-performance-limitations>).
pub const APPENDS_PER_SECOND: usize = 10;
/// Appends of a channel start at least this far apart...
pub const MIN_APPEND_SPACING: Duration = Duration::from_millis(100);
/// ...and at least this long after the answer to the append [`APPENDS_PER_SECOND`] before: Snowflake
/// counts a request somewhere between its start and its answer, so no second of its clock holds more
/// than ten, however long each took to upload (with appends started exactly 100 ms apart, a slower
/// upload of the first of eleven could put all eleven in one second).
pub const APPEND_WINDOW: Duration = Duration::from_secs(1);
/// Snowflake's throughput of one channel: "Named Channel throughput: 20 MB/s (uncompressed)", an
/// enforced default that Snowflake Support can raise (same page). The NDJSON bytes of the appends
/// answered within [`APPEND_WINDOW`] before an append starts, and its own, stay within this: as with
/// the request rate, Snowflake may count an append anywhere from its start to its answer.
pub const CHANNEL_BYTES_PER_SECOND: usize = 20_000_000;

/// How long FlowFiles wait for the records before them with nothing lined up, before the line
/// passes over the gap: PutSnowflake's Order Wait, by default.
pub use crate::config::put_snowflake::DEFAULT_ORDER_WAIT as ORDER_WAIT;

/// Gaps a channel remembers (the oldest is forgotten first; a FlowFile of a forgotten gap would
/// be skipped, see PutSnowflake's additionalDetails).
pub const MAX_GAPS: usize = 256;

/// A writer that passed over a gap stays (and remembers it) at least this long after.
pub const GAP_MEMORY: Duration = Duration::from_secs(3600);

/// Where a FlowFile goes; its code crosses JNI (`contract::wire`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Route {
    Success = wire::ROUTE_SUCCESS,
    Invalid = wire::ROUTE_INVALID,
    Failure = wire::ROUTE_FAILURE,
    /// No rows in the content: nothing was sent.
    Empty = wire::ROUTE_EMPTY,
    /// Back to the queue, marked for the at-least-once channels: its records fall in a gap the
    /// channel passed over, below its token.
    Reload = wire::ROUTE_RELOAD,
    /// Back to the queue, penalized: it waited for an earlier FlowFile while the in-flight budget
    /// was full.
    Retry = wire::ROUTE_RETRY,
    /// Not an outcome: the channel reopened before the FlowFile's rows, dropped once appended,
    /// were committed; Java keeps it held and hands its content over again.
    Resend = wire::ROUTE_RESEND,
}

/// The shard's record read just before a FlowFile's first row, as its offset token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Follows {
    /// Not said (not ConsumeKinesis' FlowFile): lined up as it comes.
    Unknown,
    /// No record before it in its lease (read from the shard's start, or the first read from
    /// LATEST or a timestamp): lined up as it comes.
    Nothing,
    After(OffsetToken),
}

impl Follows {
    /// The waiting list's order: what must be lined up before the FlowFile may follow.
    fn key(&self) -> Option<OffsetToken> {
        match self {
            Follows::After(token) => Some(token.clone()),
            Follows::Unknown | Follows::Nothing => None,
        }
    }
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
    /// What the rows hold in memory, counted against Max In-Flight Size until the FlowFile's outcome
    /// (`rows::held_bytes`): the book keeps a FlowFile's rows together and drops them with it.
    pub bytes: u64,
    pub follows: Follows,
    /// The channel is a shard's shared channel: a gap before this FlowFile is never passed over
    /// (another node may load those records, and passing them would skip them there); when it has
    /// waited too long, it goes back for the at-least-once channels instead.
    pub shared: bool,
    /// The rows of a FlowFile the channel asked back ([`Route::Resend`]), not a new FlowFile.
    pub resent: bool,
    /// The record the FlowFile names as read just before its first row, when `follows` is an
    /// earlier one because the records between never load (`feedback::parse_failures`): lining it up
    /// passes over them, and the channel remembers them as a gap, so a record among them that comes
    /// after all (repaired downstream) is loaded at least once, never skipped.
    pub passes: Option<OffsetToken>,
}

/// The id of a [`Work::pass`]: no FlowFile's (NiFi's ids are never negative).
pub const PASS_ID: i64 = i64::MIN;

impl Work {
    /// Not a FlowFile: the records after `follows` up to `upto` never load (PutSnowflake sent their
    /// FlowFile to `invalid`, `empty` or `failure`). FlowFiles of the channel already waiting for
    /// `upto` follow `follows` instead ([`ChannelBook::accept`]).
    pub fn pass(follows: Follows, upto: OffsetToken) -> Self {
        Self {
            flow_file_id: PASS_ID,
            rows: Vec::new(),
            bytes: 0,
            follows,
            shared: false,
            resent: false,
            passes: Some(upto),
        }
    }

    pub fn is_pass(&self) -> bool {
        self.flow_file_id == PASS_ID
    }
}

/// A FlowFile's outcome and the in-flight bytes it gives back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Done {
    pub outcome: Outcome,
    pub bytes: u64,
}

struct Pending {
    id: i64,
    /// Never reused in the book's life: a body prepared ahead names its rows by it ([`Span`]).
    serial: u64,
    /// Empty once dropped (every row appended, see the module comment); `row_count` and `ends` stay.
    rows: Vec<Row>,
    row_count: usize,
    /// The lowest and highest token, kept when the rows are dropped.
    ends: Option<(OffsetToken, OffsetToken)>,
    /// What the rows hold now, counted against the in-flight budget.
    bytes: u64,
    /// What the rows held when the FlowFile came: what a resend reserves of the budget.
    taken_bytes: u64,
    /// Budget reserved for the rows asked back and not yet come.
    reserved: u64,
    /// Lined up without its rows (dropped, then the channel reopened): the line waits for them.
    awaiting: Option<Awaiting>,
    follows: Follows,
    /// See [`Work::passes`]; taken when the FlowFile is first lined up.
    passes: Option<OffsetToken>,
    shared: bool,
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
    fn new(work: Work, delivery: Delivery, now: Instant, serial: u64) -> Self {
        Self {
            id: work.flow_file_id,
            serial,
            row_count: work.rows.len(),
            rows: work.rows,
            ends: None,
            bytes: work.bytes,
            taken_bytes: work.bytes,
            reserved: 0,
            awaiting: None,
            follows: work.follows,
            passes: work.passes,
            shared: work.shared,
            next_row: 0,
            skipped: 0,
            received: now,
            row_error: None,
            tokens_assigned: delivery == Delivery::ExactlyOnce,
        }
    }

    /// Tokens grow within a FlowFile, so its last row's is its highest.
    fn highest(&self) -> &OffsetToken {
        match (&self.ends, self.rows.last()) {
            (Some((_, high)), _) => high,
            (None, Some(row)) => &row.token,
            (None, None) => unreachable!("the book keeps only FlowFiles with rows"),
        }
    }

    fn lowest(&self) -> &OffsetToken {
        match (&self.ends, self.rows.first()) {
            (Some((low, _)), _) => low,
            (None, Some(row)) => &row.token,
            (None, None) => unreachable!("the book keeps only FlowFiles with rows"),
        }
    }

    fn unsent(&self) -> &[Row] {
        if self.tokens_assigned && self.awaiting.is_none() && !self.dropped() {
            &self.rows[self.next_row..]
        } else {
            &[]
        }
    }

    /// The channel opened again: nothing of it is sent, and what covered its rows no longer does.
    fn reopened(&mut self) {
        self.next_row = 0;
        self.skipped = 0;
        if let Some(awaiting) = &mut self.awaiting {
            awaiting.covered_below = None;
        }
    }

    /// Its rows were dropped (every one appended) and have not come back.
    fn dropped(&self) -> bool {
        self.rows.is_empty()
    }

    /// Every row is in an append Snowflake accepted: the rows are dropped; returns the bytes they held.
    fn drop_rows(&mut self) -> u64 {
        if self.dropped() || self.awaiting.is_some() || !self.tokens_assigned || self.next_row < self.row_count {
            return 0;
        }
        self.ends = Some((self.lowest().clone(), self.highest().clone()));
        self.rows = Vec::new();
        std::mem::take(&mut self.bytes)
    }

    /// Its rows, read again: the same number, with the same tokens (an at-least-once FlowFile's
    /// are given again from its lowest, consecutively, as the channel gave them first); rows at or
    /// below the line's end when it was lined up again are not sent.
    fn take_rows_back(&mut self, work: Work, delivery: Delivery) -> Result<(), String> {
        let (low, high) = self.ends.clone().expect("dropped rows keep their ends");
        let mut rows = work.rows;
        if delivery == Delivery::AtLeastOnce {
            let mut next = low.clone();
            for row in &mut rows {
                row.token = next.clone();
                next = next.successor();
            }
        }
        let same = rows.len() == self.row_count
            && rows.first().is_some_and(|r| r.token == low)
            && rows.last().is_some_and(|r| r.token == high);
        if !same {
            return Err(format!(
                "read again after its channel reopened, its content gave {} row(s) (offset tokens {} to {}) where it gave \
                 {} (offset tokens {low} to {high}); nothing more of it was sent",
                rows.len(),
                rows.first().map(|r| r.token.to_string()).unwrap_or_default(),
                rows.last().map(|r| r.token.to_string()).unwrap_or_default(),
                self.row_count
            ));
        }
        self.rows = rows;
        self.ends = None;
        self.bytes = work.bytes;
        if let Some(awaiting) = self.awaiting.take() {
            let covered =
                self.rows.iter().take_while(|r| awaiting.covered_below.as_ref().is_some_and(|h| r.token <= *h)).count();
            if covered > self.next_row {
                self.skipped += (covered - self.next_row) as u32;
                self.next_row = covered;
            }
        }
        Ok(())
    }

    /// What the FlowFile holds of the budget: its rows and what is reserved for them.
    fn budget(&self) -> u64 {
        self.bytes + self.reserved
    }
}

/// A FlowFile lined up without its rows.
#[derive(Debug, Clone)]
struct Awaiting {
    /// The line's end when it was lined up: its rows at or below are not sent again.
    covered_below: Option<OffsetToken>,
    /// Java was asked for the rows.
    requested: bool,
}

/// What a resent FlowFile's rows did.
#[derive(Debug, PartialEq, Eq)]
pub enum Refilled {
    /// Back in the line; the reservation made when they were asked for is given back.
    Taken { reserved: u64, done: Vec<Done> },
    /// The FlowFile is no longer here (it has its outcome): its bytes go back, with no outcome.
    Unknown { bytes: u64 },
}

struct Append {
    end: OffsetToken,
    sent: Instant,
    flow_files: Vec<i64>,
}

/// A gap a channel passed over, as it is kept across restarts (`gap_memory`): every token above
/// `after` (`None`: from the start) and below `before`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PassedGap {
    pub after: Option<OffsetToken>,
    pub before: OffsetToken,
    /// How long ago it was passed.
    pub age: Duration,
}

/// Records the line passed over: every token above `after` (`None`: from the start) and below
/// `before`.
struct Gap {
    after: Option<OffsetToken>,
    before: OffsetToken,
    at: Instant,
}

impl Gap {
    fn holds(&self, token: &OffsetToken) -> bool {
        *token < self.before && self.after.as_ref().is_none_or(|a| token > a)
    }

    /// Whether `p` brings a record of the gap: one of its rows' tokens is in it (a FlowFile may
    /// span a gap without a row in it: LINE_DELIMITED leaves out a record routed to `parse.failure`);
    /// by its ends, when its rows are dropped.
    fn holds_any_of(&self, p: &Pending) -> bool {
        if p.dropped() {
            return *p.lowest() < self.before && self.after.as_ref().is_none_or(|a| p.highest() > a);
        }
        p.rows.iter().any(|r| self.holds(&r.token))
    }
}

/// One channel's state.
pub struct ChannelBook {
    name: String,
    delivery: Delivery,
    open: bool,
    /// The highest committed token Snowflake reported.
    committed: Option<OffsetToken>,
    /// The line's end: the highest token committed, queued or sent since the last open.
    high: Option<OffsetToken>,
    /// The highest token this book assigned (at-least-once channels), over its whole life.
    assigned: Option<OffsetToken>,
    /// FlowFiles lined up, in line order (at-least-once ones also while they wait for tokens).
    line: VecDeque<Pending>,
    /// Every FlowFile in the line has its tokens and their highest tokens never fall along the
    /// line, so the finished ones are its front (false: not known).
    line_in_order: bool,
    /// Exactly-once FlowFiles waiting for the line to reach the record before them, by that record
    /// (none first), then by first token (a re-delivery whose original failed must line up before
    /// newer rows, not find its rows covered by them), then by arrival.
    waiting: BTreeMap<(Option<OffsetToken>, OffsetToken, u64), Pending>,
    arrivals: u64,
    /// Since when FlowFiles wait with nothing lined up (`None`: nothing waits, or the line just moved).
    stuck_since: Option<Instant>,
    /// A shared channel's line end when its waiting FlowFiles were sent back (see
    /// [`ChannelBook::send_back_stuck`]), and the Order Wait they waited.
    stuck_at: Option<Option<OffsetToken>>,
    stuck_wait: Duration,
    gaps: VecDeque<Gap>,
    /// Gaps passed over (or restored) in the book's life: tells a new one from none.
    gaps_passed: u64,
    appends: VecDeque<Append>,
    last_append: Option<Instant>,
    /// When the last [`APPENDS_PER_SECOND`] appends were answered, oldest first.
    answers: VecDeque<Instant>,
    /// The appends answered within the last [`APPEND_WINDOW`] and their NDJSON bytes, oldest first.
    answered_bytes: VecDeque<(Instant, usize)>,
    errors_seen: u64,
    /// A FlowFile may be lined up without its rows and not yet asked for: [`ChannelBook::resends_due`]
    /// walks the line only then (it runs on every turn of the writer's loop).
    unasked: bool,
    /// FlowFiles accepted so far: the next one's serial.
    accepted: u64,
}

/// Which unsent rows a body holds, in line order: for each FlowFile (by its serial, never reused in
/// the book's life), the index of its first row in the body and how many. Rows never change once
/// lined up, so two bodies of the same span are the same bytes with the same offset token.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Span(Vec<(u64, usize, usize)>);

impl Span {
    /// Rows in the body.
    pub fn rows(&self) -> usize {
        self.0.iter().map(|&(_, _, n)| n).sum()
    }
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
            line: VecDeque::new(),
            line_in_order: true,
            waiting: BTreeMap::new(),
            arrivals: 0,
            stuck_since: None,
            stuck_at: None,
            stuck_wait: ORDER_WAIT,
            gaps: VecDeque::new(),
            gaps_passed: 0,
            appends: VecDeque::new(),
            last_append: None,
            answers: VecDeque::with_capacity(APPENDS_PER_SECOND),
            answered_bytes: VecDeque::with_capacity(APPENDS_PER_SECOND),
            errors_seen: 0,
            accepted: 0,
            unasked: false,
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
        self.line.is_empty() && self.waiting.is_empty()
    }

    /// The book remembers a gap it passed over recently: its writer should not retire yet.
    pub fn remembers_gaps(&self, now: Instant) -> bool {
        self.gaps.back().is_some_and(|g| now.saturating_duration_since(g.at) < GAP_MEMORY)
    }

    /// FlowFiles queued and without an outcome.
    pub fn pending(&self) -> usize {
        self.line.len() + self.waiting.len()
    }

    /// FlowFiles waiting for an earlier one, and their bytes.
    pub fn waiting(&self) -> (usize, u64) {
        (self.waiting.len(), self.waiting.values().map(|p| p.bytes).sum())
    }

    pub fn committed(&self) -> Option<&OffsetToken> {
        self.committed.as_ref()
    }

    /// Whether the status poller should ask Snowflake for this channel: appends wait for their
    /// commit, or a shard's shared channel has FlowFiles waiting for records before them, which
    /// another node's writer may have committed into it (only Snowflake's committed token says so,
    /// and it lines them up or skips them as replays; without it they would wait Order Wait and go
    /// to the at-least-once channels, loading those records twice).
    pub fn awaiting_commit(&self) -> bool {
        !self.appends.is_empty() || self.waiting.values().any(|p| p.shared)
    }

    /// Queues a FlowFile's rows; returns what is done already (an empty FlowFile, rows that were
    /// all committed before, or a FlowFile of a gap passed over).
    pub fn accept(&mut self, work: Work, now: Instant) -> Vec<Done> {
        if work.is_pass() {
            return self.pass(work);
        }
        if work.rows.is_empty() {
            return vec![self.done_without_rows(work)];
        }
        self.accepted += 1;
        let mut p = Pending::new(work, self.delivery, now, self.accepted);
        let mut done = Vec::new();
        match self.delivery {
            Delivery::ExactlyOnce if self.open && self.behind_stuck_line(&p) => {
                let message = self.stuck_message(&p, self.stuck_wait);
                done.push(self.outcome(p, Route::Reload, message));
            }
            Delivery::ExactlyOnce => {
                self.wait(p);
                if self.open {
                    done = self.line_up_waiting();
                }
            }
            Delivery::AtLeastOnce => {
                if self.open {
                    line_up(&mut p, &mut self.high, &mut self.assigned);
                }
                self.push_line(p);
            }
        }
        if self.open {
            done.extend(self.complete());
        }
        done
    }

    /// A [`Work::pass`]: FlowFiles waiting for its last record follow the record before it, and pass
    /// over it when they are lined up.
    fn pass(&mut self, work: Work) -> Vec<Done> {
        let Some(upto) = work.passes else { return Vec::new() };
        if self.delivery != Delivery::ExactlyOnce {
            return Vec::new();
        }
        let keys: Vec<_> = self.waiting.keys().filter(|(key, _, _)| key.as_ref() == Some(&upto)).cloned().collect();
        for key in keys {
            if let Some(mut p) = self.waiting.remove(&key) {
                p.follows = work.follows.clone();
                p.passes.get_or_insert_with(|| upto.clone());
                self.wait(p);
            }
        }
        if !self.open {
            return Vec::new();
        }
        let mut done = self.line_up_waiting();
        done.extend(self.complete());
        done
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
        let mut done = Vec::new();
        match self.delivery {
            Delivery::ExactlyOnce => {
                // Everything lines up again from the committed token: a FlowFile whose rows were
                // queued but not committed may follow one that went to failure meanwhile.
                self.line_in_order = true;
                for mut p in std::mem::take(&mut self.line) {
                    p.reopened();
                    self.wait(p);
                }
                done = self.line_up_waiting();
            }
            Delivery::AtLeastOnce => {
                for p in &mut self.line {
                    p.reopened();
                    self.unasked |= p.dropped();
                    line_up(p, &mut self.high, &mut self.assigned);
                }
                self.line_in_order = false;
            }
        }
        done.extend(self.complete());
        done
    }

    /// The channel must be opened again before anything more is sent (stale continuation token,
    /// channel gone, pipe failover, commit timeout).
    pub fn close(&mut self) {
        self.open = false;
        self.appends.clear();
    }

    /// FlowFiles have waited [`ORDER_WAIT`] (`order_wait`) with nothing lined up: the line passes
    /// over the gap before the lowest of them, and remembers it. Returns what is done by that, and
    /// the gap passed over, described.
    pub fn pass_stuck(&mut self, now: Instant, order_wait: Duration) -> (Vec<Done>, Option<String>) {
        if !self.open || self.waiting.is_empty() {
            self.stuck_since = None;
            return (Vec::new(), None);
        }
        let since = *self.stuck_since.get_or_insert(now);
        if now.saturating_duration_since(since) < order_wait {
            return (Vec::new(), None);
        }
        let Some((_, p)) = self.waiting.pop_first() else { return (Vec::new(), None) };
        if p.shared {
            return (self.send_back_stuck(p, order_wait), None);
        }
        let mut passed = None;
        if self.high.as_ref().is_none_or(|h| p.lowest() > h) {
            let after = self.high.as_ref().map(|t| t.to_string()).unwrap_or_else(|| "none".into());
            passed = Some(format!(
                "no FlowFile brought the records after offset token {after} and before {} within {} s; the channel goes \
                 on without them",
                p.lowest(),
                order_wait.as_secs()
            ));
            self.push_gap(Gap { after: self.high.clone(), before: p.lowest().clone(), at: now });
        }
        let mut done: Vec<Done> = self.line_up_one(p).into_iter().collect();
        done.extend(self.line_up_waiting());
        done.extend(self.complete());
        self.stuck_since = None;
        (done, passed)
    }

    /// A shard's shared channel waited Order Wait for records that never came: it never goes on
    /// without them (another node may load them), so `first` and every FlowFile waiting behind the
    /// gap go back to the queue for the at-least-once channels, and so does each shared FlowFile
    /// that comes while the line stays stuck there (the rest of a lease's tail), without waiting
    /// an Order Wait of its own.
    fn send_back_stuck(&mut self, first: Pending, order_wait: Duration) -> Vec<Done> {
        self.stuck_since = None;
        self.stuck_at = Some(self.high.clone());
        self.stuck_wait = order_wait;
        // Only the shared channel's FlowFiles go back; any other stays waiting where it was.
        let (shared, kept): (BTreeMap<_, _>, BTreeMap<_, _>) =
            std::mem::take(&mut self.waiting).into_iter().partition(|(_, p)| p.shared);
        self.waiting = kept;
        let all: Vec<Pending> = std::iter::once(first).chain(shared.into_values()).collect();
        let mut done = Vec::with_capacity(all.len());
        for p in all {
            let message = self.stuck_message(&p, order_wait);
            done.push(self.outcome(p, Route::Reload, message));
        }
        done
    }

    fn stuck_message(&self, p: &Pending, order_wait: Duration) -> String {
        format!(
            "the records before it (up to offset token {}) did not come to channel {} within {} s; a shard's shared \
             channel never goes on without records another node may load, so it goes back to the queue to be loaded \
             at least once through the at-least-once channels",
            p.follows.key().map(|t| t.to_string()).unwrap_or_default(),
            self.name,
            order_wait.as_secs()
        )
    }

    /// Whether the shared channel's line still stands where it was found stuck (see
    /// [`Self::send_back_stuck`]) and `p` waits for records beyond it.
    fn behind_stuck_line(&self, p: &Pending) -> bool {
        p.shared
            && self.stuck_at.as_ref() == Some(&self.high)
            && p.follows.key().is_some_and(|before| self.high.as_ref().is_none_or(|h| before > *h))
    }

    /// The FlowFiles waiting for an earlier one that have waited at least `min_wait`, given back
    /// to NiFi's queue (the in-flight budget is full: the one they wait for may not get in).
    pub fn give_back_waiting(&mut self, now: Instant, min_wait: Duration) -> Vec<Done> {
        let keys: Vec<_> = self
            .waiting
            .iter()
            .filter(|(_, p)| now.saturating_duration_since(p.received) >= min_wait)
            .map(|(k, _)| k.clone())
            .collect();
        let given: Vec<Pending> = keys.into_iter().filter_map(|k| self.waiting.remove(&k)).collect();
        given
            .into_iter()
            .map(|p| {
                let message = format!(
                    "given back to the queue: it waits for the records before offset token {} of channel {}, and \
                     PutSnowflake's in-flight budget is full",
                    p.follows.key().map(|t| t.to_string()).unwrap_or_default(),
                    self.name
                );
                self.outcome(p, Route::Retry, message)
            })
            .collect()
    }

    /// How long until the next append is due; `None` when nothing waits to be sent.
    pub fn next_append_in(&self, now: Instant, max_latency: Duration, max_batch_bytes: usize) -> Option<Duration> {
        if !self.open {
            return None;
        }
        let first = self.sendable().find(|p| !p.unsent().is_empty())?;
        // Counted up to a full request only: this runs on every turn of the writer's loop.
        let mut waiting_bytes = 0;
        let full = self.unsent_rows().any(|r| {
            waiting_bytes += r.json.len() + 1;
            waiting_bytes >= max_batch_bytes
        });
        let linger_until = if full { now } else { first.received + max_latency };
        let mut spacing_until = self.last_append.map_or(now, |t| t + MIN_APPEND_SPACING);
        if self.answers.len() == APPENDS_PER_SECOND {
            spacing_until = spacing_until.max(self.answers[0] + APPEND_WINDOW);
        }
        // The rows counted (up to the first that makes a full request) are at least what the next append takes.
        let throughput_until = self.throughput_allows(waiting_bytes, now);
        Some(linger_until.max(spacing_until).max(throughput_until).saturating_duration_since(now))
    }

    /// The earliest time from `now` at which an append of `bytes` keeps the channel within
    /// [`CHANNEL_BYTES_PER_SECOND`] (an append larger than that alone waits for an empty window).
    fn throughput_allows(&self, bytes: usize, now: Instant) -> Instant {
        let mut counted: usize = self.answered_bytes.iter().map(|&(_, b)| b).sum();
        let mut until = now;
        for &(at, b) in &self.answered_bytes {
            if counted + bytes <= CHANNEL_BYTES_PER_SECOND {
                break;
            }
            until = until.max(at + APPEND_WINDOW);
            counted -= b;
        }
        until
    }

    /// How many unsent rows fit in `limit` bytes of NDJSON (at least one when any waits).
    pub fn rows_fitting(&self, limit: usize) -> usize {
        self.rows_fitting_after(0, limit)
    }

    /// How many unsent rows after the first `skip` fit in `limit` bytes of NDJSON (at least one
    /// when any waits): what the append after one of `skip` rows takes.
    pub fn rows_fitting_after(&self, skip: usize, limit: usize) -> usize {
        let mut bytes = 0;
        let mut n = 0;
        for row in self.unsent_rows().skip(skip) {
            if n > 0 && bytes + row.json.len() + 1 > limit {
                return n;
            }
            bytes += row.json.len() + 1;
            n += 1;
        }
        n
    }

    /// Unsent rows beyond the first `rows`.
    pub fn unsent_beyond(&self, rows: usize) -> bool {
        self.unsent_rows().nth(rows).is_some()
    }

    /// NDJSON of the next `take` unsent rows, and the highest of their tokens; `None` when no row waits.
    pub fn body(&self, take: usize) -> Option<(Vec<u8>, OffsetToken)> {
        self.body_after(0, take).map(|(body, end, _)| (body, end))
    }

    /// NDJSON of the `take` unsent rows after the first `skip`, the highest of their tokens, and
    /// which rows they are; `None` when no row waits there.
    pub fn body_after(&self, skip: usize, take: usize) -> Option<(Vec<u8>, OffsetToken, Span)> {
        let rows = || self.unsent_rows().skip(skip).take(take);
        let mut body = Vec::with_capacity(rows().map(|r| r.json.len() + 1).sum());
        let mut end: Option<&OffsetToken> = None;
        for row in rows() {
            body.extend_from_slice(&row.json);
            body.push(b'\n');
            if end.is_none_or(|e| row.token > *e) {
                end = Some(&row.token);
            }
        }
        let end = end.cloned()?;
        Some((body, end, self.span_after(skip, take)))
    }

    /// Which rows the next `take` unsent rows are: the span of `body(take)`.
    pub fn span(&self, take: usize) -> Span {
        self.span_after(0, take)
    }

    fn span_after(&self, mut skip: usize, mut take: usize) -> Span {
        let mut span = Vec::new();
        for p in self.sendable() {
            if take == 0 {
                break;
            }
            let unsent = p.unsent().len();
            if skip >= unsent {
                skip -= unsent;
                continue;
            }
            let n = (unsent - skip).min(take);
            span.push((p.serial, p.next_row + skip, n));
            take -= n;
            skip = 0;
        }
        Span(span)
    }

    /// The line's unsent rows, in order.
    fn unsent_rows(&self) -> impl Iterator<Item = &Row> {
        self.sendable().flat_map(|p| p.unsent())
    }

    /// The line up to the first FlowFile awaiting its rows: nothing past it is sent before them.
    fn sendable(&self) -> impl Iterator<Item = &Pending> {
        self.line.iter().take_while(|p| p.awaiting.is_none())
    }

    /// An append is being tried now (successful or not, it counts against the rate limit).
    pub fn attempted(&mut self, now: Instant) {
        self.last_append = Some(now);
    }

    /// The append tried last, of `bytes` of NDJSON, was answered now (whatever the answer).
    pub fn answered(&mut self, now: Instant, bytes: usize) {
        if self.answers.len() == APPENDS_PER_SECOND {
            self.answers.pop_front();
        }
        self.answers.push_back(now);
        while self.answered_bytes.front().is_some_and(|&(at, _)| at + APPEND_WINDOW <= now) {
            self.answered_bytes.pop_front();
        }
        self.answered_bytes.push_back((now, bytes));
    }

    /// Snowflake took the next `take` unsent rows with offset token `end`. Returns the FlowFiles
    /// whose rows are now all appended, and the bytes their rows held (dropped now; see the module
    /// comment).
    pub fn appended(&mut self, take: usize, end: OffsetToken, now: Instant) -> Vec<(i64, u64)> {
        let mut left = take;
        let mut flow_files = Vec::new();
        let mut dropped = Vec::new();
        for p in self.line.iter_mut().take_while(|p| p.awaiting.is_none()) {
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
            let bytes = p.drop_rows();
            if p.dropped() {
                dropped.push((p.id, bytes));
            }
        }
        self.appends.push_back(Append { end, sent: now, flow_files });
        dropped
    }

    /// FlowFiles awaiting their rows to ask Java for now, in line order, with the budget each
    /// reserves: while `may_reserve` allows it, and at least one of the channel's at a time (so the
    /// line moves even when the budget is full of FlowFiles behind it).
    pub fn resends_due(&mut self, mut may_reserve: impl FnMut(u64) -> bool) -> Vec<(i64, u64)> {
        let mut due = Vec::new();
        if !self.unasked {
            return due;
        }
        let mut outstanding = self.line.iter().any(|p| p.awaiting.as_ref().is_some_and(|a| a.requested));
        for p in &mut self.line {
            let Some(awaiting) = p.awaiting.as_mut() else { continue };
            if awaiting.requested {
                continue;
            }
            if outstanding && !may_reserve(p.taken_bytes) {
                return due; // the rest when the budget has room
            }
            awaiting.requested = true;
            outstanding = true;
            p.reserved = p.taken_bytes;
            due.push((p.id, p.taken_bytes));
        }
        self.unasked = false;
        due
    }

    /// FlowFiles lined up without their rows.
    pub fn awaiting_rows(&self) -> usize {
        self.line.iter().filter(|p| p.awaiting.is_some()).count()
    }

    /// A FlowFile's rows, asked back and read again by Java (`work.resent`).
    pub fn refill(&mut self, work: Work) -> Refilled {
        let id = work.flow_file_id;
        let delivery = self.delivery;
        let in_line = self.line.iter().position(|p| p.id == id && p.dropped());
        let in_waiting = self.waiting.iter().find(|(_, p)| p.id == id && p.dropped()).map(|(k, _)| k.clone());
        let p = match (in_line, in_waiting) {
            (Some(i), _) => &mut self.line[i],
            (None, Some(key)) => self.waiting.get_mut(&key).expect("found"),
            (None, None) => return Refilled::Unknown { bytes: work.bytes },
        };
        let reserved = std::mem::take(&mut p.reserved);
        if let Err(message) = p.take_rows_back(work, delivery) {
            // Not the rows it had: NiFi does not change the content of a FlowFile held in a session.
            let p = self.remove(id).expect("found above");
            return Refilled::Taken { reserved, done: vec![self.outcome(p, Route::Failure, message)] };
        }
        Refilled::Taken { reserved, done: Vec::new() }
    }

    fn remove(&mut self, id: i64) -> Option<Pending> {
        if let Some(i) = self.line.iter().position(|p| p.id == id) {
            self.line_in_order = false;
            return self.line.remove(i);
        }
        let key = self.waiting.iter().find(|(_, p)| p.id == id).map(|(k, _)| k.clone())?;
        self.waiting.remove(&key)
    }

    /// Snowflake's channel status reported `token` committed; returns the FlowFiles now done. A
    /// token above the line's end is another writer's commit (another node's, on a shard's shared
    /// channel): what it covers is in the table, so the line's end rises to it and the FlowFiles
    /// waiting for it line up now (their rows at or below it are not sent).
    pub fn commit_reported(&mut self, token: Option<OffsetToken>) -> Vec<Done> {
        if !self.open {
            return Vec::new();
        }
        if token > self.committed {
            self.committed = token;
        }
        let mut done = Vec::new();
        if self.committed > self.high {
            self.high = self.committed.clone();
            done = self.line_up_waiting();
        }
        done.extend(self.complete());
        done
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
        for p in self.line.iter_mut().filter(|p| suspects.contains(&p.id)) {
            p.row_error = Some(message.clone());
        }
        Some(message)
    }

    /// The token of the oldest append not committed within `timeout`, if any.
    pub fn commit_overdue(&self, now: Instant, timeout: Duration) -> Option<&OffsetToken> {
        self.appends.front().filter(|a| now.saturating_duration_since(a.sent) > timeout).map(|a| &a.end)
    }

    /// Snowflake refused the channel for good (4xx, credentials): FlowFiles with rows not yet sent
    /// (all of them, when the channel is not open) go to failure, and so do those waiting. Rows
    /// already appended may still commit, so fully sent FlowFiles stay; the channel must be reopened.
    pub fn fail_unsent(&mut self, message: &str) -> Vec<Done> {
        let open = self.open;
        let mut failed = Vec::new();
        let mut kept = VecDeque::new();
        for p in std::mem::take(&mut self.line) {
            if !open || !p.tokens_assigned || p.awaiting.is_some() || p.next_row < p.row_count {
                failed.push(p);
            } else {
                kept.push_back(p);
            }
        }
        self.line = kept;
        failed.extend(std::mem::take(&mut self.waiting).into_values());
        self.close();
        failed
            .into_iter()
            .map(|p| {
                let mut d = self.outcome(p, Route::Failure, message.to_owned());
                d.outcome.rows_sent = 0;
                d
            })
            .collect()
    }

    fn wait(&mut self, p: Pending) {
        self.arrivals += 1;
        self.waiting.insert((p.follows.key(), p.lowest().clone(), self.arrivals), p);
    }

    /// Lines up every waiting FlowFile whose record before is in the line, lowest first, until
    /// none follows on.
    fn line_up_waiting(&mut self) -> Vec<Done> {
        let mut done = Vec::new();
        loop {
            let follows = match self.waiting.first_key_value() {
                None => break,
                Some(((None, _, _), _)) => true,
                Some(((Some(before), _, _), _)) => self.high.as_ref().is_some_and(|h| before <= h),
            };
            if !follows {
                break;
            }
            let (_, p) = self.waiting.pop_first().expect("a first entry");
            self.stuck_since = None;
            done.extend(self.line_up_one(p));
        }
        done
    }

    /// Lines up one exactly-once FlowFile, unless it brings records of a gap passed over.
    fn line_up_one(&mut self, mut p: Pending) -> Option<Done> {
        if let Some(gap) = self.gaps.iter().find(|g| g.holds_any_of(&p)) {
            let message = format!(
                "its records (offset tokens {} to {}) came after channel {} had waited for them and gone on without \
                 them (tokens after {} and before {}); it goes back to the queue to be loaded at least once through the \
                 at-least-once channels",
                p.lowest(),
                p.highest(),
                self.name,
                gap.after.as_ref().map(|t| t.to_string()).unwrap_or_else(|| "none".into()),
                gap.before
            );
            return Some(self.outcome(p, Route::Reload, message));
        }
        if let Some(named) = p.passes.take() {
            let at = p.received;
            self.remember_passed(&named, &p, at);
        }
        self.unasked |= p.dropped();
        line_up(&mut p, &mut self.high, &mut self.assigned);
        self.push_line(p);
        None
    }

    /// `p` follows on from the line's end over records that never load, up to `named` (see
    /// [`Work::passes`]): unless the line holds `named` already (the records came after all), the
    /// records between are remembered as a gap.
    fn remember_passed(&mut self, named: &OffsetToken, p: &Pending, now: Instant) {
        if self.high.as_ref().is_some_and(|h| h >= named) || *p.lowest() <= *named {
            return;
        }
        self.push_gap(Gap { after: self.high.clone(), before: p.lowest().clone(), at: now });
    }

    fn push_gap(&mut self, gap: Gap) {
        if self.gaps.len() >= MAX_GAPS {
            self.gaps.pop_front();
        }
        self.gaps.push_back(gap);
        self.gaps_passed += 1;
    }

    /// How many gaps the book passed over (or was given back) in its life.
    pub fn gaps_passed(&self) -> u64 {
        self.gaps_passed
    }

    /// The gaps the book remembers, oldest first, for `gap_memory`.
    pub fn gaps(&self, now: Instant) -> Vec<PassedGap> {
        self.gaps
            .iter()
            .map(|g| PassedGap {
                after: g.after.clone(),
                before: g.before.clone(),
                age: now.saturating_duration_since(g.at),
            })
            .collect()
    }

    /// Gaps passed over before this book was made (its writer's predecessor, or before a restart):
    /// FlowFiles that bring their records go to the at-least-once channels, as for its own.
    pub fn restore_gaps(&mut self, gaps: Vec<PassedGap>, now: Instant) {
        for g in gaps {
            let at = now.checked_sub(g.age).unwrap_or(now);
            self.push_gap(Gap { after: g.after, before: g.before, at });
        }
    }

    fn push_line(&mut self, p: Pending) {
        self.line_in_order &= p.tokens_assigned && self.line.back().is_none_or(|b| b.highest() <= p.highest());
        self.line.push_back(p);
    }

    /// The outcome of every FlowFile whose highest token is committed.
    /// In order (the usual case), only the finished front is looked at: the line may hold many
    /// thousand FlowFiles of one record, and this runs at each commit Snowflake reports.
    fn complete(&mut self) -> Vec<Done> {
        let Some(committed) = self.committed.clone() else { return Vec::new() };
        debug_assert!(!self.line_in_order || in_order(&self.line), "the line's order flag is stale");
        let is_finished = |p: &Pending| p.tokens_assigned && *p.highest() <= committed;
        let mut finished = Vec::new();
        if self.line_in_order {
            while self.line.front().is_some_and(is_finished) {
                finished.extend(self.line.pop_front());
            }
        } else {
            let mut kept = VecDeque::with_capacity(self.line.len());
            for p in std::mem::take(&mut self.line) {
                if is_finished(&p) {
                    finished.push(p);
                } else {
                    kept.push_back(p);
                }
            }
            self.line_in_order = in_order(&kept);
            self.line = kept;
        }
        self.appends.retain(|a| a.end > committed);
        finished
            .into_iter()
            .map(|p| {
                let (route, message) = match &p.row_error {
                    Some(m) => (Route::Invalid, m.clone()),
                    None => (Route::Success, String::new()),
                };
                self.outcome(p, route, message)
            })
            .collect()
    }

    /// A FlowFile's outcome; rows never lined up (the channel committed past them meanwhile)
    /// count as skipped.
    fn outcome(&self, p: Pending, route: Route, message: String) -> Done {
        let lined_up = route == Route::Success || route == Route::Invalid;
        let skipped = if lined_up { p.skipped + (p.row_count - p.next_row) as u32 } else { 0 };
        let rows_sent = if lined_up { p.row_count as u32 - skipped } else { 0 };
        let offset_token = if p.tokens_assigned { p.highest().to_string() } else { String::new() };
        Done {
            outcome: Outcome {
                flow_file_id: p.id,
                route,
                channel: self.name.clone(),
                offset_token,
                message,
                rows_sent,
                rows_skipped: if route == Route::Failure { p.skipped } else { skipped },
            },
            bytes: p.budget(),
        }
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

/// Every FlowFile has its tokens and the highest tokens never fall along `line`.
fn in_order(line: &VecDeque<Pending>) -> bool {
    line.iter().all(|p| p.tokens_assigned)
        && line.iter().zip(line.iter().skip(1)).all(|(a, b)| a.highest() <= b.highest())
}

/// Gives an at-least-once FlowFile its tokens, then moves past its rows at or below `high` (the
/// highest token committed, queued or sent before it) and raises `high` to its highest.
fn line_up(p: &mut Pending, high: &mut Option<OffsetToken>, assigned: &mut Option<OffsetToken>) {
    if p.dropped() {
        // Its tokens are known; its rows come back later and are cut at today's line end then.
        let requested = p.awaiting.as_ref().is_some_and(|a| a.requested);
        p.awaiting = Some(Awaiting { covered_below: high.clone(), requested });
        if high.as_ref().is_none_or(|h| p.highest() > h) {
            *high = Some(p.highest().clone());
        }
        return;
    }
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
