//! Model test of a channel's bookkeeping (issues 15, 34 and 51): the shard's records are read into
//! FlowFiles in order, each naming the record before it, and land in NiFi's queue; PutSnowflake
//! takes them in **any order** (no prioritizer, several ConsumeKinesis tasks), re-deliveries and
//! re-reads with other batch boundaries (a rollback) come in beside them, FlowFiles routed to
//! `failure` or given back are held in NiFi and come back after any delay (the user's `failure`
//! loop), and some are dropped for good (a user's flow). Some records can never load: PutSnowflake
//! sends their FlowFile to `invalid` and passes them (`Work::pass`), or ConsumeKinesis routes them to
//! `parse.failure` and its FlowFile holds the records around them; either may be repaired downstream
//! and sent again. Appends succeed, fail, find their continuation token stale or are refused (4xx:
//! the channel fails its unsent rows); commits are made, withheld or reported late or stale; the
//! channel reopens, times out, passes over gaps after the order wait, and gives waiting FlowFiles
//! back while the in-flight budget is full (PutSnowflake then takes no FlowFile); PutSnowflake
//! stops and starts (the book is dropped, NiFi's sessions roll back, a new book opens from
//! Snowflake's committed token); all against an in-memory Snowflake table and a fake clock.
//!
//! Around the book the model does what PutSnowflake's engine (`sink`) does with a FlowFile: it
//! computes the record it follows from the notes of records that never load
//! (`feedback::parse_failures`), passes those it refuses, sends a noted record that comes after all
//! back for the at-least-once channels, and, for a shard's shared channel, keeps the lease's chain
//! (`feedback`, `link`): a FlowFile that follows on from what the chain put in goes in at once, one
//! that does not is ordered by the book, and a FlowFile routed to failure is taken out of the chain
//! only when Java collects the outcomes.
//!
//! The table holds every row: the record, the channel it came through (the book's exactly-once
//! channel, or the at-least-once channels a FlowFile marked for reload goes to) and whether it is
//! committed. After every step: no record is committed twice in the book's channel, and a FlowFile
//! marked for reload holds no row that channel has (committed or appended); every row of a FlowFile
//! that succeeded is committed (so no row is skipped as a replay that the table lacks); the book's
//! channel commits in the shard's order; no FlowFile has two outcomes. (The at-least-once channels
//! may load a record twice when two FlowFiles of it are marked for reload, a re-read and its
//! original: at least once is what they promise.) At
//! the end the service answers every call until the queue drains: every FlowFile has its outcome
//! within a bounded number of rounds, and every record of a FlowFile that was not dropped is in the
//! table.
//!
//! `PROPTEST_CASES` sets the number of cases (default 2000 each, about a second in release).

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

use proptest::prelude::*;
use tokio::time::Instant;

use super::*;

const COMMIT_TIMEOUT: Duration = Duration::from_secs(5);
/// Shorter than [`ORDER_WAIT`] in the model, so ticks reach it.
const WAIT: Duration = Duration::from_secs(20);

/// A record that can never load as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bad {
    /// Its FlowFile (it alone) goes to `invalid` at PutSnowflake, which passes it and notes it.
    AtSink,
    /// ConsumeKinesis routes it to `parse.failure` and notes it; the FlowFile holds the records
    /// around it (LINE_DELIMITED), its tokens spanning it.
    AtConsumer,
}

#[derive(Debug, Clone)]
enum Step {
    /// The consumer reads the shard's next records into a FlowFile that lands in the queue:
    /// `records` one-row records with their own tokens, or (`parts`) one record of `rows` rows
    /// sharing its token; or a record that never loads (`bad`) with good ones after it.
    Read {
        records: u8,
        parts: bool,
        rows: u8,
        bad: Option<Bad>,
    },
    /// PutSnowflake takes one queued FlowFile, any of them (none while the budget is full).
    Submit {
        pick: u16,
    },
    /// An earlier FlowFile (pending or succeeded) comes again under a new id.
    Redeliver {
        pick: u16,
    },
    /// The consumer rolled back and reads again from an earlier record, with other boundaries.
    Reread {
        from: u16,
        records: u8,
    },
    /// A queued FlowFile never reaches PutSnowflake (a user's flow dropped it).
    Drop {
        pick: u16,
    },
    Empty,
    Append {
        limit_rows: u8,
        result: AppendResult,
    },
    /// Snowflake commits up to this many of its uncommitted appends.
    Commit {
        appends: u8,
    },
    /// The status poller reports the committed token: the current one, or an older one.
    Report {
        stale: bool,
    },
    /// Time passes (commits may be overdue, the order wait may pass).
    Tick {
        seconds: u8,
    },
    /// The in-flight budget is full: the writer gives waiting FlowFiles back.
    BudgetFull,
    /// The in-flight budget fills (PutSnowflake takes no FlowFile until it frees) or frees.
    Budget {
        full: bool,
    },
    /// The channel is reported gone or the pipe fails over: the writer must reopen.
    Invalidate,
    Open,
    /// The writer asks Java for the rows of FlowFiles awaiting them (dropped once appended, then
    /// the channel reopened), as a full or a free budget allows.
    AskAgain {
        budget_free: bool,
    },
    /// Java hands over one FlowFile's content it was asked for, any of them, read again.
    Resend {
        pick: u16,
    },
    /// Java collects the outcomes: FlowFiles routed to failure or given back are held in NiFi (a
    /// `failure` loop, a penalty), and the lease's chain no longer counts them as put in.
    Collect,
    /// A FlowFile routed to failure or given back comes to the queue again, after any delay.
    SendBack {
        pick: u16,
    },
    /// A record that never loaded is repaired downstream (ReplaceText, Jolt) and sent to
    /// PutSnowflake with its attributes.
    Repair {
        pick: u16,
    },
    /// PutSnowflake stops and starts (a property changed): the book is dropped, the FlowFiles it
    /// held roll back to the queue, the lease's chain keeps only what Snowflake committed, and a new
    /// book opens from Snowflake's committed token. The notes of records that never load stay (the
    /// process's).
    Restart,
}

