//! Which way a FlowFile of a tracking consumer (Failover Position `SNOWFLAKE_COMMIT`, see `link`)
//! takes in PutSnowflake: its shard's shared channel (in `link`'s chain order, or the book's), the
//! per-node channels, nowhere (superseded), or the parking lot until it can be decided. The
//! [`Router`] owns what those decisions remember: the reports a success gives `feedback`, the
//! leases put into shared channels, the parked FlowFiles, the leases known broken and when each
//! consumer was last warned about. It is pure: the board's facts come in as [`LeaseFacts`] (read
//! under one lock, [`LeaseFacts::read`]), time comes in as `now`, and what to log or tell the
//! board goes out as values; the sink engine and the failover model drive the same router.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::time::Duration;

use tokio::time::Instant;

use super::book::{Outcome, Route};
use super::link::{self, Decision, LeaseId, Tracked};
use crate::feedback::{Board, Chain, LinkKey, Reported, ShardTenure, MAX_SHARDS_PER_KEY};
use crate::kinesis::position::Position;

/// Leases remembered as broken on this node (a forgotten one costs one more order wait).
pub const MAX_BROKEN_LEASES: usize = 10_000;

/// A warning about one consumer's topology is repeated at most this often.
pub const LINK_REWARN: Duration = Duration::from_secs(600);

/// Parked FlowFiles waiting for an earlier one of their lease are given back to NiFi's queue when
/// the in-flight budget is full, once they waited this long (see [`Router::give_back_awaiting`]).
pub const GIVE_BACK_AFTER: Duration = Duration::from_secs(1);

/// A dead holder is replaced within its failover timeout (and a lease pass): another node's
/// FlowFile waits twice that (this timeout when the consumer published none).
const DEFAULT_FAILOVER: Duration = Duration::from_secs(7);

#[derive(Debug, Clone)]
pub struct RouterSettings {
    /// The NiFi node this PutSnowflake runs on.
    pub node: String,
    /// How long a FlowFile waits for an earlier one of its lease (PutSnowflake's Order Wait).
    pub order_wait: Duration,
    /// How long a parked FlowFile waits for its lease to be decided before it takes the shared
    /// channel in the book's order.
    pub retry_limit: Duration,
    /// How long after the start a FlowFile waits when no consumer of its key on this node has read
    /// the lease table.
    pub warm_up: Duration,
    /// Parked FlowFiles are decided again when their consumers read the lease table since, or after
    /// this long (deciding one maps its content again).
    pub unpark_interval: Duration,
}

/// What the board knows of a FlowFile's lease, read under one lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseFacts {
    /// The shard's latest tracking tenure as last read.
    pub tenure: Option<ShardTenure>,
    /// Table reads the key's consumers published.
    pub scans: u64,
    /// The Failover Timeout the key's consumer published.
    pub failover: Option<Duration>,
    /// The counter of the shard's lease a consumer of this JVM holds.
    pub held_here: Option<u64>,
    /// Whether the FlowFile follows on from what this JVM put of its lease into the shared channel.
    pub chain: Chain,
    /// Another destination whose shared channel the lease's chain is.
    pub other_destination: Option<String>,
}

impl LeaseFacts {
    /// Reads the facts of the lease of a FlowFile whose first record follows `previous`, going to
    /// `destination` (the chain becomes `destination`'s when it has none yet).
    pub fn read(board: &mut Board, lease: &LeaseId, previous: Option<&Position>, destination: &str) -> Self {
        let (key, shard, tenure) = (&lease.key, lease.shard.as_str(), lease.tenure);
        let other_destination = board.chain_destination(key, shard, tenure, destination);
        let chain = board.chain(key, shard, tenure, previous);
        Self {
            tenure: board.tenure(key, shard),
            scans: board.scans(key),
            failover: board.failover(key),
            held_here: board.held_here(key, shard),
            chain,
            other_destination,
        }
    }
}

