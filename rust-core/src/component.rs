//! A processor instance as the core sees it: its type, its parsed settings and, once started, its
//! engine. The FFI layer keeps components behind handles; nothing here knows about Java.
//!
//! ConsumeKinesis's engine starts in the background ([`startup`]): `start` returns at once and the
//! processor yields while [`Component::startup_status`] says the engine is not running yet. A batch
//! taken from the engine is held as an [`outgoing`] batch until NiFi has it, and nacked if it never
//! gets there.

pub mod outgoing;
pub mod startup;

use std::sync::{Arc, Mutex};

use tracing::info;

use crate::config::{ComponentType, ConfigProblems, ConsumeKinesisConfig, PropertyMap, PutSnowflakeConfig};
use crate::consumer::output::Layout;
use crate::consumer::output::ShardFlowFiles;
use crate::consumer::{Batch, ConsumerEngine, ConsumerError, EngineSettings};
use crate::error::{Classify, ErrorClass};
use crate::feedback::parse_failures::Scope;
use crate::feedback::{BoardHandle, LinkKey, Skip};
use crate::runtime::lock;
use crate::snowflake::take_order::Candidate;
use crate::snowflake::{FlowFileIn, Outcome, SinkEngine, SinkError, SinkSettings};
pub use outgoing::OutgoingBatch;
use startup::{RetrySchedule, Startup};

/// What a starting ConsumeKinesis engine does, for the bulletin shown until it runs.
const CONSUMER_START_UP: &str = "it prepares the lease table (creating it, migrating a KCL lease table, or waiting \
     for another node's migration), checks the stream and, with Enhanced Fan-Out, waits for its consumer to be ACTIVE";

