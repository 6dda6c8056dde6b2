//! Where a FlowFile's rows go, when Database, Schema, Table or Pipe hold Expression Language: Java
//! evaluates the four properties against each FlowFile and passes the resolved names as the
//! attributes below; this module checks them and keys everything by the resolved destination
//! (database, schema, pipe).
//!
//! A FlowFile without those attributes takes the configured names, so a PutSnowflake without
//! Expression Language has exactly one destination, as before. Channel names do not depend on the
//! destination: a channel lives inside its pipe, so the same name in two pipes is two channels, each
//! with its own committed offset token.
//! The lineage gate (parents before children) still knows a shard by its channel name alone, so a
//! child shard's FlowFiles wait for its parents' FlowFiles whatever their destinations: stricter
//! than needed, never looser.
//!
//! Each open destination has its own API client (its scoped token and ingest host), writers and
//! status poller. At most `max` are open at once; one whose writers all retired (idle) and that no
//! FlowFile is being handed to is closed when a new one needs room, or on the next sweep. Beyond
//! the bound, with none idle, the FlowFile gets a [`OpenError::TooMany`] (it goes to failure).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::config::put_snowflake::{Destination as PipeChoice, PutSnowflakeConfig, DATABASE, PIPE, SCHEMA, TABLE};
use crate::runtime::lock;

/// The resolved Database, Schema, Table and Pipe Java passes with each FlowFile.
pub use crate::contract::attributes::DATABASE as ATTR_DATABASE;
pub use crate::contract::attributes::PIPE as ATTR_PIPE;
pub use crate::contract::attributes::SCHEMA as ATTR_SCHEMA;
pub use crate::contract::attributes::TABLE as ATTR_TABLE;

/// Snowflake identifiers are at most 255 characters.
pub const MAX_NAME_CHARS: usize = 255;
/// Destinations open at once unless the settings say otherwise.
pub const DEFAULT_MAX_DESTINATIONS: usize = 64;

/// A pipe in a schema of a database: what one API client writes to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DestinationKey {
    pub database: String,
    pub schema: String,
    pub pipe: String,
}

impl std::fmt::Display for DestinationKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.database, self.schema, self.pipe)
    }
}

/// Why a resolved name cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NameProblem {
    #[error("{0} evaluated to an empty value against the FlowFile's attributes; not sent")]
    Empty(&'static str),
    #[error("{0} evaluated to a name of {1} characters against the FlowFile's attributes (Snowflake allows at most 255); not sent")]
    TooLong(&'static str, usize),
    #[error("{0} evaluated to a name with a control character against the FlowFile's attributes; not sent")]
    ControlCharacter(&'static str),
}

/// The configured names, which a FlowFile's resolved names replace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DestinationRule {
    database: String,
    schema: String,
    table: String,
    /// `Some` with Destination Type PIPE.
    pipe: Option<String>,
}

impl DestinationRule {
    pub fn from_config(config: &PutSnowflakeConfig) -> Self {
        let pipe = match &config.destination {
            PipeChoice::Table => None,
            PipeChoice::Pipe(p) => Some(p.clone()),
        };
        Self { database: config.database.clone(), schema: config.schema.clone(), table: config.table.clone(), pipe }
    }

    /// The configured destination, as a FlowFile without resolved names takes it.
    pub fn configured(&self) -> DestinationKey {
        self.resolve(&HashMap::new()).unwrap_or_else(|_| DestinationKey {
            database: self.database.clone(),
            schema: self.schema.clone(),
            pipe: self.pipe.clone().unwrap_or_else(|| default_pipe(&self.table)),
        })
    }

    /// The FlowFile's destination: its resolved names, else the configured ones.
    pub fn resolve(&self, attributes: &HashMap<String, String>) -> Result<DestinationKey, NameProblem> {
        let name = |attribute: &str, property: &'static str, configured: &str| -> Result<String, NameProblem> {
            let value = attributes.get(attribute).map(String::as_str).unwrap_or(configured);
            checked(property, value).map(str::to_owned)
        };
        let database = name(ATTR_DATABASE, DATABASE, &self.database)?;
        let schema = name(ATTR_SCHEMA, SCHEMA, &self.schema)?;
        let pipe = match &self.pipe {
            Some(configured) => name(ATTR_PIPE, PIPE, configured)?,
            None => default_pipe(&name(ATTR_TABLE, TABLE, &self.table)?),
        };
        Ok(DestinationKey { database, schema, pipe })
    }
}

/// The table's default pipe.
pub fn default_pipe(table: &str) -> String {
    format!("{table}-STREAMING")
}

