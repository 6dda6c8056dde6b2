//! The PutSnowflake engine: takes FlowFiles from Java, maps them to rows, hands them to the
//! writer of their channel (`naming` decides which), and gives back each FlowFile's outcome once it
//! is known. Memory is bounded by Max In-Flight Size: Java asks [`SinkEngine::capacity`] before it
//! takes FlowFiles from its queue.
//!
//! Taking FlowFiles is per FlowFile: each one submitted gets exactly one outcome, even when
//! something fails inside the engine (then `failure`), and a FlowFile submitted again while it has
//! no outcome yet is not taken twice. So Java never has a reason to roll back a session whose
//! FlowFiles were partly handed over.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{error, info, warn};

use super::api::{ApiError, Destination, SnowflakeApi};
use super::auth::Credentials;
use super::book::{Follows, Outcome, Route, Work};
use super::channel::{ChannelSettings, ChannelWriter};
use super::destinations::{
    DestinationKey, DestinationRule, OpenDestination, OpenDestinations, DEFAULT_MAX_DESTINATIONS,
};
use super::freshness::{self, Freshness, ShardKey};
use super::gap_memory;
use super::lineage::LineageGate;
use super::link::{self, Tracked, ATTR_APPLICATION};
use super::naming::ChannelNames;
use super::offset::OffsetToken;
use super::request_size;
use super::router::{Arrival, LeaseFacts, Order, Router, RouterSettings, Way};
use super::row::Row;
use super::rows::{
    Delivery, FlowFileIn, Mapping, Prepared, Source, ATTR_ARRIVAL_MS, ATTR_LAST_SEQUENCE, ATTR_LAST_SUB,
    ATTR_PARENT_SHARDS, FRAGMENT_PREFIX,
};
use super::status::StatusBoard;
use super::supervise::spawn_restarting;
use super::writers::{OutcomeSink, WriterFactory, WriterTask, Writers};
use crate::config::put_snowflake::{Destination as PipeChoice, PutSnowflakeConfig};
use crate::feedback::parse_failures::{ParseFailures, ScopeRef};
use crate::feedback::BoardHandle;
use crate::kinesis::position::Position;
use crate::runtime::lock;
use crate::runtime::panic_message;

/// How often the Freshness Warning looks at the shards (when outcomes are collected).
const FRESHNESS_CHECK: Duration = Duration::from_secs(2);

#[derive(Clone)]
pub struct SinkSettings {
    pub channel_prefix: String,
    /// This PutSnowflake's own id (from NiFi's local state): part of every channel name.
    pub instance: Option<String>,
    pub mapping: Mapping,
    pub channel: ChannelSettings,
    pub max_in_flight_bytes: u64,
    pub status_interval: Duration,
    /// The most destinations (database, schema, pipe) open at once; see `destinations`.
    pub max_destinations: usize,
    /// The NiFi node this PutSnowflake runs on (see `link`); empty when Java named none.
    pub node: String,
    /// How long another node's FlowFile of a released lease goes back to the queue before it
    /// takes the per-node channels (see `link`).
    pub retry_limit: Duration,
    /// How long after the start another node's FlowFile goes back to the queue when no consumer
    /// of its Application Name on this node has read the lease table (see `link`).
    pub warm_up: Duration,
    /// A CA certificate (PEM) trusted besides the public web roots. No property sets it: it lets
    /// tests and benchmarks reach the stand-in over TLS with the CA it generates.
    pub extra_root_ca_pem: Option<Vec<u8>>,
    /// The board PutSnowflake reports committed positions on (see `feedback`): the process's.
    pub board: crate::feedback::BoardHandle,
    /// Freshness Warning (zero: off; see `freshness`).
    pub freshness_warning: Duration,
}

impl SinkSettings {
    pub fn from_config(config: &PutSnowflakeConfig) -> Self {
        Self {
            channel_prefix: config.channel_prefix.clone(),
            instance: config.instance.clone(),
            mapping: Mapping { iceberg: config.iceberg },
            channel: ChannelSettings {
                max_batch_bytes: config.max_batch_size as usize,
                max_latency: config.max_latency,
                commit_timeout: config.commit_timeout,
                idle_retire: Duration::from_secs(300),
                order_wait: config.order_wait,
                counters: Default::default(),
                views: Default::default(),
                gap_memory: Default::default(),
            },
            max_in_flight_bytes: config.max_in_flight_size,
            status_interval: Duration::from_millis(250),
            max_destinations: DEFAULT_MAX_DESTINATIONS,
            node: config.node.clone(),
            retry_limit: Duration::from_secs(300),
            warm_up: Duration::from_secs(60),
            extra_root_ca_pem: None,
            board: crate::feedback::BoardHandle::process(),
            freshness_warning: config.freshness_warning,
        }
    }
}

/// The control URL, as the settings resolved it: the override, `https://<SNOWFLAKE_HOST>` (managed
/// authentication), or `https://<account>.snowflakecomputing.com`.
pub fn control_url(config: &PutSnowflakeConfig) -> url::Url {
    config.control.clone()
}

pub fn pipe_name(config: &PutSnowflakeConfig) -> String {
    match &config.destination {
        PipeChoice::Table => super::destinations::default_pipe(&config.table),
        PipeChoice::Pipe(p) => p.clone(),
    }
}

