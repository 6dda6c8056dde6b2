//! Model test of exactly once across failover (issue 17): one shard read by two NiFi nodes in
//! turn, each with its own JVM (its own [`Board`]), NiFi queue (kept across a kill), consumer
//! tenure and PutSnowflake channel book (the real [`ChannelBook`]) on the shard's one shared
//! Snowflake channel; the real decisions of `consumer::resume` (where a take resumes, what it
//! writes) and PutSnowflake's `snowflake::router` (each node's own [`Router`], fed the board's
//! facts as the sink feeds it, with the model's clock: shared channel, superseded, parked, waiting
//! for an earlier FlowFile, per-node, the wait limit). Random sequences
//! of reads (NiFi commits at once, so the checkpoint may run far ahead of Snowflake), checkpoint
//! writes carrying the loaded position, reports, takes of a dead or paused node's lease, graceful
//! releases followed by an offload of the queue to the other node, kills and restarts, pauses,
//! opens, appends (an append on a channel another node reopened is refused and reopens), commits
//! and reports, and a load-balanced connection between the processors (FlowFiles move to the other
//! node while both run), all against an in-memory lease row and Snowflake channel.
//!
//! Checked after every step: no record is in the table twice, except records that went through a
//! per-node channel (at least once: another node's FlowFile whose lease is still held by a live
//! node after the wait, which is how a load-balanced connection looks; an offload never does).
//! At the end, with every service answering and every node alive: every record is in the table
//! (none skipped unloaded) and, again, none twice.
//!
//! Time passes only where a step says so (`ParkExpires`, `ParkLimit`, the end): a parked FlowFile's
//! wait for its holder to be replaced runs out only while that holder is alive, unless waits add
//! up while it is dead (a take that came late: the router then loads at least once, which the
//! check allows).
//!
//! `PROPTEST_CASES` sets the number of cases (default 2000).

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use proptest::prelude::*;
use tokio::time::Instant;

use crate::consumer::resume::{on_take, resume, FailoverPosition};
use crate::feedback::{Board, LinkKey, Loaded, ShardTenure};
use crate::kinesis::position::Position;
use crate::lease::{Checkpoint, LoadedOnTake};
use crate::snowflake::book::{ChannelBook, Done, Follows, Refilled, Route, Work};
use crate::snowflake::link::{LeaseId, Tracked};
use crate::snowflake::offset::OffsetToken;
use crate::snowflake::router::{Arrival, LeaseFacts, Order, Router, RouterSettings, Way};
use crate::snowflake::rows::{Delivery, Row};

const SHARD: &str = "shardId-000000000000";
const DESTINATION: &str = "DB.PUBLIC.EVENTS-STREAMING";

fn key() -> LinkKey {
    LinkKey { stream: "arn:aws:kinesis:us-east-1:1:stream/s".into(), application: "app".into() }
}

fn node_name(n: usize) -> String {
    format!("node-{n}")
}

/// The Order Wait of the model's PutSnowflakes: shorter than a held lease's wait (twice the
/// consumers' failover timeout of 7 s, plus 5 s), so an order wait can pass alone.
const ORDER_WAIT: Duration = Duration::from_secs(10);
const HELD_WAIT: Duration = Duration::from_secs(19);
const RETRY_LIMIT: Duration = Duration::from_secs(300);

/// Node `n`'s PutSnowflake router, started at `now`. It warms up until its consumer reads the
/// table (the product waits a minute; a consumer reads within a second): the warm-up never ends
/// by time here, and the board's reads say when a consumer has read.
fn router(n: usize, now: Instant) -> Router<FlowFile> {
    let settings = RouterSettings {
        node: node_name(n),
        order_wait: ORDER_WAIT,
        retry_limit: RETRY_LIMIT,
        warm_up: Duration::from_secs(100 * 365 * 24 * 3600),
        unpark_interval: Duration::ZERO,
    };
    Router::new(settings, now)
}

