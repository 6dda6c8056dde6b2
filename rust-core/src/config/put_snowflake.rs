//! PutSnowflake settings, compatible with Openflow's Snowflake destination parameters.

use std::time::Duration;

use super::properties::{PropertyMap, Reader};
use super::{ConfigProblems, Secret};

/// The properties' names (and, in the contract, their defaults and allowed values).
pub use crate::contract::properties::put_snowflake::{
    ACCOUNT_IDENTIFIER, AUTHENTICATION_STRATEGY, CHANNEL_PREFIX, COMMIT_TIMEOUT, DATABASE, DESTINATION_TYPE,
    FRESHNESS_WARNING, ICEBERG_ENABLED, MAX_BATCH_SIZE, MAX_IN_FLIGHT_SIZE, MAX_LATENCY, ORDER_WAIT, PIPE, PRIVATE_KEY,
    PRIVATE_KEY_FILE, PRIVATE_KEY_PASSWORD, ROLE, SCHEMA, SCHEMA_EVOLUTION_ENABLED, SERVICE_ACCOUNT_TOKEN_FILE, TABLE,
    TOKEN_FILE, URL_OVERRIDE, USER,
};

/// Order Wait's default: how long a channel's FlowFiles wait for an earlier one before the gap is
/// passed (or, with `SNOWFLAKE_COMMIT`, before a broken chain goes per-node). Longer than NiFi's
/// default penalty (30 s), so a FlowFile routed to `failure` and sent back, or given back while the
/// budget was full, usually comes back in time.
pub const DEFAULT_ORDER_WAIT: Duration = Duration::from_secs(60);
/// Not a property: this PutSnowflake's own id, which Java keeps in the processor's local state and
/// passes on every start. It is part of every channel name (see `snowflake::naming`).
pub const INSTANCE: &str = "PutSnowflake Instance";
/// Not a property: the gaps this PutSnowflake's channels passed over, as its local state kept them
/// (see `snowflake::gap_memory`), which Java passes on every start.
pub const PASSED_GAPS: &str = "PutSnowflake Passed Gaps";

pub const PROPERTY_NAMES: &[&str] = &[
    ACCOUNT_IDENTIFIER,
    URL_OVERRIDE,
    USER,
    ROLE,
    AUTHENTICATION_STRATEGY,
    PRIVATE_KEY,
    PRIVATE_KEY_FILE,
    PRIVATE_KEY_PASSWORD,
    TOKEN_FILE,
    SERVICE_ACCOUNT_TOKEN_FILE,
    DATABASE,
    SCHEMA,
    TABLE,
    DESTINATION_TYPE,
    PIPE,
    ICEBERG_ENABLED,
    SCHEMA_EVOLUTION_ENABLED,
    CHANNEL_PREFIX,
    MAX_BATCH_SIZE,
    MAX_LATENCY,
    COMMIT_TIMEOUT,
    MAX_IN_FLIGHT_SIZE,
    ORDER_WAIT,
    FRESHNESS_WARNING,
];