#[derive(Debug, Clone, Copy)]
enum AppendResult {
    Ok,
    Transient,
    /// Someone reopened the channel: the continuation token is stale.
    Stale,
    /// A 4xx: the FlowFiles with unsent rows go to failure.
    Rejected,
}

fn step() -> impl Strategy<Value = Step> {
    let bad = prop_oneof![8 => Just(None), 1 => Just(Some(Bad::AtSink)), 1 => Just(Some(Bad::AtConsumer))];
    prop_oneof![
        4 => (1u8..4, any::<bool>(), 1u8..4, bad).prop_map(|(records, parts, rows, bad)| Step::Read { records, parts, rows, bad }),
        6 => any::<u16>().prop_map(|pick| Step::Submit { pick }),
        1 => any::<u16>().prop_map(|pick| Step::Redeliver { pick }),
        1 => (any::<u16>(), 1u8..6).prop_map(|(from, records)| Step::Reread { from, records }),
        1 => any::<u16>().prop_map(|pick| Step::Drop { pick }),
        1 => Just(Step::Empty),
        5 => (1u8..5, prop_oneof![6 => Just(AppendResult::Ok), 1 => Just(AppendResult::Transient), 1 => Just(AppendResult::Stale), 1 => Just(AppendResult::Rejected)])
            .prop_map(|(limit_rows, result)| Step::Append { limit_rows, result }),
        3 => (0u8..3).prop_map(|appends| Step::Commit { appends }),
        3 => any::<bool>().prop_map(|stale| Step::Report { stale }),
        1 => (1u8..12).prop_map(|seconds| Step::Tick { seconds }),
        1 => Just(Step::BudgetFull),
        1 => any::<bool>().prop_map(|full| Step::Budget { full }),
        1 => Just(Step::Invalidate),
        3 => Just(Step::Open),
        2 => any::<bool>().prop_map(|budget_free| Step::AskAgain { budget_free }),
        3 => any::<u16>().prop_map(|pick| Step::Resend { pick }),
        2 => Just(Step::Collect),
        2 => any::<u16>().prop_map(|pick| Step::SendBack { pick }),
        1 => any::<u16>().prop_map(|pick| Step::Repair { pick }),
        1 => Just(Step::Restart),
    ]
}

/// The channel a row came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    /// The book's channel.
    Book,
    /// The at-least-once channels, for a FlowFile marked for reload.
    Reload,
}

/// A row of the table: the record (its row) it holds, its token, how it came, and, while not
/// committed, the append that sent it.
#[derive(Debug, Clone)]
struct TableRow {
    row: String,
    token: OffsetToken,
    via: Via,
    /// `Some(append)` until Snowflake commits that append.
    pending: Option<u64>,
}

/// The in-memory channel and its table.
#[derive(Default)]
struct Snowflake {
    table: Vec<TableRow>,
    /// Appends not yet committed, oldest first: their number and offset token.
    uncommitted: VecDeque<(u64, OffsetToken)>,
    appends: u64,
    committed: Option<OffsetToken>,
    history: Vec<Option<OffsetToken>>,
}

impl Snowflake {
    /// Opening discards what was not committed.
    fn open(&mut self) -> Option<OffsetToken> {
        self.uncommitted.clear();
        self.table.retain(|r| r.pending.is_none());
        self.committed.clone()
    }

    fn append(&mut self, rows: Vec<(String, OffsetToken)>, end: OffsetToken) {
        self.appends += 1;
        let n = self.appends;
        self.table.extend(rows.into_iter().map(|(row, token)| TableRow {
            row,
            token,
            via: Via::Book,
            pending: Some(n),
        }));
        self.uncommitted.push_back((n, end));
    }

    fn commit(&mut self, appends: usize) {
        for _ in 0..appends {
            let Some((n, end)) = self.uncommitted.pop_front() else { return };
            for r in self.table.iter_mut().filter(|r| r.pending == Some(n)) {
                r.pending = None;
            }
            self.history.push(self.committed.clone());
            self.committed = Some(end);
        }
    }

    /// The at-least-once channels load a FlowFile marked for reload (committed at once: their
    /// commits are not what the model is about).
    fn reload(&mut self, rows: &[(String, OffsetToken)]) {
        let loaded = rows.iter().map(|(row, token)| TableRow {
            row: row.clone(),
            token: token.clone(),
            via: Via::Reload,
            pending: None,
        });
        self.table.extend(loaded);
    }

    fn committed_rows(&self) -> impl Iterator<Item = &TableRow> {
        self.table.iter().filter(|r| r.pending.is_none())
    }
}

/// A shard record: its rows, and whether it never loads as it is.
#[derive(Clone)]
struct Record {
    rows: Vec<(String, OffsetToken)>,
    bad: Option<Bad>,
}

impl Record {
    fn last(&self) -> &OffsetToken {
        &self.rows.last().expect("records have rows").1
    }
}

/// A FlowFile as the consumer wrote it: its rows' ids and tokens, the record before it
/// (`kinesnow.previous.*`: `Nothing` when none, `Unknown` when not said), its last record, and
/// whether its content never loads.
#[derive(Clone)]
struct FlowFile {
    rows: Vec<(String, OffsetToken)>,
    previous: Follows,
    last: Option<OffsetToken>,
    bad: bool,
    /// A record that never loaded, repaired downstream.
    repaired: bool,
}