#[derive(Debug, Clone)]
enum Step {
    /// The producer writes records to the shard.
    Put {
        n: u8,
    },
    /// The holder (as it believes) reads records into one FlowFile, which NiFi commits at once.
    Read {
        node: u8,
        n: u8,
    },
    /// The holder's engine takes in its board's loaded position and writes a checkpoint (fenced).
    Checkpoint {
        node: u8,
    },
    /// The node's engine scans the row and publishes the tenure on its board.
    Scan {
        node: u8,
    },
    /// A node takes the lease: free, or its holder dead or paused past the failover timeout.
    Take {
        node: u8,
    },
    /// The holder stops gracefully (final checkpoint, release); with `offload` its queue then moves
    /// to the other node (NiFi's offload).
    Release {
        node: u8,
        offload: bool,
    },
    Kill {
        node: u8,
    },
    Restart {
        node: u8,
    },
    Pause {
        node: u8,
    },
    Resume {
        node: u8,
    },
    /// PutSnowflake takes up to `n` FlowFiles from its queue.
    Submit {
        node: u8,
        n: u8,
    },
    Open {
        node: u8,
    },
    Append {
        node: u8,
        rows: u8,
    },
    /// Snowflake commits up to this many appends.
    Commit {
        appends: u8,
    },
    /// A node's status poller reports the channel's committed token.
    Report {
        node: u8,
    },
    /// Parked FlowFiles have waited longer than a dead holder takes to be replaced.
    ParkExpires {
        node: u8,
    },
    /// A load-balanced connection between ConsumeKinesis and PutSnowflake: up to `n` of the node's
    /// newest queued FlowFiles go to the other node's queue while both run.
    Balance {
        node: u8,
        n: u8,
    },
    /// Parked FlowFiles reach the sink's wait limit (nobody took their lease in time): they go into the
    /// shared channel ordered by the book, which never passes a gap; the book's order wait passes too.
    ParkLimit {
        node: u8,
    },
    /// Two FlowFiles of the node's queue swap places (no prioritizer, several ConsumeKinesis tasks,
    /// other flows writing content).
    Reorder {
        node: u8,
        a: u16,
        b: u16,
    },
}

fn step() -> impl Strategy<Value = Step> {
    let node = 0u8..2;
    prop_oneof![
        3 => (1u8..6).prop_map(|n| Step::Put { n }),
        5 => (node.clone(), 1u8..5).prop_map(|(node, n)| Step::Read { node, n }),
        3 => node.clone().prop_map(|node| Step::Checkpoint { node }),
        2 => node.clone().prop_map(|node| Step::Scan { node }),
        2 => node.clone().prop_map(|node| Step::Take { node }),
        1 => (node.clone(), any::<bool>()).prop_map(|(node, offload)| Step::Release { node, offload }),
        1 => node.clone().prop_map(|node| Step::Kill { node }),
        1 => node.clone().prop_map(|node| Step::Restart { node }),
        1 => node.clone().prop_map(|node| Step::Pause { node }),
        1 => node.clone().prop_map(|node| Step::Resume { node }),
        4 => (node.clone(), 1u8..4).prop_map(|(node, n)| Step::Submit { node, n }),
        2 => node.clone().prop_map(|node| Step::Open { node }),
        4 => (node.clone(), 1u8..6).prop_map(|(node, rows)| Step::Append { node, rows }),
        3 => (0u8..3).prop_map(|appends| Step::Commit { appends }),
        3 => node.clone().prop_map(|node| Step::Report { node }),
        1 => node.clone().prop_map(|node| Step::ParkExpires { node }),
        1 => (node.clone(), 1u8..3).prop_map(|(node, n)| Step::Balance { node, n }),
        2 => (node.clone(), any::<u16>(), any::<u16>()).prop_map(|(node, a, b)| Step::Reorder { node, a, b }),
        1 => node.prop_map(|node| Step::ParkLimit { node }),
    ]
}

fn token(record: u64) -> OffsetToken {
    OffsetToken::from_counter(record)
}

fn position(record: u64) -> Position {
    Position::new(record.to_string(), None)
}

fn record_of(p: &Position) -> u64 {
    p.sequence_number.parse().expect("model positions are record numbers")
}

/// The lease row in DynamoDB.
#[derive(Default)]
struct TableRow {
    /// The holding engine: its node and that node's incarnation (a restarted node is a new owner).
    holder: Option<(usize, u64)>,
    counter: u64,
    checkpoint: Option<u64>,
    loaded: Option<Loaded>,
}

/// The shared channel in Snowflake: one open handle at a time.
#[derive(Default)]
struct Channel {
    table: Vec<u64>,
    committed: Option<u64>,
    uncommitted: VecDeque<(Vec<u64>, u64)>,
    /// Which node's open is current (an append from any other is refused).
    opened_by: Option<(usize, u64)>,
    opens: u64,
}

#[derive(Clone, Debug)]
struct FlowFile {
    id: i64,
    records: Vec<u64>,
    node: usize,
    tenure: u64,
}

/// What a consumer tenure knows.
struct Tenure {
    counter: u64,
    /// The next record to read.
    next: u64,
    /// What the tenure knows Snowflake has.
    loaded: Loaded,
}

struct Node {
    alive: bool,
    /// The node's consumer read the lease table since the node (re)started: until then its
    /// PutSnowflake is warming up (the product waits a minute; a consumer scans within a second).
    scanned: bool,
    /// Bumped by every restart: the engine's owner id.
    incarnation: u64,
    paused: bool,
    board: Board,
    tenure: Option<Tenure>,
    queue: VecDeque<FlowFile>,
    book: ChannelBook,
    /// The open this node's book belongs to.
    handle: Option<u64>,
    taken: BTreeMap<i64, FlowFile>,
    /// PutSnowflake's router: its parked FlowFiles, reports, the leases it put into the channel.
    router: Router<FlowFile>,
    /// FlowFiles whose rows the book asked for again (dropped once appended, then the channel
    /// reopened): Java hands them over at its next submission.
    asked: Vec<i64>,
}

