//! One channel's writer: the task that opens the channel, appends its rows and follows its
//! commits. What to send and when a FlowFile is done is the book's (`book`); this module does the
//! calls.
//!
//! It appends at most ten requests a second, each at most Max Batch Size before and 4 MB after
//! zstd (`request_size`; a row larger than Max Batch Size goes alone), with the offset token of the
//! highest row in it. Appends to a channel follow one another (each carries the continuation token
//! the one before returned), but while one is in flight the writer prepares the next when a full
//! request of rows waits behind it ([`Ahead`]): zstd runs on tokio's blocking pool, off the
//! writer's thread, and the next append starts as soon as the rate allows. Opening (and every
//! reopen, after a stale continuation token, a vanished channel, a pipe failover or a commit that
//! never came) reads the committed token, and the book lines the queue up from it, so a replay
//! never loads a row twice.
//! With nothing queued for the idle time, the writer retires (see `writers`).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{error, info, warn};

use super::api::{ApiError, ChannelStatus, SnowflakeApi, MAX_UNCOMPRESSED_REQUEST};
use super::book::{ChannelBook, Done, Refilled, Span, Work};
use super::gap_memory::GapMemory;
use super::offset::OffsetToken;
use super::request_size::{self, next_take, Take, TooLarge};
use super::rows::Delivery;
use super::status::StatusWatch;
use super::views::{ChannelViews, ViewEntry};
use super::writers::{Flights, Retire};
use crate::contract::counters::put_snowflake::SinkCounter;
use crate::counters::SinkCounters;
use crate::kinesis::limiter::Backoff;

pub use super::book::{Outcome, Route};

#[derive(Clone)]
pub struct ChannelSettings {
    pub max_batch_bytes: usize,
    pub max_latency: Duration,
    pub commit_timeout: Duration,
    /// A writer with nothing queued for this long retires (a new one starts with the next FlowFile).
    pub idle_retire: Duration,
    /// How long FlowFiles wait for the records before them before the line passes over the gap
    /// (`book::ORDER_WAIT`).
    pub order_wait: Duration,
    /// What NiFi's counters show (drained by the processor), shared by the engine's writers.
    pub counters: Arc<SinkCounters>,
    /// What View State shows of the open channels, shared by the engine's writers.
    pub views: Arc<ChannelViews>,
    /// The gaps every channel passed over, kept across restarts (see `gap_memory`).
    pub gap_memory: Arc<GapMemory>,
}

/// The back-off between reopens of a channel another writer keeps reopening: jittered, doubling
/// from the base up to the cap, so one writer soon holds the channel for longer than Snowflake takes
/// to commit (about a second).
const REOPEN_BACKOFF_BASE: Duration = Duration::from_millis(200);
const REOPEN_BACKOFF_CAP: Duration = Duration::from_secs(10);

/// FlowFiles waiting for an earlier one are given back when the in-flight budget has been full
/// for them this long.
const GIVE_BACK_AFTER: Duration = Duration::from_secs(1);

pub struct ChannelWriter {
    book: ChannelBook,
    api: Arc<SnowflakeApi>,
    settings: ChannelSettings,
    work: mpsc::UnboundedReceiver<Work>,
    /// The engine dropped its end of `work`.
    work_closed: bool,
    flights: Flights,
    status: StatusWatch,
    continuation: Option<String>,
    backoff: Backoff,
    /// Between reopens after another writer reopened the channel (a stale continuation token):
    /// two writers that reopened at once would discard each other's uncommitted rows for ever.
    /// Reset once the committed token moves.
    reopen_backoff: Backoff,
    /// When FlowFiles were last given back with a warning (at most one per [`GIVE_BACK_REWARN`]).
    gave_back_warned: Option<Instant>,
    /// This channel's line in View State, removed when the writer ends.
    view: ViewEntry,
    /// The next append's body, prepared while the last append was in flight.
    ahead: Option<Ahead>,
    /// How many gaps the book had passed when its gaps were last given to `gap_memory`.
    gaps_kept: u64,
}

/// A channel warns about FlowFiles given back at most this often.
const GIVE_BACK_REWARN: Duration = Duration::from_secs(600);