struct Model {
    delivery: Delivery,
    /// The book is a shard's shared channel, which the lease's chain fills.
    shared: bool,
    book: ChannelBook,
    service: Snowflake,
    now: Instant,
    next_id: i64,
    next_sequence: u64,
    /// The shard's records in order.
    records: Vec<Record>,
    /// NiFi's queue between the processors.
    queue: Vec<FlowFile>,
    /// Records some FlowFile that was not dropped holds: they must be loaded.
    owed: HashSet<String>,
    submitted: HashMap<i64, FlowFile>,
    outcomes: HashMap<i64, Outcome>,
    /// FlowFiles the book held when PutSnowflake stopped: back in the queue, without an outcome.
    rolled_back: HashSet<i64>,
    /// Routed to failure or given back, not yet collected by Java.
    uncollected: Vec<i64>,
    /// Collected: held in NiFi until they come back (any time, or never).
    held_back: Vec<FlowFile>,
    /// Records that never load, as `feedback::parse_failures` notes them: last -> the record before.
    noted: HashMap<OffsetToken, Option<OffsetToken>>,
    /// The lease's chain: the records this JVM put into the shared channel reach this one.
    chain_end: Option<OffsetToken>,
    /// Records skipped for the chain (never loading): (the record before, the last).
    chain_skips: Vec<(Option<OffsetToken>, OffsetToken)>,
    /// Records repaired already.
    repaired: HashSet<usize>,
    /// PutSnowflake takes no FlowFile.
    budget_full: bool,
    /// The body a writer prepares behind each append while it is in flight (`channel::Ahead`),
    /// kept here whatever happens next (the writer drops it after a failed append): whenever its
    /// span is the next append's, it must be that append's body.
    ahead: Option<(Span, Vec<u8>, OffsetToken)>,
    /// Appends sent with the body prepared ahead (the check above held).
    ahead_hits: u64,
    /// FlowFiles Java was asked to hand over again and has not yet.
    asked: Vec<i64>,
    /// FlowFiles whose rows the book dropped, once appended.
    rows_dropped: u64,
}

impl Model {
    fn new(delivery: Delivery, shared: bool) -> Self {
        Self {
            delivery,
            shared,
            book: ChannelBook::new("model".into(), delivery),
            service: Snowflake::default(),
            now: Instant::now(),
            next_id: 1,
            next_sequence: 100,
            records: Vec::new(),
            queue: Vec::new(),
            owed: HashSet::new(),
            submitted: HashMap::new(),
            outcomes: HashMap::new(),
            rolled_back: HashSet::new(),
            uncollected: Vec::new(),
            held_back: Vec::new(),
            noted: HashMap::new(),
            chain_end: None,
            chain_skips: Vec::new(),
            repaired: HashSet::new(),
            budget_full: false,
            ahead: None,
            ahead_hits: 0,
            asked: Vec::new(),
            rows_dropped: 0,
        }
    }

    fn ask_again(&mut self, budget_free: bool) {
        for (id, _) in self.book.resends_due(|_| budget_free) {
            assert!(!self.outcomes.contains_key(&id), "FlowFile {id} asked back after its outcome");
            assert!(!self.asked.contains(&id), "FlowFile {id} asked back twice before it came");
            self.asked.push(id);
        }
    }

    /// Java reads the FlowFile again: the same rows (tokens as the consumer wrote them; an
    /// at-least-once FlowFile's placeholders). A FlowFile with its outcome meanwhile is not held
    /// any more and is not sent.
    fn resend(&mut self, pick: u16) {
        if self.asked.is_empty() {
            return;
        }
        let id = self.asked.swap_remove(pick as usize % self.asked.len());
        if self.outcomes.contains_key(&id) || self.rolled_back.contains(&id) {
            return;
        }
        let flow_file = self.submitted[&id].clone();
        let work = Work {
            flow_file_id: id,
            rows: rows_of(&flow_file),
            bytes: 1,
            follows: Follows::Unknown,
            shared: false,
            resent: true,
            passes: None,
        };
        match self.book.refill(work) {
            Refilled::Taken { done, .. } => self.record(done),
            Refilled::Unknown { .. } => panic!("FlowFile {id} asked back and held, but the book does not know it"),
        }
    }

    fn enqueue(&mut self, flow_file: FlowFile) {
        if !flow_file.bad {
            self.owed.extend(flow_file.rows.iter().map(|(row, _)| row.clone()));
        }
        self.queue.push(flow_file);
    }

    /// The record before record `i`, as a FlowFile starting there names it.
    fn before(&self, i: usize) -> Follows {
        match i.checked_sub(1) {
            None => Follows::Nothing,
            Some(before) => Follows::After(self.records[before].last().clone()),
        }
    }

    /// The FlowFiles ConsumeKinesis writes of records `from..to`: a record PutSnowflake refuses
    /// alone, one routed to `parse.failure` left out (noted; the FlowFile around it spans it), the
    /// others together.
    fn flow_files_of(&mut self, from: usize, to: usize) -> Vec<FlowFile> {
        let mut out = Vec::new();
        let mut joined: Option<FlowFile> = None;
        for i in from..to {
            let record = self.records[i].clone();
            match record.bad {
                Some(Bad::AtConsumer) => {
                    let previous = self.before(i).key();
                    self.note_never_loading(previous, record.last().clone());
                }
                Some(Bad::AtSink) => {
                    out.extend(joined.take());
                    let previous = self.before(i);
                    out.push(FlowFile {
                        rows: record.rows.clone(),
                        previous,
                        last: Some(record.last().clone()),
                        bad: true,
                        repaired: false,
                    });
                }
                None => {
                    let previous = self.before(i);
                    let f = joined.get_or_insert_with(|| FlowFile {
                        rows: Vec::new(),
                        previous,
                        last: None,
                        bad: false,
                        repaired: false,
                    });
                    f.rows.extend(record.rows.iter().cloned());
                    f.last = Some(record.last().clone());
                }
            }
        }
        out.extend(joined);
        out
    }

