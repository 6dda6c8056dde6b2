//! The smallest faithful part of Snowflake's SQL API (`POST /api/v2/statements`) that
//! PutSnowflake's verification reads: `DESCRIBE TABLE` (`DESC TABLE`) and
//! `SHOW TABLES [LIKE '…'] [IN SCHEMA db.schema]`, answered from the catalog with the
//! result-set shape of the SQL API (`resultSetMetaData.rowType`, `data` rows of strings, code
//! `090001`). A missing table is 422 with code `002003`; any other statement is 422 with a
//! syntax error code, saying what the stand-in answers. Same authentication as the REST API.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::Shared;
use crate::catalog::{ObjectName, TableDef};
use crate::channels::now_ms;
use crate::ddl::{normalize_ident, split_identifier};
use crate::error::ApiError;

#[derive(Deserialize)]
pub struct StatementRequest {
    statement: String,
    #[serde(default)]
    database: Option<String>,
    #[serde(default)]
    schema: Option<String>,
}

/// `POST /api/v2/statements`.
pub async fn statements(
    State(state): State<Shared>,
    headers: HeaderMap,
    Json(req): Json<StatementRequest>,
) -> Result<Json<Value>, ApiError> {
    state.auth.authenticate(&headers)?;
    let defaults = (req.database.as_deref().map(normalize_ident), req.schema.as_deref().map(normalize_ident));
    let catalog = state.catalog.read().unwrap();
    let (columns, rows) = match parse(&req.statement, &defaults)? {
        Statement::Describe(name) => {
            let table = catalog.table(&name).ok_or_else(|| not_found(&name))?;
            describe(table)
        }
        Statement::ShowTables { pattern, database, schema } => {
            let tables: Vec<&TableDef> = catalog
                .tables()
                .filter(|t| {
                    t.name.database.eq_ignore_ascii_case(&database) && t.name.schema.eq_ignore_ascii_case(&schema)
                })
                .filter(|t| pattern.as_deref().is_none_or(|p| like(&t.name.name, p)))
                .collect();
            show_tables(&tables)
        }
    };
    Ok(Json(result_set(&columns, rows)))
}

enum Statement {
    Describe(ObjectName),
    ShowTables { pattern: Option<String>, database: String, schema: String },
}

fn syntax(statement: &str) -> ApiError {
    ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "001003",
        format!("SQL compilation error: syntax error in '{statement}' (the stand-in's SQL API answers DESCRIBE TABLE and SHOW TABLES only)"),
    )
}

fn not_found(name: &ObjectName) -> ApiError {
    ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "002003",
        format!("SQL compilation error:\nTable '{name}' does not exist or not authorized."),
    )
}

/// Strips a leading keyword (case-insensitive, followed by a space or the end).
fn keyword<'a>(text: &'a str, word: &str) -> Option<&'a str> {
    let t = text.trim_start();
    let head = t.get(..word.len())?;
    let rest = &t[word.len()..];
    (head.eq_ignore_ascii_case(word) && (rest.is_empty() || rest.starts_with(char::is_whitespace))).then_some(rest)
}

/// `a`, `a.b` or `a.b.c` (normalised), and the rest.
fn dotted(text: &str) -> Result<(Vec<String>, &str), String> {
    let (first, mut rest) = split_identifier(text)?;
    let mut parts = vec![first];
    while let Some(after) = rest.strip_prefix('.') {
        let (next, r) = split_identifier(after)?;
        parts.push(next);
        rest = r;
    }
    Ok((parts, rest))
}

