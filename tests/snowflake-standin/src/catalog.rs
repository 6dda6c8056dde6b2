//! Table and pipe metadata: what the stand-in knows about each table (columns,
//! schema evolution, error logging, Iceberg) and how a pipe name resolves to a
//! table. The default pipe `<TABLE>-STREAMING` exists for every table; named
//! pipes are created by DDL. Names are matched case-insensitively.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

use crate::schema::{IcebergVersion, SfType};

/// `database.schema.name`, each part already normalised (see `ddl::normalize_ident`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ObjectName {
    pub database: String,
    pub schema: String,
    pub name: String,
}

impl ObjectName {
    pub fn new(database: &str, schema: &str, name: &str) -> Self {
        ObjectName { database: database.into(), schema: schema.into(), name: name.into() }
    }

    /// Case-insensitive lookup key.
    pub fn key(&self) -> String {
        format!("{}\u{1}{}\u{1}{}", self.database, self.schema, self.name).to_uppercase()
    }

    /// `"DB"."SCHEMA"."NAME"` for DuckDB.
    pub fn quoted(&self) -> String {
        format!("{}.{}.{}", quote(&self.database), quote(&self.schema), quote(&self.name))
    }

    /// The DuckDB name of this table's error table (`ERROR_TABLE(t)` in queries).
    pub fn error_table(&self) -> ObjectName {
        ObjectName::new(&self.database, &self.schema, &format!("{}$ERRORS", self.name))
    }
}

impl fmt::Display for ObjectName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.database, self.schema, self.name)
    }
}

/// Quotes a DuckDB identifier.
pub fn quote(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ColumnDef {
    pub name: String,
    pub ty: SfType,
    pub nullable: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableDef {
    pub name: ObjectName,
    pub columns: Vec<ColumnDef>,
    pub enable_schema_evolution: bool,
    pub error_logging: bool,
    pub iceberg: Option<IcebergVersion>,
}

impl TableDef {
    /// Checks the column types against the table kind (e.g. no VARIANT on Iceberg v2).
    pub fn validate(&self) -> Result<(), String> {
        if self.columns.is_empty() {
            return Err(format!("table {} needs at least one column", self.name));
        }
        for c in &self.columns {
            c.ty.check_allowed(self.iceberg).map_err(|e| format!("column {}: {e}", c.name))?;
        }
        Ok(())
    }

    /// Index of the column named `key`, matched case-insensitively.
    pub fn column_index(&self, key: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name.eq_ignore_ascii_case(key))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PipeDef {
    pub name: ObjectName,
    pub table: ObjectName,
}

pub const DEFAULT_PIPE_SUFFIX: &str = "-STREAMING";

/// All tables and named pipes.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Catalog {
    tables: BTreeMap<String, TableDef>,
    pipes: BTreeMap<String, PipeDef>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CatalogError {
    #[error("Pipe '{0}' does not exist or not authorized.")]
    PipeNotFound(String),
    #[error("Table '{0}' does not exist or not authorized.")]
    TableNotFound(String),
    #[error("Object '{0}' already exists.")]
    AlreadyExists(String),
}

impl Catalog {
    pub fn table(&self, name: &ObjectName) -> Option<&TableDef> {
        self.tables.get(&name.key())
    }

    pub fn table_mut(&mut self, name: &ObjectName) -> Option<&mut TableDef> {
        self.tables.get_mut(&name.key())
    }

    pub fn tables(&self) -> impl Iterator<Item = &TableDef> {
        self.tables.values()
    }

    pub fn pipes(&self) -> impl Iterator<Item = &PipeDef> {
        self.pipes.values()
    }

    pub fn put_table(&mut self, table: TableDef) {
        self.tables.insert(table.name.key(), table);
    }

    pub fn remove_table(&mut self, name: &ObjectName) -> Option<TableDef> {
        self.tables.remove(&name.key())
    }

    pub fn put_pipe(&mut self, pipe: PipeDef) {
        self.pipes.insert(pipe.name.key(), pipe);
    }

    pub fn remove_pipe(&mut self, name: &ObjectName) -> Option<PipeDef> {
        self.pipes.remove(&name.key())
    }

    /// The table a pipe writes to: a named pipe, or the default `<TABLE>-STREAMING`.
    pub fn resolve_pipe(&self, pipe: &ObjectName) -> Result<&TableDef, CatalogError> {
        if let Some(p) = self.pipes.get(&pipe.key()) {
            return self.table(&p.table).ok_or_else(|| CatalogError::TableNotFound(p.table.to_string()));
        }
        let upper = pipe.name.to_uppercase();
        if let Some(base) = upper.strip_suffix(DEFAULT_PIPE_SUFFIX) {
            let table_name = ObjectName::new(&pipe.database, &pipe.schema, &pipe.name[..base.len()]);
            return self.table(&table_name).ok_or_else(|| CatalogError::TableNotFound(table_name.to_string()));
        }
        Err(CatalogError::PipeNotFound(pipe.to_string()))
    }
}