    fn read(&mut self, records: u8, parts: bool, rows: u8, bad: Option<Bad>) {
        if self.delivery == Delivery::AtLeastOnce {
            // Rows without exact tokens: each submission is new rows (a replay may load them again).
            self.next_sequence += 1;
            let n = self.next_sequence;
            let rows = (0..rows).map(|r| (format!("f{n}r{r}"), OffsetToken::from_counter(0)));
            let flow_file =
                FlowFile { rows: rows.collect(), previous: Follows::Unknown, last: None, bad: false, repaired: false };
            self.enqueue(flow_file);
            return;
        }
        let from = self.records.len();
        if let Some(bad) = bad {
            // A good record, the one that never loads, and good ones after it.
            self.push_single_records(1);
            self.next_sequence += 1;
            let token = OffsetToken::from_counter(self.next_sequence);
            self.records.push(Record { rows: vec![(format!("s{}", self.next_sequence), token)], bad: Some(bad) });
            self.push_single_records(records);
        } else if parts {
            self.next_sequence += 1 + u64::from(rows) % 3;
            let record = OffsetToken::from_counter(self.next_sequence);
            let mut out = Vec::new();
            for r in 1..=u64::from(rows) {
                let token = if r == u64::from(rows) { record.clone() } else { record.part(r) };
                out.push((format!("s{}r{r}", self.next_sequence), token));
            }
            self.records.push(Record { rows: out, bad: None });
        } else {
            self.push_single_records(records);
        }
        for flow_file in self.flow_files_of(from, self.records.len()) {
            self.enqueue(flow_file);
        }
    }

    fn push_single_records(&mut self, records: u8) {
        for _ in 0..records {
            self.next_sequence += 1 + u64::from(records) % 2;
            let row = (format!("s{}", self.next_sequence), OffsetToken::from_counter(self.next_sequence));
            self.records.push(Record { rows: vec![row], bad: None });
        }
    }

    fn reread(&mut self, from: u16, records: u8) {
        if self.records.is_empty() {
            return;
        }
        let from = from as usize % self.records.len();
        let to = (from + usize::from(records)).min(self.records.len());
        for flow_file in self.flow_files_of(from, to) {
            self.enqueue(flow_file);
        }
    }

    /// A record that never loaded (noted), repaired: its FlowFile with its attributes, and good
    /// content. (Its re-delivery is not modelled: it loads at least once, as it goes.)
    fn repair(&mut self, pick: u16) {
        let bad: Vec<usize> = (0..self.records.len())
            .filter(|i| {
                let record = &self.records[*i];
                record.bad.is_some() && !self.repaired.contains(i) && self.noted.contains_key(record.last())
            })
            .collect();
        if bad.is_empty() {
            return;
        }
        let i = bad[pick as usize % bad.len()];
        self.repaired.insert(i);
        let record = self.records[i].clone();
        let previous = self.before(i);
        let last = Some(record.last().clone());
        self.enqueue(FlowFile { rows: record.rows.clone(), previous, last, bad: false, repaired: true });
    }

    fn take(&mut self, pick: u16) -> Option<FlowFile> {
        (!self.queue.is_empty()).then(|| self.queue.swap_remove(pick as usize % self.queue.len()))
    }

    fn drop_one(&mut self, pick: u16) {
        let Some(dropped) = self.take(pick) else { return };
        // Its records are owed only if another FlowFile still holds them: in the queue, held in
        // NiFi after failure, in the book, or loaded.
        let in_book_or_done = self.submitted.iter().filter(|(id, f)| {
            !f.bad
                && !self.rolled_back.contains(id)
                && self.outcomes.get(id).is_none_or(|o| !matches!(o.route, Route::Failure | Route::Retry))
        });
        let uncollected = self.uncollected.iter().map(|id| &self.submitted[id]);
        let held: HashSet<&String> = self
            .queue
            .iter()
            .chain(self.held_back.iter())
            .chain(uncollected)
            .filter(|f| !f.bad)
            .chain(in_book_or_done.map(|(_, f)| f))
            .flat_map(|f| f.rows.iter().map(|(row, _)| row))
            .collect();
        for (row, _) in &dropped.rows {
            if !held.contains(row) {
                self.owed.remove(row);
            }
        }
    }

    /// `feedback::parse_failures::note`.
    fn note_never_loading(&mut self, previous: Option<OffsetToken>, last: OffsetToken) {
        self.noted.insert(last.clone(), previous.clone());
        self.chain_skips.push((previous, last));
    }

    /// `feedback::parse_failures::before_failures`: the record a FlowFile whose record before is
    /// `previous` really follows on from (`None`: none).
    fn before_failures(&self, previous: &OffsetToken) -> Option<OffsetToken> {
        let mut current = previous.clone();
        while let Some(earlier) = self.noted.get(&current) {
            current = earlier.clone()?;
        }
        Some(current)
    }

    /// `sink::follows`: what the book waits for, and the record it names itself when that is an
    /// earlier one.
    fn follows(&self, flow_file: &FlowFile) -> (Follows, Option<OffsetToken>) {
        match &flow_file.previous {
            Follows::After(previous) => {
                let follows = self.before_failures(previous).map_or(Follows::Nothing, Follows::After);
                let passes = (follows != flow_file.previous).then(|| previous.clone());
                (follows, passes)
            }
            other => (other.clone(), None),
        }
    }

    /// `feedback::Board::chain`: the FlowFile follows on from what the chain put in (after the
    /// records skipped for it).
    fn chain_reaches(&mut self, previous: &Follows) -> bool {
        loop {
            let end = self.chain_end.clone();
            let next = self
                .chain_skips
                .iter()
                .filter(|(before, last)| *before <= end && Some(last) > end.as_ref())
                .map(|(_, last)| last.clone())
                .max();
            match next {
                Some(last) => self.chain_end = Some(last),
                None => break,
            }
        }
        match previous {
            Follows::After(p) => self.chain_end.as_ref().is_some_and(|end| p <= end),
            Follows::Nothing => true,
            Follows::Unknown => false,
        }
    }

