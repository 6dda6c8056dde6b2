//! Shared server state (settings, auth, catalog, channels, storage, faults) and
//! the operations that change the catalog: DDL, table specs from JSON and the
//! config file read at start. The catalog, users and channels are persisted in
//! DuckDB when a state dir is given, so a restarted stand-in keeps them.

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Mutex, RwLock};

use crate::auth::Authenticator;
use crate::catalog::{Catalog, CatalogError, ColumnDef, ObjectName, PipeDef, TableDef};
use crate::channels::{ChannelRecord, Channels};
use crate::ddl::{self, normalize_ident, Statement};
use crate::faults::Faults;
use crate::schema::{self, IcebergVersion};
use crate::storage::{StorageError, Store};

/// Settings that tests may change at run time (`POST /admin/settings`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Settings {
    /// Delay between an append being accepted and its rows being committed: the fixed lag, or the low end of the
    /// range when `commit_lag_max_ms` is above it.
    pub commit_lag_ms: u64,
    /// The high end of the commit lag's range: each append of a channel draws its lag uniformly from
    /// `commit_lag_ms..=commit_lag_max_ms` and commits at the later of that and the channel's previous append's
    /// commit (in append order). At or below `commit_lag_ms` (0 by default): the lag is fixed at `commit_lag_ms`.
    #[serde(default)]
    pub commit_lag_max_ms: u64,
    /// Per-channel append limit in requests/s (0 = off; default Snowflake's 10, see `limits`).
    pub rate_limit_per_channel: u32,
    /// Per-channel limit in bytes of rows (uncompressed) per second (0 = off; default Snowflake's 20 MB/s).
    #[serde(default = "default_throughput_limit")]
    pub throughput_limit_per_channel: u64,
    /// Time an open takes (a second open meanwhile gets 409 in progress).
    pub open_latency_ms: u64,
    /// What `GET /v2/streaming/hostname` answers.
    pub hostname: String,
    /// Cap on the request body as sent (compressed) in bytes.
    pub max_wire_bytes: usize,
    /// Cap on the decoded request body in bytes.
    pub max_body_bytes: usize,
    /// Lifetime of scoped tokens minted by `/oauth/token`.
    pub scoped_token_ttl_s: i64,
    /// Benchmark mode: the protocol is checked and bodies decompressed as always, but rows are only counted
    /// (each line must look like a JSON object, `{`…`}`), never parsed, converted or stored; committed counts per
    /// table are read at `GET /admin/bench-counts`. For measuring clients, not for testing what lands.
    #[serde(default)]
    pub bench_mode: bool,
}

/// Parses a commit lag as given to `--commit-lag-ms`: `1000` (fixed) or `4000-10000` (each append draws from the
/// range), in ms. Returns (low, high).
pub fn parse_commit_lag(text: &str) -> Result<(u64, u64), String> {
    let number = |s: &str| s.trim().parse::<u64>().map_err(|e| format!("'{s}' in commit lag '{text}': {e}"));
    match text.split_once('-') {
        None => number(text).map(|ms| (ms, ms)),
        Some((low, high)) => {
            let (low, high) = (number(low)?, number(high)?);
            if high < low {
                return Err(format!("commit lag '{text}': the range's high end is below its low end"));
            }
            Ok((low, high))
        }
    }
}

fn default_throughput_limit() -> u64 {
    crate::limits::SNOWFLAKE_BYTES_PER_SECOND
}

impl Settings {
    /// The commit lag's range, (low, high) in ms; equal ends for a fixed lag.
    pub fn commit_lag_range(&self) -> (u64, u64) {
        (self.commit_lag_ms, self.commit_lag_max_ms.max(self.commit_lag_ms))
    }

