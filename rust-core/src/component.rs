//! A processor instance as the core sees it: its type, its parsed settings and, once started, its
//! engine. The FFI layer keeps components behind handles; nothing here knows about Java.

use std::sync::{Arc, Mutex};

use tracing::info;

use crate::config::{ComponentType, ConfigProblems, ConsumeKinesisConfig, PropertyMap, PutSnowflakeConfig};
use crate::consumer::output::Layout;
use crate::consumer::{ConsumerEngine, ConsumerError, EngineSettings};
use crate::error::{Classify, ErrorClass};
use crate::ffi::batch::{self, BatchError};
use crate::ffi::sink_io::{self, SinkIoError};
use crate::snowflake::{SinkEngine, SinkError, SinkSettings};

#[derive(Debug, thiserror::Error)]
pub enum ComponentError {
    #[error("{0}")]
    Config(#[from] ConfigProblems),
    #[error("{0}")]
    Consumer(#[from] ConsumerError),
    #[error("{0}")]
    Batch(#[from] BatchError),
    #[error("{0}")]
    Sink(#[from] SinkError),
    #[error("{0}")]
    SinkIo(#[from] SinkIoError),
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
            Self::Batch(_) | Self::SinkIo(_) => ErrorClass::Fatal,
            Self::NotStarted(_) => ErrorClass::Retryable,
        }
    }
}

#[derive(Debug)]
pub enum Settings {
    ConsumeKinesis(ConsumeKinesisConfig),
    PutSnowflake(PutSnowflakeConfig),
}

pub struct Component {
    settings: Settings,
    consumer: Mutex<Option<Arc<ConsumerEngine>>>,
    sink: Mutex<Option<Arc<SinkEngine>>>,
}

impl Component {
    /// Parses the settings; every problem is reported at once.
    pub fn open(kind: ComponentType, props: &PropertyMap) -> Result<Self, ComponentError> {
        let settings = match kind {
            ComponentType::ConsumeKinesis => Settings::ConsumeKinesis(ConsumeKinesisConfig::parse(props)?),
            ComponentType::PutSnowflake => Settings::PutSnowflake(PutSnowflakeConfig::parse(props)?),
        };
        let component = Self { settings, consumer: Mutex::new(None), sink: Mutex::new(None) };
        info!("{} configured", component.describe());
        Ok(component)
    }

    pub fn kind(&self) -> ComponentType {
        match self.settings {
            Settings::ConsumeKinesis(_) => ComponentType::ConsumeKinesis,
            Settings::PutSnowflake(_) => ComponentType::PutSnowflake,
        }
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Starts the engine; `id` is the component's handle, used to route its log events.
    pub fn start(&self, id: u64) -> Result<(), ComponentError> {
        match &self.settings {
            Settings::ConsumeKinesis(config) => {
                let settings = EngineSettings::from_config(config, id);
                let aws = config.aws();
                let engine = crate::runtime::get().block_on(async move {
                    let clients = crate::aws::clients(&aws).await;
                    ConsumerEngine::start(settings, clients).await
                })?;
                *self.consumer.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(engine));
                Ok(())
            }
            Settings::PutSnowflake(config) => {
                let settings = SinkSettings::from_config(config, id);
                let _runtime = crate::runtime::get().enter();
                let engine = SinkEngine::start(config, settings)?;
                *self.sink.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(engine));
                Ok(())
            }
        }
    }

    /// PutSnowflake: hands FlowFiles (the JNI layout of `sink_io`) to the engine.
    pub fn submit(&self, flow_files: &[u8]) -> Result<(), ComponentError> {
        let engine = self.sink()?;
        let flow_files = sink_io::decode_flow_files(flow_files)?;
        let _runtime = crate::runtime::get().enter();
        engine.submit(flow_files);
        Ok(())
    }

    /// PutSnowflake: the outcomes known so far (JNI layout), waiting up to `wait` for one; `None` if none.
    pub fn outcomes(&self, wait: std::time::Duration) -> Result<Option<Vec<u8>>, ComponentError> {
        let engine = self.sink()?;
        let outcomes = crate::runtime::get().block_on(engine.outcomes(wait, 10_000));
        Ok((!outcomes.is_empty()).then(|| sink_io::encode_outcomes(&outcomes)))
    }

    /// PutSnowflake: bytes of FlowFile content the engine can still take.
    pub fn capacity(&self) -> Result<u64, ComponentError> {
        Ok(self.sink()?.capacity())
    }

    fn sink(&self) -> Result<Arc<SinkEngine>, ComponentError> {
        self.sink.lock().unwrap_or_else(|p| p.into_inner()).clone().ok_or(ComponentError::NotStarted(self.kind().name()))
    }

    /// The next batch of FlowFiles in the JNI layout, or `None` when nothing arrived in time.
    pub fn poll(&self) -> Result<Option<Vec<u8>>, ComponentError> {
        let (engine, config) = self.consumer()?;
        let batch = crate::runtime::get().block_on(engine.poll(config.max_batch_size, config.max_batch_duration));
        let Some(batch) = batch else { return Ok(None) };
        let layout = Layout { stream: &config.stream_name, processing: config.processing_strategy, output: config.output_strategy };
        let shards: Vec<_> = batch.shards.into_iter().map(|s| layout.shard(s)).collect();
        Ok(Some(batch::encode(batch.id, &shards)?))
    }

    pub fn ack(&self, batch_id: i64) -> Result<(), ComponentError> {
        let (engine, _) = self.consumer()?;
        Ok(crate::runtime::get().block_on(engine.ack(batch_id))?)
    }

    pub fn nack(&self, batch_id: i64) -> Result<(), ComponentError> {
        let (engine, _) = self.consumer()?;
        Ok(engine.nack(batch_id)?)
    }

    /// Stops the engine, if any: final checkpoints are already written; leases are released.
    pub fn stop(&self) {
        let engine = self.consumer.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(engine) = engine {
            crate::runtime::get().block_on(engine.stop());
        }
        if let Some(sink) = self.sink.lock().unwrap_or_else(|p| p.into_inner()).take() {
            sink.stop();
        }
    }

    fn consumer(&self) -> Result<(Arc<ConsumerEngine>, &ConsumeKinesisConfig), ComponentError> {
        let engine = self.consumer.lock().unwrap_or_else(|p| p.into_inner()).clone();
        match (&self.settings, engine) {
            (Settings::ConsumeKinesis(config), Some(engine)) => Ok((engine, config)),
            _ => Err(ComponentError::NotStarted(self.kind().name())),
        }
    }

    /// One line naming what this component works on; never a secret.
    pub fn describe(&self) -> String {
        match &self.settings {
            Settings::ConsumeKinesis(c) => {
                format!("ConsumeKinesis for stream '{}' (application '{}', region {})", c.stream_name, c.application_name, c.region)
            }
            Settings::PutSnowflake(c) => {
                format!("PutSnowflake into {}.{}.{} (account '{}')", c.database, c.schema, c.table, c.account)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        c.start(1).unwrap();
        assert_eq!(c.capacity().unwrap(), 64 * 1024 * 1024);
        assert_eq!(c.outcomes(std::time::Duration::ZERO).unwrap(), None);
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
        let err = c.start(1).unwrap_err();
        assert_eq!(err.class(), ErrorClass::Configuration);
        assert!(err.to_string().contains("instance id"), "{err}");
    }

    #[test]
    fn open_reports_configuration_problems() {
        let Err(err) = Component::open(ComponentType::PutSnowflake, &PropertyMap::default()) else { panic!("must fail") };
        assert_eq!(err.class(), ErrorClass::Configuration);
        assert!(err.to_string().contains("Account Identifier: is required"));
    }
}