impl Node {
    fn new(n: usize, now: Instant) -> Self {
        Self {
            alive: true,
            scanned: false,
            incarnation: 0,
            paused: false,
            board: Board::default(),
            tenure: None,
            queue: VecDeque::new(),
            book: ChannelBook::new("shared".into(), Delivery::ExactlyOnce),
            handle: None,
            taken: BTreeMap::new(),
            router: router(n, now),
            asked: Vec::new(),
        }
    }
}

struct Model {
    records: u64,
    row: TableRow,
    channel: Channel,
    nodes: [Node; 2],
    next_id: i64,
    now: Instant,
    /// Records that went through a per-node channel (at least once).
    at_least_once: std::collections::BTreeSet<u64>,
    coverage: Coverage,
}

/// How often a run took each path the model is about.
#[derive(Debug, Default, Clone, Copy)]
struct Coverage {
    shared: u64,
    superseded: u64,
    parked: u64,
    awaited: u64,
    per_node: u64,
    takes_over_a_dead_or_paused_holder: u64,
    resumes_behind_the_checkpoint: u64,
    offloads_with_flow_files: u64,
    stale_appends: u64,
    balanced: u64,
    reordered: u64,
    park_limits: u64,
}

impl Coverage {
    fn add(&mut self, o: &Coverage) {
        self.shared += o.shared;
        self.superseded += o.superseded;
        self.parked += o.parked;
        self.awaited += o.awaited;
        self.per_node += o.per_node;
        self.takes_over_a_dead_or_paused_holder += o.takes_over_a_dead_or_paused_holder;
        self.resumes_behind_the_checkpoint += o.resumes_behind_the_checkpoint;
        self.offloads_with_flow_files += o.offloads_with_flow_files;
        self.stale_appends += o.stale_appends;
        self.balanced += o.balanced;
        self.reordered += o.reordered;
        self.park_limits += o.park_limits;
    }
}

impl Model {
    fn new() -> Self {
        let now = Instant::now();
        Self {
            records: 0,
            row: TableRow::default(),
            channel: Channel::default(),
            nodes: [Node::new(0, now), Node::new(1, now)],
            next_id: 1,
            now,
            at_least_once: Default::default(),
            coverage: Coverage::default(),
        }
    }

    fn apply(&mut self, step: &Step) {
        match *step {
            Step::Put { n } => self.records += u64::from(n),
            Step::Read { node, n } => self.read(node as usize, u64::from(n)),
            Step::Checkpoint { node } => self.checkpoint(node as usize),
            Step::Scan { node } => self.scan(node as usize),
            Step::Take { node } => self.take(node as usize),
            Step::Release { node, offload } => self.release(node as usize, offload),
            Step::Kill { node } => self.kill(node as usize),
            Step::Restart { node } => self.restart(node as usize),
            Step::Pause { node } => self.nodes[node as usize].paused = true,
            Step::Resume { node } => {
                // A node back from a pause beats and scans before it delivers again.
                self.nodes[node as usize].paused = false;
                self.scan(node as usize);
            }
            Step::Submit { node, n } => self.submit(node as usize, usize::from(n)),
            Step::Open { node } => self.open(node as usize),
            Step::Append { node, rows } => self.append(node as usize, usize::from(rows)),
            Step::Commit { appends } => self.commit(usize::from(appends)),
            Step::Report { node } => self.report(node as usize),
            Step::ParkExpires { node } => self.park_expires(node as usize),
            Step::ParkLimit { node } => self.park_limit(node as usize),
            Step::Balance { node, n } => self.balance(node as usize, usize::from(n)),
            Step::Reorder { node, a, b } => {
                // NiFi's queue keeps no order without a prioritizer (issue 34).
                let queue = &mut self.nodes[node as usize].queue;
                if !queue.is_empty() {
                    let len = queue.len();
                    queue.swap(a as usize % len, b as usize % len);
                    self.coverage.reordered += 1;
                }
            }
        }
    }

    fn active(&self, n: usize) -> bool {
        self.nodes[n].alive && !self.nodes[n].paused
    }

    /// The row names node `n`'s running engine.
    fn holds(&self, n: usize) -> bool {
        self.row.holder == Some((n, self.nodes[n].incarnation))
    }

    fn read(&mut self, n: usize, count: u64) {
        if !self.active(n) {
            return;
        }
        let Some(t) = self.nodes[n].tenure.as_mut() else { return };
        // A node delivers only while it holds the lease as far as its heartbeat can tell; a node
        // that lost it while paused stops on its next scan (`Scan` drops the tenure).
        let end = (t.next + count).min(self.records + 1);
        if end <= t.next {
            return;
        }
        let records: Vec<u64> = (t.next..end).collect();
        t.next = end;
        let counter = t.counter;
        let id = self.next_id;
        self.next_id += 1;
        self.nodes[n].queue.push_back(FlowFile { id, records, node: n, tenure: counter });
    }