/// A tracked FlowFile handed to the router: `item` is what the lot keeps while it is parked.
pub struct Arrival<'a, F> {
    pub id: i64,
    pub tracked: &'a Tracked,
    /// Its destination (database, schema, pipe), as text.
    pub destination: &'a str,
    /// Bytes it holds while parked.
    pub bytes: u64,
    /// Kinesis arrival (ms) of its first record.
    pub arrival_ms: Option<i64>,
    pub item: &'a F,
}

/// How a FlowFile came to its shard's shared channel (the book keeps their order either way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// `link`'s chain: the FlowFile follows on from what this JVM put of its lease into the channel.
    Chain,
    /// The channel's book, by the record before the FlowFile (`book::Follows`), never passing a gap.
    Book,
}

/// Where a tracked FlowFile goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Way {
    /// Its shard's shared channel. With [`Order::Chain`] the caller tells the board it is put in.
    Shared(Order),
    /// The per-node channels (at least once); `warning`: the reason to warn about, when one is due.
    PerNode { warning: Option<String> },
    /// Nowhere: lease `current` re-read its records and loads them.
    Superseded { current: u64 },
    /// Kept in the lot (its bytes count as in flight); `awaits_chain`: it waits for an earlier
    /// FlowFile of its lease.
    Parked { awaits_chain: bool },
}

/// What a tracked FlowFile's success reports to `feedback`, and where its lease's chain goes back
/// to when it fails instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub lease: LeaseId,
    pub destination: String,
    pub last: Position,
    pub previous: Option<Position>,
    /// Kinesis arrival (ms) of the FlowFile's first record.
    pub arrival_ms: Option<i64>,
}

/// What settled outcomes tell the board: `loaded` reports, `unloaded` chains to take back.
#[derive(Debug, Default)]
pub struct Settled {
    pub loaded: Vec<Report>,
    pub unloaded: Vec<Report>,
}

impl Settled {
    /// Tells the board: each unloaded FlowFile's chain goes back to before it; each loaded one's
    /// position is committed in its chain and reported (with its arrival). Returns the reports
    /// that newly found their key loaded into a second destination, with the first one.
    pub fn tell(self, board: &mut Board) -> Vec<(Report, String)> {
        for r in &self.unloaded {
            board.unput_from_channel(&r.lease.key, &r.lease.shard, r.lease.tenure, r.previous.as_ref());
        }
        let mut conflicts = Vec::new();
        for r in self.loaded {
            let lease = &r.lease;
            board.committed_in_channel(&lease.key, &lease.shard, lease.tenure, &r.last);
            match board.report(&lease.key, &r.destination, &lease.shard, r.last.clone()) {
                Reported::Recorded => {
                    if let Some(arrival) = r.arrival_ms {
                        board.report_arrival(&lease.key, &lease.shard, arrival);
                    }
                }
                Reported::Conflicted { first, newly: true } => conflicts.push((r, first)),
                Reported::Conflicted { .. } | Reported::Full => {}
            }
        }
        conflicts
    }
}

/// A FlowFile out of the lot, with the bytes it held.
#[derive(Debug)]
pub struct Unparked<F> {
    pub id: i64,
    pub item: F,
    pub bytes: u64,
}

/// What a stopping router leaves: the leases whose chains rewind, and the FlowFiles it held.
pub struct Stopped<F> {
    pub rewind: Vec<LeaseId>,
    pub parked: Vec<Unparked<F>>,
}

struct Parked<F> {
    id: i64,
    item: F,
    key: LinkKey,
    bytes: u64,
    awaits_chain: bool,
}

/// FlowFiles waiting for a decision. `holding` counts, per shard, those that hold the shard's next
/// ones up (those not waiting for an earlier FlowFile of their lease, which may be the next one).
struct Lot<F> {
    parked: Vec<Parked<F>>,
    ids: HashSet<i64>,
    holding: HashMap<(LinkKey, String), usize>,
    /// When and at which scan of their consumer FlowFiles were first parked (kept until decided).
    since: HashMap<i64, (Instant, u64)>,
    /// When the parked FlowFiles were last decided again, and their consumers' table reads then.
    last_unpark: Option<(Instant, u64)>,
}