fn checked<'a>(property: &'static str, value: &'a str) -> Result<&'a str, NameProblem> {
    if value.trim().is_empty() {
        return Err(NameProblem::Empty(property));
    }
    let chars = value.chars().count();
    if chars > MAX_NAME_CHARS {
        return Err(NameProblem::TooLong(property, chars));
    }
    if value.chars().any(char::is_control) {
        return Err(NameProblem::ControlCharacter(property));
    }
    Ok(value)
}

/// What the open set needs of an open destination.
pub trait OpenDestination {
    /// Nothing runs for it: no writer, no channel on its status board.
    fn is_idle(&self) -> bool;
    /// Stops its tasks.
    fn close(&self);
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OpenError {
    #[error(
        "PutSnowflake already writes to {max} destinations (its most at once) and none is idle, so it does not open {key}; \
         the FlowFile goes to failure and loads once a destination falls idle"
    )]
    TooMany { max: usize, key: String },
    #[error("cannot open the destination {key}: {reason}")]
    Failed { key: String, reason: String },
}

type Opener<D> = Box<dyn Fn(&DestinationKey) -> Result<D, String> + Send + Sync>;

/// The open destinations, at most `max`, each opened on first use.
pub struct OpenDestinations<D: OpenDestination> {
    open: Mutex<HashMap<DestinationKey, Arc<D>>>,
    max: usize,
    opener: Opener<D>,
}

impl<D: OpenDestination> OpenDestinations<D> {
    pub fn new(max: usize, opener: Opener<D>) -> Self {
        Self { open: Mutex::default(), max: max.max(1), opener }
    }

    /// The destination, opened if it is not; closes idle ones to make room.
    pub fn get(&self, key: &DestinationKey) -> Result<Arc<D>, OpenError> {
        let mut open = self.lock();
        if let Some(d) = open.get(key) {
            return Ok(d.clone());
        }
        if open.len() >= self.max {
            retire_idle(&mut open);
        }
        if open.len() >= self.max {
            return Err(OpenError::TooMany { max: self.max, key: key.to_string() });
        }
        let d = Arc::new((self.opener)(key).map_err(|reason| OpenError::Failed { key: key.to_string(), reason })?);
        open.insert(key.clone(), d.clone());
        Ok(d)
    }

    /// The destination if it is open; never opens one.
    pub fn if_open(&self, key: &DestinationKey) -> Option<Arc<D>> {
        self.lock().get(key).cloned()
    }