/// The next append's body, prepared (and being compressed) while the append before it was in
/// flight. Only rows that the next append takes whatever comes meanwhile are prepared: a full
/// request with more rows waiting behind it (rows only join the line at its end). The next append
/// takes it only when its span is exactly the rows it would send then (a reopen, a failure, or
/// anything else that changed the line makes it differ), so what is sent, with which offset token
/// and in which order, is what the writer would send without it. One per channel; its rows are
/// rows the book holds, so all of them together are within Max In-Flight Size.
struct Ahead {
    span: Span,
    end: OffsetToken,
    ndjson_len: usize,
    compressed: JoinHandle<std::io::Result<Vec<u8>>>,
}

/// A body ready to send: its NDJSON length, highest token, and zstd (or why it could not be compressed).
type Composed = (usize, OffsetToken, std::io::Result<Vec<u8>>);

/// zstd of an append's body, on tokio's blocking pool; `None` when the runtime is shutting down.
async fn compressed(task: JoinHandle<std::io::Result<Vec<u8>>>) -> Option<std::io::Result<Vec<u8>>> {
    match task.await {
        Ok(result) => Some(result),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => None,
    }
}

fn compress_off_thread(body: Vec<u8>) -> JoinHandle<std::io::Result<Vec<u8>>> {
    tokio::task::spawn_blocking(move || request_size::compress(&body))
}

