//! The PutSnowflake engine: takes FlowFiles from Java, maps them to rows, hands them to the
//! writer of their channel (one per source shard), and gives back each FlowFile's outcome once it
//! is known. Memory is bounded by Max In-Flight Size: Java asks [`SinkEngine::capacity`] before it
//! takes FlowFiles from its queue.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::Instrument;

use super::api::{ApiError, Destination, SnowflakeApi};
use super::auth::Credentials;
use super::channel::{ChannelSettings, ChannelWriter, Outcome, Route, Work};
use super::lineage::LineageGate;
use super::rows::{FlowFileIn, Mapping, Prepared, Source, ATTR_PARENT_SHARDS};
use super::status::StatusBoard;
use crate::config::put_snowflake::{Destination as PipeChoice, PutSnowflakeConfig};

#[derive(Clone)]
pub struct SinkSettings {
    pub component: u64,
    pub channel_prefix: String,
    pub mapping: Mapping,
    pub channel: ChannelSettings,
    pub max_in_flight_bytes: u64,
    pub status_interval: Duration,
    /// A CA certificate (PEM) trusted besides the public web roots. No property sets it: it lets
    /// tests and benchmarks reach the stand-in over TLS with the CA it generates.
    pub extra_root_ca_pem: Option<Vec<u8>>,
}

impl SinkSettings {
    pub fn from_config(config: &PutSnowflakeConfig, component: u64) -> Self {
        Self {
            component,
            channel_prefix: config.channel_prefix.clone(),
            mapping: Mapping { iceberg: config.iceberg },
            channel: ChannelSettings {
                component,
                max_batch_bytes: config.max_batch_size as usize,
                max_latency: config.max_latency,
                commit_timeout: config.commit_timeout,
            },
            max_in_flight_bytes: config.max_in_flight_size,
            status_interval: Duration::from_millis(250),
            extra_root_ca_pem: None,
        }
    }
}

/// The control URL: the override, or `https://<account>.snowflakecomputing.com` (lower case, `_` → `-`).
pub fn control_url(config: &PutSnowflakeConfig) -> url::Url {
    config.url_override.clone().unwrap_or_else(|| {
        let host = config.account.to_lowercase().replace('_', "-");
        url::Url::parse(&format!("https://{host}.snowflakecomputing.com")).expect("account identifiers are host-safe")
    })
}

pub fn pipe_name(config: &PutSnowflakeConfig) -> String {
    match &config.destination {
        PipeChoice::Table => format!("{}-STREAMING", config.table),
        PipeChoice::Pipe(p) => p.clone(),
    }
}

pub struct SinkEngine {
    settings: SinkSettings,
    api: Arc<SnowflakeApi>,
    channels: Mutex<HashMap<String, mpsc::UnboundedSender<Work>>>,
    writers: Mutex<Vec<JoinHandle<()>>>,
    poller: JoinHandle<()>,
    board: StatusBoard,
    outcomes_tx: mpsc::UnboundedSender<Outcome>,
    outcomes_rx: tokio::sync::Mutex<mpsc::UnboundedReceiver<Outcome>>,
    in_flight_bytes: Arc<AtomicU64>,
    direct_counter: AtomicU64,
    /// Holds a child shard's FlowFiles until its parents' channels have committed theirs.
    gate: Mutex<LineageGate>,
}

#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    #[error("{0}")]
    Api(#[from] ApiError),
}

impl SinkEngine {
    /// Must run inside the runtime (it spawns the status poller).
    pub fn start(config: &PutSnowflakeConfig, settings: SinkSettings) -> Result<Self, SinkError> {
        let credentials = Credentials::from_config(&config.account, config.role.as_deref(), &config.authentication).map_err(ApiError::from)?;
        let destination = Destination {
            control: control_url(config),
            database: config.database.clone(),
            schema: config.schema.clone(),
            pipe: pipe_name(config),
        };
        let api = Arc::new(SnowflakeApi::new(destination, credentials, config.commit_timeout, settings.extra_root_ca_pem.as_deref())?);
        let board = StatusBoard::default();
        // Spans carry the component, so every event below (the API's retries too) reaches its processor's log.
        let span = tracing::info_span!("put_snowflake", component = settings.component);
        let poller = tokio::spawn(board.clone().run(api.clone(), settings.status_interval, settings.component).instrument(span));
        let (outcomes_tx, outcomes_rx) = mpsc::unbounded_channel();
        // Direct FlowFiles get tokens from a counter that starts at the clock, so a restart continues above.
        let start = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_micros() as u64;
        Ok(Self {
            settings,
            api,
            channels: Mutex::new(HashMap::new()),
            writers: Mutex::new(Vec::new()),
            poller,
            board,
            outcomes_tx,
            outcomes_rx: tokio::sync::Mutex::new(outcomes_rx),
            in_flight_bytes: Arc::new(AtomicU64::new(0)),
            direct_counter: AtomicU64::new(start),
            gate: Mutex::new(LineageGate::default()),
        })
    }

