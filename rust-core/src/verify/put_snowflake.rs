//! PutSnowflake's verification, through the same authentication and REST client the engine uses
//! (`snowflake::auth`, `snowflake::api`): the control host accepts the key-pair JWT or the managed
//! token (`GET /v2/streaming/hostname`); the scoped token is obtained (`POST /oauth/token`, key
//! pair only); the pipe answers (`:bulk-channel-status` of a channel that is never opened, so
//! nothing is created); and the table's columns and settings, read through the SQL API
//! (`DESCRIBE TABLE`, `SHOW TABLES`). Nothing is written.

use std::time::{Duration, SystemTime};

use super::table_facts::{self, Claimed, Row};
use super::Step;
use crate::config::put_snowflake::{Authentication, Destination as PipeChoice};
use crate::config::PutSnowflakeConfig;
use crate::snowflake::api::{ApiError, Destination, SnowflakeApi};
use crate::snowflake::auth::Credentials;
use crate::snowflake::sink::{control_url, pipe_name};

pub const AUTH_STEP: &str = "Snowflake Authentication";
pub const SCOPED_TOKEN_STEP: &str = "Scoped Token";
pub const PIPE_STEP: &str = "Destination Pipe";

/// Transient answers are retried this long per call during verification.
const RETRY_BUDGET: Duration = Duration::from_secs(5);

/// What the probes found; `None` where a probe did not run because an earlier one failed.
#[derive(Debug, Clone)]
pub struct Facts {
    /// The private key could be read and parsed (key pair), or the managed-token settings taken.
    pub credentials: Result<(), String>,
    /// The ingest host the control host named.
    pub control: Option<Result<String, ApiError>>,
    /// When the scoped token expires; `Ok(None)` with a managed token (no exchange).
    pub scoped: Option<Result<Option<SystemTime>, ApiError>>,
    pub pipe: Option<Result<(), ApiError>>,
    pub described: Option<Result<Vec<Row>, String>>,
    pub shown: Option<Result<Vec<Row>, String>>,
}

/// Probes Snowflake and returns the steps. `extra_root_ca_pem`: a CA trusted besides the public
/// roots (tests against a TLS stand-in only).
pub async fn verify(config: &PutSnowflakeConfig, extra_root_ca_pem: Option<&[u8]>) -> Vec<Step> {
    let facts = probe(config, extra_root_ca_pem).await;
    steps(config, &facts)
}

pub async fn probe(config: &PutSnowflakeConfig, extra_root_ca_pem: Option<&[u8]>) -> Facts {
    let mut facts =
        Facts { credentials: Ok(()), control: None, scoped: None, pipe: None, described: None, shown: None };
    let credentials = match Credentials::from_config(&config.account, config.role.as_deref(), &config.authentication) {
        Ok(c) => c,
        Err(e) => {
            facts.credentials = Err(e.to_string());
            return facts;
        }
    };
    let destination = Destination {
        control: control_url(config),
        database: config.database.clone(),
        schema: config.schema.clone(),
        pipe: pipe_name(config),
    };
    let api = match SnowflakeApi::new(destination, credentials, RETRY_BUDGET, &config.proxy, extra_root_ca_pem) {
        Ok(api) => api,
        Err(e) => {
            facts.credentials = Err(e.to_string());
            return facts;
        }
    };
    let control = bounded(api.ingest_host()).await.map(|u| u.host_str().unwrap_or_default().to_owned());
    let accepted = control.is_ok();
    facts.control = Some(control);
    if !accepted {
        return facts;
    }
    let scoped = bounded(api.scoped_token_expiry()).await;
    let scoped_ok = scoped.is_ok();
    facts.scoped = Some(scoped);
    if scoped_ok {
        let probe_channel = format!("{}_verify", config.channel_prefix);
        facts.pipe = Some(bounded(api.bulk_status(&[probe_channel])).await.map(|_| ()));
    }
    let role = config.role.as_deref();
    let describe = table_facts::describe_statement(&config.database, &config.schema, &config.table);
    facts.described = Some(bounded(api.sql(&describe, role)).await.map_err(|e| e.to_string()));
    let show = table_facts::show_statement(&config.database, &config.schema, &config.table);
    facts.shown = Some(bounded(api.sql(&show, role)).await.map_err(|e| e.to_string()));
    facts
}