    /// What PutSnowflake's engine does with a FlowFile it takes (`sink::submit_one`).
    fn submit(&mut self, flow_file: FlowFile) {
        let id = self.next_id;
        self.next_id += 1;
        self.submitted.insert(id, flow_file.clone());
        if flow_file.bad {
            return self.refuse(id, &flow_file);
        }
        if let Some(done) = self.repaired_never_loading(id, &flow_file) {
            return self.record(vec![done]);
        }
        let (mut follows, mut passes) = self.follows(&flow_file);
        if self.shared && self.chain_reaches(&flow_file.previous) {
            // `link`'s chain puts it in: it follows on from what this JVM put of its lease.
            if let Some(last) = &flow_file.last {
                self.chain_end = self.chain_end.clone().max(Some(last.clone()));
            }
            (follows, passes) = chain_follows(follows, passes);
        }
        let work = Work {
            flow_file_id: id,
            rows: rows_of(&flow_file),
            bytes: 1,
            follows,
            shared: self.shared,
            resent: false,
            passes,
        };
        let done = self.book.accept(work, self.now);
        self.record(done);
    }

    /// `sink::pass_never_loading`: the FlowFile goes to `invalid`; its record is noted and passed.
    fn refuse(&mut self, id: i64, flow_file: &FlowFile) {
        let last = flow_file.last.clone().expect("a shard FlowFile names its last record");
        let previous = flow_file.previous.key();
        self.note_never_loading(previous.clone(), last.clone());
        let follows =
            previous.map_or(Follows::Nothing, |p| self.before_failures(&p).map_or(Follows::Nothing, Follows::After));
        let mut done = self.book.accept(Work::pass(follows, last), self.now);
        done.push(immediate(id, Route::Invalid));
        self.record(done);
    }

    /// `sink::repaired_never_loading`: a record noted as never loading comes after all.
    fn repaired_never_loading(&self, id: i64, flow_file: &FlowFile) -> Option<Done> {
        let last = flow_file.last.as_ref()?;
        let noted = self.noted.get(last)?;
        (self.delivery == Delivery::ExactlyOnce && *noted == flow_file.previous.key())
            .then(|| immediate(id, Route::Reload))
    }

    fn redeliver(&mut self, pick: u16) {
        if self.delivery == Delivery::AtLeastOnce {
            return;
        }
        let mut candidates: Vec<i64> = self
            .submitted
            .iter()
            .filter(|(id, f)| !f.bad && !f.repaired && self.outcomes.get(id).is_none_or(|o| o.route == Route::Success))
            .map(|(id, _)| *id)
            .collect();
        if candidates.is_empty() {
            return;
        }
        candidates.sort_unstable();
        let original = self.submitted[&candidates[pick as usize % candidates.len()]].clone();
        self.queue.push(original);
    }

    fn append(&mut self, limit_rows: u8, result: AppendResult) {
        if !self.book.is_open() {
            return;
        }
        let take = self.book.rows_fitting(usize::MAX).min(usize::from(limit_rows));
        let Some((body, end)) = self.book.body(take) else { return };
        if let Some((span, prepared, prepared_end)) = self.ahead.take() {
            if span == self.book.span(take) {
                assert_eq!((&prepared, &prepared_end), (&body, &end), "a body prepared ahead of its span's append");
                self.ahead_hits += 1;
            }
        }
        let next = self.book.rows_fitting_after(take, usize::MAX).min(usize::from(limit_rows));
        self.ahead = self.book.body_after(take, next).map(|(body, end, span)| (span, body, end));
        self.book.attempted(self.now);
        match result {
            AppendResult::Ok => {
                let rows = self.unsent_rows(take);
                self.service.append(rows, end.clone());
                self.rows_dropped += self.book.appended(take, end, self.now).len() as u64;
            }
            AppendResult::Transient => {}
            AppendResult::Stale => {
                // Someone else opened the channel: Snowflake discarded what was not committed.
                self.service.open();
                self.book.close();
            }
            AppendResult::Rejected => {
                let done = self.book.fail_unsent("rejected");
                self.record(done);
            }
        }
    }

    /// The next `take` unsent rows and their tokens, as the append sends them.
    fn unsent_rows(&self, take: usize) -> Vec<(String, OffsetToken)> {
        let rows = self.book.sendable().flat_map(|p| p.unsent()).take(take);
        rows.map(|r| (String::from_utf8(r.json.to_vec()).unwrap(), r.token.clone())).collect()
    }

    fn report(&mut self, stale: bool) {
        let token = if stale {
            let h = &self.service.history;
            if h.is_empty() {
                return;
            }
            h[h.len() / 2].clone()
        } else {
            self.service.committed.clone()
        };
        let done = self.book.commit_reported(token);
        self.record(done);
    }

    fn open(&mut self) {
        if !self.book.is_open() {
            let reported = self.service.open();
            let done = self.book.opened(reported, 0);
            self.record(done);
        }
    }

    fn tick(&mut self, seconds: u8) {
        self.now += Duration::from_secs(u64::from(seconds));
        if self.book.commit_overdue(self.now, COMMIT_TIMEOUT).is_some() {
            self.book.close();
        }
        let (done, _) = self.book.pass_stuck(self.now, WAIT);
        self.record(done);
        self.budget_full_gives_back();
    }

    fn budget_full_gives_back(&mut self) {
        if self.budget_full {
            let done = self.book.give_back_waiting(self.now, Duration::ZERO);
            self.record(done);
        }
    }

    /// Java collects the outcomes: failed and given-back FlowFiles are held in NiFi, and the
    /// chain takes them out (`Board::unput_from_channel`).
    fn collect(&mut self) {
        for id in std::mem::take(&mut self.uncollected) {
            let flow_file = self.submitted[&id].clone();
            if self.shared {
                self.chain_end = self.chain_end.clone().min(flow_file.previous.key());
            }
            self.held_back.push(flow_file);
        }
    }

    fn send_back(&mut self, pick: u16) {
        if !self.held_back.is_empty() {
            let flow_file = self.held_back.swap_remove(pick as usize % self.held_back.len());
            self.queue.push(flow_file);
        }
    }