fn parse(statement: &str, defaults: &(Option<String>, Option<String>)) -> Result<Statement, ApiError> {
    let text = statement.trim().trim_end_matches(';');
    let bad = || syntax(text);
    if let Some(rest) = keyword(text, "DESCRIBE").or_else(|| keyword(text, "DESC")) {
        let rest = keyword(rest, "TABLE").ok_or_else(bad)?;
        let (parts, tail) = dotted(rest).map_err(|_| bad())?;
        if !tail.trim().is_empty() {
            return Err(bad());
        }
        let (db, sc) = defaults.clone();
        let name = match parts.as_slice() {
            [t] => ObjectName::new(&db.ok_or_else(bad)?, &sc.ok_or_else(bad)?, t),
            [s, t] => ObjectName::new(&db.ok_or_else(bad)?, s, t),
            [d, s, t] => ObjectName::new(d, s, t),
            _ => return Err(bad()),
        };
        return Ok(Statement::Describe(name));
    }
    let rest = keyword(text, "SHOW").and_then(|r| keyword(r, "TABLES")).ok_or_else(bad)?;
    let mut rest = rest.trim_start();
    let mut pattern = None;
    if let Some(r) = keyword(rest, "LIKE") {
        let r = r.trim_start().strip_prefix('\'').ok_or_else(bad)?;
        let (p, tail) = quoted_string(r).ok_or_else(bad)?;
        pattern = Some(p);
        rest = tail.trim_start();
    }
    let (mut database, mut schema) = defaults.clone();
    if let Some(r) = keyword(rest, "IN") {
        let r = keyword(r, "SCHEMA").ok_or_else(bad)?;
        let (parts, tail) = dotted(r).map_err(|_| bad())?;
        match parts.as_slice() {
            [s] => schema = Some(s.clone()),
            [d, s] => (database, schema) = (Some(d.clone()), Some(s.clone())),
            _ => return Err(bad()),
        }
        rest = tail.trim_start();
    }
    if !rest.is_empty() {
        return Err(bad());
    }
    Ok(Statement::ShowTables { pattern, database: database.ok_or_else(bad)?, schema: schema.ok_or_else(bad)? })
}

/// The rest of a single-quoted string (`''` is a quote) and what follows it.
fn quoted_string(text: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c == '\'' {
            if matches!(chars.peek(), Some((_, '\''))) {
                chars.next();
                out.push('\'');
                continue;
            }
            return Some((out, &text[i + 1..]));
        }
        out.push(c);
    }
    None
}

/// SQL LIKE, case-insensitive as SHOW's LIKE is: `%` any run, `_` one character, `\` escapes.
fn like(name: &str, pattern: &str) -> bool {
    #[derive(Clone, Copy, PartialEq)]
    enum P {
        Any,
        One,
        Lit(char),
    }
    let mut tokens = Vec::new();
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        tokens.push(match c {
            '%' => P::Any,
            '_' => P::One,
            '\\' => P::Lit(chars.next().unwrap_or('\\')),
            c => P::Lit(c),
        });
    }
    let name: Vec<char> = name.to_uppercase().chars().collect();
    fn go(n: &[char], p: &[P]) -> bool {
        match p.first() {
            None => n.is_empty(),
            Some(P::Any) => (0..=n.len()).any(|k| go(&n[k..], &p[1..])),
            Some(P::One) => !n.is_empty() && go(&n[1..], &p[1..]),
            Some(P::Lit(c)) => n.first().is_some_and(|x| x.to_uppercase().eq(c.to_uppercase())) && go(&n[1..], &p[1..]),
        }
    }
    go(&name, &tokens)
}

fn yn(b: bool) -> Value {
    Value::String(if b { "Y" } else { "N" }.into())
}

fn describe(table: &TableDef) -> (Vec<&'static str>, Vec<Vec<Value>>) {
    let columns = vec![
        "name",
        "type",
        "kind",
        "null?",
        "default",
        "primary key",
        "unique key",
        "check",
        "expression",
        "comment",
        "policy name",
        "privacy domain",
    ];
    let rows = table
        .columns
        .iter()
        .map(|c| {
            let mut row = vec![
                json!(c.name),
                json!(c.ty.to_string()),
                json!("COLUMN"),
                yn(c.nullable),
                Value::Null,
                yn(false),
                yn(false),
            ];
            row.extend([Value::Null, Value::Null, Value::Null, Value::Null, Value::Null]);
            row
        })
        .collect();
    (columns, rows)
}