async fn bounded<T>(call: impl std::future::Future<Output = Result<T, ApiError>>) -> Result<T, ApiError> {
    match tokio::time::timeout(super::PROBE_TIMEOUT, call).await {
        Ok(result) => result,
        Err(_) => Err(ApiError::Transient(format!("no answer within {} s", super::PROBE_TIMEOUT.as_secs()))),
    }
}

fn who(config: &PutSnowflakeConfig) -> String {
    match &config.authentication {
        Authentication::KeyPair { user, .. } => format!("the key-pair JWT of user {user}"),
        _ => "the Snowflake-managed token".to_owned(),
    }
}

/// The steps, from the facts alone.
pub fn steps(config: &PutSnowflakeConfig, facts: &Facts) -> Vec<Step> {
    let control = control_url(config);
    let table = format!("{}.{}.{}", config.database, config.schema, config.table);
    let mut steps = Vec::new();
    let auth = match (&facts.credentials, &facts.control) {
        (Err(e), _) => Step::failed(AUTH_STEP, format!("the credentials cannot be used: {e}")),
        (Ok(()), Some(Ok(host))) => {
            Step::successful(AUTH_STEP, format!("{} was accepted by {control} (Snowpipe Streaming ingest host {host})", who(config)))
        }
        (Ok(()), Some(Err(ApiError::Unauthorized(m)))) => Step::failed(
            AUTH_STEP,
            format!(
                "{control} refused {}: {m}. Check the Account Identifier, the User and that the user's RSA_PUBLIC_KEY matches \
                 the private key",
                who(config)
            ),
        ),
        (Ok(()), Some(Err(e))) => Step::failed(AUTH_STEP, format!("{control} could not be asked for the ingest host: {e}")),
        (Ok(()), None) => Step::failed(AUTH_STEP, "not probed"),
    };
    let authenticated = auth.outcome == super::Outcome::Successful;
    steps.push(auth);
    if !authenticated {
        let why = format!("skipped: {AUTH_STEP} failed");
        for name in [SCOPED_TOKEN_STEP, PIPE_STEP, table_facts::COLUMNS_STEP, table_facts::SETTINGS_STEP] {
            steps.push(Step::skipped(name, why.clone()));
        }
        return steps;
    }
    steps.push(match &facts.scoped {
        Some(Ok(None)) => Step::skipped(
            SCOPED_TOKEN_STEP,
            "the Snowflake-managed token is sent to the ingest host as it is: no scoped token is exchanged",
        ),
        Some(Ok(Some(expires))) => Step::successful(
            SCOPED_TOKEN_STEP,
            format!(
                "obtained from {control}oauth/token for the ingest host, valid until {}",
                humantime::format_rfc3339_seconds(*expires)
            ),
        ),
        Some(Err(e)) => Step::failed(
            SCOPED_TOKEN_STEP,
            format!("the scoped token could not be obtained from {control}oauth/token: {e}"),
        ),
        None => Step::skipped(SCOPED_TOKEN_STEP, "not probed"),
    });
    let pipe = pipe_name(config);
    let pipe_text = match &config.destination {
        PipeChoice::Table => format!("the default pipe {pipe} of table {table}"),
        PipeChoice::Pipe(_) => format!("pipe {}.{}.{pipe}", config.database, config.schema),
    };
    steps.push(match &facts.pipe {
        Some(Ok(())) => Step::successful(PIPE_STEP, format!("{pipe_text} exists and answers channel status requests")),
        Some(Err(ApiError::Rejected { status, code, message })) => {
            Step::failed(PIPE_STEP, format!("{pipe_text} cannot be used: HTTP {status} {code}: {message}"))
        }
        Some(Err(e)) => Step::failed(PIPE_STEP, format!("{pipe_text} could not be checked: {e}")),
        None => Step::skipped(PIPE_STEP, format!("skipped: {SCOPED_TOKEN_STEP} failed")),
    });
    let not_run = || Err("not run".to_owned());
    steps.push(table_facts::columns_step(&table, facts.described.as_ref().unwrap_or(&not_run())));
    let claimed = Claimed { schema_evolution: config.schema_evolution, iceberg: config.iceberg };
    steps.push(table_facts::settings_step(&config.table, facts.shown.as_ref().unwrap_or(&not_run()), claimed));
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PropertyMap;
    use crate::verify::Outcome;

    fn config(auth: &str) -> PutSnowflakeConfig {
        let mut pairs = vec![
            ("Account Identifier", "myorg-acct"),
            ("Database", "DB"),
            ("Schema", "PUBLIC"),
            ("Table", "EVENTS"),
            ("Schema Evolution Enabled", "true"),
            ("Authentication Strategy", auth),
        ];
        if auth == "KEY_PAIR" {
            pairs.extend([
                ("User", "LOADER"),
                ("Private Key File", concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/user.p8")),
            ]);
        }
        PutSnowflakeConfig::parse(&PropertyMap::from_pairs(pairs)).unwrap()
    }

    fn row(pairs: &[(&str, &str)]) -> Row {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), Some((*v).to_owned()))).collect()
    }

    fn good() -> Facts {
        Facts {
            credentials: Ok(()),
            control: Some(Ok("myorg-acct.ingest.snowflakecomputing.com".into())),
            scoped: Some(Ok(Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)))),
            pipe: Some(Ok(())),
            described: Some(Ok(vec![row(&[("name", "ID"), ("type", "NUMBER(38,0)"), ("null?", "Y")])])),
            shown: Some(Ok(vec![row(&[
                ("name", "EVENTS"),
                ("enable_schema_evolution", "Y"),
                ("error_logging", "Y"),
                ("is_iceberg", "N"),
            ])])),
        }
    }

    #[test]
    fn every_step_passes_on_a_good_destination() {
        let steps = steps(&config("KEY_PAIR"), &good());
        let names: Vec<&str> = steps.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [AUTH_STEP, SCOPED_TOKEN_STEP, PIPE_STEP, table_facts::COLUMNS_STEP, table_facts::SETTINGS_STEP]
        );
        assert!(steps.iter().all(|s| s.outcome == Outcome::Successful), "{steps:#?}");
        assert!(
            steps[0].explanation.contains("key-pair JWT of user LOADER")
                && steps[0].explanation.contains("https://myorg-acct.snowflakecomputing.com/")
        );
        assert!(steps[1].explanation.contains("2027-01-15T08:00:00Z"), "{}", steps[1].explanation);
        assert!(steps[2].explanation.contains("default pipe EVENTS-STREAMING"), "{}", steps[2].explanation);
    }

    #[test]
    fn a_refused_jwt_fails_and_skips_the_rest() {
        let mut f = good();
        f.control = Some(Err(ApiError::Unauthorized("390144: JWT token is invalid".into())));
        let steps = steps(&config("KEY_PAIR"), &f);
        assert_eq!(steps[0].outcome, Outcome::Failed);
        assert!(steps[0].explanation.contains("RSA_PUBLIC_KEY"), "{}", steps[0].explanation);
        assert!(steps[1..].iter().all(|s| s.outcome == Outcome::Skipped), "{steps:#?}");
        let mut unreadable = good();
        unreadable.credentials = Err("cannot read the private key file '/nonexistent/key.p8'".into());
        assert!(super::steps(&config("KEY_PAIR"), &unreadable)[0].explanation.contains("/nonexistent/key.p8"));
    }

    #[test]
    fn a_managed_token_exchanges_no_scoped_token() {
        let mut f = good();
        f.scoped = Some(Ok(None));
        let steps = steps(&config("SNOWFLAKE_MANAGED_TOKEN"), &f);
        assert!(steps[0].explanation.contains("Snowflake-managed token"));
        assert_eq!(steps[1].outcome, Outcome::Skipped);
        assert_eq!(steps[2].outcome, Outcome::Successful);
    }

    #[test]
    fn a_failed_token_exchange_or_a_missing_pipe_fail_their_steps() {
        let mut f = good();
        f.scoped = Some(Err(ApiError::Unauthorized("390144".into())));
        f.pipe = None;
        let s = steps(&config("KEY_PAIR"), &f);
        assert_eq!((s[1].outcome, s[2].outcome), (Outcome::Failed, Outcome::Skipped));
        let mut f = good();
        f.pipe = Some(Err(ApiError::Rejected {
            status: 404,
            code: "ERR_TABLE_DOES_NOT_EXIST_NOT_AUTHORIZED".into(),
            message: "no table".into(),
        }));
        let s = steps(&config("KEY_PAIR"), &f);
        assert_eq!(s[2].outcome, Outcome::Failed);
        assert!(s[2].explanation.contains("HTTP 404 ERR_TABLE_DOES_NOT_EXIST_NOT_AUTHORIZED"), "{}", s[2].explanation);
    }
}
