//! "Verify Properties" on NiFi's canvas (`VerifiableProcessor`): each processor's settings are
//! tried against the real services before the processor starts, step by step, with read-only
//! probes only. The probes (I/O) gather facts; pure functions turn the facts into steps, so every
//! verdict is unit-tested without a service. The steps cross JNI as alternating name, outcome and
//! explanation (see `ffi::exports`), and Java makes NiFi's `ConfigVerificationResult`s of them.
//!
//! The map: `consume_kinesis` and `put_snowflake` are each processor's steps; `lease_census` reads
//! whose the lease table is; `table_facts` reads the destination table's columns and settings.

pub mod consume_kinesis;
pub mod lease_census;
pub mod put_snowflake;
pub mod table_facts;

use std::future::Future;
use std::time::Duration;

use crate::config::{ComponentType, PropertyMap};

/// NiFi's `ConfigVerificationResult.Outcome`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Successful,
    Failed,
    Skipped,
}

impl Outcome {
    /// The name of NiFi's enum constant.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Successful => "SUCCESSFUL",
            Self::Failed => "FAILED",
            Self::Skipped => "SKIPPED",
        }
    }
}

/// One verification step as NiFi shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub name: String,
    pub outcome: Outcome,
    pub explanation: String,
}

impl Step {
    pub fn new(name: &str, outcome: Outcome, explanation: impl Into<String>) -> Self {
        Self { name: name.to_owned(), outcome, explanation: explanation.into() }
    }

    pub fn successful(name: &str, explanation: impl Into<String>) -> Self {
        Self::new(name, Outcome::Successful, explanation)
    }

    pub fn failed(name: &str, explanation: impl Into<String>) -> Self {
        Self::new(name, Outcome::Failed, explanation)
    }

    pub fn skipped(name: &str, explanation: impl Into<String>) -> Self {
        Self::new(name, Outcome::Skipped, explanation)
    }
}

/// The steps as the bridge carries them: name, outcome, explanation, name, ...
pub fn flatten(steps: &[Step]) -> Vec<String> {
    steps.iter().flat_map(|s| [s.name.clone(), s.outcome.as_str().to_owned(), s.explanation.clone()]).collect()
}

/// Verifies `props` for `kind`: every step, in order. Settings that do not parse give one failed
/// step (NiFi verifies only valid settings, so this is a safety net).
pub fn verify(kind: ComponentType, props: &PropertyMap) -> Vec<Step> {
    match kind {
        ComponentType::ConsumeKinesis => match crate::config::ConsumeKinesisConfig::parse(props) {
            Ok(config) => crate::runtime::get().block_on(consume_kinesis::verify(&config)),
            Err(problems) => vec![Step::failed("Configuration", problems.to_string())],
        },
        ComponentType::PutSnowflake => match crate::config::PutSnowflakeConfig::parse(props) {
            Ok(config) => crate::runtime::get().block_on(put_snowflake::verify(&config, None)),
            Err(problems) => vec![Step::failed("Configuration", problems.to_string())],
        },
    }
}

/// How long one probe may take before it counts as failed: verification runs on a NiFi web
/// thread and must answer.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(20);

/// Runs a probe, bounded by [`PROBE_TIMEOUT`].
pub async fn bounded<T>(what: &str, probe: impl Future<Output = Result<T, String>>) -> Result<T, String> {
    match tokio::time::timeout(PROBE_TIMEOUT, probe).await {
        Ok(result) => result,
        Err(_) => Err(format!("{what} did not answer within {} s", PROBE_TIMEOUT.as_secs())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_cross_as_triples() {
        let steps = [Step::successful("A", "fine"), Step::skipped("B", "not needed"), Step::failed("C", "broken")];
        assert_eq!(flatten(&steps), ["A", "SUCCESSFUL", "fine", "B", "SKIPPED", "not needed", "C", "FAILED", "broken"]);
    }

    #[test]
    fn settings_that_do_not_parse_give_one_failed_step() {
        let steps = verify(ComponentType::ConsumeKinesis, &PropertyMap::from_pairs(Vec::<(String, String)>::new()));
        assert_eq!(steps.len(), 1);
        assert_eq!(steps[0].outcome, Outcome::Failed);
        assert!(steps[0].explanation.contains("Stream Name"), "{}", steps[0].explanation);
    }
}
