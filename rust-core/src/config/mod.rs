//! Typed settings parsed from a processor's property map, and every configuration rule.
//!
//! Property names, defaults and allowed values are written once in `contract::properties` (Java's
//! descriptors take them from its generated twins and add descriptions and validators for NiFi's
//! UI); whether a combination of values is valid is decided only here. A parse either yields a
//! typed config or the full list of [`ConfigProblem`]s, each naming the property it is about.
//!
//! The map: `properties` is the property map and NiFi's value formats; `consume_kinesis` and
//! `put_snowflake` are each processor's settings; `proxy` is the HTTP proxy both take.

pub mod consume_kinesis;
pub mod properties;
pub mod proxy;
pub mod put_snowflake;

pub use crate::secrets::Secret;
pub use consume_kinesis::ConsumeKinesisConfig;
pub use properties::PropertyMap;
pub use put_snowflake::PutSnowflakeConfig;

use std::fmt;

/// One thing wrong with the settings, as NiFi shows it: the property (subject) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigProblem {
    pub property: String,
    pub message: String,
}

impl ConfigProblem {
    pub fn new(property: impl Into<String>, message: impl Into<String>) -> Self {
        Self { property: property.into(), message: message.into() }
    }
}

impl fmt::Display for ConfigProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.property, self.message)
    }
}

/// All problems found in one property map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigProblems(pub Vec<ConfigProblem>);

impl fmt::Display for ConfigProblems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        write!(f, "invalid configuration: {}", parts.join("; "))
    }
}

impl std::error::Error for ConfigProblems {}

impl crate::error::Classify for ConfigProblems {
    fn class(&self) -> crate::error::ErrorClass {
        crate::error::ErrorClass::Configuration
    }
}

/// The processor types the core knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ComponentType {
    ConsumeKinesis,
    PutSnowflake,
}

impl ComponentType {
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "ConsumeKinesis" => Some(Self::ConsumeKinesis),
            "PutSnowflake" => Some(Self::PutSnowflake),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::ConsumeKinesis => "ConsumeKinesis",
            Self::PutSnowflake => "PutSnowflake",
        }
    }

    /// Every property name the rules read, so the Java declarations can be checked against them.
    pub fn property_names(self) -> &'static [&'static str] {
        match self {
            Self::ConsumeKinesis => consume_kinesis::PROPERTY_NAMES,
            Self::PutSnowflake => put_snowflake::PROPERTY_NAMES,
        }
    }

    /// Validates a property map; an empty list means valid.
    pub fn validate(self, props: &PropertyMap) -> Vec<ConfigProblem> {
        let result = match self {
            Self::ConsumeKinesis => ConsumeKinesisConfig::parse(props).map(|_| ()),
            Self::PutSnowflake => PutSnowflakeConfig::parse(props).map(|_| ()),
        };
        result.err().map(|p| p.0).unwrap_or_default()
    }
}

/// `pairs` and every default of `specs` that `pairs` leave unset: what NiFi hands over when a user
/// leaves those properties alone.
#[cfg(test)]
pub(crate) fn with_defaults<'a>(
    pairs: &[(&'a str, &'a str)],
    specs: &'a [crate::contract::properties::PropertySpec],
) -> Vec<(&'a str, &'a str)> {
    let mut all = pairs.to_vec();
    for spec in specs {
        if let (Some(default), false) = (spec.default, pairs.iter().any(|(name, _)| *name == spec.name)) {
            all.push((spec.name, default));
        }
    }
    all
}