    fn checkpoint(&mut self, n: usize) {
        if !self.active(n) {
            return;
        }
        let fact = self.nodes[n].board.loaded(&key(), SHARD);
        let Some(t) = self.nodes[n].tenure.as_mut() else { return };
        if let Some(p) = fact {
            t.loaded = t.loaded.clone().max(Loaded::Through(p));
        }
        if self.row.holder != Some((n, self.nodes[n].incarnation)) || self.row.counter != t.counter {
            return; // fenced
        }
        if t.next > 1 {
            self.row.checkpoint = Some(t.next - 1);
        }
        self.row.loaded = Some(t.loaded.clone());
    }

    fn scan(&mut self, n: usize) {
        if !self.nodes[n].alive {
            return;
        }
        self.nodes[n].scanned = true;
        let tracked =
            self.row.loaded.is_some().then(|| {
                (SHARD.to_owned(), ShardTenure { counter: self.row.counter, held: self.row.holder.is_some() })
            });
        self.nodes[n].board.publish_tenures(&key(), std::time::Duration::from_secs(7), tracked);
        let mine = self.nodes[n].tenure.as_ref().is_some_and(|t| self.holds(n) && self.row.counter == t.counter);
        if !mine && !self.nodes[n].paused {
            self.nodes[n].tenure = None; // the lease moved on: readers stop
        }
        let held: Vec<(String, u64)> = self.nodes[n].tenure.iter().map(|t| (SHARD.to_owned(), t.counter)).collect();
        self.nodes[n].board.publish_held(&key(), "engine", held);
    }

    fn take(&mut self, n: usize) {
        if !self.active(n) || self.nodes[n].tenure.is_some() {
            return;
        }
        if let Some((h, incarnation)) = self.row.holder {
            if self.active(h) && self.nodes[h].incarnation == incarnation {
                return; // its heartbeat is fresh
            }
            self.coverage.takes_over_a_dead_or_paused_holder += 1;
        }
        let checkpoint = match self.row.checkpoint {
            Some(c) => Checkpoint::At(position(c)),
            None => Checkpoint::None,
        };
        let before = self.row.loaded.clone();
        match on_take(FailoverPosition::SnowflakeCommit, &checkpoint) {
            LoadedOnTake::MarkStart if self.row.loaded.is_none() => self.row.loaded = Some(Loaded::FromTrimHorizon),
            LoadedOnTake::Remove => self.row.loaded = None,
            _ => {}
        }
        self.row.holder = Some((n, self.nodes[n].incarnation));
        self.row.counter += 1;
        let r = resume(FailoverPosition::SnowflakeCommit, &checkpoint, before.as_ref());
        let next = r.after.as_ref().map_or(1, |p| record_of(p) + 1);
        if self.row.checkpoint.is_some_and(|c| next <= c) {
            self.coverage.resumes_behind_the_checkpoint += 1;
        }
        let loaded = r.loaded.expect("tracked");
        self.nodes[n].tenure = Some(Tenure { counter: self.row.counter, next, loaded });
        self.nodes[n].board.took_here(&key(), "engine", SHARD, self.row.counter, r.after.clone());
    }

    fn release(&mut self, n: usize, offload: bool) {
        if !self.active(n) {
            return;
        }
        self.checkpoint(n);
        if self.nodes[n].tenure.take().is_some() && self.holds(n) {
            self.row.holder = None;
        }
        self.nodes[n].board.forget_engine(&key(), "engine");
        if offload {
            // NiFi offloads a disconnected node: its processors stopped (PutSnowflake's sessions
            // rolled back), its queue goes to the other node.
            self.stop_put_snowflake(n);
            let moved: Vec<FlowFile> = self.nodes[n].queue.drain(..).collect();
            if !moved.is_empty() {
                self.coverage.offloads_with_flow_files += 1;
            }
            self.nodes[1 - n].queue.extend(moved);
        }
    }

    /// NiFi's load balancing sends some of node `n`'s newest queued FlowFiles to the other node.
    fn balance(&mut self, n: usize, count: usize) {
        if !self.nodes[n].alive || !self.nodes[1 - n].alive {
            return;
        }
        let queue = &mut self.nodes[n].queue;
        let moved: Vec<FlowFile> = queue.drain(queue.len().saturating_sub(count)..).collect();
        if !moved.is_empty() {
            self.coverage.balanced += 1;
        }
        self.nodes[1 - n].queue.extend(moved);
    }