    /// The per-channel limits in force.
    pub fn channel_limits(&self) -> crate::limits::ChannelLimits {
        crate::limits::ChannelLimits {
            requests_per_second: self.rate_limit_per_channel,
            bytes_per_second: self.throughput_limit_per_channel,
        }
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            commit_lag_ms: 1000,
            commit_lag_max_ms: 0,
            rate_limit_per_channel: crate::limits::SNOWFLAKE_REQUESTS_PER_SECOND,
            throughput_limit_per_channel: crate::limits::SNOWFLAKE_BYTES_PER_SECOND,
            open_latency_ms: 0,
            hostname: "127.0.0.1".into(),
            max_wire_bytes: 4 * 1024 * 1024,
            max_body_bytes: 16 * 1024 * 1024,
            scoped_token_ttl_s: 3600,
            bench_mode: false,
        }
    }
}

/// One request as seen by the stand-in (`GET /admin/requests`).
#[derive(Debug, Clone, Serialize)]
pub struct LoggedRequest {
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    pub status: u16,
    pub headers: serde_json::Map<String, serde_json::Value>,
    /// The credentials' kind (and a managed token's label), never a token: `Authenticator::describe`.
    pub auth: serde_json::Value,
}

/// Bench mode: a committed batch, for a benchmark to measure latency (append or arrival to commit).
#[derive(Debug, Clone, Serialize)]
pub struct BenchCommit {
    pub table: String,
    pub channel: String,
    /// The append's end offset token (its last row's).
    pub offset_token: Option<String>,
    pub rows: u64,
    /// When the append was accepted and when the batch was committed, epoch ms.
    pub accepted_ms: i64,
    pub committed_ms: i64,
}

/// The most bench commits held between two reads of `GET /admin/bench-commits`.
pub const BENCH_COMMITS_MAX: usize = 1_000_000;