    /// Bytes Java may still hand over before the budget is used up.
    pub fn capacity(&self) -> u64 {
        self.settings.max_in_flight_bytes.saturating_sub(self.in_flight_bytes.load(Ordering::Acquire))
    }

    /// Maps each FlowFile and queues its rows on its channel; content that is not rows gets its
    /// `invalid` outcome at once. Must run inside the runtime.
    pub fn submit(&self, flow_files: Vec<FlowFileIn>) {
        for flow_file in flow_files {
            let prepared = self.settings.mapping.prepare(&flow_file, || self.direct_counter.fetch_add(1, Ordering::AcqRel));
            match prepared {
                Prepared::Invalid(reason) => {
                    let _ = self.outcomes_tx.send(Outcome {
                        flow_file_id: flow_file.id,
                        route: Route::Invalid,
                        channel: String::new(),
                        offset_token: String::new(),
                        message: format!("not sent: {reason}"),
                        rows_sent: 0,
                        rows_skipped: 0,
                    });
                }
                Prepared::Rows { source, rows } => {
                    let bytes = rows.iter().map(|r| r.json.len() as u64 + 1).sum();
                    self.in_flight_bytes.fetch_add(bytes, Ordering::AcqRel);
                    let channel = self.channel_name(&source);
                    let parents = self.parent_channels(&source, &flow_file);
                    let work = Work { flow_file_id: flow_file.id, rows, bytes };
                    if let Some(work) = self.lock_gate().admit(&channel, parents, work) {
                        self.dispatch(&channel, work);
                    }
                }
            }
        }
    }

    /// `<prefix>_<stream>_<shardId>`, or `<prefix>_direct` for FlowFiles not from Kinesis.
    pub fn channel_name(&self, source: &Source) -> String {
        match source {
            Source::Shard { stream, shard_id } => format!("{}_{stream}_{shard_id}", self.settings.channel_prefix),
            Source::Direct => format!("{}_direct", self.settings.channel_prefix),
        }
    }

    /// The channels of the source shard's parents, from `aws.kinesis.parent.shard.ids`.
    fn parent_channels(&self, source: &Source, flow_file: &FlowFileIn) -> Vec<String> {
        let (Source::Shard { stream, .. }, Some(parents)) = (source, flow_file.attributes.get(ATTR_PARENT_SHARDS)) else {
            return Vec::new();
        };
        parents
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| self.channel_name(&Source::Shard { stream: stream.clone(), shard_id: p.to_owned() }))
            .collect()
    }

    fn lock_gate(&self) -> std::sync::MutexGuard<'_, LineageGate> {
        self.gate.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn dispatch(&self, channel: &str, work: Work) {
        self.writer(channel).send(work).expect("writers live as long as the engine");
    }

    /// FlowFiles held back for their parents' channels right now.
    pub fn held_for_parents(&self) -> usize {
        self.lock_gate().held()
    }

    fn writer(&self, channel: &str) -> mpsc::UnboundedSender<Work> {
        let mut channels = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(sender) = channels.get(channel) {
            return sender.clone();
        }
        let (sender, receiver) = mpsc::unbounded_channel();
        let writer = ChannelWriter::new(
            channel.to_owned(),
            self.api.clone(),
            self.settings.channel.clone(),
            receiver,
            self.outcomes_tx.clone(),
            self.in_flight_bytes.clone(),
            self.board.watch(channel),
        );
        let span = tracing::info_span!("channel", component = self.settings.component);
        self.writers.lock().unwrap_or_else(|p| p.into_inner()).push(tokio::spawn(writer.run().instrument(span)));
        channels.insert(channel.to_owned(), sender.clone());
        sender
    }

    /// Outcomes known so far, waiting up to `wait` for the first one. Children's FlowFiles held
    /// for these are sent on.
    pub async fn outcomes(&self, wait: Duration, max: usize) -> Vec<Outcome> {
        let out = self.collect_outcomes(wait, max).await;
        let released: Vec<(String, Work)> = {
            let mut gate = self.lock_gate();
            out.iter().flat_map(|o| gate.resolved(o.flow_file_id)).collect()
        };
        for (channel, work) in released {
            self.dispatch(&channel, work);
        }
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
    /// their replay skips whatever Snowflake committed meanwhile.
    pub fn stop(&self) {
        self.poller.abort();
        for writer in self.writers.lock().unwrap_or_else(|p| p.into_inner()).drain(..) {
            writer.abort();
        }
        self.channels.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

impl Drop for SinkEngine {
    fn drop(&mut self) {
        self.stop();
    }
}