    /// PutSnowflake stops: FlowFiles without an outcome (parked ones too) return to the queue's front.
    fn stop_put_snowflake(&mut self, n: usize) {
        let node = &mut self.nodes[n];
        let stopped = std::mem::replace(&mut node.router, router(n, self.now)).stop();
        let mut taken: Vec<FlowFile> = std::mem::take(&mut node.taken).into_values().collect();
        taken.extend(stopped.parked.into_iter().map(|u| u.item));
        taken.sort_by_key(|f| f.id);
        for f in taken.into_iter().rev() {
            node.queue.push_front(f);
        }
        node.book = ChannelBook::new("shared".into(), Delivery::ExactlyOnce);
        node.handle = None;
        node.asked.clear();
        for lease in stopped.rewind {
            node.board.rewind_chain(&lease.key, &lease.shard, lease.tenure);
        }
    }

    fn kill(&mut self, n: usize) {
        self.stop_put_snowflake(n);
        let node = &mut self.nodes[n];
        node.alive = false;
        node.scanned = false;
        node.paused = false;
        node.tenure = None;
        node.board = Board::default();
    }

    fn restart(&mut self, n: usize) {
        if !self.nodes[n].alive {
            self.nodes[n].alive = true;
            self.nodes[n].incarnation += 1;
        }
    }

    fn submit(&mut self, n: usize, count: usize) {
        if !self.nodes[n].alive {
            return;
        }
        // As the Java shim does: FlowFiles asked back are handed over first, then new FlowFiles are
        // submitted, then the outcomes call decides the parked ones again.
        self.resend(n);
        for _ in 0..count {
            let Some(f) = self.nodes[n].queue.pop_front() else { break };
            self.decide(n, f);
        }
        self.unpark(n);
    }

    /// The router decides the parked FlowFiles again (as the sink's outcomes call does).
    fn unpark(&mut self, n: usize) {
        let scans = self.nodes[n].board.scans(&key());
        let due = self.nodes[n].router.unpark_due(scans, self.now);
        for u in due {
            self.decide(n, u.item);
        }
    }

    /// Time passes for parked FlowFiles: the wait for a holder to be replaced while that holder is
    /// alive (a dead or paused holder is replaced within it), else the order wait alone.
    fn park_expires(&mut self, n: usize) {
        if !self.nodes[n].alive {
            return;
        }
        let holder_alive = self.row.holder.is_some_and(|(h, inc)| self.active(h) && self.nodes[h].incarnation == inc);
        self.now += if holder_alive { HELD_WAIT } else { ORDER_WAIT };
        self.unpark(n);
    }

    /// The FlowFile's way, by node `n`'s router on the facts of its board, as the sink takes it.
    fn decide(&mut self, n: usize, f: FlowFile) {
        let first = *f.records.first().expect("a FlowFile holds records");
        let tracked = Tracked {
            lease: LeaseId { key: key(), shard: SHARD.into(), tenure: f.tenure },
            node: node_name(f.node),
            last: position(*f.records.last().expect("a FlowFile holds records")),
            previous: (first > 1).then(|| position(first - 1)),
        };
        let facts = LeaseFacts::read(&mut self.nodes[n].board, &tracked.lease, tracked.previous.as_ref(), DESTINATION);
        let arrival =
            Arrival { id: f.id, tracked: &tracked, destination: DESTINATION, bytes: 1, arrival_ms: None, item: &f };
        let way = self.nodes[n].router.route(&arrival, &facts, self.now);
        match &way {
            Way::Shared(Order::Chain) => self.coverage.shared += 1,
            Way::Shared(Order::Book) => self.coverage.park_limits += 1,
            Way::Superseded { .. } => self.coverage.superseded += 1,
            Way::Parked { awaits_chain: false } => self.coverage.parked += 1,
            Way::Parked { awaits_chain: true } => self.coverage.awaited += 1,
            Way::PerNode { .. } => self.coverage.per_node += 1,
        }
        match way {
            Way::Shared(Order::Chain) => {
                self.nodes[n].board.put_in_channel(&key(), SHARD, f.tenure, &tracked.last);
                self.line_up(n, f, Follows::Unknown);
            }
            // Nobody decided its lease within the wait limit: ordered by the book, which never
            // passes a gap.
            Way::Shared(Order::Book) => {
                let follows = if first > 1 { Follows::After(token(first - 1)) } else { Follows::Nothing };
                self.line_up(n, f, follows);
            }
            Way::Superseded { .. } | Way::Parked { .. } => {}
            // At least once through the node's own channel: loaded as it comes, and its records
            // may load once more later (the documented limit of a load-balanced connection).
            Way::PerNode { .. } => {
                self.channel.table.extend(&f.records);
                self.at_least_once.extend(&f.records);
            }
        }
    }