    /// Closes every idle destination; returns how many.
    pub fn retire_idle(&self) -> usize {
        retire_idle(&mut self.lock())
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn all(&self) -> Vec<Arc<D>> {
        self.lock().values().cloned().collect()
    }

    pub fn close_all(&self) {
        for (_, d) in self.lock().drain() {
            d.close();
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<DestinationKey, Arc<D>>> {
        lock(&self.open)
    }
}

/// Idle, and held by nobody but the set (no FlowFile is being handed to it right now).
fn retire_idle<D: OpenDestination>(open: &mut HashMap<DestinationKey, Arc<D>>) -> usize {
    let before = open.len();
    open.retain(|_, d| {
        let keep = Arc::strong_count(d) > 1 || !d.is_idle();
        if !keep {
            d.close();
        }
        keep
    });
    before - open.len()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use super::*;

    fn rule(pipe: Option<&str>) -> DestinationRule {
        DestinationRule { database: "DB".into(), schema: "S".into(), table: "T".into(), pipe: pipe.map(str::to_owned) }
    }

    fn attrs(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn key(db: &str, schema: &str, pipe: &str) -> DestinationKey {
        DestinationKey { database: db.into(), schema: schema.into(), pipe: pipe.into() }
    }

    #[test]
    fn without_resolved_names_the_configured_destination_is_taken() {
        assert_eq!(rule(None).resolve(&HashMap::new()), Ok(key("DB", "S", "T-STREAMING")));
        assert_eq!(rule(Some("P")).resolve(&HashMap::new()), Ok(key("DB", "S", "P")));
        assert_eq!(rule(None).configured(), key("DB", "S", "T-STREAMING"));
        // The same values resolved by Java (no Expression Language) are the same destination.
        let same = attrs(&[(ATTR_DATABASE, "DB"), (ATTR_SCHEMA, "S"), (ATTR_TABLE, "T")]);
        assert_eq!(rule(None).resolve(&same), Ok(key("DB", "S", "T-STREAMING")));
    }

    #[test]
    fn resolved_names_pick_the_destination() {
        let a = attrs(&[(ATTR_DATABASE, "D2"), (ATTR_SCHEMA, "S2"), (ATTR_TABLE, "ORDERS"), (ATTR_PIPE, "IGNORED")]);
        assert_eq!(
            rule(None).resolve(&a),
            Ok(key("D2", "S2", "ORDERS-STREAMING")),
            "the pipe is not read with Destination Type TABLE"
        );
        let p = attrs(&[(ATTR_PIPE, "EVENTS_PIPE"), (ATTR_TABLE, "IGNORED")]);
        assert_eq!(rule(Some("P")).resolve(&p), Ok(key("DB", "S", "EVENTS_PIPE")));
    }

    #[test]
    fn empty_long_or_control_names_are_problems_naming_the_property() {
        let r = rule(None);
        assert_eq!(r.resolve(&attrs(&[(ATTR_TABLE, "")])), Err(NameProblem::Empty(TABLE)));
        assert_eq!(r.resolve(&attrs(&[(ATTR_SCHEMA, "  ")])), Err(NameProblem::Empty(SCHEMA)));
        assert_eq!(r.resolve(&attrs(&[(ATTR_DATABASE, &"x".repeat(256))])), Err(NameProblem::TooLong(DATABASE, 256)));
        assert!(r.resolve(&attrs(&[(ATTR_DATABASE, &"é".repeat(255))])).is_ok(), "characters, not bytes");
        assert_eq!(r.resolve(&attrs(&[(ATTR_TABLE, "a\nb")])), Err(NameProblem::ControlCharacter(TABLE)));
        assert_eq!(rule(Some("P")).resolve(&attrs(&[(ATTR_PIPE, "")])), Err(NameProblem::Empty(PIPE)));
        let message = NameProblem::Empty(TABLE).to_string();
        assert!(message.starts_with("Table evaluated to an empty value"), "{message}");
    }

    struct Fake {
        idle: Arc<AtomicBool>,
        closed: Arc<AtomicUsize>,
    }

    impl OpenDestination for Fake {
        fn is_idle(&self) -> bool {
            self.idle.load(Ordering::SeqCst)
        }
        fn close(&self) {
            self.closed.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn set(
        max: usize,
        idle: Arc<AtomicBool>,
        opened: Arc<AtomicUsize>,
        closed: Arc<AtomicUsize>,
    ) -> OpenDestinations<Fake> {
        OpenDestinations::new(
            max,
            Box::new(move |k: &DestinationKey| {
                if k.pipe == "BROKEN" {
                    return Err("no client".into());
                }
                opened.fetch_add(1, Ordering::SeqCst);
                Ok(Fake { idle: idle.clone(), closed: closed.clone() })
            }),
        )
    }

    #[test]
    fn each_destination_is_opened_once_and_the_bound_holds_until_one_is_idle() {
        let (idle, opened, closed) =
            (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let set = set(2, idle.clone(), opened.clone(), closed.clone());
        let a = set.get(&key("D", "S", "A")).unwrap();
        assert!(Arc::ptr_eq(&a, &set.get(&key("D", "S", "A")).unwrap()), "one client per destination");
        drop(a);
        set.get(&key("D", "S", "B")).unwrap();
        assert_eq!(opened.load(Ordering::SeqCst), 2);
        let err = set.get(&key("D", "S", "C")).err().unwrap();
        assert_eq!(err, OpenError::TooMany { max: 2, key: "D.S.C".into() });
        assert!(err.to_string().contains("already writes to 2 destinations"), "{err}");
        assert_eq!((set.len(), closed.load(Ordering::SeqCst)), (2, 0), "busy destinations stay open");
        idle.store(true, Ordering::SeqCst);
        let held = set.get(&key("D", "S", "A")).unwrap();
        set.get(&key("D", "S", "C")).unwrap();
        assert_eq!(closed.load(Ordering::SeqCst), 1, "only B closed: A is being handed a FlowFile");
        assert!(Arc::ptr_eq(&held, &set.get(&key("D", "S", "A")).unwrap()));
        drop(held);
        assert_eq!(set.retire_idle(), 2);
        assert!(set.is_empty());
        assert_eq!(
            set.get(&key("D", "S", "BROKEN")).err().unwrap(),
            OpenError::Failed { key: "D.S.BROKEN".into(), reason: "no client".into() }
        );
        assert!(set.is_empty(), "a failed open takes no room");
    }

    #[test]
    fn looking_among_open_destinations_opens_none() {
        let (idle, opened, closed) =
            (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let set = set(2, idle, opened.clone(), closed);
        assert!(set.if_open(&key("D", "S", "A")).is_none());
        assert_eq!((opened.load(Ordering::SeqCst), set.len()), (0, 0), "nothing opened");
        let a = set.get(&key("D", "S", "A")).unwrap();
        assert!(Arc::ptr_eq(&a, &set.if_open(&key("D", "S", "A")).unwrap()));
        assert_eq!(opened.load(Ordering::SeqCst), 1);
    }
}