pub struct AppState {
    pub settings: RwLock<Settings>,
    pub auth: Authenticator,
    pub catalog: RwLock<Catalog>,
    pub channels: Channels,
    pub store: Store,
    pub faults: Faults,
    /// Each channel's appends of the last second, against Snowflake's limits.
    pub channel_windows: crate::limits::ChannelWindows,
    pub requests: Mutex<VecDeque<LoggedRequest>>,
    pub telemetry_batches: std::sync::atomic::AtomicU64,
    /// Bench mode: rows committed per table (`DB.SCHEMA.TABLE`).
    pub bench_counts: Mutex<std::collections::HashMap<String, u64>>,
    /// Bench mode: one entry per committed batch, oldest first, until `GET /admin/bench-commits` takes them
    /// (end-to-end latency: bench/pipeline.py). At most `BENCH_COMMITS_MAX`; more are counted as dropped.
    pub bench_commits: Mutex<(Vec<BenchCommit>, u64)>,
    /// The SQL API's recent SELECT results by statement handle, for `GET /api/v2/statements/<handle>`.
    pub sql_results: Mutex<VecDeque<(String, crate::routes::sql_api::StoredResult)>>,
    /// The roles, users, databases, schemas and warehouses the SQL API's set-up statements made.
    pub account: RwLock<crate::account::Account>,
}

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// A table as given in JSON (`POST /admin/tables`, config file).
#[derive(Debug, Clone, Deserialize)]
pub struct TableSpec {
    pub database: String,
    #[serde(default = "default_schema")]
    pub schema: String,
    pub name: String,
    pub columns: Vec<ColumnSpec>,
    #[serde(default)]
    pub enable_schema_evolution: bool,
    #[serde(default)]
    pub error_logging: bool,
    /// `null`, `"v2"` or `"v3"` (or 2 / 3).
    #[serde(default)]
    pub iceberg: Option<serde_json::Value>,
    #[serde(default)]
    pub or_replace: bool,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ColumnSpec {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: String,
    #[serde(default = "yes")]
    pub nullable: bool,
}

#[derive(Debug, Clone, Deserialize)]
pub struct PipeSpec {
    pub database: String,
    #[serde(default = "default_schema")]
    pub schema: String,
    pub name: String,
    pub table: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct UserSpec {
    pub account: String,
    pub user: String,
    #[serde(default)]
    pub public_key_pem: Option<String>,
    #[serde(default)]
    pub public_key_file: Option<String>,
}

/// The `--config` file (JSON).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ConfigFile {
    #[serde(default)]
    pub users: Vec<UserSpec>,
    /// DDL statements run in order (see `ddl`).
    #[serde(default)]
    pub sql: Vec<String>,
    #[serde(default)]
    pub tables: Vec<TableSpec>,
    #[serde(default)]
    pub pipes: Vec<PipeSpec>,
}

fn default_schema() -> String {
    "PUBLIC".into()
}

fn yes() -> bool {
    true
}

impl TableSpec {
    pub fn to_def(&self) -> Result<TableDef, String> {
        let iceberg = match &self.iceberg {
            None | Some(serde_json::Value::Null) | Some(serde_json::Value::Bool(false)) => None,
            Some(v) => match v.to_string().trim_matches('"').to_lowercase().as_str() {
                "v3" | "3" => Some(IcebergVersion::V3),
                "v2" | "2" | "true" => Some(IcebergVersion::V2),
                other => return Err(format!("iceberg must be null, \"v2\" or \"v3\", not {other}")),
            },
        };
        let columns = self
            .columns
            .iter()
            .map(|c| {
                Ok(ColumnDef {
                    name: normalize_ident(&c.name),
                    ty: schema::parse_type(&c.ty).map_err(|e| format!("column {}: {e}", c.name))?,
                    nullable: c.nullable,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let def = TableDef {
            name: ObjectName::new(
                &normalize_ident(&self.database),
                &normalize_ident(&self.schema),
                &normalize_ident(&self.name),
            ),
            columns,
            enable_schema_evolution: self.enable_schema_evolution,
            error_logging: self.error_logging,
            iceberg,
        };
        def.validate()?;
        Ok(def)
    }
}

impl AppState {
    pub fn new(settings: Settings, store: Store) -> Self {
        AppState {
            auth: Authenticator::new(settings.scoped_token_ttl_s),
            settings: RwLock::new(settings),
            catalog: RwLock::new(Catalog::default()),
            channels: Channels::default(),
            store,
            faults: Faults::default(),
            channel_windows: Default::default(),
            requests: Mutex::new(VecDeque::new()),
            telemetry_batches: Default::default(),
            bench_counts: Default::default(),
            bench_commits: Default::default(),
            sql_results: Default::default(),
            account: Default::default(),
        }
    }

    pub fn settings(&self) -> Settings {
        self.settings.read().unwrap().clone()
    }

    /// Runs one DDL statement; returns a short description of what was done.
    pub fn execute_ddl(&self, sql: &str, defaults: &(Option<String>, Option<String>)) -> Result<String, StateError> {
        match ddl::parse(sql, defaults).map_err(StateError::Invalid)? {
            Statement::CreateTable { table, or_replace, if_not_exists } => {
                let exists = self.catalog.read().unwrap().table(&table.name).is_some();
                if exists && if_not_exists {
                    return Ok(format!("Table {} already exists, statement succeeded.", table.name));
                }
                if exists && !or_replace {
                    return Err(CatalogError::AlreadyExists(table.name.to_string()).into());
                }
                self.create_table(table.clone(), or_replace)?;
                Ok(format!("Table {} successfully created.", table.name))
            }
            Statement::CreatePipe { pipe, or_replace } => {
                let exists = self.catalog.read().unwrap().pipes().any(|p| p.name.key() == pipe.name.key());
                if exists && !or_replace {
                    return Err(CatalogError::AlreadyExists(pipe.name.to_string()).into());
                }
                let name = pipe.name.to_string();
                self.create_pipe(pipe)?;
                Ok(format!("Pipe {name} successfully created."))
            }
            Statement::AlterTableSet { name, evolution, error_logging } => {
                let table = {
                    let mut cat = self.catalog.write().unwrap();
                    let t = cat.table_mut(&name).ok_or_else(|| CatalogError::TableNotFound(name.to_string()))?;
                    if let Some(e) = evolution {
                        t.enable_schema_evolution = e;
                    }
                    if let Some(e) = error_logging {
                        t.error_logging = e;
                    }
                    t.clone()
                };
                if table.error_logging {
                    self.store.enable_error_table(&table.name)?;
                }
                self.persist_catalog()?;
                Ok("Statement executed successfully.".into())
            }
            Statement::DropTable { name, if_exists } => {
                let removed = self.catalog.write().unwrap().remove_table(&name);
                if removed.is_none() && !if_exists {
                    return Err(CatalogError::TableNotFound(name.to_string()).into());
                }
                self.store.drop_table(&name)?;
                self.bench_counts.lock().unwrap().remove(&name.to_string());
                self.persist_catalog()?;
                Ok(format!("{name} successfully dropped."))
            }
            Statement::DropPipe { name, if_exists } => {
                let removed = self.catalog.write().unwrap().remove_pipe(&name);
                if removed.is_none() && !if_exists {
                    return Err(CatalogError::PipeNotFound(name.to_string()).into());
                }
                self.persist_catalog()?;
                Ok(format!("{name} successfully dropped."))
            }
        }
    }

    pub fn create_table(&self, table: TableDef, replace: bool) -> Result<(), StateError> {
        table.validate().map_err(StateError::Invalid)?;
        self.store.create_table(&table, replace)?;
        self.bench_counts.lock().unwrap().remove(&table.name.to_string());
        self.catalog.write().unwrap().put_table(table);
        self.persist_catalog()
    }

    pub fn create_pipe(&self, pipe: PipeDef) -> Result<(), StateError> {
        if self.catalog.read().unwrap().table(&pipe.table).is_none() {
            return Err(CatalogError::TableNotFound(pipe.table.to_string()).into());
        }
        self.catalog.write().unwrap().put_pipe(pipe);
        self.persist_catalog()
    }

    pub fn register_user(&self, spec: &UserSpec) -> Result<String, StateError> {
        let pem = match (&spec.public_key_pem, &spec.public_key_file) {
            (Some(p), _) => p.clone(),
            (None, Some(f)) => std::fs::read_to_string(f).map_err(|e| StateError::Invalid(format!("{f}: {e}")))?,
            (None, None) => return Err(StateError::Invalid("public_key_pem or public_key_file is required".into())),
        };
        let fp = self.auth.register(&spec.account, &spec.user, &pem).map_err(|e| StateError::Invalid(e.to_string()))?;
        let doc = serde_json::json!({"account": spec.account, "user": spec.user, "public_key_pem": pem});
        self.store.save_meta(
            "user",
            &format!("{}.{}:{fp}", spec.account.to_uppercase(), spec.user.to_uppercase()),
            &doc.to_string(),
        )?;
        Ok(fp)
    }

    /// Applies a config file: users, then DDL, then JSON tables and pipes.
    pub fn apply_config(&self, cfg: &ConfigFile) -> Result<(), StateError> {
        for u in &cfg.users {
            self.register_user(u)?;
        }
        for sql in &cfg.sql {
            self.execute_ddl(sql, &(None, None))?;
        }
        for t in &cfg.tables {
            self.create_table(t.to_def().map_err(StateError::Invalid)?, true)?;
        }
        for p in &cfg.pipes {
            let db = normalize_ident(&p.database);
            let sc = normalize_ident(&p.schema);
            self.create_pipe(PipeDef {
                name: ObjectName::new(&db, &sc, &normalize_ident(&p.name)),
                table: ObjectName::new(&db, &sc, &normalize_ident(&p.table)),
            })?;
        }
        Ok(())
    }

    pub fn persist_catalog(&self) -> Result<(), StateError> {
        let doc =
            serde_json::to_string(&*self.catalog.read().unwrap()).map_err(|e| StateError::Invalid(e.to_string()))?;
        self.store.save_meta("catalog", "catalog", &doc)?;
        Ok(())
    }

    /// Persists a channel's record (with a state dir; in memory there is no restart to survive).
    pub fn persist_channel(&self, rec: &ChannelRecord) {
        self.save_channel_records(std::slice::from_ref(rec));
    }

    /// Persists the current records of these channels (by `channel_key`) in one write (with a state dir).
    pub fn persist_channels(&self, keys: &[String]) {
        if !keys.is_empty() && self.store.persistent() {
            self.save_channel_records(&self.channels.records(keys));
        }
    }

    fn save_channel_records(&self, recs: &[ChannelRecord]) {
        if recs.is_empty() || !self.store.persistent() {
            return;
        }
        // One document per key (a statement may not replace a key twice).
        let docs: std::collections::BTreeMap<String, String> = recs
            .iter()
            .filter_map(|rec| {
                let key = rec.pipe.as_ref().map(|p| format!("{p}/{}", rec.name)).unwrap_or_default();
                serde_json::to_string(rec).ok().map(|doc| (key, doc))
            })
            .collect();
        let docs: Vec<(String, String)> = docs.into_iter().collect();
        if let Err(e) = self.store.save_meta_many("channel", &docs) {
            tracing::warn!("cannot persist {} channel(s): {e}", docs.len());
        }
    }

    /// Reloads catalog, users and channels persisted by an earlier run.
    pub fn restore(&self) -> Result<(), StateError> {
        if let Some((_, doc)) = self.store.load_meta("catalog")?.into_iter().next() {
            let cat: Catalog = serde_json::from_str(&doc).map_err(|e| StateError::Invalid(e.to_string()))?;
            for t in cat.tables() {
                self.store.attach_existing(&t.name.database, &t.name.schema)?;
            }
            *self.catalog.write().unwrap() = cat;
        }
        for (_, doc) in self.store.load_meta("user")? {
            if let Ok(u) = serde_json::from_str::<UserSpec>(&doc) {
                let _ = self.auth.register(&u.account, &u.user, u.public_key_pem.as_deref().unwrap_or_default());
            }
        }
        let recs =
            self.store.load_meta("channel")?.into_iter().filter_map(|(_, d)| serde_json::from_str(&d).ok()).collect();
        self.channels.restore(recs);
        Ok(())
    }

    pub fn load_config_file(&self, path: &Path) -> Result<(), StateError> {
        let text =
            std::fs::read_to_string(path).map_err(|e| StateError::Invalid(format!("{}: {e}", path.display())))?;
        let cfg: ConfigFile =
            serde_json::from_str(&text).map_err(|e| StateError::Invalid(format!("{}: {e}", path.display())))?;
        self.apply_config(&cfg)
    }

    pub fn log_request(&self, entry: LoggedRequest) {
        let mut log = self.requests.lock().unwrap();
        if log.len() >= 2000 {
            log.pop_front();
        }
        log.push_back(entry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_lags_parse_as_a_value_or_a_range() {
        assert_eq!(parse_commit_lag("1000"), Ok((1000, 1000)));
        assert_eq!(parse_commit_lag("4000-10000"), Ok((4000, 10000)));
        assert_eq!(parse_commit_lag(" 0 - 5 "), Ok((0, 5)));
        assert!(parse_commit_lag("10000-4000").is_err());
        assert!(parse_commit_lag("4s").is_err());
        let s = Settings { commit_lag_ms: 4000, commit_lag_max_ms: 10000, ..Default::default() };
        assert_eq!(s.commit_lag_range(), (4000, 10000));
        assert_eq!(Settings { commit_lag_max_ms: 0, ..s }.commit_lag_range(), (4000, 4000));
    }
}