    /// Into the shared channel's book.
    fn line_up(&mut self, n: usize, f: FlowFile, follows: Follows) {
        let rows =
            f.records.iter().map(|r| Row { json: r.to_string().into_bytes().into(), token: token(*r) }).collect();
        self.nodes[n].taken.insert(f.id, f.clone());
        let work = Work { flow_file_id: f.id, rows, bytes: 1, follows, shared: true, resent: false, passes: None };
        let done = self.nodes[n].book.accept(work, self.now);
        self.settle(n, done);
    }

    /// The writer asks for the rows of FlowFiles lined up without them.
    fn ask_again(&mut self, n: usize) {
        let due = self.nodes[n].book.resends_due(|_| true);
        self.nodes[n].asked.extend(due.into_iter().map(|(id, _)| id));
    }

    /// Java reads the FlowFiles asked back again (those it still holds) and hands them over.
    fn resend(&mut self, n: usize) {
        for id in std::mem::take(&mut self.nodes[n].asked) {
            let Some(f) = self.nodes[n].taken.get(&id) else { continue };
            let rows =
                f.records.iter().map(|r| Row { json: r.to_string().into_bytes().into(), token: token(*r) }).collect();
            let work = Work {
                flow_file_id: id,
                rows,
                bytes: 1,
                follows: Follows::Unknown,
                shared: true,
                resent: true,
                passes: None,
            };
            match self.nodes[n].book.refill(work) {
                Refilled::Taken { done, .. } => self.settle(n, done),
                Refilled::Unknown { .. } => panic!("FlowFile {id} asked back and held, but the book does not know it"),
            }
        }
    }

    fn open(&mut self, n: usize) {
        if !self.nodes[n].alive || self.nodes[n].book.is_open() {
            return;
        }
        self.channel.uncommitted.clear(); // Snowflake discards what it did not commit
        self.channel.opens += 1;
        self.channel.opened_by = Some((n, self.channel.opens));
        self.nodes[n].handle = Some(self.channel.opens);
        let reported = self.channel.committed.map(token);
        let done = self.nodes[n].book.opened(reported, 0);
        self.settle(n, done);
        self.ask_again(n);
    }

    fn append(&mut self, n: usize, rows: usize) {
        let node = &self.nodes[n];
        if !node.alive || !node.book.is_open() {
            return;
        }
        if self.channel.opened_by.map(|(_, open)| open) != node.handle {
            self.coverage.stale_appends += 1;
            self.nodes[n].book.close(); // stale continuation token: reopen
            return;
        }
        let take = self.nodes[n].book.rows_fitting(usize::MAX).min(rows);
        let Some((body, end)) = self.nodes[n].book.body(take) else { return };
        self.nodes[n].book.attempted(self.now);
        let records: Vec<u64> = String::from_utf8(body).unwrap().lines().map(|l| l.parse().unwrap()).collect();
        let end_record = end.to_string().parse().expect("whole tokens");
        self.channel.uncommitted.push_back((records, end_record));
        self.nodes[n].book.appended(take, end, self.now);
        self.ask_again(n);
    }

    fn commit(&mut self, appends: usize) {
        for _ in 0..appends {
            let Some((records, end)) = self.channel.uncommitted.pop_front() else { return };
            self.channel.table.extend(records);
            self.channel.committed = Some(end);
        }
    }

    fn report(&mut self, n: usize) {
        if !self.nodes[n].alive {
            return;
        }
        let done = self.nodes[n].book.commit_reported(self.channel.committed.map(token));
        self.settle(n, done);
    }

    /// Outcomes: a success tells the node's board what Snowflake has (through the router, as the
    /// sink does); a failure goes back.
    fn settle(&mut self, n: usize, done: Vec<Done>) {
        let outcomes: Vec<_> = done.iter().map(|d| d.outcome.clone()).collect();
        for d in done {
            let Some(f) = self.nodes[n].taken.remove(&d.outcome.flow_file_id) else { continue };
            match d.outcome.route {
                Route::Success => {
                    for r in &f.records {
                        assert!(
                            self.channel.table.contains(r),
                            "FlowFile {} succeeded without record {r} in the table",
                            f.id
                        );
                    }
                }
                Route::Failure => self.nodes[n].queue.push_front(f),
                // Back to the queue for the at-least-once channels: loaded there, maybe once more later.
                Route::Reload => {
                    self.channel.table.extend(&f.records);
                    self.at_least_once.extend(&f.records);
                }
                other => panic!("unexpected route {other:?}"),
            }
        }
        let settled = self.nodes[n].router.settled(&outcomes);
        settled.tell(&mut self.nodes[n].board);
    }

    /// The sink's wait limit passes: parked FlowFiles nobody decided go into the shared channel,
    /// ordered by the book; then the book's order wait passes too.
    fn park_limit(&mut self, n: usize) {
        if !self.nodes[n].alive {
            return;
        }
        self.now += RETRY_LIMIT;
        self.unpark(n);
        let (done, passed) = self.nodes[n].book.pass_stuck(self.now, std::time::Duration::ZERO);
        let (done2, _) = self.nodes[n].book.pass_stuck(self.now, std::time::Duration::ZERO);
        assert!(passed.is_none(), "a shared channel never passes a gap");
        self.settle(n, done);
        self.settle(n, done2);
    }

