//! DuckDB storage. One in-memory DuckDB connection to which every Snowflake
//! database is ATTACHed under its own name (a file `<state-dir>/db_<NAME>.duckdb`,
//! or in memory without a state dir), so `DB.PUBLIC.T` works in SQL as written.
//! Rows arrive as text cells, go through a VARCHAR staging table (Appender) and
//! are cast into the target table in one transaction with their error rows.
//! A small key/value table (`standin_meta`) persists the catalog and channels.

use duckdb::{appender_params_from_iter, Connection};
use serde_json::Value;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::catalog::{quote, ColumnDef, ObjectName, TableDef};

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("duckdb: {0}")]
    Duck(#[from] duckdb::Error),
    #[error("{0}")]
    Invalid(String),
}

pub type Result<T> = std::result::Result<T, StorageError>;

/// A row that failed conversion, written to the table's error table.
#[derive(Debug, Clone)]
pub struct ErrorRecord {
    pub pipe: String,
    pub channel: String,
    pub offset_token: Option<String>,
    pub row_index: i64,
    pub error_code: String,
    pub message: String,
    pub column: Option<String>,
    pub record: String,
}

/// Result of a read-only query: column names and one JSON object per row.
#[derive(Debug, Clone, serde::Serialize)]
pub struct QueryResult {
    pub columns: Vec<String>,
    pub rows: Vec<Value>,
}

pub struct Store {
    conn: Mutex<Connection>,
    state_dir: Option<PathBuf>,
    attached: Mutex<HashSet<String>>,
}

const ERROR_TABLE_COLUMNS: &str =
    "ERROR_TIMESTAMP TIMESTAMP, PIPE_NAME VARCHAR, CHANNEL_NAME VARCHAR, OFFSET_TOKEN VARCHAR, \
     ROW_INDEX BIGINT, ERROR_CODE VARCHAR, ERROR_MESSAGE VARCHAR, COLUMN_NAME VARCHAR, RECORD_CONTENT VARCHAR";

impl Store {
    /// Opens the store; with a state dir the databases live in files there.
    pub fn open(state_dir: Option<&Path>) -> Result<Store> {
        let conn = Connection::open_in_memory()?;
        let meta = match state_dir {
            Some(dir) => format!("'{}'", dir.join("standin_meta.duckdb").display().to_string().replace('\'', "''")),
            None => "':memory:'".to_string(),
        };
        conn.execute_batch(&format!(
            "ATTACH {meta} AS standin_meta; \
             CREATE TABLE IF NOT EXISTS standin_meta.main.kv (kind VARCHAR, key VARCHAR, value VARCHAR, PRIMARY KEY (kind, key));"
        ))?;
        Ok(Store {
            conn: Mutex::new(conn),
            state_dir: state_dir.map(Path::to_path_buf),
            attached: Mutex::new(HashSet::new()),
        })
    }

    /// Attaches the database (once) and creates the schema if needed.
    pub fn ensure_schema(&self, conn: &Connection, database: &str, schema: &str) -> Result<()> {
        let mut attached = self.attached.lock().unwrap();
        if !attached.contains(&database.to_uppercase()) {
            let target = match &self.state_dir {
                Some(dir) => {
                    let safe: String =
                        database.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
                    format!("'{}'", dir.join(format!("db_{safe}.duckdb")).display().to_string().replace('\'', "''"))
                }
                None => "':memory:'".to_string(),
            };
            conn.execute_batch(&format!("ATTACH IF NOT EXISTS {target} AS {}", quote(database)))?;
            attached.insert(database.to_uppercase());
        }
        conn.execute_batch(&format!("CREATE SCHEMA IF NOT EXISTS {}.{}", quote(database), quote(schema)))?;
        Ok(())
    }

    fn column_sql(c: &ColumnDef) -> String {
        format!("{} {}{}", quote(&c.name), c.ty.duckdb_type(), if c.nullable { "" } else { " NOT NULL" })
    }

    /// Creates (or replaces) a table, and its error table when error logging is on.
    pub fn create_table(&self, table: &TableDef, replace: bool) -> Result<()> {
        let conn = self.conn.lock().unwrap();
        self.ensure_schema(&conn, &table.name.database, &table.name.schema)?;
        let cols: Vec<String> = table.columns.iter().map(Self::column_sql).collect();
        let verb = if replace { "CREATE OR REPLACE TABLE" } else { "CREATE TABLE" };
        conn.execute_batch(&format!("{verb} {} ({})", table.name.quoted(), cols.join(", ")))?;
        if table.error_logging {
            Self::create_error_table(&conn, &table.name)?;
        }
        Ok(())
    }