/// Where Openflow's Snowflake deployments mount the session token.
pub const DEFAULT_TOKEN_FILE: &str = "/snowflake/session/token";
/// Where they mount the service account's OIDC token (workload identity); preferred when readable.
pub const DEFAULT_SERVICE_ACCOUNT_TOKEN_FILE: &str = "/snowflake/serviceaccount/token";
/// The environment variable Openflow's Snowflake deployments set to the account's host name.
pub const SNOWFLAKE_HOST_VARIABLE: &str = "SNOWFLAKE_HOST";
const MIB: u64 = 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrivateKeySource {
    Pem(Secret),
    File(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Authentication {
    KeyPair {
        user: String,
        key: PrivateKeySource,
        password: Option<Secret>,
    },
    /// Openflow's `SNOWFLAKE_MANAGED`: the token files the platform mounts and rotates.
    SnowflakeManaged {
        service_account_token_file: String,
        session_token_file: String,
    },
}

/// Where the control URL came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlSource {
    UrlOverride,
    /// `https://<SNOWFLAKE_HOST>` (managed authentication only).
    SnowflakeHost,
    Account,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// The table's default pipe, `<TABLE>-STREAMING`.
    Table,
    Pipe(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct PutSnowflakeConfig {
    /// Empty when not set (allowed with managed authentication).
    pub account: String,
    pub url_override: Option<url::Url>,
    /// Where the control calls go (`control_url`), and why.
    pub control: url::Url,
    pub control_source: ControlSource,
    pub role: Option<String>,
    pub authentication: Authentication,
    pub database: String,
    pub schema: String,
    pub table: String,
    pub destination: Destination,
    pub iceberg: bool,
    pub schema_evolution: bool,
    pub channel_prefix: String,
    /// This processor instance's id (`INSTANCE`); the engine refuses to start without one.
    pub instance: Option<String>,
    /// The gaps kept in the local state (`PASSED_GAPS`); empty when none.
    pub passed_gaps: String,
    /// The NiFi node (a fact Java passes, see `consume_kinesis::NODE_IDENTITY`); empty in validation.
    pub node: String,
    /// The HTTP proxy of every Snowflake call (facts from the Proxy Configuration Service).
    pub proxy: super::proxy::Proxy,
    pub max_batch_size: u64,
    pub max_latency: Duration,
    pub commit_timeout: Duration,
    /// All rows held until Snowflake commits them, over every channel.
    pub max_in_flight_size: u64,
    /// How long FlowFiles wait for the records before them (see `snowflake::book`).
    pub order_wait: Duration,
    /// Freshness Warning (zero: off; see `snowflake::freshness`).
    pub freshness_warning: Duration,
}

impl PutSnowflakeConfig {
    /// Reads the settings, with `SNOWFLAKE_HOST` from this process' environment.
    pub fn parse(props: &PropertyMap) -> Result<Self, ConfigProblems> {
        Self::parse_with_env(props, |name| std::env::var(name).ok())
    }

    /// Reads the settings, with environment variables from `env` (tests pass their own).
    pub fn parse_with_env(props: &PropertyMap, env: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigProblems> {
        let mut r = Reader::new(props);
        let account = r.optional(ACCOUNT_IDENTIFIER).unwrap_or_default();
        check_account(&mut r, &account);
        let url_override = url_override(&mut r);
        let role = r.optional(ROLE);
        let authentication = authentication(&mut r);
        let managed = matches!(authentication, Authentication::SnowflakeManaged { .. });
        let snowflake_host = if managed { env(SNOWFLAKE_HOST_VARIABLE).filter(|h| !h.trim().is_empty()) } else { None };
        let (control, control_source) =
            control(&mut r, url_override.as_ref(), snowflake_host.as_deref(), &account, managed);
        let database = r.required(DATABASE);
        let schema = r.required(SCHEMA);
        let table = r.required(TABLE);
        let destination = destination(&mut r);
        let iceberg = r.boolean(ICEBERG_ENABLED, false);
        let schema_evolution = r.boolean(SCHEMA_EVOLUTION_ENABLED, false);
        let channel_prefix = r.optional(CHANNEL_PREFIX).unwrap_or_else(|| "kinesnow".to_owned());
        if !channel_prefix.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-')) {
            r.problem(CHANNEL_PREFIX, format!("'{channel_prefix}' may only hold letters, digits, '_' and '-'"));
        }
        let instance = r.optional(INSTANCE);
        let passed_gaps = r.optional(PASSED_GAPS).unwrap_or_default();
        let node = r.optional(super::consume_kinesis::NODE_IDENTITY).unwrap_or_default();
        let proxy = super::proxy::Proxy::read(&mut r);
        let max_batch_size = r.data_size_in(MAX_BATCH_SIZE, 8 * MIB, 1024, 16 * MIB);
        let max_latency =
            r.duration_in(MAX_LATENCY, Duration::from_millis(250), Duration::from_millis(10), Duration::from_secs(600));
        let commit_timeout =
            r.duration_in(COMMIT_TIMEOUT, Duration::from_secs(90), Duration::from_secs(1), Duration::from_secs(3600));
        let max_in_flight_size = r.data_size_in(MAX_IN_FLIGHT_SIZE, 64 * MIB, MIB, 4096 * MIB);
        let order_wait =
            r.duration_in(ORDER_WAIT, DEFAULT_ORDER_WAIT, Duration::from_secs(1), Duration::from_secs(3600));
        let freshness_warning =
            r.duration_in(FRESHNESS_WARNING, Duration::ZERO, Duration::ZERO, Duration::from_secs(86_400));
        if max_in_flight_size < max_batch_size {
            r.problem(MAX_IN_FLIGHT_SIZE, "must be at least Max Batch Size");
        }
        r.finish(Self {
            account,
            url_override,
            control,
            control_source,
            role,
            authentication,
            database,
            schema,
            table,
            destination,
            iceberg,
            schema_evolution,
            channel_prefix,
            instance,
            passed_gaps,
            node,
            proxy,
            max_batch_size,
            max_latency,
            commit_timeout,
            max_in_flight_size,
            order_wait,
            freshness_warning,
        })
    }
}

/// Snowflake URL Override: https, or plain http to a server on this machine.
fn url_override(r: &mut Reader) -> Option<url::Url> {
    let url = r.url(URL_OVERRIDE);
    if let Some(u) = &url {
        let loopback = matches!(u.host_str(), Some("127.0.0.1" | "localhost" | "[::1]"));
        if u.scheme() == "http" && !loopback {
            r.problem(URL_OVERRIDE, "plain http is allowed only for a server on this machine (127.0.0.1); use https");
        }
    }
    url
}

/// Destination Type, and the pipe it names.
fn destination(r: &mut Reader) -> Destination {
    #[derive(Clone, Copy)]
    enum Kind {
        Table,
        Pipe,
    }
    match r.one_of(DESTINATION_TYPE, Kind::Table, &[("TABLE", Kind::Table), ("PIPE", Kind::Pipe)]) {
        Kind::Table => Destination::Table,
        Kind::Pipe => r.optional(PIPE).map(Destination::Pipe).unwrap_or_else(|| {
            r.problem(PIPE, "is required when Destination Type is PIPE");
            Destination::Table
        }),
    }
}

/// The control URL, first found of: Snowflake URL Override; with managed authentication
/// `https://<SNOWFLAKE_HOST>` (as Openflow builds it: the platform's token is valid only through that
/// host); `https://<account>.snowflakecomputing.com` (lower case, `_` → `-`).
fn control(
    r: &mut Reader,
    url_override: Option<&url::Url>,
    snowflake_host: Option<&str>,
    account: &str,
    managed: bool,
) -> (url::Url, ControlSource) {
    let placeholder = || url::Url::parse("https://account.invalid").expect("a valid URL");
    if let Some(u) = url_override {
        return (u.clone(), ControlSource::UrlOverride);
    }
    if let Some(host) = snowflake_host {
        let host = host.trim();
        let parsed = url::Url::parse(&format!("https://{host}")).ok().filter(|u| {
            u.host_str().is_some()
                && u.path() == "/"
                && u.query().is_none()
                && u.username().is_empty()
                && !host.contains('/')
        });
        return match parsed {
            Some(u) => (u, ControlSource::SnowflakeHost),
            None => {
                r.problem(
                    AUTHENTICATION_STRATEGY,
                    format!("environment variable {SNOWFLAKE_HOST_VARIABLE} '{host}' is not a host name (such as myorg-myaccount.snowflakecomputing.com)"),
                );
                (placeholder(), ControlSource::SnowflakeHost)
            }
        };
    }
    if account.is_empty() {
        // Key pair: already named by `key_pair`, which needs the account for the JWT in any case.
        if managed {
            r.problem(
                ACCOUNT_IDENTIFIER,
                format!(
                    "is required when the environment variable {SNOWFLAKE_HOST_VARIABLE} is not set (Openflow's Snowflake \
                     deployments set it) and no Snowflake URL Override is given"
                ),
            );
        }
        return (placeholder(), ControlSource::Account);
    }
    let host = account.to_lowercase().replace('_', "-");
    match url::Url::parse(&format!("https://{host}.snowflakecomputing.com")) {
        Ok(u) => (u, ControlSource::Account),
        Err(_) => (placeholder(), ControlSource::Account),
    }
}

/// Account identifiers are `<org>-<account>` or a locator, optionally with region and cloud
/// (`xy12345.us-east-2.aws`); letters, digits, '_', '-' and '.'.
fn check_account(r: &mut Reader, account: &str) {
    let ok = account.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if !account.is_empty() && !ok {
        r.problem(
            ACCOUNT_IDENTIFIER,
            format!("'{account}' is not a Snowflake account identifier such as myorg-myaccount"),
        );
    }
}

fn authentication(r: &mut Reader) -> Authentication {
    #[derive(Clone, Copy)]
    enum Kind {
        KeyPair,
        Managed,
    }
    let kind = r.one_of(
        AUTHENTICATION_STRATEGY,
        Kind::KeyPair,
        &[
            ("KEY_PAIR", Kind::KeyPair),
            ("SNOWFLAKE_MANAGED", Kind::Managed),
            // Earlier names of the same strategy, still accepted.
            ("SNOWFLAKE_MANAGED_TOKEN", Kind::Managed),
            ("SNOWFLAKE_SESSION_TOKEN", Kind::Managed),
        ],
    );
    match kind {
        Kind::Managed => Authentication::SnowflakeManaged {
            service_account_token_file: r
                .optional(SERVICE_ACCOUNT_TOKEN_FILE)
                .unwrap_or_else(|| DEFAULT_SERVICE_ACCOUNT_TOKEN_FILE.to_owned()),
            session_token_file: r.optional(TOKEN_FILE).unwrap_or_else(|| DEFAULT_TOKEN_FILE.to_owned()),
        },
        Kind::KeyPair => key_pair(r),
    }
}

fn key_pair(r: &mut Reader) -> Authentication {
    if r.optional(ACCOUNT_IDENTIFIER).is_none() {
        r.problem(ACCOUNT_IDENTIFIER, "is required when Authentication Strategy is KEY_PAIR");
    }
    let user = r.optional(USER).unwrap_or_else(|| {
        r.problem(USER, "is required when Authentication Strategy is KEY_PAIR");
        String::new()
    });
    let password = r.optional_raw(PRIVATE_KEY_PASSWORD).map(Secret::new);
    let key = match (r.optional_raw(PRIVATE_KEY), r.optional(PRIVATE_KEY_FILE)) {
        (Some(_), Some(_)) => {
            r.problem(PRIVATE_KEY, "set either Private Key or Private Key File, not both");
            PrivateKeySource::File(String::new())
        }
        (None, None) => {
            r.problem(
                PRIVATE_KEY,
                "Private Key or Private Key File is required when Authentication Strategy is KEY_PAIR",
            );
            PrivateKeySource::File(String::new())
        }
        (Some(pem), None) => {
            check_pem(r, PRIVATE_KEY, &pem, password.is_some());
            PrivateKeySource::Pem(Secret::new(pem))
        }
        (None, Some(path)) => {
            match std::fs::read_to_string(&path) {
                Ok(pem) => check_pem(r, PRIVATE_KEY_FILE, &pem, password.is_some()),
                Err(e) => r.problem(PRIVATE_KEY_FILE, format!("cannot read '{path}': {e}")),
            }
            PrivateKeySource::File(path)
        }
    };
    Authentication::KeyPair { user, key, password }
}

// PEM armour lines, assembled so that secret scanners do not take this file for a key.
const PKCS8: &str = concat!("-----BEGIN ", "PRIVATE KEY-----");
const ENCRYPTED_PKCS8: &str = concat!("-----BEGIN ENCRYPTED ", "PRIVATE KEY-----");
const PKCS1: &str = concat!("-----BEGIN RSA ", "PRIVATE KEY-----");

/// Checks the PEM's kind without ever echoing its content.
fn check_pem(r: &mut Reader, property: &str, pem: &str, has_password: bool) {
    if pem.contains(ENCRYPTED_PKCS8) {
        if !has_password {
            r.problem(PRIVATE_KEY_PASSWORD, "is required: the private key is encrypted");
        }
    } else if pem.contains(PKCS8) {
        // Unencrypted PKCS#8: fine; a password is simply not needed.
    } else if pem.contains(PKCS1) {
        r.problem(property, "is a PKCS#1 key; convert it to PKCS#8 with 'openssl pkcs8 -topk8' first");
    } else {
        r.problem(property, format!("is not a PEM-encoded PKCS#8 private key ({PKCS8} or {ENCRYPTED_PKCS8})"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_instance_id_is_read_from_its_fact() {
        let mut p = minimal();
        assert_eq!(parse(p.clone()).unwrap().instance, None, "validation runs without it");
        p.push((INSTANCE, "3f2a9c01b7de"));
        let c = parse(p).unwrap();
        assert_eq!(c.instance.as_deref(), Some("3f2a9c01b7de"));
        assert_eq!(c.channel_prefix, "kinesnow", "the prefix stays as set");
    }

    /// Shape only (a truncated body): the rules look at the armour, not the key.
    const KEY: &str = concat!(
        "-----BEGIN ",
        "PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----\n"
    );

    fn minimal() -> Vec<(&'static str, &'static str)> {
        vec![
            (ACCOUNT_IDENTIFIER, "myorg-myaccount"),
            (USER, "KINESNOW"),
            (PRIVATE_KEY, KEY),
            (DATABASE, "DB"),
            (SCHEMA, "PUBLIC"),
            (TABLE, "EVENTS"),
        ]
    }

    fn parse(pairs: Vec<(&str, &str)>) -> Result<PutSnowflakeConfig, ConfigProblems> {
        PutSnowflakeConfig::parse(&PropertyMap::from_pairs(pairs))
    }

    fn messages(pairs: Vec<(&str, &str)>) -> Vec<String> {
        parse(pairs).unwrap_err().0.iter().map(ToString::to_string).collect()
    }

    /// The contract's defaults (which Java's descriptors show and NiFi hands over) are what these
    /// settings assume for a property that is not set.
    #[test]
    fn the_contracts_defaults_are_what_an_unset_property_means() {
        let unset = parse(minimal()).unwrap();
        let given =
            parse(super::super::with_defaults(&minimal(), crate::contract::properties::put_snowflake::ALL)).unwrap();
        assert_eq!(format!("{unset:?}"), format!("{given:?}"));
    }

    #[test]
    fn minimal_key_pair_settings_are_valid() {
        let c = parse(minimal()).unwrap();
        assert_eq!(c.destination, Destination::Table);
        assert!(!format!("{c:?}").contains("MIIEvQ"), "the key must not appear in Debug output");
    }

    #[test]
    fn names_missing_destination_and_key() {
        let m = messages(vec![(ACCOUNT_IDENTIFIER, "a-b"), (USER, "U")]);
        assert!(m.iter().any(|m| m.starts_with("Private Key: Private Key or Private Key File is required")), "{m:?}");
        for p in [DATABASE, SCHEMA, TABLE] {
            assert!(m.contains(&format!("{p}: is required")), "{m:?}");
        }
    }

    #[test]
    fn encrypted_key_needs_password_and_pkcs1_is_explained() {
        let mut p = minimal();
        p[2] = (
            PRIVATE_KEY,
            concat!("-----BEGIN ENCRYPTED ", "PRIVATE KEY-----\nabc\n-----END ENCRYPTED PRIVATE KEY-----"),
        );
        assert!(messages(p).iter().any(|m| m.contains("Private Key Password: is required")));
        let mut p = minimal();
        p[2] = (PRIVATE_KEY, concat!("-----BEGIN RSA ", "PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----"));
        assert!(messages(p).iter().any(|m| m.contains("openssl pkcs8 -topk8")));
    }

    #[test]
    fn key_file_must_be_readable() {
        let mut p = minimal();
        p.remove(2);
        p.push((PRIVATE_KEY_FILE, "/nonexistent/rsa_key.p8"));
        assert!(messages(p).iter().any(|m| m.starts_with("Private Key File: cannot read '/nonexistent/rsa_key.p8'")));
    }

    fn managed(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
        let mut p = vec![(AUTHENTICATION_STRATEGY, "SNOWFLAKE_MANAGED"), (DATABASE, "D"), (SCHEMA, "S"), (TABLE, "T")];
        p.extend_from_slice(extra);
        p
    }

    fn parse_env(pairs: Vec<(&str, &str)>, host: Option<&str>) -> Result<PutSnowflakeConfig, ConfigProblems> {
        PutSnowflakeConfig::parse_with_env(&PropertyMap::from_pairs(pairs), |name| {
            assert_eq!(name, SNOWFLAKE_HOST_VARIABLE, "no other variable is read");
            host.map(str::to_owned)
        })
    }

    #[test]
    fn snowflake_managed_and_its_two_aliases_need_no_account_user_or_key() {
        for strategy in ["SNOWFLAKE_MANAGED", "SNOWFLAKE_MANAGED_TOKEN", "SNOWFLAKE_SESSION_TOKEN"] {
            let c = parse_env(
                vec![(AUTHENTICATION_STRATEGY, strategy), (DATABASE, "D"), (SCHEMA, "S"), (TABLE, "T")],
                Some("org-acct.snowflakecomputing.com"),
            )
            .unwrap_or_else(|e| panic!("{strategy}: {e}"));
            assert_eq!(
                c.authentication,
                Authentication::SnowflakeManaged {
                    service_account_token_file: DEFAULT_SERVICE_ACCOUNT_TOKEN_FILE.into(),
                    session_token_file: DEFAULT_TOKEN_FILE.into()
                },
                "{strategy}"
            );
            assert_eq!(
                c.control.as_str(),
                "https://org-acct.snowflakecomputing.com/",
                "{strategy}: the host comes from SNOWFLAKE_HOST"
            );
            assert_eq!((c.control_source, c.account.as_str()), (ControlSource::SnowflakeHost, ""));
        }
        let m = messages(vec![
            (AUTHENTICATION_STRATEGY, "SNOWFLAKE_OAUTH"),
            (ACCOUNT_IDENTIFIER, "a-b"),
            (DATABASE, "D"),
            (SCHEMA, "S"),
            (TABLE, "T"),
        ]);
        assert!(m.iter().any(|m| m.contains("'SNOWFLAKE_OAUTH' is not one of KEY_PAIR, SNOWFLAKE_MANAGED")), "{m:?}");
    }

    #[test]
    fn managed_without_snowflake_host_needs_an_account_or_url_naming_the_variable() {
        let e = parse_env(managed(&[]), None).unwrap_err().to_string();
        assert!(
            e.contains("Account Identifier: is required when the environment variable SNOWFLAKE_HOST is not set"),
            "{e}"
        );
        let e = parse_env(managed(&[]), Some("  ")).unwrap_err().to_string();
        assert!(e.contains("SNOWFLAKE_HOST is not set"), "a blank variable is not a host: {e}");
        let c = parse_env(managed(&[(ACCOUNT_IDENTIFIER, "My_Org-Acct")]), None).unwrap();
        assert_eq!(
            (c.control.as_str(), c.control_source),
            ("https://my-org-acct.snowflakecomputing.com/", ControlSource::Account)
        );
        let c = parse_env(managed(&[(URL_OVERRIDE, "http://127.0.0.1:8765")]), None).unwrap();
        assert_eq!((c.control.as_str(), c.control_source), ("http://127.0.0.1:8765/", ControlSource::UrlOverride));
    }

    #[test]
    fn the_url_override_wins_then_snowflake_host_then_the_account() {
        let all = managed(&[(URL_OVERRIDE, "https://proxy.example:8443"), (ACCOUNT_IDENTIFIER, "org-other")]);
        let c = parse_env(all, Some("org-acct.snowflakecomputing.com")).unwrap();
        assert_eq!((c.control.as_str(), c.control_source), ("https://proxy.example:8443/", ControlSource::UrlOverride));
        let c = parse_env(managed(&[(ACCOUNT_IDENTIFIER, "org-other")]), Some("127.0.0.1:8443")).unwrap();
        assert_eq!((c.control.as_str(), c.control_source), ("https://127.0.0.1:8443/", ControlSource::SnowflakeHost));
        // Key pair is Openflow's KEY_PAIR: the account always, SNOWFLAKE_HOST never.
        let c = parse_env(minimal(), Some("127.0.0.1:8443")).unwrap();
        assert_eq!(
            (c.control.as_str(), c.control_source),
            ("https://myorg-myaccount.snowflakecomputing.com/", ControlSource::Account)
        );
    }

    #[test]
    fn a_snowflake_host_that_is_not_a_host_is_named() {
        for bad in ["https://org-acct.snowflakecomputing.com", "org acct", "host/path", "user@host"] {
            let e = parse_env(managed(&[]), Some(bad)).unwrap_err().to_string();
            assert!(
                e.contains(&format!("environment variable SNOWFLAKE_HOST '{bad}' is not a host name")),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn key_pair_still_requires_the_account() {
        let mut p = minimal();
        p.remove(0);
        let m = messages(p);
        assert_eq!(m.iter().filter(|m| m.starts_with("Account Identifier")).count(), 1, "{m:?}");
        assert!(
            m.contains(&"Account Identifier: is required when Authentication Strategy is KEY_PAIR".to_owned()),
            "{m:?}"
        );
    }

    #[test]
    fn the_token_files_can_be_moved() {
        let c =
            parse_env(managed(&[(TOKEN_FILE, "/tmp/s"), (SERVICE_ACCOUNT_TOKEN_FILE, "/tmp/sa")]), Some("h")).unwrap();
        assert_eq!(
            c.authentication,
            Authentication::SnowflakeManaged {
                service_account_token_file: "/tmp/sa".into(),
                session_token_file: "/tmp/s".into()
            }
        );
    }

    #[test]
    fn named_pipe_requires_its_name() {
        let mut p = minimal();
        p.push((DESTINATION_TYPE, "PIPE"));
        assert!(messages(p.clone()).contains(&"Pipe: is required when Destination Type is PIPE".to_owned()));
        p.push((PIPE, "EVENTS_PIPE"));
        assert_eq!(parse(p).unwrap().destination, Destination::Pipe("EVENTS_PIPE".into()));
    }
}