#[derive(Debug, thiserror::Error)]
pub enum ComponentError {
    #[error("{0}")]
    Config(#[from] ConfigProblems),
    #[error("{0}")]
    Consumer(#[from] ConsumerError),
    #[error("{0}")]
    Sink(#[from] SinkError),
    #[error("{0} is not started")]
    NotStarted(&'static str),
}

impl Classify for ComponentError {
    fn class(&self) -> ErrorClass {
        match self {
            Self::Config(_) => ErrorClass::Configuration,
            Self::Consumer(e) => e.class(),
            Self::Sink(SinkError::Api(e)) => e.class(),
            Self::Sink(SinkError::NoInstance) => ErrorClass::Configuration,
            Self::NotStarted(_) => ErrorClass::Retryable,
        }
    }
}

/// One processor instance: its parsed settings and, once started, its engine. ConsumeKinesis'
/// engine is reached through its [`Startup`] (it starts in the background); PutSnowflake's
/// starts at once.
pub enum Component {
    ConsumeKinesis { config: ConsumeKinesisConfig, startup: Mutex<Option<Arc<Startup<ConsumerEngine>>>> },
    PutSnowflake { config: PutSnowflakeConfig, engine: Mutex<Option<Arc<SinkEngine>>> },
}

impl Component {
    /// Parses the settings; every problem is reported at once.
    pub fn open(kind: ComponentType, props: &PropertyMap) -> Result<Self, ComponentError> {
        let component = match kind {
            ComponentType::ConsumeKinesis => {
                Self::ConsumeKinesis { config: ConsumeKinesisConfig::parse(props)?, startup: Mutex::new(None) }
            }
            ComponentType::PutSnowflake => {
                Self::PutSnowflake { config: PutSnowflakeConfig::parse(props)?, engine: Mutex::new(None) }
            }
        };
        info!("{} configured", component.describe());
        Ok(component)
    }

    pub fn kind(&self) -> ComponentType {
        match self {
            Self::ConsumeKinesis { .. } => ComponentType::ConsumeKinesis,
            Self::PutSnowflake { .. } => ComponentType::PutSnowflake,
        }
    }

    /// Starts the engine. ConsumeKinesis's engine starts in the background: this returns at once
    /// (see [`Self::startup_status`]); a second call while it starts or runs does nothing. The
    /// engine's tasks keep the caller's span (`runtime::spawn`), which routes their log events.
    pub fn start(&self) -> Result<(), ComponentError> {
        match self {
            Self::ConsumeKinesis { config, startup } => {
                let mut slot = lock(startup);
                if slot.is_none() {
                    *slot = Some(Arc::new(start_consumer(config, RetrySchedule::default())));
                }
                Ok(())
            }
            Self::PutSnowflake { config, engine } => {
                let _runtime = crate::runtime::get().enter();
                let started = SinkEngine::start(config, SinkSettings::from_config(config))?;
                *lock(engine) = Some(Arc::new(started));
                Ok(())
            }
        }
    }

    /// PutSnowflake: hands FlowFiles to the engine.
    pub fn submit(&self, flow_files: Vec<FlowFileIn>) -> Result<(), ComponentError> {
        let engine = self.sink()?;
        let _runtime = crate::runtime::get().enter();
        engine.submit(flow_files);
        Ok(())
    }

    /// PutSnowflake: the outcomes known so far, waiting up to `wait` for one (empty if none).
    pub fn outcomes(&self, wait: std::time::Duration) -> Result<Vec<Outcome>, ComponentError> {
        let engine = self.sink()?;
        Ok(crate::runtime::get().block_on(engine.outcomes(wait, 10_000)))
    }

    /// The counts of NiFi's counters since the last call, in the contract's order
    /// (`contract::counters`; zeros while no engine runs), then the gauges' values now
    /// (`contract::counters::NO_VALUE` for one with nothing to measure).
    pub fn take_metrics(&self) -> Vec<i64> {
        use crate::contract::counters::{consume_kinesis, put_snowflake, NO_VALUE};
        let (counts, gauges) = match self {
            Self::ConsumeKinesis { .. } => self.consumer().map_or_else(
                |_| (vec![0; consume_kinesis::ENGINE.len()], vec![NO_VALUE; consume_kinesis::GAUGES.len()]),
                |(e, _)| (e.take_counters(), e.gauges()),
            ),
            Self::PutSnowflake { .. } => self.sink().map_or_else(
                |_| (vec![0; put_snowflake::ENGINE.len()], vec![NO_VALUE; put_snowflake::GAUGES.len()]),
                |s| (s.take_counters(), s.gauges()),
            ),
        };
        counts.into_iter().map(|n| n.min(i64::MAX as u64) as i64).chain(gauges).collect()
    }

    /// The lines of its View State (ConsumeKinesis: this node and each leased shard's status;
    /// PutSnowflake: each open channel); empty while its engine does not run.
    pub fn status_map(&self) -> Vec<(String, String)> {
        match self {
            Self::ConsumeKinesis { .. } => self.consumer().map_or_else(|_| Vec::new(), |(e, _)| e.status_map()),
            Self::PutSnowflake { .. } => self.sink().map_or_else(|_| Vec::new(), |s| s.status_map()),
        }
    }

    /// PutSnowflake: bytes of FlowFile content the engine can still take.
    pub fn capacity(&self) -> Result<u64, ComponentError> {
        Ok(self.sink()?.capacity())
    }

    /// PutSnowflake: which of the queued FlowFiles (in the queue's order) to take now, within
    /// the room left in the in-flight budget (see `snowflake::take_order`).
    pub fn choose(&self, candidates: &[Candidate]) -> Result<Vec<usize>, ComponentError> {
        Ok(crate::snowflake::take_order::choose(candidates, self.sink()?.capacity()))
    }

    fn sink(&self) -> Result<Arc<SinkEngine>, ComponentError> {
        match self {
            Self::PutSnowflake { engine, .. } => lock(engine).clone(),
            Self::ConsumeKinesis { .. } => None,
        }
        .ok_or(ComponentError::NotStarted(self.kind().name()))
    }

    /// `None` once the component can work; else why it cannot yet (ConsumeKinesis's engine is
    /// starting, or its last start attempt failed and is tried again), for a bulletin.
    pub fn startup_status(&self) -> Option<String> {
        match self {
            Self::ConsumeKinesis { startup, .. } => match lock(startup).as_ref() {
                Some(startup) => startup.status(),
                None => Some("the engine is not started".into()),
            },
            Self::PutSnowflake { .. } => None,
        }
    }

    /// The next batch of FlowFiles, or `None` when nothing arrived in time (or the engine is
    /// still starting). Dropped without being handed over (it could not be encoded or copied into
    /// Java), it is nacked, so its shards are read again from their checkpoint.
    pub fn poll_batch(&self) -> Result<Option<OutgoingBatch>, ComponentError> {
        let (engine, config) = match self.consumer() {
            Ok(running) => running,
            Err(ComponentError::NotStarted(_)) if self.consumer_starting() => return Ok(None),
            Err(e) => return Err(e),
        };
        let batch = crate::runtime::get().block_on(engine.poll(config.max_batch_size, config.max_batch_duration));
        let Some(Batch { id, shards, .. }) = batch else { return Ok(None) };
        let layout = Layout {
            stream: &config.stream_name,
            processing: &config.processing_strategy,
            output: config.output_strategy,
        };
        let shards: Vec<_> = shards.into_iter().map(|s| layout.shard(s)).collect();
        note_parse_failures(engine.board(), &note_scope(config), engine.link(), &shards);
        let link = engine.link().map_or(String::new(), |k| k.stream.clone());
        Ok(Some(OutgoingBatch::new(id, link, shards, move |id| engine.nack(id))))
    }

    /// Processing Strategy RECORD: the Kinesis records of a batch the shim sent to `parse.failure`,
    /// before it commits the batch, so PutSnowflake's order (and, with Failover Position
    /// `SNOWFLAKE_COMMIT`, the chain of their lease) passes over them.
    pub fn note_skipped(&self, skips: Vec<Skip>) -> Result<(), ComponentError> {
        let (engine, config) = self.consumer()?;
        note_skips(engine.board(), &note_scope(config), engine.link(), skips);
        Ok(())
    }

    pub fn ack(&self, batch_id: i64) -> Result<(), ComponentError> {
        let (engine, _) = self.consumer()?;
        Ok(crate::runtime::get().block_on(engine.ack(batch_id))?)
    }

    pub fn nack(&self, batch_id: i64) -> Result<(), ComponentError> {
        let (engine, _) = self.consumer()?;
        Ok(engine.nack(batch_id)?)
    }

    /// Stops the engine, if any: final checkpoints are already written; leases are released. A
    /// start in progress is cancelled and leaves nothing behind.
    pub fn stop(&self) {
        match self {
            Self::ConsumeKinesis { startup, .. } => {
                // Stopped in place, so batch acknowledgements still reach the engine while it stops.
                let running = lock(startup).clone();
                if let Some(running) = running {
                    crate::runtime::get().block_on(running.stop());
                }
                lock(startup).take();
            }
            Self::PutSnowflake { engine, .. } => {
                if let Some(sink) = lock(engine).take() {
                    sink.stop();
                }
            }
        }
    }

    /// A ConsumeKinesis whose engine was started and does not run yet.
    fn consumer_starting(&self) -> bool {
        matches!(self, Self::ConsumeKinesis { startup, .. } if lock(startup).is_some())
    }

    fn consumer(&self) -> Result<(Arc<ConsumerEngine>, &ConsumeKinesisConfig), ComponentError> {
        match self {
            Self::ConsumeKinesis { config, startup } => match lock(startup).as_ref().and_then(|s| s.engine()) {
                Some(engine) => Ok((engine, config)),
                None => Err(ComponentError::NotStarted(self.kind().name())),
            },
            Self::PutSnowflake { .. } => Err(ComponentError::NotStarted(self.kind().name())),
        }
    }

    /// One line naming what this component works on; never a secret.
    pub fn describe(&self) -> String {
        match self {
            Self::ConsumeKinesis { config: c, .. } => {
                format!(
                    "ConsumeKinesis for stream '{}' (application '{}', region {})",
                    c.stream_name, c.application_name, c.region
                )
            }
            Self::PutSnowflake { config: c, .. } => {
                format!(
                    "PutSnowflake into {}.{}.{} (at {})",
                    c.database,
                    c.schema,
                    c.table,
                    c.control.host_str().unwrap_or_default()
                )
            }
        }
    }
}

/// Spawns the start of a ConsumeKinesis engine on the runtime (clients, then the engine's two steps).
fn start_consumer(config: &ConsumeKinesisConfig, retry: RetrySchedule) -> Startup<ConsumerEngine> {
    let settings = EngineSettings::from_config(config);
    let aws = crate::aws::AwsSettings::of(config);
    let _runtime = crate::runtime::get().enter();
    Startup::spawn(
        CONSUMER_START_UP,
        retry,
        move || {
            let (settings, aws) = (settings.clone(), aws.clone());
            async move {
                let clients = crate::aws::clients(&aws).await;
                ConsumerEngine::prepare(settings, clients).await
            }
        },
        |prepared| prepared.join(),
    )
}

/// Records routed to `parse.failure` never reach PutSnowflake: the order its channels keep passes
/// over them (`feedback::parse_failures`), and so does a tracked lease's chain (see `feedback`).
/// The flow this consumer's notes belong to: what its FlowFiles' attributes name (Application Name,
/// `aws.kinesis.region`, `aws.kinesis.stream.name`), which is how PutSnowflake finds the notes.
fn note_scope(config: &ConsumeKinesisConfig) -> Scope {
    Scope::new(&config.application_name, &config.region, &config.stream_name)
}

fn note_parse_failures(board: &BoardHandle, scope: &Scope, key: Option<&LinkKey>, shards: &[ShardFlowFiles]) {
    use crate::consumer::output::Route;
    use crate::kinesis::position::Position;
    let failures = shards.iter().flat_map(|s| {
        s.flow_files.iter().filter(|f| f.route == Route::ParseFailure).map(move |f| Skip {
            shard: s.shard_id.clone(),
            tenure: s.tenure,
            previous: f.previous.clone(),
            last: Position::new(f.last_sequence.clone(), f.last_sub),
        })
    });
    note_skips(board, scope, key, failures);
}

/// Tells PutSnowflake's order and, for tracked leases, the board of skipped records, locking each
/// only when there is one.
fn note_skips(handle: &BoardHandle, scope: &Scope, key: Option<&LinkKey>, skips: impl IntoIterator<Item = Skip>) {
    let mut board = None;
    let mut noted = None;
    for Skip { shard, tenure, previous, last } in skips {
        noted.get_or_insert_with(|| handle.parse_failures()).note(scope, &shard, previous.clone(), &last);
        if let (Some(key), Some(tenure)) = (key, tenure) {
            board.get_or_insert_with(|| handle.lock()).skipped(key, &shard, tenure, previous, last);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_parse_failures_the_shim_reports_keep_the_lease_chain_unbroken() {
        use crate::feedback::{board, Chain};
        use crate::kinesis::position::Position;
        let at = |seq: &str| Position::new(seq, None);
        let key = LinkKey { stream: "arn:aws:kinesis:us-east-1:1:stream/record-gap".into(), application: "app".into() };
        board().took_here(&key, "engine", "shard-1", 7, Some(at("10")));
        board().put_in_channel(&key, "shard-1", 7, &at("11"));
        let chain = |previous: &str| board().chain(&key, "shard-1", 7, Some(&at(previous)));
        assert_eq!(chain("12"), Chain::Broken, "record 12 went to parse.failure, unreported");
        let skips = crate::ffi::skips::encode(&[
            ("shard-1", 7, Some(at("11")), at("12")),
            ("shard-1", 7, Some(at("12")), at("13")),
            ("shard-1", -1, Some(at("13")), at("14")),
        ]);
        let skips = crate::ffi::skips::decode(&skips).unwrap();
        let scope = Scope::new("app", "us-east-1", "record-gap");
        note_skips(&BoardHandle::process(), &scope, None, skips.clone());
        assert_eq!(chain("12"), Chain::Broken, "no link: nothing to note on the board");
        let noted =
            |previous: &str| crate::feedback::parse_failures::noted().before_failures(&scope, "shard-1", at(previous));
        assert_eq!(noted("14"), Some(at("11")), "PutSnowflake's order passes over all three, link or not");
        note_skips(&BoardHandle::process(), &scope, Some(&key), skips);
        assert_eq!(chain("13"), Chain::Linked, "12 and 13 went to parse.failure: the next FlowFile follows on");
        assert_eq!(chain("14"), Chain::Broken, "14's skip names no lease");
    }

    #[test]
    fn consume_kinesis_starts_in_the_background_and_a_stop_during_start_up_returns_at_once() {
        // Port 1 on loopback refuses connections: the start fails, is reported and waits to retry.
        let props = PropertyMap::from_pairs([
            ("Stream Name", "orders"),
            ("Application Name", "orders-app"),
            ("Region", "us-east-1"),
            ("AWS Access Key ID", "AKIAIOSFODNN7EXAMPLE"),
            ("AWS Secret Access Key", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
            ("Endpoint Override URL", "http://127.0.0.1:1"),
        ]);
        let c = Component::open(ComponentType::ConsumeKinesis, &props).unwrap();
        assert_eq!(c.startup_status().unwrap(), "the engine is not started");
        let t = std::time::Instant::now();
        c.start().unwrap();
        assert!(t.elapsed() < std::time::Duration::from_millis(500), "start took {:?}", t.elapsed());
        assert!(c.startup_status().unwrap().starts_with("the engine is starting"), "{:?}", c.startup_status());
        assert!(c.poll_batch().unwrap().is_none(), "nothing to poll while starting");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !c.startup_status().unwrap().contains("could not start") {
            assert!(std::time::Instant::now() < deadline, "no failure reported: {:?}", c.startup_status());
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let status = c.startup_status().unwrap();
        assert!(status.contains("DynamoDB call on table 'orders-app' failed"), "{status}");
        assert!(!status.contains("wJalrXUtnFEMI"), "no secret in the status");
        let t = std::time::Instant::now();
        c.stop();
        assert!(t.elapsed() < std::time::Duration::from_secs(1), "stop took {:?}", t.elapsed());
        assert!(matches!(c.ack(1), Err(ComponentError::NotStarted(_))));
    }

    #[test]
    fn put_snowflake_starts_without_contacting_snowflake_and_stops() {
        let dir = std::env::temp_dir().join(format!("kinesnow-token-{}", std::process::id()));
        std::fs::write(&dir, "token").unwrap();
        let props = PropertyMap::from_pairs([
            ("Account Identifier", "a-b"),
            ("Authentication Strategy", "SNOWFLAKE_MANAGED_TOKEN"),
            ("Session Token File", dir.to_str().unwrap()),
            ("Database", "D"),
            ("Schema", "S"),
            ("Table", "T"),
            (crate::config::put_snowflake::INSTANCE, "a1b2c3"),
        ]);
        let c = Component::open(ComponentType::PutSnowflake, &props).unwrap();
        assert!(matches!(c.capacity(), Err(ComponentError::NotStarted(_))));
        c.start().unwrap();
        assert_eq!(c.capacity().unwrap(), 64 * 1024 * 1024);
        assert!(c.outcomes(std::time::Duration::ZERO).unwrap().is_empty());
        c.stop();
        assert!(matches!(c.capacity(), Err(ComponentError::NotStarted(_))));
        std::fs::remove_file(dir).unwrap();
    }

    /// Issue 15, defect 5: without an instance id, standalone NiFis sharing a Channel Name Prefix
    /// shared channels and skipped each other's rows; such a start is refused.
    #[test]
    fn put_snowflake_refuses_to_start_without_its_instance_id() {
        let props = PropertyMap::from_pairs([
            ("Account Identifier", "a-b"),
            ("Authentication Strategy", "SNOWFLAKE_MANAGED_TOKEN"),
            ("Database", "D"),
            ("Schema", "S"),
            ("Table", "T"),
        ]);
        let c = Component::open(ComponentType::PutSnowflake, &props).unwrap();
        let err = c.start().unwrap_err();
        assert_eq!(err.class(), ErrorClass::Configuration);
        assert!(err.to_string().contains("instance id"), "{err}");
    }

    #[test]
    fn open_reports_configuration_problems() {
        let Err(err) = Component::open(ComponentType::PutSnowflake, &PropertyMap::default()) else {
            panic!("must fail")
        };
        assert_eq!(err.class(), ErrorClass::Configuration);
        assert!(err.to_string().contains("Account Identifier: is required"));
    }
}