    fn create_error_table(conn: &Connection, table: &ObjectName) -> Result<()> {
        conn.execute_batch(&format!(
            "CREATE TABLE IF NOT EXISTS {} ({ERROR_TABLE_COLUMNS})",
            table.error_table().quoted()
        ))?;
        Ok(())
    }

    pub fn enable_error_table(&self, table: &ObjectName) -> Result<()> {
        Self::create_error_table(&self.conn.lock().unwrap(), table)
    }

    pub fn drop_table(&self, table: &ObjectName) -> Result<()> {
        let conn = self.conn.lock().unwrap();
        conn.execute_batch(&format!(
            "DROP TABLE IF EXISTS {}; DROP TABLE IF EXISTS {};",
            table.quoted(),
            table.error_table().quoted()
        ))?;
        Ok(())
    }

    /// Schema evolution: adds a nullable column.
    pub fn add_column(&self, table: &ObjectName, column: &ColumnDef) -> Result<()> {
        let sql = format!("ALTER TABLE {} ADD COLUMN IF NOT EXISTS {}", table.quoted(), Self::column_sql(column));
        self.conn.lock().unwrap().execute_batch(&sql)?;
        Ok(())
    }

    /// Schema evolution: drops NOT NULL from a column.
    pub fn drop_not_null(&self, table: &ObjectName, column: &str) -> Result<()> {
        let sql = format!("ALTER TABLE {} ALTER COLUMN {} DROP NOT NULL", table.quoted(), quote(column));
        self.conn.lock().unwrap().execute_batch(&sql)?;
        Ok(())
    }

    /// Inserts converted rows (one text cell per column of `columns`, `None` = NULL)
    /// and error records. Rows are appended to a VARCHAR staging table in the
    /// in-memory catalog first; the cast into the table and the error rows are
    /// then written in one transaction (DuckDB lets a transaction write to one
    /// attached database only, and reading the stage is fine).
    pub fn insert(&self, table: &TableDef, rows: &[Vec<Option<String>>], errors: &[ErrorRecord]) -> Result<()> {
        let conn = self.conn.lock().unwrap();
        let stage = format!("_stage_{}", table.columns.len());
        if !rows.is_empty() {
            Self::stage_rows(&conn, &stage, table.columns.len(), rows)?;
        }
        conn.execute_batch("BEGIN TRANSACTION")?;
        let result = Self::insert_in_tx(&conn, table, &stage, !rows.is_empty(), errors);
        match &result {
            Ok(()) => conn.execute_batch("COMMIT")?,
            Err(_) => {
                let _ = conn.execute_batch("ROLLBACK");
            }
        }
        if !rows.is_empty() {
            conn.execute_batch(&format!("DELETE FROM memory.main.{stage}"))?;
        }
        result
    }

    fn stage_rows(conn: &Connection, stage: &str, n: usize, rows: &[Vec<Option<String>>]) -> Result<()> {
        let stage_cols: Vec<String> = (0..n).map(|i| format!("c{i} VARCHAR")).collect();
        conn.execute_batch(&format!(
            "CREATE TABLE IF NOT EXISTS memory.main.{stage} ({}); DELETE FROM memory.main.{stage};",
            stage_cols.join(", ")
        ))?;
        let mut app = conn.appender(stage)?;
        for row in rows {
            app.append_row(appender_params_from_iter(row.iter()))?;
        }
        app.flush()?;
        Ok(())
    }

    fn insert_in_tx(
        conn: &Connection,
        table: &TableDef,
        stage: &str,
        has_rows: bool,
        errors: &[ErrorRecord],
    ) -> Result<()> {
        if has_rows {
            let names: Vec<String> = table.columns.iter().map(|c| quote(&c.name)).collect();
            let exprs: Vec<String> =
                table.columns.iter().enumerate().map(|(i, c)| c.ty.staging_expr(&format!("c{i}"))).collect();
            conn.execute_batch(&format!(
                "INSERT INTO {} ({}) SELECT {} FROM memory.main.{stage}",
                table.name.quoted(),
                names.join(", "),
                exprs.join(", ")
            ))?;
        }
        if table.error_logging && !errors.is_empty() {
            let mut stmt = conn.prepare(&format!(
                "INSERT INTO {} VALUES (make_timestamp(?), ?, ?, ?, ?, ?, ?, ?, ?)",
                table.name.error_table().quoted()
            ))?;
            let now_us = crate::channels::now_ms() * 1000;
            for e in errors {
                stmt.execute(duckdb::params![
                    now_us,
                    e.pipe,
                    e.channel,
                    e.offset_token,
                    e.row_index,
                    e.error_code,
                    e.message,
                    e.column,
                    e.record
                ])?;
            }
        }
        Ok(())
    }