impl<F> Default for Lot<F> {
    fn default() -> Self {
        Self {
            parked: Vec::new(),
            ids: HashSet::new(),
            holding: HashMap::new(),
            since: HashMap::new(),
            last_unpark: None,
        }
    }
}

impl<F> Lot<F> {
    fn holds(&self, lease: &LeaseId) -> bool {
        self.holding.contains_key(&(lease.key.clone(), lease.shard.clone()))
    }

    fn park(&mut self, id: i64, item: F, lease: &LeaseId, bytes: u64, awaits_chain: bool) {
        self.ids.insert(id);
        if !awaits_chain {
            *self.holding.entry((lease.key.clone(), lease.shard.clone())).or_default() += 1;
        }
        self.parked.push(Parked { id, item, key: lease.key.clone(), bytes, awaits_chain });
    }

    fn take_all(&mut self) -> Vec<Unparked<F>> {
        self.ids.clear();
        self.holding.clear();
        std::mem::take(&mut self.parked)
            .into_iter()
            .map(|p| Unparked { id: p.id, item: p.item, bytes: p.bytes })
            .collect()
    }
}

/// Leases one of whose FlowFiles waited the order wait in vain, oldest first, at most
/// [`MAX_BROKEN_LEASES`].
#[derive(Default)]
struct Broken {
    set: HashSet<LeaseId>,
    order: VecDeque<LeaseId>,
}

impl Broken {
    fn remember(&mut self, lease: &LeaseId) {
        if self.set.insert(lease.clone()) {
            self.order.push_back(lease.clone());
            if self.order.len() > MAX_BROKEN_LEASES {
                if let Some(old) = self.order.pop_front() {
                    self.set.remove(&old);
                }
            }
        }
    }
}

pub struct Router<F> {
    settings: RouterSettings,
    started: Instant,
    reports: HashMap<i64, Report>,
    /// The leases whose FlowFiles went into a shared channel: their chains rewind to what Snowflake
    /// committed when the router stops.
    put_in: HashSet<LeaseId>,
    lot: Lot<F>,
    broken: Broken,
    warned: HashMap<String, Instant>,
}

impl<F: Clone> Router<F> {
    pub fn new(settings: RouterSettings, started: Instant) -> Self {
        Self {
            settings,
            started,
            reports: HashMap::new(),
            put_in: HashSet::new(),
            lot: Lot::default(),
            broken: Broken::default(),
            warned: HashMap::new(),
        }
    }

    /// Whether the FlowFile waits in the lot now.
    pub fn is_parked(&self, id: i64) -> bool {
        self.lot.ids.contains(&id)
    }

    /// FlowFiles in the lot, and the bytes they hold.
    pub fn parked(&self) -> (usize, u64) {
        (self.lot.parked.len(), self.lot.parked.iter().map(|p| p.bytes).sum())
    }