    fn check_no_duplicates(&self) {
        let mut seen = std::collections::HashSet::new();
        for r in &self.channel.table {
            assert!(
                seen.insert(r) || self.at_least_once.contains(r),
                "record {r} is in the table twice: {:?}",
                self.channel.table
            );
        }
    }

    /// Every service answers, every node is alive and unpaused: the run must complete.
    fn finish(&mut self) {
        for n in 0..2 {
            self.restart(n);
            self.nodes[n].paused = false;
        }
        for _ in 0..400 {
            for n in 0..2 {
                self.scan(n);
                self.take(n);
                self.read(n, 10);
                self.checkpoint(n);
                self.submit(n, 10);
                // Time passes: parked FlowFiles' waits run out (a held lease's holder is alive).
                self.park_expires(n);
                self.park_limit(n);
                self.open(n);
                self.append(n, 50);
                self.commit(usize::MAX);
                self.report(n);
                self.check_no_duplicates();
            }
            let queues_empty =
                self.nodes.iter().all(|n| n.queue.is_empty() && n.taken.is_empty() && n.router.parked().0 == 0);
            let all_read = self.nodes.iter().any(|n| n.tenure.as_ref().is_some_and(|t| t.next > self.records));
            if queues_empty && all_read && self.channel.uncommitted.is_empty() {
                break;
            }
        }
        let mut loaded: Vec<u64> = self.channel.table.clone();
        loaded.sort_unstable();
        loaded.dedup();
        let expected: Vec<u64> = (1..=self.records).collect();
        assert_eq!(loaded, expected, "every record at the end");
        self.check_no_duplicates();
    }
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(2000)
}

fn run(steps: &[Step]) -> Coverage {
    run_model(steps).coverage
}

fn run_model(steps: &[Step]) -> Model {
    let mut model = Model::new();
    for s in steps {
        model.apply(s);
        model.check_no_duplicates();
    }
    model.finish();
    model
}

/// Issue 34, items 2 and 11: node 0 was killed while a FlowFile of records 1-4 was half loaded
/// (records 1 and 2 committed in the shared channel); after its restart no engine of its JVM knows
/// that lease's chain and nobody takes the lease (its shard had ended, or ConsumeKinesis is stopped),
/// so the FlowFile parks until the sink's wait limit. It then went to the per-node channels and
/// records 1 and 2 loaded twice (1,000 duplicate rows in a real two-NiFi run). Now it goes into the
/// shared channel ordered by the book, and Snowflake's committed records 1 and 2 are skipped.
#[test]
fn model_a_flow_file_half_loaded_before_a_kill_loads_the_rest_once_at_the_wait_limit() {
    let model = run_model(&[
        Step::Put { n: 4 },
        Step::Take { node: 0 },
        Step::Read { node: 0, n: 4 },
        Step::Submit { node: 0, n: 1 },
        Step::Open { node: 0 },
        Step::Append { node: 0, rows: 2 },
        Step::Commit { appends: 1 },
        Step::Kill { node: 0 },
        Step::Restart { node: 0 },
        Step::Submit { node: 0, n: 1 },
        Step::ParkLimit { node: 0 },
        Step::Open { node: 0 },
        Step::Append { node: 0, rows: 4 },
        Step::Commit { appends: 1 },
        Step::Report { node: 0 },
    ]);
    assert!(model.at_least_once.is_empty(), "nothing went through a per-node channel: {:?}", model.at_least_once);
    assert!(model.coverage.park_limits > 0, "the FlowFile reached the wait limit");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn model_two_nodes_load_every_record_once_across_takes_kills_pauses_and_offloads(steps in prop::collection::vec(step(), 1..150)) {
        run(&steps);
    }
}

/// The random sequences reach the decisions and the events around them (a model that never
/// supersedes, parks, takes over or balances would pass for nothing). The 500 cases come from a
/// fixed seed: with a new seed each run, one run in many missed a rare decision and failed (seen
/// once in the suite), though the model itself held.
#[test]
fn model_failover_covers_every_decision() {
    use proptest::test_runner::{RngAlgorithm, TestRng, TestRunner};
    let mut total = Coverage::default();
    let mut runner = TestRunner::new_with_rng(
        ProptestConfig { cases: 500, failure_persistence: None, ..ProptestConfig::default() },
        TestRng::deterministic_rng(RngAlgorithm::ChaCha),
    );
    let seen = std::cell::RefCell::new(&mut total);
    runner
        .run(&prop::collection::vec(step(), 1..150), |steps| {
            seen.borrow_mut().add(&run(&steps));
            Ok(())
        })
        .expect("the model holds");
    eprintln!("failover model coverage over 500 cases: {total:?}");
    let c = total;
    for (name, n) in [
        ("shared channel", c.shared),
        ("superseded", c.superseded),
        ("parked", c.parked),
        ("waits for an earlier FlowFile of its lease", c.awaited),
        ("takes over a dead or paused holder", c.takes_over_a_dead_or_paused_holder),
        ("resumes behind the checkpoint", c.resumes_behind_the_checkpoint),
        ("offloads with FlowFiles", c.offloads_with_flow_files),
        ("appends on a channel another node reopened", c.stale_appends),
        ("FlowFiles moved by a load-balanced connection", c.balanced),
        ("FlowFiles reordered in a queue", c.reordered),
        ("parked FlowFiles at the wait limit", c.park_limits),
        ("per-node channels", c.per_node),
    ] {
        assert!(n > 0, "the model never exercised: {name} ({c:?})");
    }
}