    /// Runs a read-only query (SELECT / WITH / FROM / VALUES / DESCRIBE / SHOW / SUMMARIZE)
    /// and returns its rows as JSON objects (DuckDB's own `to_json`).
    pub fn query(&self, sql: &str) -> Result<QueryResult> {
        let sql = sql.trim().trim_end_matches(';');
        let first = sql.split_whitespace().next().unwrap_or("").to_uppercase();
        let inner = match first.as_str() {
            "SELECT" | "WITH" | "FROM" | "VALUES" | "(" => sql.to_string(),
            "DESCRIBE" | "SHOW" | "SUMMARIZE" => format!("SELECT * FROM ({sql})"),
            _ => {
                return Err(StorageError::Invalid(
                    "only read-only queries (SELECT, WITH, FROM, VALUES, DESCRIBE, SHOW, SUMMARIZE) are accepted"
                        .into(),
                ))
            }
        };
        let conn = self.conn.lock().unwrap();
        let columns = {
            let mut stmt = conn.prepare(&format!("SELECT * FROM ({inner}) AS _q LIMIT 0"))?;
            let _ = stmt.query([])?;
            stmt.column_names()
        };
        let mut stmt = conn.prepare(&format!("SELECT CAST(to_json(_q) AS VARCHAR) FROM ({inner}) AS _q"))?;
        let rows = stmt
            .query_map([], |r| r.get::<_, String>(0))?
            .map(|r| {
                r.map_err(StorageError::from)
                    .and_then(|s| serde_json::from_str(&s).map_err(|e| StorageError::Invalid(e.to_string())))
            })
            .collect::<Result<Vec<Value>>>()?;
        Ok(QueryResult { columns, rows })
    }

    /// Stores a metadata document (catalog, users, channels) under `kind`/`key`.
    pub fn save_meta(&self, kind: &str, key: &str, value: &str) -> Result<()> {
        self.conn.lock().unwrap().execute(
            "INSERT OR REPLACE INTO standin_meta.main.kv VALUES (?, ?, ?)",
            duckdb::params![kind, key, value],
        )?;
        Ok(())
    }

    /// Stores several documents of one `kind` (distinct keys) in one statement.
    pub fn save_meta_many(&self, kind: &str, docs: &[(String, String)]) -> Result<()> {
        let conn = self.conn.lock().unwrap();
        for chunk in docs.chunks(256) {
            let values = vec!["(?, ?, ?)"; chunk.len()].join(", ");
            let params: Vec<&str> = chunk.iter().flat_map(|(k, v)| [kind, k.as_str(), v.as_str()]).collect();
            conn.execute(
                &format!("INSERT OR REPLACE INTO standin_meta.main.kv VALUES {values}"),
                duckdb::params_from_iter(params),
            )?;
        }
        Ok(())
    }

    /// Whether the store lives in a state dir (survives a restart), or in memory.
    pub fn persistent(&self) -> bool {
        self.state_dir.is_some()
    }

    pub fn delete_meta(&self, kind: &str, key: &str) -> Result<()> {
        self.conn
            .lock()
            .unwrap()
            .execute("DELETE FROM standin_meta.main.kv WHERE kind = ? AND key = ?", duckdb::params![kind, key])?;
        Ok(())
    }

    pub fn load_meta(&self, kind: &str) -> Result<Vec<(String, String)>> {
        let conn = self.conn.lock().unwrap();
        let mut stmt = conn.prepare("SELECT key, value FROM standin_meta.main.kv WHERE kind = ? ORDER BY key")?;
        let rows =
            stmt.query_map([kind], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(rows)
    }

    /// Attaches a database found in persisted metadata (used at restart).
    pub fn attach_existing(&self, database: &str, schema: &str) -> Result<()> {
        let conn = self.conn.lock().unwrap();
        self.ensure_schema(&conn, database, schema)
    }

    /// Flushes DuckDB's write-ahead log into the database files.
    pub fn checkpoint(&self) -> Result<()> {
        let conn = self.conn.lock().unwrap();
        let dbs: Vec<String> = self.attached.lock().unwrap().iter().cloned().collect();
        for db in dbs {
            conn.execute_batch(&format!("CHECKPOINT {}", quote(&db)))?;
        }
        conn.execute_batch("CHECKPOINT standin_meta")?;
        Ok(())
    }
}