    /// The FlowFile's way (see `link`); a parked one is kept until [`Self::unpark_due`] hands it back.
    pub fn route(&mut self, arrival: &Arrival<'_, F>, facts: &LeaseFacts, now: Instant) -> Way {
        let lease = &arrival.tracked.lease;
        // A shard's FlowFiles keep their order: behind a parked one, the next ones wait too (but not
        // behind one that waits for an earlier FlowFile of its lease: that one may be this one).
        let behind_parked = self.lot.holds(lease);
        let decision = self.decide(arrival, facts, behind_parked, now);
        // How long since it was first parked (nothing when it was not).
        let waited =
            self.lot.since.get(&arrival.id).map_or(Duration::ZERO, |(first, _)| now.saturating_duration_since(*first));
        match decision {
            Decision::Shared => {
                self.decided(arrival);
                if self.put_in.len() < MAX_SHARDS_PER_KEY {
                    self.put_in.insert(lease.clone());
                }
                Way::Shared(Order::Chain)
            }
            Decision::Superseded { current } => {
                self.lot.since.remove(&arrival.id);
                Way::Superseded { current }
            }
            Decision::Park if waited < self.settings.retry_limit || behind_parked => {
                self.park(arrival, facts.scans, now, false)
            }
            // Nobody took the lease over within the wait: the shared channel, ordered by the book.
            Decision::Park => {
                self.decided(arrival);
                Way::Shared(Order::Book)
            }
            Decision::AwaitChain { .. } if waited < self.settings.order_wait => {
                self.park(arrival, facts.scans, now, true)
            }
            Decision::AwaitChain { reason } => {
                self.lot.since.remove(&arrival.id);
                self.broken.remember(lease);
                Way::PerNode { warning: self.warning_due(&lease.key, reason, now) }
            }
            Decision::PerNode { reason } => {
                self.lot.since.remove(&arrival.id);
                Way::PerNode { warning: self.warning_due(&lease.key, reason, now) }
            }
        }
    }

    /// `link::decide`, after the rules that come first: a lease loaded into another destination and
    /// a lease known broken go per node, and a FlowFile behind a parked one of its shard waits.
    fn decide(&self, arrival: &Arrival<'_, F>, facts: &LeaseFacts, behind_parked: bool, now: Instant) -> Decision {
        let (tracked, lease) = (arrival.tracked, &arrival.tracked.lease);
        if let Some(other) = &facts.other_destination {
            return Decision::PerNode {
                reason: format!(
                    "lease {} of shard {} is loaded into {other} by another PutSnowflake of this NiFi, and exactly once \
                     across failover holds for one destination per Application Name",
                    lease.tenure, lease.shard
                ),
            };
        }
        if facts.chain == Chain::Broken && self.broken.set.contains(lease) {
            return Decision::PerNode {
                reason: format!(
                    "a FlowFile that lease {} of shard {} read before another one never reached this PutSnowflake (is the \
                     connection from ConsumeKinesis load-balanced, or are FlowFiles filtered out on the way?); the rest of \
                     that lease's FlowFiles on this node go the same way",
                    lease.tenure, lease.shard
                ),
            };
        }
        if behind_parked {
            return Decision::Park;
        }
        let seen = self.lot.since.get(&arrival.id).copied();
        let view = link::View {
            held_here: facts.held_here,
            known: facts.scans > 0,
            tenure: facts.tenure,
            fresh: seen.is_some_and(|(_, at_scan)| facts.scans > at_scan),
            chain: facts.chain,
        };
        let warming = now.saturating_duration_since(self.started) < self.settings.warm_up;
        let held_wait = facts.failover.unwrap_or(DEFAULT_FAILOVER) * 2 + Duration::from_secs(5);
        let held_wait_over = seen.is_some_and(|(first, _)| now.saturating_duration_since(first) >= held_wait);
        link::decide(tracked, &self.settings.node, view, warming, held_wait_over)
    }

    /// Into the lot; its first park's time and scan are kept until it is decided.
    fn park(&mut self, arrival: &Arrival<'_, F>, scans: u64, now: Instant, awaits_chain: bool) -> Way {
        self.lot.since.entry(arrival.id).or_insert((now, scans));
        let item = arrival.item.clone();
        self.lot.park(arrival.id, item, &arrival.tracked.lease, arrival.bytes, awaits_chain);
        Way::Parked { awaits_chain }
    }

    /// Into a shared channel: its success reports what it loaded.
    fn decided(&mut self, arrival: &Arrival<'_, F>) {
        self.lot.since.remove(&arrival.id);
        let t = arrival.tracked;
        let report = Report {
            lease: t.lease.clone(),
            destination: arrival.destination.to_owned(),
            last: t.last.clone(),
            previous: t.previous.clone(),
            arrival_ms: arrival.arrival_ms,
        };
        self.reports.insert(arrival.id, report);
    }