/// Starts a destination's status poller and makes its writers, all on `api`.
fn open_destination(api: Arc<SnowflakeApi>, settings: &SinkSettings, sink: OutcomeSink) -> DestinationTasks {
    let board = StatusBoard::default();
    // The tasks keep the caller's span (the component's, see `runtime::spawn`), so every event below
    // (the API's retries too) reaches its processor's log.
    let poller = {
        let (board, api, interval) = (board.clone(), api.clone(), settings.status_interval);
        spawn_restarting("channel status poller", Duration::from_secs(1), move || {
            board.clone().run(api.clone(), interval)
        })
    };
    let factory: WriterFactory = {
        let (board, channel_settings) = (board.clone(), settings.channel.clone());
        Arc::new(move |name: String, delivery, queue, flights| {
            let status = board.watch(&name);
            Box::pin(
                ChannelWriter::new(name, delivery, api.clone(), channel_settings.clone(), queue, flights, status).run(),
            ) as WriterTask
        })
    };
    DestinationTasks { writers: Writers::new(factory, sink), board, poller }
}

/// What the gate holds for a FlowFile: its destination, channel, delivery and rows.
type Routed = (DestinationKey, String, Delivery, Work);

/// A FlowFile taken with rows: where they go, where they came from, how they are delivered.
struct Taken {
    destination: DestinationKey,
    source: Source,
    delivery: Delivery,
}

fn router_settings(settings: &SinkSettings) -> RouterSettings {
    RouterSettings {
        node: settings.node.clone(),
        order_wait: settings.channel.order_wait,
        retry_limit: settings.retry_limit,
        warm_up: settings.warm_up,
        unpark_interval: UNPARK_INTERVAL,
    }
}

/// One open destination: its API client's writers and status poller.
pub struct DestinationTasks {
    writers: Writers,
    board: StatusBoard,
    poller: JoinHandle<()>,
}

impl OpenDestination for DestinationTasks {
    fn is_idle(&self) -> bool {
        self.writers.running() == 0 && self.board.is_empty()
    }

    fn close(&self) {
        self.poller.abort();
        self.writers.stop();
    }
}

pub struct SinkEngine {
    settings: SinkSettings,
    names: ChannelNames,
    rule: DestinationRule,
    destinations: OpenDestinations<DestinationTasks>,
    outcomes_tx: mpsc::UnboundedSender<Outcome>,
    outcomes_rx: tokio::sync::Mutex<mpsc::UnboundedReceiver<Outcome>>,
    in_flight_bytes: Arc<AtomicU64>,
    /// Holds a child shard's FlowFiles until its parents' FlowFiles have their outcomes; knows
    /// every FlowFile handed to a writer and without an outcome taken by Java yet.
    gate: Mutex<LineageGate<Routed>>,
    /// FlowFiles of tracking consumers (see `router`): their ways, what their success tells
    /// `feedback`, the parked ones and the warnings given.
    router: Mutex<Router<FlowFileIn>>,
    /// FlowFiles whose channel asked for their rows again (`Route::Resend`), by id: the channel.
    /// Their next submission is their rows, not a new FlowFile.
    resending: Mutex<HashMap<i64, String>>,
    /// Per shard, how fresh its rows in Snowflake are (View State, the Freshness Warning).
    freshness: Mutex<Freshness>,
    /// When the Freshness Warning looks next.
    next_freshness_check: Mutex<Instant>,
}

/// Parked FlowFiles are decided again when their consumers have read the lease table since, or
/// after this long (their waits are counted in seconds), not on every outcome call: deciding one
/// maps its content again.
const UNPARK_INTERVAL: Duration = Duration::from_secs(1);

#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    #[error("{0}")]
    Api(#[from] ApiError),
    #[error(
        "PutSnowflake was started without its instance id (NiFi passes it from the processor's local state); \
         without it, NiFi instances sharing a Channel Name Prefix would share channels and skip each other's rows"
    )]
    NoInstance,
}

impl SinkEngine {
    /// Must run inside the runtime (it spawns the status poller).
    pub fn start(config: &PutSnowflakeConfig, mut settings: SinkSettings) -> Result<Self, SinkError> {
        let instance = settings.instance.clone().ok_or(SinkError::NoInstance)?;
        settings.channel.gap_memory = Arc::new(restored_gaps(config));
        let credentials = Credentials::from_config(&config.account, config.role.as_deref(), &config.authentication)
            .map_err(ApiError::from)?;
        let (outcomes_tx, outcomes_rx) = mpsc::unbounded_channel();
        let in_flight_bytes = Arc::new(AtomicU64::new(0));
        let sink = OutcomeSink {
            outcomes: outcomes_tx.clone(),
            in_flight_bytes: in_flight_bytes.clone(),
            max_in_flight_bytes: settings.max_in_flight_bytes,
        };
        let opener = {
            let (control, settings, commit_timeout, proxy) =
                (control_url(config), settings.clone(), config.commit_timeout, config.proxy.clone());
            Box::new(move |key: &DestinationKey| {
                let destination = Destination {
                    control: control.clone(),
                    database: key.database.clone(),
                    schema: key.schema.clone(),
                    pipe: key.pipe.clone(),
                };
                let api = SnowflakeApi::new(
                    destination,
                    credentials.clone(),
                    commit_timeout,
                    &proxy,
                    settings.extra_root_ca_pem.as_deref(),
                )
                .map_err(|e| e.to_string())?
                .with_counters(settings.channel.counters.clone());
                Ok(open_destination(Arc::new(api), &settings, sink.clone()))
            })
        };
        let rule = DestinationRule::from_config(config);
        let destinations = OpenDestinations::new(settings.max_destinations, opener);
        // The configured destination opens at start, so what cannot make a client fails the start as before.
        destinations.get(&rule.configured()).map_err(|e| ApiError::Protocol(e.to_string()))?;
        let router = Router::new(router_settings(&settings), Instant::now());
        Ok(Self {
            names: ChannelNames::new(&settings.channel_prefix, &instance),
            rule,
            destinations,
            settings,
            outcomes_tx,
            outcomes_rx: tokio::sync::Mutex::new(outcomes_rx),
            in_flight_bytes,
            gate: Mutex::new(LineageGate::default()),
            router: Mutex::new(router),
            resending: Mutex::new(HashMap::new()),
            freshness: Mutex::new(Freshness::default()),
            next_freshness_check: Mutex::new(Instant::now()),
        })
    }