    /// PutSnowflake stops and starts. An at-least-once FlowFile rolled back loads again (at least
    /// once, as promised), which this model does not count, so only exactly-once books restart.
    ///
    /// The gaps the book passed over go through `gap_memory` as PutSnowflake's local state keeps
    /// them (written, read back, restored into the new book). Not modelled: a restart once a gap is
    /// older than `GAP_MEMORY` (an hour; forgotten then, as PutSnowflake's page says).
    fn restart(&mut self) {
        let gaps = self.book.gaps(self.now);
        if self.delivery == Delivery::AtLeastOnce || gaps.iter().any(|g| g.age >= super::GAP_MEMORY) {
            return;
        }
        self.collect();
        let held: Vec<i64> = self
            .submitted
            .keys()
            .copied()
            .filter(|id| !self.outcomes.contains_key(id) && !self.rolled_back.contains(id))
            .collect();
        for id in held {
            self.rolled_back.insert(id);
            self.queue.push(self.submitted[&id].clone());
        }
        // `Board::rewind_chain`: only what Snowflake committed counts as in the channel.
        self.chain_end = self.chain_end.clone().min(self.service.committed.clone());
        let kept = crate::snowflake::gap_memory::GapMemory::default();
        kept.record("model", gaps);
        let kept = crate::snowflake::gap_memory::GapMemory::restore(&kept.to_state()).expect("our own state");
        self.book = ChannelBook::new("model".into(), self.delivery);
        self.book.restore_gaps(kept.of("model"), self.now);
        self.asked.clear();
        self.ahead = None;
    }

    fn apply(&mut self, step: &Step) {
        match *step {
            Step::Read { records, parts, rows, bad } => self.read(records, parts, rows, bad),
            Step::Submit { pick } => {
                if self.budget_full {
                    return;
                }
                if let Some(flow_file) = self.take(pick) {
                    self.submit(flow_file);
                }
            }
            Step::Redeliver { pick } => self.redeliver(pick),
            Step::Reread { from, records } => self.reread(from, records),
            Step::Drop { pick } => self.drop_one(pick),
            Step::Empty => self.submit(FlowFile {
                rows: Vec::new(),
                previous: Follows::Unknown,
                last: None,
                bad: false,
                repaired: false,
            }),
            Step::Append { limit_rows, result } => self.append(limit_rows, result),
            Step::Commit { appends } => self.service.commit(usize::from(appends)),
            Step::Report { stale } => self.report(stale),
            Step::Tick { seconds } => self.tick(seconds),
            Step::BudgetFull => {
                let done = self.book.give_back_waiting(self.now, Duration::ZERO);
                self.record(done);
            }
            Step::Budget { full } => {
                self.budget_full = full;
                self.budget_full_gives_back();
            }
            Step::Invalidate => self.book.close(),
            Step::Open => self.open(),
            Step::AskAgain { budget_free } => self.ask_again(budget_free),
            Step::Resend { pick } => self.resend(pick),
            Step::Collect => self.collect(),
            Step::SendBack { pick } => self.send_back(pick),
            Step::Repair { pick } => self.repair(pick),
            Step::Restart => self.restart(),
        }
    }

    fn record(&mut self, done: Vec<Done>) {
        for d in done {
            let o = d.outcome;
            let flow_file = self.submitted[&o.flow_file_id].clone();
            match o.route {
                Route::Success => {
                    let table: HashSet<&String> = self.service.committed_rows().map(|r| &r.row).collect();
                    for (row, _) in &flow_file.rows {
                        assert!(
                            table.contains(row),
                            "FlowFile {} succeeded but row {row} is not in the table: {o:?}",
                            o.flow_file_id
                        );
                    }
                }
                Route::Empty => assert!(flow_file.rows.is_empty(), "only a FlowFile without rows is empty"),
                // Routed to failure and sent back (exact tokens only: an at-least-once FlowFile partly
                // appended loads those rows again), or given back: it comes again.
                Route::Failure if self.delivery == Delivery::AtLeastOnce => {
                    for (row, _) in &flow_file.rows {
                        self.owed.remove(row);
                    }
                }
                Route::Failure | Route::Retry => self.uncollected.push(o.flow_file_id),
                // The at-least-once channels load it: none of its rows may be in the book's channel.
                Route::Reload => {
                    let book: HashSet<&String> =
                        self.service.table.iter().filter(|r| r.via == Via::Book).map(|r| &r.row).collect();
                    for (row, _) in &flow_file.rows {
                        assert!(
                            !book.contains(row),
                            "FlowFile {} goes for reload with row {row}, which its channel loads already: {o:?}",
                            o.flow_file_id
                        );
                    }
                    self.service.reload(&flow_file.rows);
                }
                Route::Invalid => assert!(flow_file.bad, "no row errors in this model: {o:?}"),
                Route::Resend => panic!("a request for rows again is not an outcome"),
            }
            let id = o.flow_file_id;
            assert!(self.outcomes.insert(id, o).is_none(), "FlowFile {id} got two outcomes");
        }
    }

    /// The table after every step: no record twice, every row of a FlowFile that succeeded in it,
    /// the exactly-once channel in the shard's order.
    fn check_table(&self) {
        let mut seen = HashSet::new();
        for row in self.service.committed_rows().filter(|r| r.via == Via::Book) {
            assert!(seen.insert(&row.row), "record {} was committed twice: {:?}", row.row, self.service.table);
        }
        seen.extend(self.service.committed_rows().map(|r| &r.row));
        for (id, o) in &self.outcomes {
            if o.route == Route::Success {
                for (row, _) in &self.submitted[id].rows {
                    assert!(seen.contains(row), "FlowFile {id} succeeded ({o:?}) but row {row} is not in the table");
                }
            }
        }
        let book: Vec<&OffsetToken> =
            self.service.committed_rows().filter(|r| r.via == Via::Book).map(|r| &r.token).collect();
        for pair in book.windows(2) {
            assert!(
                pair[0] < pair[1],
                "the exactly-once channel committed {} after {}: out of order",
                pair[1],
                pair[0]
            );
        }
    }