fn show_tables(tables: &[&TableDef]) -> (Vec<&'static str>, Vec<Vec<Value>>) {
    let columns = vec![
        "created_on",
        "name",
        "database_name",
        "schema_name",
        "kind",
        "comment",
        "cluster_by",
        "rows",
        "bytes",
        "owner",
        "retention_time",
        "automatic_clustering",
        "change_tracking",
        "search_optimization",
        "search_optimization_progress",
        "search_optimization_bytes",
        "is_external",
        "enable_schema_evolution",
        "owner_role_type",
        "is_event",
        "budget",
        "is_hybrid",
        "is_iceberg",
        "is_dynamic",
        "is_immutable",
        "error_logging",
    ];
    let rows = tables
        .iter()
        .map(|t| {
            vec![
                Value::Null,
                json!(t.name.name),
                json!(t.name.database),
                json!(t.name.schema),
                json!("TABLE"),
                json!(""),
                json!(""),
                Value::Null,
                Value::Null,
                json!("STANDIN"),
                json!("1"),
                json!("OFF"),
                json!("OFF"),
                json!("OFF"),
                Value::Null,
                Value::Null,
                yn(false),
                yn(t.enable_schema_evolution),
                json!("ROLE"),
                yn(false),
                Value::Null,
                yn(false),
                yn(t.iceberg.is_some()),
                yn(false),
                yn(false),
                yn(t.error_logging),
            ]
        })
        .collect();
    (columns, rows)
}

/// The SQL API's answer for a statement that completed: every value as text (or null).
fn result_set(columns: &[&str], rows: Vec<Vec<Value>>) -> Value {
    let handle = uuid::Uuid::new_v4().to_string();
    let request = uuid::Uuid::new_v4().to_string();
    let row_type: Vec<Value> = columns
        .iter()
        .map(|c| json!({"name": c, "database": "", "schema": "", "table": "", "type": "text", "nullable": true, "length": 16777216, "byteLength": 16777216, "scale": null, "precision": null, "collation": null}))
        .collect();
    json!({
        "resultSetMetaData": {"numRows": rows.len(), "format": "jsonv2", "partitionInfo": [{"rowCount": rows.len()}], "rowType": row_type},
        "data": rows,
        "code": "090001",
        "statementStatusUrl": format!("/api/v2/statements/{handle}?requestId={request}"),
        "requestId": request,
        "sqlState": "00000",
        "statementHandle": handle,
        "message": "Statement executed successfully.",
        "createdOn": now_ms(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_follows_sql() {
        assert!(like("RAW_EVENTS", "RAW\\_EVENTS"));
        assert!(!like("RAWXEVENTS", "RAW\\_EVENTS"));
        assert!(like("RAWXEVENTS", "RAW_EVENTS"));
        assert!(like("events", "EVE%"));
        assert!(!like("EVENTS2", "EVENTS"));
    }

    #[test]
    fn statements_are_parsed_with_defaults() {
        let d = (Some("DB".to_owned()), Some("SC".to_owned()));
        assert!(
            matches!(parse("desc table t", &d), Ok(Statement::Describe(n)) if n == ObjectName::new("DB", "SC", "T"))
        );
        assert!(
            matches!(parse("DESCRIBE TABLE x.\"y\".z;", &d), Ok(Statement::Describe(n)) if n == ObjectName::new("X", "y", "Z"))
        );
        match parse("SHOW TABLES LIKE 'it''s' IN SCHEMA a.b", &d) {
            Ok(Statement::ShowTables { pattern, database, schema }) => {
                assert_eq!((pattern.as_deref(), database.as_str(), schema.as_str()), (Some("it's"), "A", "B"))
            }
            _ => panic!("not parsed"),
        }
        assert!(parse("SELECT 1", &d).is_err());
        assert!(parse("SHOW TABLES LIKE 'x' garbage", &d).is_err());
    }
}