    /// Bytes Java may still hand over before the budget is used up.
    /// View State's lines: each open channel (see `views`), then each shard's freshness (see
    /// `freshness`).
    pub fn status_map(&self) -> Vec<(String, String)> {
        let mut lines = self.settings.channel.views.lines();
        lines.extend(self.lock_freshness().lines(SystemTime::now()));
        let gaps = self.settings.channel.gap_memory.to_state();
        if gaps != "{}" {
            lines.push((gap_memory::STATE_KEY.to_owned(), gaps));
        }
        lines
    }

    /// The counts of NiFi's counters since the last call, in the contract's order (see `counters`).
    pub fn take_counters(&self) -> Vec<u64> {
        self.settings.channel.counters.take()
    }

    /// The gauges' values now, in the contract's order (`contract::counters::put_snowflake::GAUGES`).
    pub fn gauges(&self) -> Vec<i64> {
        let lag = self.lock_freshness().lag(SystemTime::now());
        vec![i64::try_from(lag.as_millis()).unwrap_or(i64::MAX)]
    }

    pub fn capacity(&self) -> u64 {
        self.settings.max_in_flight_bytes.saturating_sub(self.in_flight_bytes.load(Ordering::Acquire))
    }

    /// Maps each FlowFile and queues its rows on its channel; content that is not rows gets its
    /// outcome at once (`invalid`, `empty`). Every FlowFile gets exactly one outcome. Must run
    /// inside the runtime.
    pub fn submit(&self, flow_files: Vec<FlowFileIn>) {
        for flow_file in flow_files {
            let id = flow_file.id;
            let resend = self.lock_resending().remove(&id);
            if let Some(channel) = resend {
                self.resubmit(flow_file, &channel);
                continue;
            }
            if self.lock_gate().contains(id) || self.lock_router().is_parked(id) {
                // Submitted again (a session rolled back) while its first submission is under way.
                continue;
            }
            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| self.submit_one(flow_file))) {
                let message = format!(
                    "internal error in PutSnowflake while taking the FlowFile (a bug, please report it): {}; sending it again is safe",
                    panic_message(panic.as_ref())
                );
                error!("FlowFile {id}: {message}");
                self.immediate(id, Route::Failure, String::new(), message);
            }
        }
    }

    fn submit_one(&self, flow_file: FlowFileIn) {
        let destination = match self.rule.resolve(&flow_file.attributes) {
            Ok(destination) => destination,
            Err(problem) => {
                error!("FlowFile {}: {problem}", flow_file.id);
                return self.immediate(flow_file.id, Route::Failure, String::new(), problem.to_string());
            }
        };
        match self.settings.mapping.prepare(&flow_file) {
            Prepared::Invalid(reason) => {
                self.pass_never_loading(&flow_file, &destination);
                self.immediate(flow_file.id, Route::Invalid, String::new(), format!("not sent: {reason}"))
            }
            Prepared::Empty => {
                self.pass_never_loading(&flow_file, &destination);
                self.immediate(
                    flow_file.id,
                    Route::Empty,
                    String::new(),
                    "the FlowFile holds no rows; nothing was sent".into(),
                )
            }
            Prepared::Rows { source, delivery, rows } => {
                self.take_rows(flow_file, Taken { destination, source, delivery }, rows)
            }
        }
    }

    /// A FlowFile mapped to rows: refused when a row is too large, else routed (see `router`) and
    /// handed to its channel unless it is decided here already (superseded) or parked.
    fn take_rows(&self, flow_file: FlowFileIn, taken: Taken, rows: Vec<Row>) {
        let oversized =
            rows.iter().enumerate().find_map(|(i, row)| request_size::check_row(&row.json).err().map(|t| (i, t)));
        if let Some((index, too_large)) = oversized {
            return self.refuse_too_large(&flow_file, &taken.destination, rows.len(), index, too_large);
        }
        let notes = read_notes(&self.settings.board, &flow_file, &taken.source, taken.delivery);
        if let Some(message) = notes.repaired {
            return self.immediate(flow_file.id, Route::Reload, String::new(), message);
        }
        self.note_taken(&flow_file, &taken.source);
        let shared = match self.tracked_way(&flow_file, &taken, rows.len()) {
            Ok(shared) => shared,
            Err(()) => return, // decided already (superseded, or parked)
        };
        self.hand_over(flow_file, taken, rows, shared, notes.follows);
    }

    /// Lines the FlowFile's rows up in its channel (behind its parents' channels).
    fn hand_over(
        &self,
        flow_file: FlowFileIn,
        taken: Taken,
        rows: Vec<Row>,
        shared: Option<(Tracked, Order)>,
        (follows, passes): (Follows, Option<OffsetToken>),
    ) {
        let Taken { destination, source, delivery } = taken;
        // What the rows hold until their outcome: the content's buffer when they are slices of it.
        let bytes = super::rows::held_bytes(&flow_file, &rows);
        let (channel, parents, key) = match &shared {
            Some((t, _)) => {
                let channel = link::shared_channel(&self.settings.channel_prefix, &t.lease.key, &t.lease.shard);
                let parents = parent_ids(&flow_file)
                    .map(|p| link::shared_channel(&self.settings.channel_prefix, &t.lease.key, p))
                    .collect();
                (channel.clone(), parents, channel)
            }
            None => (
                self.names.channel(&source, delivery),
                self.parent_keys(&source, &flow_file),
                self.names.lineage_key(&source),
            ),
        };
        // The book waits for the record before the FlowFile (`follows`) on a shared channel too:
        // `link`'s chain may still count a FlowFile whose append was refused (issue 51, hole 1).
        let shared = shared.is_some();
        let work = Work { flow_file_id: flow_file.id, rows, bytes, follows, shared, resent: false, passes };
        self.in_flight_bytes.fetch_add(bytes, Ordering::AcqRel);
        let admitted = self.lock_gate().admit(flow_file.id, &key, parents, (destination, channel, delivery, work));
        if let Some(routed) = admitted {
            self.dispatch(routed);
        }
    }

    /// The rows of a FlowFile its channel asked for again, read again by Java, back to that
    /// channel (see `book`: rows are dropped once appended). Mapped exactly as when it was taken;
    /// the channel checks that they are the rows it had.
    fn resubmit(&self, flow_file: FlowFileIn, channel: &str) {
        let destination = match self.rule.resolve(&flow_file.attributes) {
            Ok(destination) => destination,
            Err(problem) => {
                return error!(
                    "FlowFile {} asked back by channel {channel}: {problem}; the channel waits for it: stop and start PutSnowflake to hand it over again",
                    flow_file.id
                )
            }
        };
        let (rows, delivery) = match self.settings.mapping.prepare(&flow_file) {
            Prepared::Rows { rows, delivery, .. } => (rows, delivery),
            Prepared::Invalid(_) | Prepared::Empty => (Vec::new(), Delivery::ExactlyOnce),
        };
        let bytes = super::rows::held_bytes(&flow_file, &rows);
        let (id, follows) = (flow_file.id, Follows::Unknown);
        let work = Work { flow_file_id: id, rows, bytes, follows, shared: false, resent: true, passes: None };
        self.in_flight_bytes.fetch_add(bytes, Ordering::AcqRel);
        match self.destinations.get(&destination) {
            Ok(open) => open.writers.dispatch(channel, delivery, work),
            Err(e) => {
                self.in_flight_bytes.fetch_sub(bytes, Ordering::AcqRel);
                error!(
                    "FlowFile {} asked back by channel {channel}: {e}; the channel waits for it: stop and start \
                     PutSnowflake to hand it over again",
                    flow_file.id
                );
            }
        }
    }

    fn lock_resending(&self) -> std::sync::MutexGuard<'_, HashMap<i64, String>> {
        lock(&self.resending)
    }

    /// A FlowFile with a row no append request can carry (see `request_size`) goes to failure before
    /// any of its rows is sent: Snowflake would refuse the request, and a refused append fails every
    /// unsent row of its channel. Its records never load, whoever sends it (its row is refused the same
    /// way on every node and every time it is sent back), so the FlowFiles after it do not wait for it
    /// ([`Self::pass_never_loading`]); split upstream and sent again, its records load at least once.
    fn refuse_too_large(
        &self,
        flow_file: &FlowFileIn,
        destination: &DestinationKey,
        rows: usize,
        index: usize,
        too_large: request_size::TooLarge,
    ) {
        let id = flow_file.id;
        let message = format!(
            "row {} of {rows} is too large for any Snowflake append request: {too_large}; none of its {rows} row(s) \
             were sent. Split the record upstream into smaller ones (Snowflake takes at most 4 MB per request after \
             compression), or make its content compress better",
            index + 1
        );
        error!("FlowFile {id} goes to failure without being sent: {message}");
        self.pass_never_loading(flow_file, destination);
        self.immediate(id, Route::Failure, String::new(), message);
    }

    /// A FlowFile of a shard's records, read exactly once, that can never load (`invalid`, `empty`, a
    /// row too large for any request): the FlowFiles of its shard after it follow on from the record
    /// before it at once, instead of waiting Order Wait for records that never come. Noted for the
    /// FlowFiles still to come (`feedback::parse_failures`, this flow's), told to the channels where
    /// later ones may wait already, and, for a tracking consumer's lease, to its chain. Not for a
    /// fragment of a FlowFile (a split holds only some of the records its attributes span) nor for
    /// one sent back for the at-least-once channels.
    fn pass_never_loading(&self, flow_file: &FlowFileIn, destination: &DestinationKey) {
        let attributes = &flow_file.attributes;
        let source = super::rows::source_of(attributes);
        let Source::Shard { shard_id, .. } = &source else { return };
        if super::rows::marked_at_least_once_by(attributes) || attributes.keys().any(|k| k.starts_with(FRAGMENT_PREFIX))
        {
            return;
        }
        let (Some(previous), Some(last)) = (super::rows::previous_record(attributes), last_record(attributes)) else {
            return;
        };
        let Some(upto) = token_of(&last) else { return };
        let scope = note_scope(attributes, &source);
        let follows = {
            let mut noted = self.settings.board.parse_failures();
            noted.note(&scope, shard_id, previous.clone(), &last);
            match previous {
                None => Follows::Nothing,
                Some(p) => noted.before_failures(&scope, shard_id, p).map_or(Follows::Nothing, follows_record),
            }
        };
        let tracked = link::tracked(attributes);
        if let Some(t) = &tracked {
            let lease = &t.lease;
            self.settings.board.lock().skipped(
                &lease.key,
                &lease.shard,
                lease.tenure,
                t.previous.clone(),
                t.last.clone(),
            );
        }
        // Only an open destination can have channels where later FlowFiles wait.
        let Some(open) = self.destinations.if_open(destination) else { return };
        let mut channels = vec![self.names.channel(&source, Delivery::ExactlyOnce)];
        channels
            .extend(tracked.map(|t| link::shared_channel(&self.settings.channel_prefix, &t.lease.key, &t.lease.shard)));
        for channel in channels {
            open.writers.pass(&channel, Work::pass(follows.clone(), upto.clone()));
        }
    }

    /// Hands the FlowFile to its channel's writer in its destination, opening the destination if
    /// needed; a destination that cannot be opened sends the FlowFile to failure.
    fn dispatch(&self, (destination, channel, delivery, work): Routed) {
        match self.destinations.get(&destination) {
            Ok(open) => open.writers.dispatch(&channel, delivery, work),
            Err(e) => {
                self.in_flight_bytes.fetch_sub(work.bytes, Ordering::AcqRel);
                error!("FlowFile {}: {e}", work.flow_file_id);
                self.immediate(work.flow_file_id, Route::Failure, channel, e.to_string());
            }
        }
    }

    /// The tracked FlowFile's way (see `router`): `Ok(Some)` for its shard's shared channel,
    /// `Ok(None)` for the per-node channels, `Err` when it is decided here already (superseded)
    /// or parked until it can be.
    fn tracked_way(&self, flow_file: &FlowFileIn, taken: &Taken, rows: usize) -> Result<Option<(Tracked, Order)>, ()> {
        if taken.delivery != Delivery::ExactlyOnce || !matches!(taken.source, Source::Shard { .. }) {
            return Ok(None);
        }
        let Some(tracked) = link::tracked(&flow_file.attributes) else { return Ok(None) };
        let destination = taken.destination.to_string();
        let facts = self.lease_facts(&tracked, &destination);
        let arrival = Arrival {
            id: flow_file.id,
            tracked: &tracked,
            destination: &destination,
            bytes: flow_file.content.len() as u64,
            arrival_ms: arrival_ms(flow_file),
            item: flow_file,
        };
        let way = {
            let mut router = self.lock_router();
            let way = router.route(&arrival, &facts, Instant::now());
            match way {
                Way::Shared(Order::Chain) => {
                    let lease = &tracked.lease;
                    self.settings.board.lock().put_in_channel(&lease.key, &lease.shard, lease.tenure, &tracked.last);
                }
                // Its bytes count as in flight while it waits.
                Way::Parked { .. } => _ = self.in_flight_bytes.fetch_add(arrival.bytes, Ordering::AcqRel),
                _ => {}
            }
            way
        };
        match way {
            Way::Shared(order) => {
                if order == Order::Book {
                    self.note_book_order(flow_file.id, &tracked);
                }
                Ok(Some((tracked, order)))
            }
            Way::PerNode { warning } => {
                if let Some(reason) = warning {
                    self.warn_per_node(&tracked, &reason);
                }
                Ok(None)
            }
            Way::Superseded { current } => {
                self.superseded(flow_file.id, &tracked, current, rows);
                Err(())
            }
            Way::Parked { .. } => Err(()),
        }
    }

    /// What the board knows of the tracked FlowFile's lease, read under one lock of the board.
    fn lease_facts(&self, tracked: &Tracked, destination: &str) -> LeaseFacts {
        let mut board = self.settings.board.lock();
        LeaseFacts::read(&mut board, &tracked.lease, tracked.previous.as_ref(), destination)
    }

    /// Nobody took the lease over within the wait (its shard ended, ConsumeKinesis is stopped, NiFi
    /// restarted): the shared channel, ordered by the book. Rows Snowflake committed there are
    /// skipped (another tenure or node loaded them, or this one before a kill -9), a gap before it is
    /// never passed over, and a FlowFile that waits for one goes back for the at-least-once channels.
    /// The per-node channels would load rows the next tenure reloads.
    fn note_book_order(&self, id: i64, tracked: &Tracked) {
        info!(
            "FlowFile {id}: shard {}'s lease {} was neither taken over nor known to this node within {} s; it goes \
             into the shard's shared channel in the order of its records",
            tracked.lease.shard,
            tracked.lease.tenure,
            self.settings.retry_limit.as_secs()
        );
    }

    /// Success without loading: lease `current` re-read the FlowFile's records and loads them.
    fn superseded(&self, id: i64, tracked: &Tracked, current: u64, rows: usize) {
        let lease = &tracked.lease;
        let message = format!(
            "superseded: read on node '{}' by lease {} of shard {}, whose lease {current} has read these records \
             again from what Snowflake had and loads them; nothing was sent",
            tracked.node, lease.tenure, lease.shard
        );
        let _ = self.outcomes_tx.send(Outcome {
            flow_file_id: id,
            route: Route::Success,
            channel: link::shared_channel(&self.settings.channel_prefix, &lease.key, &lease.shard),
            offset_token: String::new(),
            message,
            rows_sent: 0,
            rows_skipped: rows as u32,
        });
    }

    /// Decides the parked FlowFiles again (the consumer of their key has read the table since,
    /// or their wait is over); those still undecidable stay parked. While the in-flight budget is
    /// full, those waiting for an earlier FlowFile of their lease go back to the queue first
    /// (penalized, `retry`), so that one can be taken.
    fn unpark(&self) {
        let now = Instant::now();
        let (given_back, unparked) = {
            let mut router = self.lock_router();
            let keys = router.parked_keys();
            if keys.is_empty() {
                return;
            }
            let given_back = if self.budget_full() { router.give_back_awaiting(now) } else { Vec::new() };
            let scans = {
                let board = self.settings.board.lock();
                keys.iter().map(|key| board.scans(key)).sum::<u64>()
            };
            (given_back, router.unpark_due(scans, now))
        };
        if !given_back.is_empty() {
            info!(
                "{} FlowFile(s) waiting for an earlier one of their lease go back to the queue, penalized: Max In-Flight \
                 Size is full, and the one they wait for may not get in otherwise",
                given_back.len()
            );
        }
        for parked in given_back {
            self.in_flight_bytes.fetch_sub(parked.bytes, Ordering::AcqRel);
            let message = "given back to the queue: it waits for an earlier FlowFile of its lease, and PutSnowflake's \
                           in-flight budget is full";
            self.immediate(parked.id, Route::Retry, String::new(), message.into());
        }
        for parked in unparked {
            self.in_flight_bytes.fetch_sub(parked.bytes, Ordering::AcqRel);
            self.submit(vec![parked.item]);
        }
    }

    /// The in-flight budget is used up: Java hands nothing over until some is given back.
    fn budget_full(&self) -> bool {
        self.in_flight_bytes.load(Ordering::Acquire) >= self.settings.max_in_flight_bytes
    }

    fn warn_per_node(&self, tracked: &Tracked, reason: &str) {
        warn!(
            "FlowFiles of stream '{}' (Application Name '{}') are loaded at least once, through this node's own channels, not \
             exactly once: {reason}. Exactly once across failover needs ConsumeKinesis and PutSnowflake on the same node, with \
             no load-balanced connection between them",
            tracked.lease.key.stream,
            tracked.lease.key.application
        );
    }

    fn lock_router(&self) -> std::sync::MutexGuard<'_, Router<FlowFileIn>> {
        lock(&self.router)
    }

    /// Tells `feedback` what the tracked FlowFiles among `outcomes` have in Snowflake; a shared
    /// channel's FlowFile that did not load (`failure`, or back to the queue) takes its lease's chain
    /// back to before it, so the FlowFiles after it wait for it when it is sent back.
    fn report_loaded(&self, outcomes: &[Outcome]) {
        let settled = self.lock_router().settled(outcomes);
        if settled.loaded.is_empty() && settled.unloaded.is_empty() {
            return;
        }
        let conflicts = settled.tell(&mut self.settings.board.lock());
        for (r, first) in conflicts {
            warn!(
                "rows of stream '{}' (Application Name '{}') are loaded into {} and {}: Snowflake's committed position cannot \
                 be told to ConsumeKinesis for two tables, so it is no longer told (a node that takes a shard over reads it \
                 again from the last position known, which loads nothing twice but reads more); keep one PutSnowflake \
                 destination per Application Name for exactly once at the least cost",
                r.lease.key.stream,
                r.lease.key.application,
                first,
                r.destination
            );
        }
    }

    /// A FlowFile of a Kinesis shard is waiting here from now on (see `freshness`).
    fn note_taken(&self, flow_file: &FlowFileIn, source: &Source) {
        let Source::Shard { stream, shard_id, .. } = source else { return };
        let Some(arrival) = arrival_ms(flow_file) else { return };
        let shard = ShardKey { stream: stream.clone(), shard_id: shard_id.clone() };
        self.lock_freshness().taken(flow_file.id, shard, arrival);
    }

    /// The outcomes' FlowFiles wait no more; a success's rows are in Snowflake. Then the
    /// Freshness Warning, at most once per [`FRESHNESS_CHECK`].
    fn note_settled(&self, outcomes: &[Outcome]) {
        let now = SystemTime::now();
        let alarms = {
            let mut freshness = self.lock_freshness();
            for o in outcomes {
                freshness.settled(o.flow_file_id, o.route == Route::Success, now);
            }
            let mut next = lock(&self.next_freshness_check);
            if Instant::now() < *next {
                return;
            }
            *next = Instant::now() + FRESHNESS_CHECK;
            freshness.check(now, self.settings.freshness_warning)
        };
        for alarm in alarms {
            match alarm {
                freshness::Alarm::Stale { shard, age, waiting, committed } => {
                    let newest = if committed {
                        "the newest row Snowflake has committed"
                    } else {
                        "nothing is committed yet, and the oldest FlowFile waiting"
                    };
                    warn!(
                        "rows of shard {} of stream '{}' are not fresh in Snowflake: {newest} arrived in Kinesis {} ago, \
                         while {waiting} FlowFile(s) of the shard wait in PutSnowflake for Snowflake to commit",
                        shard.shard_id,
                        shard.stream,
                        freshness::age_text(age)
                    )
                }
                freshness::Alarm::Fresh { shard, age } => {
                    let now = match age {
                        Some(age) => format!("the newest row committed arrived {} ago", freshness::age_text(age)),
                        None => "nothing of the shard waits".to_owned(),
                    };
                    warn!(
                        "rows of shard {} of stream '{}' are fresh again in Snowflake: {now}",
                        shard.shard_id, shard.stream
                    )
                }
            }
        }
    }

    fn lock_freshness(&self) -> std::sync::MutexGuard<'_, Freshness> {
        lock(&self.freshness)
    }

    fn immediate(&self, id: i64, route: Route, channel: String, message: String) {
        let _ = self.outcomes_tx.send(Outcome {
            flow_file_id: id,
            route,
            channel,
            offset_token: String::new(),
            message,
            rows_sent: 0,
            rows_skipped: 0,
        });
    }

    /// The channel of a FlowFile from `source` delivered as `delivery` (see `naming`).
    pub fn channel_name(&self, source: &Source, delivery: Delivery) -> String {
        self.names.channel(source, delivery)
    }

    /// The lineage keys of the source shard's parents, from `aws.kinesis.parent.shard.ids`.
    /// (For a tracked FlowFile they are its parents' shared channels.)
    fn parent_keys(&self, source: &Source, flow_file: &FlowFileIn) -> Vec<String> {
        let (Source::Shard { region, stream, .. }, Some(parents)) =
            (source, flow_file.attributes.get(ATTR_PARENT_SHARDS))
        else {
            return Vec::new();
        };
        parents
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| {
                self.names.lineage_key(&Source::Shard {
                    region: region.clone(),
                    stream: stream.clone(),
                    shard_id: p.to_owned(),
                })
            })
            .collect()
    }

    fn lock_gate(&self) -> std::sync::MutexGuard<'_, LineageGate<Routed>> {
        lock(&self.gate)
    }

    /// FlowFiles held back for their parents' channels right now.
    pub fn held_for_parents(&self) -> usize {
        self.lock_gate().held()
    }

    /// Channels with a running writer, and channels on the status board (both shrink as idle
    /// writers retire).
    pub fn channels_running(&self) -> (usize, usize) {
        self.destinations.all().iter().fold((0, 0), |(w, b), d| (w + d.writers.running(), b + d.board.len()))
    }

    /// Destinations open right now (idle ones close as new ones need room, and on each outcome call).
    pub fn destinations_open(&self) -> usize {
        self.destinations.len()
    }

    /// Outcomes known so far, waiting up to `wait` for the first one. Children's FlowFiles held
    /// for these are sent on.
    /// Requests for a FlowFile's content again (`Route::Resend`) are among them; they settle nothing.
    pub async fn outcomes(&self, wait: Duration, max: usize) -> Vec<Outcome> {
        self.unpark();
        let out = self.collect_outcomes(wait, max).await;
        let (resends, settled): (Vec<&Outcome>, Vec<&Outcome>) = out.iter().partition(|o| o.route == Route::Resend);
        let settled: Vec<Outcome> = settled.into_iter().cloned().collect();
        {
            let mut resending = self.lock_resending();
            for o in &settled {
                resending.remove(&o.flow_file_id);
            }
            for o in resends {
                resending.insert(o.flow_file_id, o.channel.clone());
            }
        }
        self.report_loaded(&settled);
        self.note_settled(&settled);
        let released: Vec<Routed> = {
            let mut gate = self.lock_gate();
            settled.iter().flat_map(|o| gate.resolved(o.flow_file_id)).collect()
        };
        for routed in released {
            self.dispatch(routed);
        }
        self.destinations.retire_idle();
        out
    }

    async fn collect_outcomes(&self, wait: Duration, max: usize) -> Vec<Outcome> {
        let mut rx = self.outcomes_rx.lock().await;
        let mut out = Vec::new();
        if wait.is_zero() {
            while out.len() < max {
                match rx.try_recv() {
                    Ok(o) => out.push(o),
                    Err(_) => break,
                }
            }
            return out;
        }
        if let Ok(Some(first)) = tokio::time::timeout(wait, rx.recv()).await {
            out.push(first);
            while out.len() < max {
                match rx.try_recv() {
                    Ok(o) => out.push(o),
                    Err(_) => break,
                }
            }
        }
        out
    }

    /// Stops every task. FlowFiles without an outcome stay in Java's sessions, which roll back;
    /// their replay skips whatever Snowflake committed meanwhile. The chains this engine put into
    /// count only what Snowflake committed again (see `feedback`): the rolled-back FlowFiles may
    /// come back behind later ones.
    pub fn stop(&self) {
        self.destinations.close_all();
        // The parked FlowFiles' sessions roll back with the rest.
        let rewind = self.lock_router().stop().rewind;
        if !rewind.is_empty() {
            let mut board = self.settings.board.lock();
            for lease in rewind {
                board.rewind_chain(&lease.key, &lease.shard, lease.tenure);
            }
        }
    }
}