    fn check(&self) {
        self.check_table();
        assert_eq!(
            self.book.pending() + self.outcomes.len() + self.rolled_back.len(),
            self.submitted.len(),
            "every FlowFile is queued, has its outcome or was rolled back"
        );
        // Memory follows what is being appended, not what awaits Snowflake's commit: a FlowFile
        // that has gone out in full holds no rows, unless none of them had to go out at all.
        for p in &self.book.line {
            if !p.rows.is_empty() && p.tokens_assigned && p.awaiting.is_none() && p.next_row == p.row_count {
                assert_eq!(p.skipped as usize, p.row_count, "FlowFile {} holds rows it has appended", p.id);
            }
        }
    }

    /// The service answers every call, every FlowFile held after failure is sent back and every
    /// queued FlowFile comes in (in the queue's order): the queue must drain and every record owed
    /// must be loaded.
    fn drain(&mut self) {
        self.budget_full = false;
        for _ in 0..200 {
            self.collect();
            while !self.held_back.is_empty() {
                self.send_back(0);
            }
            while let Some(flow_file) = self.take(0) {
                self.submit(flow_file);
            }
            let settled = self.outcomes.len() + self.rolled_back.len() == self.submitted.len();
            if self.queue.is_empty() && self.uncollected.is_empty() && settled {
                break;
            }
            self.open();
            self.ask_again(true);
            while !self.asked.is_empty() {
                self.resend(0);
            }
            self.append(u8::MAX, AppendResult::Ok);
            self.service.commit(usize::MAX);
            self.report(false);
            self.tick(5);
            self.check();
        }
        let missing: Vec<_> = self
            .submitted
            .keys()
            .filter(|id| !self.outcomes.contains_key(id) && !self.rolled_back.contains(id))
            .collect();
        assert!(missing.is_empty(), "no progress although Snowflake answers: FlowFiles {missing:?} have no outcome");
        let table: HashSet<&String> = self.service.committed_rows().map(|r| &r.row).collect();
        for row in &self.owed {
            assert!(table.contains(row), "record {row} was read and never dropped, but is not in the table");
        }
    }
}

/// `sink::submit_one` for a FlowFile `link`'s chain puts into the shared channel: the book waits
/// for the record before it too, as for any other (issue 51, hole 1: the chain may still count a
/// FlowFile whose append was refused, until Java collects its outcome).
fn chain_follows(follows: Follows, passes: Option<OffsetToken>) -> (Follows, Option<OffsetToken>) {
    (follows, passes)
}

fn rows_of(flow_file: &FlowFile) -> Vec<Row> {
    let row =
        |(row, token): &(String, OffsetToken)| Row { json: row.clone().into_bytes().into(), token: token.clone() };
    flow_file.rows.iter().map(row).collect()
}

/// An outcome the engine gives without the book.
fn immediate(id: i64, route: Route) -> Done {
    let outcome = Outcome {
        flow_file_id: id,
        route,
        channel: "model".into(),
        offset_token: String::new(),
        message: String::new(),
        rows_sent: 0,
        rows_skipped: 0,
    };
    Done { outcome, bytes: 1 }
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(2000)
}

fn run(delivery: Delivery, steps: &[Step]) -> Model {
    run_on(Model::new(delivery, false), steps)
}

/// On a shard's shared channel, filled by the lease's chain.
fn run_shared(steps: &[Step]) -> Model {
    run_on(Model::new(Delivery::ExactlyOnce, true), steps)
}

fn run_on(mut model: Model, steps: &[Step]) -> Model {
    for s in steps {
        model.apply(s);
        model.check();
    }
    model.drain();
    model.check();
    model
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn model_exactly_once_channel_never_loads_a_row_twice_never_loses_one_and_always_drains(steps in prop::collection::vec(step(), 1..120)) {
        run(Delivery::ExactlyOnce, &steps);
    }

    #[test]
    fn model_at_least_once_channel_never_skips_or_doubles_a_submission(steps in prop::collection::vec(step(), 1..120)) {
        run(Delivery::AtLeastOnce, &steps);
    }

    /// Any order of arrival, re-deliveries and failures sent back, but nothing dropped and no
    /// wait long enough to pass over a gap: every record is loaded exactly once, none reloaded.
    #[test]
    fn model_any_order_without_drops_loads_every_record_once_in_the_exact_channel(steps in prop::collection::vec(step(), 1..120)) {
        let steps: Vec<Step> = steps
            .into_iter()
            .filter(|s| !matches!(s, Step::Drop { .. } | Step::Tick { .. } | Step::Repair { .. }))
            .collect();
        let model = run(Delivery::ExactlyOnce, &steps);
        let reloaded: Vec<_> = model.service.table.iter().filter(|r| r.via == Via::Reload).collect();
        prop_assert!(reloaded.is_empty(), "nothing waited long enough to be passed over, nothing was repaired: {reloaded:?}");
    }

    #[test]
    fn model_shared_channel_filled_by_the_chain_never_loads_a_row_twice_never_loses_one_and_always_drains(steps in prop::collection::vec(step(), 1..120)) {
        run_shared(&steps);
    }
}

/// Issue 38: appends of one row each, a backlog behind them, FlowFiles arriving, a stale token and
/// a reopen between: the bodies prepared ahead are taken (and match) where nothing changed the line.
#[test]
fn model_bodies_prepared_behind_appends_in_flight_are_the_next_appends() {
    let mut steps = vec![Step::Open];
    for _ in 0..4 {
        steps.push(Step::Read { records: 3, parts: false, rows: 1, bad: None });
        steps.push(Step::Submit { pick: 0 });
    }
    let ok = Step::Append { limit_rows: 2, result: AppendResult::Ok };
    steps.extend([
        ok.clone(),
        ok.clone(),
        Step::Read { records: 2, parts: true, rows: 3, bad: None },
        Step::Submit { pick: 0 },
    ]);
    steps.extend([ok.clone(), Step::Commit { appends: 2 }, Step::Report { stale: false }, ok.clone()]);
    steps.extend([Step::Append { limit_rows: 2, result: AppendResult::Stale }, Step::Open, ok.clone(), ok]);
    let model = run(Delivery::ExactlyOnce, &steps);
    assert!(model.ahead_hits >= 3, "{} appends took their prepared body", model.ahead_hits);
}