impl ChannelWriter {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        name: String,
        delivery: Delivery,
        api: Arc<SnowflakeApi>,
        settings: ChannelSettings,
        work: mpsc::UnboundedReceiver<Work>,
        flights: Flights,
        status: StatusWatch,
    ) -> Self {
        let view = settings.views.enter(&name);
        let mut book = ChannelBook::new(name, delivery);
        book.restore_gaps(settings.gap_memory.of(book.name()), Instant::now());
        let gaps_kept = book.gaps_passed();
        Self {
            view,
            gaps_kept,
            book,
            api,
            settings,
            work,
            work_closed: false,
            flights,
            status,
            continuation: None,
            backoff: Backoff::new(Duration::from_millis(500), Duration::from_secs(30)),
            reopen_backoff: Backoff::new(REOPEN_BACKOFF_BASE, REOPEN_BACKOFF_CAP),
            gave_back_warned: None,
            ahead: None,
        }
    }

    fn name(&self) -> &str {
        self.book.name()
    }

    /// Runs until it retires or the engine drops the sender.
    pub async fn run(mut self) {
        loop {
            if self.book.is_idle() && !self.wait_for_work().await {
                return;
            }
            while let Ok(work) = self.work.try_recv() {
                self.accept(work);
            }
            if self.book.is_idle() {
                continue;
            }
            if !self.book.is_open() && !self.open().await {
                continue;
            }
            match self.book.next_append_in(Instant::now(), self.settings.max_latency, self.settings.max_batch_bytes) {
                Some(wait) if wait.is_zero() => self.append().await,
                Some(wait) => self.wait(wait).await,
                None => self.wait(Duration::from_secs(1)).await,
            }
            self.check_commit_timeout();
            self.keep_order();
            self.ask_for_dropped_rows();
            self.status.set_awaiting(self.book.awaiting_commit());
        }
    }

    /// With nothing queued: waits for a FlowFile; returns false once the writer is to end.
    async fn wait_for_work(&mut self) -> bool {
        self.status.set_awaiting(false);
        loop {
            match tokio::time::timeout(self.settings.idle_retire, self.work.recv()).await {
                Ok(Some(work)) => {
                    self.accept(work);
                    return true;
                }
                Ok(None) => return false,
                Err(_) if self.book.remembers_gaps(Instant::now()) => continue,
                Err(_) => match self.flights.try_retire(&mut self.work) {
                    Retire::Now => {
                        info!("channel {}: idle for {:?}, its writer retires", self.name(), self.settings.idle_retire);
                        return false;
                    }
                    Retire::Take(work) => {
                        self.accept(work);
                        return true;
                    }
                    Retire::Busy => continue,
                },
            }
        }
    }

    fn accept(&mut self, work: Work) {
        if work.resent {
            return self.take_rows_back(work);
        }
        let done = self.book.accept(work, Instant::now());
        self.deliver(done);
    }

    /// Rows Java read again for a FlowFile the book asked back ([`Self::ask_for_dropped_rows`]).
    fn take_rows_back(&mut self, work: Work) {
        let id = work.flow_file_id;
        match self.book.refill(work) {
            Refilled::Taken { reserved, done } => {
                self.flights.release(id, reserved);
                self.deliver(done);
            }
            Refilled::Unknown { bytes } => self.flights.give_back(id, bytes),
        }
    }

    /// FlowFiles lined up without their rows (dropped once appended, then the channel reopened
    /// before Snowflake committed them): Java is asked to hand their content over again, as the
    /// in-flight budget allows and at least one at a time.
    fn ask_for_dropped_rows(&mut self) {
        let flights = &self.flights;
        for (id, bytes) in self.book.resends_due(|bytes| flights.may_reserve(bytes)) {
            flights.ask_again(id, bytes, self.book.name());
        }
    }

    fn deliver(&mut self, done: Vec<Done>) {
        // Before the outcomes: a gap passed over is kept before the FlowFiles after it succeed.
        self.keep_gaps();
        for d in done {
            self.flights.finish(d);
        }
    }

    /// Gives the book's gaps to `gap_memory` when it passed over a new one.
    fn keep_gaps(&mut self) {
        let passed = self.book.gaps_passed();
        if passed != self.gaps_kept {
            self.gaps_kept = passed;
            self.settings.gap_memory.record(self.book.name(), self.book.gaps(Instant::now()));
        }
    }

    /// Opens the channel; the book lines every pending FlowFile up again from the committed token.
    /// Returns false (after a pause) when it could not.
    async fn open(&mut self) -> bool {
        match self.api.open_channel(self.book.name()).await {
            Ok(opened) => {
                self.backoff.reset();
                if self.continuation.is_some() {
                    self.settings.counters.increment(SinkCounter::ChannelReopens);
                }
                self.continuation = Some(opened.continuation_token);
                let reported = opened.status.last_committed_offset_token.as_deref().and_then(OffsetToken::parse);
                let done = self.book.opened(reported, opened.status.rows_error_count.unwrap_or(0));
                self.view.opened(self.api.pipe(), self.book.committed().map(ToString::to_string));
                info!(
                    "channel {} opened on pipe {}; last committed offset token {}",
                    self.name(),
                    self.api.pipe(),
                    self.book.committed().map(ToString::to_string).unwrap_or_else(|| "none".into())
                );
                self.deliver(done);
                self.ask_for_dropped_rows();
                true
            }
            Err(e) => {
                self.on_error("open", e).await;
                false
            }
        }
    }

    /// Sends one request with the oldest unsent rows, and prepares the next one meanwhile.
    async fn append(&mut self) {
        let limit = self.settings.max_batch_bytes.min(MAX_UNCOMPRESSED_REQUEST);
        let mut take = self.book.rows_fitting(limit);
        let ready = self.take_ahead(take).await;
        let Some((ndjson_len, end, compressed)) = self.compose(&mut take, ready).await else { return };
        let Some(continuation) = self.continuation.clone() else {
            self.book.close();
            return;
        };
        self.book.attempted(Instant::now());
        let offset_token = end.to_string();
        let request = async {
            let result =
                self.api.append_rows(self.book.name(), &continuation, &offset_token, compressed, ndjson_len).await;
            (result, Instant::now())
        };
        // The request goes out first (join! polls it first); then, while it is in flight, the
        // next body is built and handed to the blocking pool to compress.
        let ((result, answered), ahead) = tokio::join!(request, async { self.prepare_ahead(take, limit) });
        self.book.answered(answered, ndjson_len);
        match result {
            Ok(next) => {
                self.backoff.reset();
                self.continuation = Some(next);
                for (id, bytes) in self.book.appended(take, end, Instant::now()) {
                    self.flights.release(id, bytes);
                }
                self.status.set_awaiting(true);
                self.ahead = ahead;
            }
            // The body prepared behind a failed append is dropped: after a retry, a reopen or a
            // failure the next append is composed from the book again.
            Err(e) => self.on_error("append", e).await,
        }
    }

    /// The next append's body: the oldest `take` unsent rows (`ready` when prepared ahead), fewer
    /// when compressed they do not fit one request, compressed. `None` when nothing is to be sent
    /// (nothing unsent, or the rows failed: they went to failure).
    async fn compose(
        &mut self,
        take: &mut usize,
        mut ready: Option<Composed>,
    ) -> Option<(usize, OffsetToken, Vec<u8>)> {
        loop {
            let (ndjson_len, end, compressed) = match ready.take() {
                Some(ready) => ready,
                None => {
                    let (body, end) = self.book.body(*take)?;
                    let ndjson_len = body.len();
                    (ndjson_len, end, compressed(compress_off_thread(body)).await?)
                }
            };
            let compressed = match compressed {
                Ok(c) => c,
                Err(e) => {
                    error!("channel {}: rows could not be compressed: {e}", self.name());
                    let done = self.book.fail_unsent(&format!("the rows could not be compressed: {e}"));
                    self.deliver(done);
                    return None;
                }
            };
            match next_take(*take, compressed.len()) {
                Take::Send => return Some((ndjson_len, end, compressed)),
                Take::Fewer(fewer) => *take = fewer,
                Take::RowTooLarge => {
                    // `sink` refuses such a row before it reaches a channel, measured the same way;
                    // never send one: Snowflake would refuse the request.
                    let too_large = TooLarge { ndjson: ndjson_len, compressed: Some(compressed.len()) };
                    error!(
                        "channel {}: a row too large for any append request reached the channel (a bug, please report \
                         it); the channel's unsent FlowFiles go to failure: {too_large}",
                        self.name()
                    );
                    let done =
                        self.book.fail_unsent(&format!("a row is too large for any append request: {too_large}"));
                    self.deliver(done);
                    return None;
                }
            }
        }
    }

    /// The body prepared ahead, when it holds exactly the next `take` unsent rows (what the
    /// append would build now); otherwise it is dropped.
    async fn take_ahead(&mut self, take: usize) -> Option<Composed> {
        let ahead = self.ahead.take()?;
        if ahead.span != self.book.span(take) {
            ahead.compressed.abort();
            return None;
        }
        let result = compressed(ahead.compressed).await?;
        Some((ahead.ndjson_len, ahead.end, result))
    }

    /// While an append of the next `in_flight` unsent rows is in flight: the body of the append
    /// after it, when a full request of rows waits behind it and more rows after those (so that
    /// append takes exactly these, whatever arrives meanwhile).
    fn prepare_ahead(&self, in_flight: usize, limit: usize) -> Option<Ahead> {
        let next = self.book.rows_fitting_after(in_flight, limit);
        if next == 0 || !self.book.unsent_beyond(in_flight + next) {
            return None;
        }
        let (body, end, span) = self.book.body_after(in_flight, next)?;
        let ndjson_len = body.len();
        Some(Ahead { span, end, ndjson_len, compressed: compress_off_thread(body) })
    }

    /// Waits for a status update, new work, or `timeout`.
    async fn wait(&mut self, timeout: Duration) {
        tokio::select! {
            changed = self.status.changed() => {
                if let Some(status) = changed {
                    self.on_status(status);
                }
            }
            work = self.work.recv(), if !self.work_closed => {
                match work {
                    Some(work) => self.accept(work),
                    None => self.work_closed = true,
                }
            }
            _ = tokio::time::sleep(timeout) => {}
        }
    }

    fn on_status(&mut self, status: ChannelStatus) {
        if !self.book.is_open() {
            return;
        }
        if let Some(code) = status.channel_status_code.as_deref() {
            if code.contains("NO_LONGER_EXISTS") || code.contains("INVALID") {
                warn!("channel {} reports {code}; reopening it", self.name());
                self.book.close();
                return;
            }
        }
        let upper = status.last_error_offset_upper_bound.as_deref().and_then(OffsetToken::parse);
        let reason = status.last_error_message.as_deref().unwrap_or("no message");
        if let Some(message) = self.book.row_errors(status.rows_error_count.unwrap_or(0), upper, reason) {
            warn!("channel {}: {message}", self.name());
        }
        let before = self.book.committed().cloned();
        let done =
            self.book.commit_reported(status.last_committed_offset_token.as_deref().and_then(OffsetToken::parse));
        if self.book.committed().cloned() > before {
            self.reopen_backoff.reset();
            if let Some(token) = self.book.committed() {
                self.view.committed(token.to_string());
            }
        }
        self.deliver(done);
    }

    /// FlowFiles that wait for earlier ones: the line passes over a gap nobody filled within the
    /// order wait, and while the in-flight budget is full they go back to the queue so the FlowFiles
    /// they wait for can come in.
    fn keep_order(&mut self) {
        let now = Instant::now();
        let (done, passed) = self.book.pass_stuck(now, self.settings.order_wait);
        if let Some(gap) = passed {
            self.settings.counters.increment(SinkCounter::GapsDetected);
            warn!(
                "channel {}: {gap}; FlowFiles that bring those records later are loaded at least once, through the \
                 at-least-once channels",
                self.name()
            );
        }
        self.deliver(done);
        if self.flights.budget_full() {
            let done = self.book.give_back_waiting(now, GIVE_BACK_AFTER);
            if !done.is_empty()
                && self.gave_back_warned.is_none_or(|t| now.saturating_duration_since(t) >= GIVE_BACK_REWARN)
            {
                self.gave_back_warned = Some(now);
                warn!(
                    "channel {}: {} FlowFile(s) waited for earlier ones of their shard while Max In-Flight Size was full, \
                     and went back to the queue, penalized, so the earlier ones can come in (they were not among the \
                     queued FlowFiles PutSnowflake could take: still on their way, penalized, swapped out of the queue's \
                     memory, or on another node). While this lasts the shard loads about once per Penalty Duration; a \
                     larger Max In-Flight Size or a shorter Penalty Duration keeps it going",
                    self.name(),
                    done.len()
                );
            }
            self.deliver(done);
        }
    }

    /// Rows appended long ago and still not committed: Snowflake lost or withholds them; reopen
    /// (which discards what it did not commit) and send them again.
    fn check_commit_timeout(&mut self) {
        if let Some(end) = self.book.commit_overdue(Instant::now(), self.settings.commit_timeout) {
            warn!(
                "channel {}: rows up to offset token {end} not committed after {:?}; reopening the channel to send them again",
                self.name(),
                self.settings.commit_timeout
            );
            self.book.close();
        }
    }

    async fn on_error(&mut self, call: &str, e: ApiError) {
        match e {
            ApiError::StaleContinuation(_) | ApiError::ChannelGone(_) => {
                let delay = self.reopen_backoff.next_delay();
                warn!("channel {}: {e}; reopening it in {delay:?} and sending uncommitted rows again", self.name());
                self.book.close();
                tokio::time::sleep(delay).await;
            }
            ApiError::PipeFailover(_) => {
                // Backed off as a stale token is: an answer that keeps coming must not make a tight loop of reopens.
                let delay = self.reopen_backoff.next_delay();
                warn!("channel {}: {e}; reconnecting and reopening in {delay:?}", self.name());
                self.api.reset_session().await;
                self.book.close();
                tokio::time::sleep(delay).await;
            }
            ApiError::Transient(_) | ApiError::Protocol(_) => {
                let delay = self.backoff.next_delay();
                warn!("channel {}: {call} failed: {e}; trying again in {delay:?}", self.name());
                tokio::time::sleep(delay).await;
            }
            ApiError::Unauthorized(_) | ApiError::Rejected { .. } | ApiError::Auth(_) | ApiError::ProxyRefused(_) => {
                error!("channel {} on pipe {}: {call} failed: {e}", self.name(), self.api.pipe());
                let done = self.book.fail_unsent(&format!("{call} failed: {e}"));
                self.deliver(done);
            }
        }
    }
}