impl Drop for SinkEngine {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The Kinesis arrival (ms) of the FlowFile's first record, from its attribute.
/// The gaps the channels passed over before this start, as the local state kept them; unreadable
/// ones are reported and forgotten (a FlowFile of such a gap that comes back would be skipped).
fn restored_gaps(config: &PutSnowflakeConfig) -> gap_memory::GapMemory {
    gap_memory::GapMemory::restore(&config.passed_gaps).unwrap_or_else(|e| {
        error!(
            "{e}; the gaps channels passed over before this start are forgotten: a FlowFile that brings their records \
             from now on is skipped as a replay instead of loading at least once"
        );
        gap_memory::GapMemory::default()
    })
}

fn arrival_ms(flow_file: &FlowFileIn) -> Option<i64> {
    flow_file.attributes.get(ATTR_ARRIVAL_MS).and_then(|a| a.trim().parse::<i64>().ok())
}

/// What the notes of records that never load (`feedback::parse_failures`, read under one lock)
/// say of a FlowFile of an exactly-once channel.
struct Notes {
    /// Why it goes back for the at-least-once channels, if it brings noted records repaired.
    repaired: Option<String>,
    /// What its channel's book waits for, and the record it names itself if that differs.
    follows: (Follows, Option<OffsetToken>),
}

fn read_notes(board: &BoardHandle, flow_file: &FlowFileIn, source: &Source, delivery: Delivery) -> Notes {
    let (Delivery::ExactlyOnce, Source::Shard { shard_id, .. }) = (delivery, source) else {
        return Notes { repaired: None, follows: (Follows::Unknown, None) };
    };
    let noted = board.parse_failures();
    let scope = note_scope(&flow_file.attributes, source);
    let noted = (!noted.is_empty()).then_some((&*noted, &scope, shard_id.as_str()));
    Notes { repaired: repaired_never_loading(noted, flow_file), follows: follows(noted, flow_file) }
}

/// The notes of one flow's shard, when there are any.
type ShardNotes<'a> = Option<(&'a ParseFailures, &'a ScopeRef<'a>, &'a str)>;

/// What a per-node channel's book waits for before it lines the FlowFile up: the record
/// ConsumeKinesis read before its first one, or before the records that never load right before it
/// (`feedback::parse_failures`, see `book`); and, in that second case, the record it names itself
/// (`Work::passes`).
fn follows(noted: ShardNotes, flow_file: &FlowFileIn) -> (Follows, Option<OffsetToken>) {
    match super::rows::previous_record(&flow_file.attributes) {
        None => (Follows::Unknown, None),
        Some(None) => (Follows::Nothing, None),
        Some(Some(previous)) => {
            let named = token_of(&previous);
            let follows = match noted {
                None => follows_record(previous),
                Some((noted, scope, shard_id)) => {
                    noted.before_failures(scope, shard_id, previous).map_or(Follows::Nothing, follows_record)
                }
            };
            let passes = named.filter(|n| follows != Follows::After(n.clone()));
            (follows, passes)
        }
    }
}

/// The FlowFile brings records noted as never loading (`feedback::parse_failures`: routed to
/// `parse.failure`, or sent to `invalid`/`empty`/`failure` here), with the record before them they
/// were noted with: they come after all, repaired downstream (ReplaceText, Jolt). Later records of
/// their shard may be committed past them already (a LINE_DELIMITED FlowFile's tokens span a
/// record it lost to `parse.failure`), so they go back for the at-least-once channels: why, if so.
fn repaired_never_loading(noted: ShardNotes, flow_file: &FlowFileIn) -> Option<String> {
    let (noted, scope, shard_id) = noted?;
    let (Some(previous), Some(last)) =
        (super::rows::previous_record(&flow_file.attributes), last_record(&flow_file.attributes))
    else {
        return None;
    };
    noted.noted(scope, shard_id, previous.as_ref(), &last).then(|| {
        format!(
            "its records (up to sequence number {} of shard {shard_id}) were noted as never loading (parse.failure, \
             invalid, empty or too large) and come after all, repaired: the channel may have gone on past them, so it goes \
             back to the queue to be loaded at least once through the at-least-once channels",
            last.sequence_number
        )
    })
}

/// A FlowFile follows on from `record`.
fn follows_record(record: Position) -> Follows {
    token_of(&record).map_or(Follows::Unknown, Follows::After)
}

fn token_of(record: &Position) -> Option<OffsetToken> {
    OffsetToken::sharded(&record.sequence_number, record.sub_sequence_number.unwrap_or(0))
}

/// The FlowFile's last record, from `aws.kinesis.last.sequence.number` (and its sub-sequence).
fn last_record(attributes: &HashMap<String, String>) -> Option<Position> {
    let sequence = attributes.get(ATTR_LAST_SEQUENCE).map(|s| s.trim()).filter(|s| !s.is_empty())?;
    let sub = attributes.get(ATTR_LAST_SUB).and_then(|sub| sub.trim().parse::<u64>().ok());
    Some(Position::new(sequence, sub))
}

/// The flow whose never-loading records a FlowFile's follow on from (see `feedback::parse_failures`):
/// its Application Name, region and stream, as ConsumeKinesis wrote them.
fn note_scope<'a>(attributes: &'a HashMap<String, String>, source: &'a Source) -> ScopeRef<'a> {
    let Source::Shard { region, stream, .. } = source else {
        return ScopeRef { application: "", region: "", stream: "" };
    };
    let application = attributes.get(ATTR_APPLICATION).map(|a| a.trim()).unwrap_or_default();
    ScopeRef { application, region: region.as_deref().unwrap_or_default(), stream }
}

/// The parents named in `aws.kinesis.parent.shard.ids`.
fn parent_ids(flow_file: &FlowFileIn) -> impl Iterator<Item = &str> {
    flow_file
        .attributes
        .get(ATTR_PARENT_SHARDS)
        .into_iter()
        .flat_map(|p| p.split(','))
        .map(str::trim)
        .filter(|p| !p.is_empty())
}