    /// `reason`, when the key's consumer was not warned within [`LINK_REWARN`].
    fn warning_due(&mut self, key: &LinkKey, reason: String, now: Instant) -> Option<String> {
        let subject = format!("{}/{}", key.stream, key.application);
        if self.warned.get(&subject).is_some_and(|t| now.saturating_duration_since(*t) < LINK_REWARN) {
            return None;
        }
        self.warned.insert(subject, now);
        Some(reason)
    }

    /// The keys of the parked FlowFiles' consumers (the caller sums their table reads).
    pub fn parked_keys(&self) -> BTreeSet<LinkKey> {
        self.lot.parked.iter().map(|p| p.key.clone()).collect()
    }

    /// The parked FlowFiles, to be routed again, when their consumers have read the lease table
    /// since they were last decided (`scans`: the sum of those reads) or [`RouterSettings::unpark_interval`] passed.
    pub fn unpark_due(&mut self, scans: u64, now: Instant) -> Vec<Unparked<F>> {
        if self.lot.parked.is_empty() {
            return Vec::new();
        }
        let interval = self.settings.unpark_interval;
        if self.lot.last_unpark.is_some_and(|(at, seen)| seen == scans && now.saturating_duration_since(at) < interval)
        {
            return Vec::new();
        }
        self.lot.last_unpark = Some((now, scans));
        // Those given back to the queue and never seen again are forgotten after the longest wait.
        let horizon = self.settings.order_wait.max(self.settings.retry_limit) * 2;
        let parked = &self.lot.ids;
        self.lot.since.retain(|id, (first, _)| parked.contains(id) || now.saturating_duration_since(*first) < horizon);
        self.lot.take_all()
    }

    /// The parked FlowFiles that wait for an earlier one of their lease, parked at least
    /// [`GIVE_BACK_AFTER`] ago: when the in-flight budget is full they go back to NiFi's queue, so
    /// the one they wait for can be taken. Their first park is kept: their order wait goes on.
    pub fn give_back_awaiting(&mut self, now: Instant) -> Vec<Unparked<F>> {
        let since = &self.lot.since;
        let due = |p: &Parked<F>| {
            p.awaits_chain
                && since.get(&p.id).is_some_and(|(first, _)| now.saturating_duration_since(*first) >= GIVE_BACK_AFTER)
        };
        let (given, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.lot.parked).into_iter().partition(due);
        self.lot.parked = kept;
        for p in &given {
            self.lot.ids.remove(&p.id);
        }
        given.into_iter().map(|p| Unparked { id: p.id, item: p.item, bytes: p.bytes }).collect()
    }

    /// What the tracked FlowFiles among `outcomes` tell the board: a success what it loaded; a
    /// shared channel's FlowFile that did not load (`failure`, back to the queue) takes its lease's
    /// chain back to before it, so the FlowFiles after it wait for it when it is sent back.
    pub fn settled(&mut self, outcomes: &[Outcome]) -> Settled {
        let mut settled = Settled::default();
        for o in outcomes {
            match (self.reports.remove(&o.flow_file_id), o.route) {
                (Some(r), Route::Success) => settled.loaded.push(r),
                // Its rows are committed; some were rejected into the error table.
                (Some(_), Route::Invalid) | (None, _) => {}
                (Some(r), _) => settled.unloaded.push(r),
            }
        }
        settled
    }