/// The sequence that shows defect 9 on the old writer, kept as a fixed case.
#[test]
fn model_redelivery_while_pending_then_commit() {
    run(
        Delivery::ExactlyOnce,
        &[
            Step::Open,
            Step::Read { records: 2, parts: false, rows: 1, bad: None },
            Step::Submit { pick: 0 },
            Step::Append { limit_rows: 4, result: AppendResult::Ok },
            Step::Redeliver { pick: 0 },
            Step::Submit { pick: 0 },
            Step::Append { limit_rows: 4, result: AppendResult::Ok },
            Step::Commit { appends: 2 },
            Step::Report { stale: false },
        ],
    );
}

/// Found by the model: a re-delivery queued behind newer rows while its original was pending; the
/// original went to failure, and on the reopen the re-delivery's row was taken for covered by the
/// newer rows, so it succeeded without being loaded.
#[test]
fn model_redelivery_of_a_failed_flow_file_behind_newer_rows() {
    run(
        Delivery::ExactlyOnce,
        &[
            Step::Open,
            Step::Read { records: 1, parts: false, rows: 1, bad: None },
            Step::Submit { pick: 0 },
            Step::Read { records: 1, parts: false, rows: 1, bad: None },
            Step::Submit { pick: 0 },
            Step::Redeliver { pick: 1 },
            Step::Read { records: 1, parts: false, rows: 1, bad: None },
            Step::Submit { pick: 1 },
            Step::Redeliver { pick: 0 },
            Step::Submit { pick: 0 },
            Step::Append { limit_rows: 1, result: AppendResult::Rejected },
        ],
    );
}

/// Issue 34, item 1: the second FlowFile of a shard came first (no prioritizer, another writer of
/// content, two ConsumeKinesis tasks); the old book lined it up, and the first one's rows, below the
/// queued token, were skipped and never loaded.
#[test]
fn model_a_later_flow_file_taken_first_waits_and_the_earlier_one_is_loaded() {
    run(
        Delivery::ExactlyOnce,
        &[
            Step::Open,
            Step::Read { records: 2, parts: false, rows: 1, bad: None },
            Step::Read { records: 2, parts: false, rows: 1, bad: None },
            Step::Submit { pick: 1 },
            Step::Append { limit_rows: 4, result: AppendResult::Ok },
            Step::Commit { appends: 1 },
            Step::Report { stale: false },
            Step::Submit { pick: 0 },
        ],
    );
}

/// Issue 34, item 3 on one node: a FlowFile went to `failure` while the one after it waited to be
/// sent; sent back, it must load, and the one after it must not pass it.
#[test]
fn model_a_flow_file_sent_back_from_failure_loads() {
    run(
        Delivery::ExactlyOnce,
        &[
            Step::Open,
            Step::Read { records: 1, parts: false, rows: 1, bad: None },
            Step::Read { records: 1, parts: false, rows: 1, bad: None },
            Step::Submit { pick: 0 },
            Step::Append { limit_rows: 1, result: AppendResult::Rejected },
            Step::Submit { pick: 0 },
            Step::Open,
            Step::Append { limit_rows: 4, result: AppendResult::Ok },
            Step::Commit { appends: 1 },
            Step::Report { stale: false },
        ],
    );
}

/// Issue 50: rows dropped once appended, a reopen before the commit, and FlowFiles asked back and
/// handed over in another order than asked (Java reads them as it gets to them): every record once.
#[test]
fn model_rows_dropped_once_appended_come_back_after_a_reopen_and_load_once() {
    let mut steps = vec![Step::Open];
    for _ in 0..3 {
        steps.push(Step::Read { records: 2, parts: false, rows: 1, bad: None });
        steps.push(Step::Submit { pick: 0 });
    }
    let ok = Step::Append { limit_rows: 3, result: AppendResult::Ok };
    steps.extend([ok.clone(), ok.clone(), Step::Commit { appends: 1 }, Step::Invalidate, Step::Open]);
    steps.extend([
        Step::AskAgain { budget_free: true },
        Step::Resend { pick: 1 },
        ok.clone(),
        Step::Resend { pick: 0 },
    ]);
    steps.extend([ok.clone(), ok, Step::Commit { appends: 5 }, Step::Report { stale: false }]);
    let model = run(Delivery::ExactlyOnce, &steps);
    assert!(model.rows_dropped >= 2, "{} FlowFiles dropped their rows", model.rows_dropped);
    assert_eq!(model.outcomes.len(), 3);
    assert!(model.outcomes.values().all(|o| o.route == Route::Success));
}

/// Issue 51, hole 1: an append refused with a 4xx on a shard's shared channel fails the FlowFile;
/// until Java collects that outcome the lease's chain still counts it as put in, so the next
/// FlowFile follows on from it and goes in. It must wait for the failed one: before, it went in
/// as it came (`Follows::Unknown`), Snowflake committed past the failed records, and when they
/// came back from `failure` they were skipped as a replay, with `success`.
#[test]
fn model_a_refused_append_on_a_shared_channel_does_not_let_the_next_flow_file_commit_past_it() {
    let model = run_shared(&[
        Step::Open,
        Step::Read { records: 2, parts: false, rows: 1, bad: None },
        Step::Read { records: 1, parts: false, rows: 1, bad: None },
        Step::Submit { pick: 0 },
        Step::Append { limit_rows: 4, result: AppendResult::Rejected },
        Step::Open,
        Step::Submit { pick: 0 },
        Step::Append { limit_rows: 4, result: AppendResult::Ok },
        Step::Commit { appends: 1 },
        Step::Report { stale: false },
        Step::Collect,
        Step::SendBack { pick: 0 },
        Step::Submit { pick: 0 },
    ]);
    assert!(model.service.table.iter().all(|r| r.via == Via::Book), "every record through the shared channel");
}
