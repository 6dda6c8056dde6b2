//! A processor instance as the core sees it: its type, its parsed settings and, once built, its
//! engine. The FFI layer keeps components behind handles; nothing here knows about Java.

use tracing::info;

use crate::config::{ComponentType, ConfigProblems, ConsumeKinesisConfig, PropertyMap, PutSnowflakeConfig};
use crate::error::{Classify, ErrorClass};

#[derive(Debug, thiserror::Error)]
pub enum ComponentError {
    #[error("{0}")]
    Config(#[from] ConfigProblems),
    #[error("{0} cannot start: its engine is not part of this build yet, so it does not read or write any data")]
    EngineUnavailable(&'static str),
}

impl Classify for ComponentError {
    fn class(&self) -> ErrorClass {
        match self {
            Self::Config(_) | Self::EngineUnavailable(_) => ErrorClass::Configuration,
        }
    }
}

#[derive(Debug)]
pub enum Settings {
    ConsumeKinesis(ConsumeKinesisConfig),
    PutSnowflake(PutSnowflakeConfig),
}

#[derive(Debug)]
pub struct Component {
    settings: Settings,
}

impl Component {
    /// Parses the settings; every problem is reported at once.
    pub fn open(kind: ComponentType, props: &PropertyMap) -> Result<Self, ComponentError> {
        let settings = match kind {
            ComponentType::ConsumeKinesis => Settings::ConsumeKinesis(ConsumeKinesisConfig::parse(props)?),
            ComponentType::PutSnowflake => Settings::PutSnowflake(PutSnowflakeConfig::parse(props)?),
        };
        let component = Self { settings };
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

    /// Starts the engine. No engine exists yet, so this says so instead of pretending to run.
    pub fn start(&self) -> Result<(), ComponentError> {
        Err(ComponentError::EngineUnavailable(self.kind().name()))
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
    fn start_says_the_engine_is_missing() {
        let props = PropertyMap::from_pairs([("Stream Name", "s"), ("Application Name", "app"), ("Region", "us-east-1")]);
        let c = Component::open(ComponentType::ConsumeKinesis, &props).unwrap();
        let err = c.start().unwrap_err();
        assert_eq!(err.class(), ErrorClass::Configuration);
        assert!(err.to_string().starts_with("ConsumeKinesis cannot start"));
        assert!(c.describe().contains("stream 's'"));
    }

    #[test]
    fn open_reports_configuration_problems() {
        let err = Component::open(ComponentType::PutSnowflake, &PropertyMap::default()).unwrap_err();
        assert_eq!(err.class(), ErrorClass::Configuration);
        assert!(err.to_string().contains("Account Identifier: is required"));
    }
}