    /// Forgets the parked FlowFiles (their sessions roll back) and the leases put in, for their
    /// chains to rewind to what Snowflake committed.
    pub fn stop(&mut self) -> Stopped<F> {
        Stopped { rewind: self.put_in.drain().collect(), parked: self.lot.take_all() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHARD: &str = "shardId-000000000001";

    fn settings() -> RouterSettings {
        RouterSettings {
            node: "n1".into(),
            order_wait: Duration::from_secs(60),
            retry_limit: Duration::from_secs(300),
            warm_up: Duration::from_secs(60),
            unpark_interval: Duration::from_secs(1),
        }
    }

    fn key() -> LinkKey {
        LinkKey { stream: "arn:aws:kinesis:eu-west-1:1:stream/orders".into(), application: "app".into() }
    }

    fn lease(tenure: u64) -> LeaseId {
        LeaseId { key: key(), shard: SHARD.into(), tenure }
    }

    /// Records `first..=last` read on `node` by lease `tenure`.
    fn tracked(node: &str, tenure: u64, first: u64, last: u64) -> Tracked {
        Tracked {
            lease: lease(tenure),
            node: node.into(),
            last: Position::new(last.to_string(), None),
            previous: (first > 1).then(|| Position::new((first - 1).to_string(), None)),
        }
    }

    /// This node's consumer holds lease `tenure` and read the table once.
    fn held(tenure: u64, chain: Chain) -> LeaseFacts {
        LeaseFacts {
            tenure: Some(ShardTenure { counter: tenure, held: true }),
            scans: 1,
            failover: Some(Duration::from_secs(7)),
            held_here: Some(tenure),
            chain,
            other_destination: None,
        }
    }

    fn route(router: &mut Router<i64>, id: i64, t: &Tracked, facts: &LeaseFacts, now: Instant) -> Way {
        let arrival = Arrival { id, tracked: t, destination: "DB.S.P", bytes: 100, arrival_ms: Some(7), item: &id };
        router.route(&arrival, facts, now)
    }

    fn outcome(id: i64, route: Route) -> Outcome {
        Outcome {
            flow_file_id: id,
            route,
            channel: String::new(),
            offset_token: String::new(),
            message: String::new(),
            rows_sent: 0,
            rows_skipped: 0,
        }
    }

    #[test]
    fn a_flow_file_following_its_chain_takes_the_shared_channel_and_reports_when_it_loads() {
        let t0 = Instant::now();
        let mut router = Router::new(settings(), t0);
        let (one, two) = (tracked("n1", 4, 1, 2), tracked("n1", 4, 3, 3));
        assert_eq!(route(&mut router, 1, &one, &held(4, Chain::Linked), t0), Way::Shared(Order::Chain));
        assert_eq!(route(&mut router, 2, &two, &held(4, Chain::Linked), t0), Way::Shared(Order::Chain));
        let settled =
            router.settled(&[outcome(1, Route::Success), outcome(2, Route::Failure), outcome(9, Route::Success)]);
        assert_eq!(settled.loaded.len(), 1);
        let report = &settled.loaded[0];
        assert_eq!((&report.lease, report.last.sequence_number.as_str(), report.arrival_ms), (&lease(4), "2", Some(7)));
        assert_eq!(report.destination, "DB.S.P");
        assert_eq!(settled.unloaded.len(), 1, "its chain goes back to before the failed one");
        assert_eq!(settled.unloaded[0].previous, Some(Position::new("2", None)));
        assert!(router.settled(&[outcome(1, Route::Success)]).loaded.is_empty(), "reported once");
        let stopped = router.stop();
        assert_eq!(stopped.rewind, vec![lease(4)], "the lease put in rewinds at the stop");
    }

    #[test]
    fn another_nodes_flow_file_waits_for_a_fresh_read_then_is_superseded_by_a_later_lease() {
        let t0 = Instant::now() - Duration::from_secs(120); // warmed up
        let mut router = Router::new(settings(), t0);
        let theirs = tracked("n2", 4, 1, 1);
        let now = t0 + Duration::from_secs(120);
        let stale = LeaseFacts { held_here: None, chain: Chain::Unknown, ..held(5, Chain::Unknown) };
        assert_eq!(route(&mut router, 1, &theirs, &stale, now), Way::Parked { awaits_chain: false });
        assert!(router.is_parked(1));
        assert_eq!(router.unpark_due(1, now).len(), 1, "decided again the first time");
        assert_eq!(route(&mut router, 1, &theirs, &stale, now), Way::Parked { awaits_chain: false }, "no fresh read");
        assert!(router.unpark_due(1, now).is_empty(), "no new read, within the interval");
        let again = router.unpark_due(2, now);
        assert_eq!(again.iter().map(|u| (u.id, u.bytes)).collect::<Vec<_>>(), vec![(1, 100)]);
        assert!(!router.is_parked(1));
        let fresh = LeaseFacts { scans: 2, ..stale };
        assert_eq!(route(&mut router, 1, &theirs, &fresh, now), Way::Superseded { current: 5 });
        assert!(
            router.settled(&[outcome(1, Route::Success)]).loaded.is_empty(),
            "a superseded FlowFile reports nothing"
        );
    }

    #[test]
    fn a_parked_flow_file_nobody_decides_takes_the_shared_channel_in_the_books_order_after_the_wait() {
        let t0 = Instant::now();
        let mut router = Router::new(settings(), t0);
        // Left from before a restart: no consumer here has read the table, nothing known of its chain.
        let unknown = LeaseFacts {
            tenure: None,
            scans: 0,
            failover: None,
            held_here: None,
            chain: Chain::Unknown,
            other_destination: None,
        };
        let (first, next) = (tracked("n1", 4, 1, 1), tracked("n1", 4, 2, 2));
        assert_eq!(route(&mut router, 1, &first, &unknown, t0), Way::Parked { awaits_chain: false });
        let linked = LeaseFacts { chain: Chain::Linked, ..unknown.clone() };
        assert_eq!(
            route(&mut router, 2, &next, &linked, t0),
            Way::Parked { awaits_chain: false },
            "behind a parked FlowFile of its shard, the next one waits too"
        );
        let late = t0 + Duration::from_secs(299);
        for u in router.unpark_due(0, late) {
            let t = if u.id == 1 { &first } else { &next };
            assert_eq!(route(&mut router, u.id, t, &unknown, late), Way::Parked { awaits_chain: false }, "{}", u.id);
        }
        let over = t0 + Duration::from_secs(300);
        let ways: Vec<(i64, Way)> = router
            .unpark_due(0, over)
            .into_iter()
            .map(|u| (u.id, route(&mut router, u.id, if u.id == 1 { &first } else { &next }, &unknown, over)))
            .collect();
        assert_eq!(ways, vec![(1, Way::Shared(Order::Book)), (2, Way::Shared(Order::Book))]);
        let settled = router.settled(&[outcome(1, Route::Success), outcome(2, Route::Success)]);
        assert_eq!(settled.loaded.len(), 2, "their success reports what they loaded");
        assert!(router.stop().rewind.is_empty(), "the book's order puts nothing into the chain");
    }

    #[test]
    fn a_flow_file_awaiting_an_earlier_one_goes_per_node_after_the_order_wait_and_its_lease_is_remembered_broken() {
        let t0 = Instant::now();
        let mut router = Router::new(settings(), t0);
        let (later, last) = (tracked("n1", 4, 3, 3), tracked("n1", 4, 4, 4));
        assert_eq!(route(&mut router, 3, &later, &held(4, Chain::Broken), t0), Way::Parked { awaits_chain: true });
        assert_eq!(
            route(&mut router, 4, &last, &held(4, Chain::Broken), t0),
            Way::Parked { awaits_chain: true },
            "one awaiting its chain holds nothing up: it is decided on its own"
        );
        let waited = t0 + Duration::from_secs(59);
        for u in router.unpark_due(1, waited) {
            let t = if u.id == 3 { &later } else { &last };
            assert_eq!(
                route(&mut router, u.id, t, &held(4, Chain::Broken), waited),
                Way::Parked { awaits_chain: true }
            );
        }
        let over = t0 + Duration::from_secs(60);
        let mut unparked = router.unpark_due(1, over).into_iter();
        let three = unparked.next().unwrap();
        let Way::PerNode { warning: Some(reason) } =
            route(&mut router, three.id, &later, &held(4, Chain::Broken), over)
        else {
            panic!("per node with a warning")
        };
        assert!(reason.contains("never reached this PutSnowflake"), "{reason}");
        let four = unparked.next().unwrap();
        assert_eq!(
            route(&mut router, four.id, &last, &held(4, Chain::Broken), over),
            Way::PerNode { warning: None },
            "the lease is known broken: at once, and warned about once per interval"
        );
        let other_lease = tracked("n1", 5, 9, 9);
        assert_eq!(
            route(&mut router, 9, &other_lease, &held(5, Chain::Broken), over),
            Way::Parked { awaits_chain: true },
            "another lease is not broken"
        );
    }

    #[test]
    fn a_lease_loaded_into_another_destination_goes_per_node_at_once() {
        let t0 = Instant::now();
        let mut router = Router::new(settings(), t0);
        let t = tracked("n1", 4, 1, 1);
        let facts = LeaseFacts { other_destination: Some("DB.S.OTHER".into()), ..held(4, Chain::Linked) };
        let Way::PerNode { warning: Some(reason) } = route(&mut router, 1, &t, &facts, t0) else { panic!("per node") };
        assert!(reason.contains("is loaded into DB.S.OTHER by another PutSnowflake"), "{reason}");
        assert!(!reason.contains("  "), "one sentence: {reason}");
        assert!(router.settled(&[outcome(1, Route::Success)]).loaded.is_empty());
    }

    #[test]
    fn a_consumers_per_node_warning_is_repeated_at_most_once_per_interval() {
        let t0 = Instant::now();
        let mut router = Router::new(settings(), t0);
        let facts = LeaseFacts { other_destination: Some("DB.S.OTHER".into()), ..held(4, Chain::Linked) };
        let t = tracked("n1", 4, 1, 1);
        let warned = |w: Way| matches!(w, Way::PerNode { warning: Some(_) });
        assert!(warned(route(&mut router, 1, &t, &facts, t0)));
        assert!(!warned(route(&mut router, 2, &t, &facts, t0 + LINK_REWARN - Duration::from_secs(1))));
        assert!(warned(route(&mut router, 3, &t, &facts, t0 + LINK_REWARN)));
        let mut other = t.clone();
        other.lease.key.application = "other-app".into();
        assert!(warned(route(&mut router, 4, &other, &facts, t0 + LINK_REWARN)), "each consumer has its own");
    }

    /// Issue 51, hole 4: FlowFiles waiting for an earlier one of their lease go back to the queue
    /// when the budget is full (the caller asks), so the earlier one can be taken; those holding a
    /// shard up stay. Their order wait goes on from their first park.
    #[test]
    fn flow_files_awaiting_their_chain_are_given_back_and_keep_their_first_park() {
        let t0 = Instant::now();
        let mut router = Router::new(settings(), t0);
        let waiting = tracked("n1", 4, 3, 3);
        assert_eq!(route(&mut router, 3, &waiting, &held(4, Chain::Broken), t0), Way::Parked { awaits_chain: true });
        let unknown = LeaseFacts { held_here: None, scans: 0, tenure: None, ..held(7, Chain::Unknown) };
        let holder = LeaseId { shard: "shardId-2".into(), ..lease(7) };
        let other = Tracked { lease: holder, ..tracked("n1", 7, 1, 1) };
        assert_eq!(route(&mut router, 8, &other, &unknown, t0), Way::Parked { awaits_chain: false });
        assert!(router.give_back_awaiting(t0).is_empty(), "not within a second of its park");
        let given = router.give_back_awaiting(t0 + GIVE_BACK_AFTER);
        assert_eq!(given.iter().map(|u| (u.id, u.item, u.bytes)).collect::<Vec<_>>(), vec![(3, 3, 100)]);
        assert!(!router.is_parked(3) && router.is_parked(8));
        assert_eq!(router.parked(), (1, 100));
        let back = t0 + Duration::from_secs(61);
        assert!(
            matches!(route(&mut router, 3, &waiting, &held(4, Chain::Broken), back), Way::PerNode { .. }),
            "back after the order wait since its first park: per node"
        );
    }
}