/// The loss of the earlier shared-channel design, as a fixed case: node 0 reads and NiFi commits
/// records 1-4 (checkpoint 4) while Snowflake has none; node 0 dies; node 1 takes over and, resuming
/// after what Snowflake has rather than the checkpoint, loads 1-4 itself; node 0's queue, loaded
/// when it returns, is skipped.
#[test]
fn model_takeover_while_snowflake_is_behind() {
    let _ = run(&[
        Step::Put { n: 4 },
        Step::Take { node: 0 },
        Step::Read { node: 0, n: 4 },
        Step::Checkpoint { node: 0 },
        Step::Kill { node: 0 },
        Step::Take { node: 1 },
        Step::Read { node: 1, n: 4 },
        Step::Submit { node: 1, n: 1 },
        Step::Open { node: 1 },
        Step::Append { node: 1, rows: 4 },
        Step::Commit { appends: 1 },
        Step::Report { node: 1 },
        Step::Restart { node: 0 },
        Step::Submit { node: 0, n: 1 },
        Step::Open { node: 0 },
        Step::Append { node: 0, rows: 4 },
        Step::Commit { appends: 1 },
    ]);
}

/// The loss a load-balanced connection caused before chains (found by the model's `Balance` step):
/// node 0's FlowFile of record 1 goes to node 1 and waits there; node 0 loads record 2 into the
/// shared channel and reports it loaded, so its checkpoint carries loaded position 2; node 0 dies;
/// node 1 takes over after position 2 and supersedes record 1's FlowFile, which no one ever
/// loaded. Now node 0 sees record 1's FlowFile missing before record 2's, loads record 2 through
/// its own channel and reports nothing, so node 1 re-reads both.
#[test]
fn model_balanced_flow_file_then_a_kill() {
    let _ = run(&[
        Step::Put { n: 2 },
        Step::Take { node: 0 },
        Step::Read { node: 0, n: 1 },
        Step::Balance { node: 0, n: 1 },
        Step::Read { node: 0, n: 1 },
        Step::Scan { node: 1 },
        Step::Submit { node: 1, n: 1 },
        Step::Submit { node: 0, n: 1 },
        Step::Open { node: 0 },
        Step::Append { node: 0, rows: 1 },
        Step::Commit { appends: 1 },
        Step::Report { node: 0 },
        Step::Checkpoint { node: 0 },
        Step::Kill { node: 0 },
        Step::Take { node: 1 },
        Step::Scan { node: 1 },
        Step::Submit { node: 1, n: 1 },
    ]);
}

/// A loss the model found at 100,000 cases: node 1 reads records 1, 2 and 3 into three FlowFiles;
/// record 3's goes to node 0 by a load-balanced connection; node 1's PutSnowflake puts records 1
/// and 2 into the shared channel (the chain counts them in) and stops before they load (its
/// sessions roll back). Two offloads bring all three back to node 1, record 3's in front. Had the
/// chain kept counting 1 and 2 as in the channel, record 3 would go in first and the channel would
/// then skip 1 and 2 for good. A stopping PutSnowflake rewinds the chains it put into to what
/// Snowflake committed, so record 3's FlowFile no longer follows on and goes per node.
#[test]
fn model_flow_files_rolled_back_and_reordered_by_offloads() {
    let _ = run(&[
        Step::Take { node: 1 },
        Step::Put { n: 2 },
        Step::Read { node: 1, n: 1 },
        Step::Read { node: 1, n: 1 },
        Step::Put { n: 1 },
        Step::Read { node: 1, n: 1 },
        Step::Balance { node: 1, n: 1 },
        Step::Submit { node: 1, n: 2 },
        Step::Release { node: 1, offload: true },
        Step::Release { node: 0, offload: true },
        Step::Submit { node: 1, n: 1 },
        Step::Scan { node: 1 },
        Step::Submit { node: 1, n: 1 },
        Step::Open { node: 1 },
        Step::Append { node: 1, rows: 1 },
        Step::Commit { appends: 1 },
    ]);
}
