//! The smallest faithful part of Snowflake's SQL API (`POST /api/v2/statements`) that
//! PutSnowflake's verification and `kinesnow-ctl audit` read: `DESCRIBE TABLE` (`DESC TABLE`) and
//! `SHOW TABLES [LIKE '…'] [IN SCHEMA db.schema]`, answered from the catalog, and a single-table
//! `SELECT … FROM db.schema.table [WHERE …] [ORDER BY …] [LIMIT n]` run in DuckDB, with
//! Snowflake's semi-structured paths (`col:field.sub` and `::string`/`::number`/`::variant` casts)
//! translated to DuckDB's JSON functions. Results have the SQL API's shape
//! (`resultSetMetaData.rowType` and `partitionInfo`, `data` rows of strings, code `090001`); a
//! SELECT's result comes in partitions of [`PARTITION_ROWS`] rows, the first in the answer and the
//! others at `GET /api/v2/statements/<handle>?partition=<n>`, gzip-compressed (`Content-Encoding:
//! gzip`) when the request accepts it, as Snowflake sends them. A missing table is 422 with code
//! `002003`. Besides, the set-up statements of `parameter-contexts/template/snowflake-setup.sql`:
//! the account-level ones (`account`: roles, users and their keys, databases, schemas, warehouses,
//! grants) and `CREATE [OR REPLACE] [ICEBERG] TABLE` into an existing schema (the catalog's DDL,
//! `ddl`), each answered with a one-row `status`. Any other statement is 422 with a syntax error
//! code, saying what the stand-in answers. Same authentication as the REST API.

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::Shared;
use crate::account::{self, AccountError, Object};
use crate::auth::Principal;
use crate::catalog::{quote, ObjectName, TableDef};
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

/// Rows per partition of a SELECT's result (Snowflake sizes its partitions itself; a small fixed
/// size lets tests see several).
pub const PARTITION_ROWS: usize = 100;
/// SELECT results kept for partition reads, newest last.
const KEPT_RESULTS: usize = 16;

/// A SELECT's result as later partition reads need it: the first answer and every partition.
#[derive(Clone)]
pub struct StoredResult {
    first: Value,
    partitions: Vec<Vec<Vec<Value>>>,
}

/// `POST /api/v2/statements`.
pub async fn statements(
    State(state): State<Shared>,
    headers: HeaderMap,
    Json(req): Json<StatementRequest>,
) -> Result<Json<Value>, ApiError> {
    let (principal, _) = state.auth.authenticate(&headers)?;
    let defaults = (req.database.as_deref().map(normalize_ident), req.schema.as_deref().map(normalize_ident));
    if keyword(&req.statement, "SELECT").is_some() {
        return select(&state, &req.statement, &defaults).map(Json);
    }
    if let Some(statement) = account::parse(&req.statement, defaults.0.as_deref()).map_err(account_error)? {
        return set_up(&state, &principal, &statement).map(Json);
    }
    if let Some(status) = create_table(&state, &req.statement, &defaults)? {
        return Ok(Json(result_set(&["status"], vec![vec![json!(status)]])));
    }
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

/// Runs an account-level statement; a new public key is registered for the caller's account.
fn set_up(state: &Shared, principal: &Principal, statement: &account::Statement) -> Result<Value, ApiError> {
    let status = {
        let catalog = state.catalog.read().unwrap();
        let catalog_has = |o: &Object| catalog_has(&catalog, o);
        state.account.write().unwrap().apply(statement, &catalog_has).map_err(account_error)?
    };
    if let account::Statement::SetPublicKey { user, key_body } = statement {
        let pem = format!("-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n", key_body.trim());
        let caller_account = principal.account_user.split('.').next().unwrap_or_default();
        state.auth.register(caller_account, user, &pem).map_err(|e| {
            ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "000000", // the stand-in does not know Snowflake's code for it
                format!("SQL execution error: invalid RSA_PUBLIC_KEY for user {user}: {e}"),
            )
        })?;
    }
    Ok(result_set(&["status"], vec![vec![json!(status)]]))
}

fn catalog_has(catalog: &crate::catalog::Catalog, object: &Object) -> bool {
    catalog.tables().any(|t| match object {
        Object::Database(d) => t.name.database.eq_ignore_ascii_case(d),
        Object::Schema(d, s) => t.name.database.eq_ignore_ascii_case(d) && t.name.schema.eq_ignore_ascii_case(s),
        _ => false,
    })
}

/// `CREATE [OR REPLACE] [ICEBERG] TABLE` through the catalog's DDL, into a schema that exists.
fn create_table(
    state: &Shared,
    statement: &str,
    defaults: &(Option<String>, Option<String>),
) -> Result<Option<String>, ApiError> {
    let Some(rest) = keyword(statement, "CREATE") else { return Ok(None) };
    let rest = keyword(rest, "OR").and_then(|r| keyword(r, "REPLACE")).unwrap_or(rest);
    let rest = keyword(rest, "ICEBERG").unwrap_or(rest);
    if keyword(rest, "TABLE").is_none() {
        return Ok(None);
    }
    let compile =
        |e: String| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "001003", format!("SQL compilation error: {e}"));
    let crate::ddl::Statement::CreateTable { table, .. } = crate::ddl::parse(statement, defaults).map_err(compile)?
    else {
        return Ok(None);
    };
    let schema = Object::Schema(table.name.database.clone(), table.name.schema.clone());
    let exists = {
        let catalog = state.catalog.read().unwrap();
        state.account.read().unwrap().exists(&schema, &|o| catalog_has(&catalog, o))
    };
    if !exists {
        return Err(account_error(AccountError::Missing(schema)));
    }
    state.execute_ddl(statement, defaults).map(Some).map_err(|e| compile(e.to_string()))
}

fn account_error(e: AccountError) -> ApiError {
    let code = match e {
        AccountError::Syntax(_) => "001003",
        AccountError::Missing(_) => "002003",
        AccountError::Exists(_) => "002002",
    };
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, code, e.to_string())
}

enum Statement {
    Describe(ObjectName),
    ShowTables { pattern: Option<String>, database: String, schema: String },
}

fn syntax(statement: &str) -> ApiError {
    ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "001003",
        format!("SQL compilation error: syntax error in '{statement}' (the stand-in's SQL API answers DESCRIBE TABLE, SHOW TABLES, a SELECT from one table and the set-up script's statements only)"),
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

/// Runs a SELECT from one table; keeps its partitions for later reads.
fn select(state: &Shared, statement: &str, defaults: &(Option<String>, Option<String>)) -> Result<Value, ApiError> {
    let text = statement.trim().trim_end_matches(';');
    let (sql, table) = translate(text, defaults).map_err(|why| {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "001003", format!("SQL compilation error: {why} in '{text}'"))
    })?;
    let known = state.catalog.read().unwrap().table(&table).map(|t| t.name.quoted());
    let quoted = known.ok_or_else(|| not_found(&table))?;
    let result = state.store.query(&sql.replace(TABLE_MARK, &quoted)).map_err(|e| {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "001003", format!("SQL compilation error: {e}"))
    })?;
    let columns: Vec<String> = result.columns.iter().map(|c| c.to_uppercase()).collect();
    let kinds: Vec<&str> = result
        .columns
        .iter()
        .map(|c| match result.rows.first().and_then(|r| r.get(c)) {
            Some(Value::Number(_)) => "fixed",
            _ => "text",
        })
        .collect();
    let rows: Vec<Vec<Value>> =
        result.rows.iter().map(|r| result.columns.iter().map(|c| text_value(r.get(c))).collect()).collect();
    let partitions: Vec<Vec<Vec<Value>>> =
        if rows.is_empty() { vec![vec![]] } else { rows.chunks(PARTITION_ROWS).map(<[_]>::to_vec).collect() };
    let names: Vec<&str> = columns.iter().map(String::as_str).collect();
    let mut first = result_set(&names, partitions[0].clone());
    for (column, kind) in first["resultSetMetaData"]["rowType"].as_array_mut().into_iter().flatten().zip(kinds) {
        column["type"] = json!(kind);
    }
    first["resultSetMetaData"]["numRows"] = json!(rows.len());
    first["resultSetMetaData"]["partitionInfo"] =
        Value::Array(partitions.iter().map(|p| json!({"rowCount": p.len(), "uncompressedSize": Value::Array(p.iter().map(|r| Value::Array(r.clone())).collect()).to_string().len()})).collect());
    let handle = first["statementHandle"].as_str().unwrap_or_default().to_owned();
    let mut kept = state.sql_results.lock().unwrap();
    kept.push_back((handle, StoredResult { first: first.clone(), partitions }));
    while kept.len() > KEPT_RESULTS {
        kept.pop_front();
    }
    Ok(first)
}

#[derive(Deserialize)]
pub struct PartitionQuery {
    #[serde(default)]
    partition: Option<usize>,
}

/// `GET /api/v2/statements/<handle>[?partition=<n>]`: the statement's answer again (no
/// partition), or one partition's rows (`{"data": …}`, as Snowflake sends partitions after the
/// first).
pub async fn statement_result(
    State(state): State<Shared>,
    headers: HeaderMap,
    Path(handle): Path<String>,
    Query(query): Query<PartitionQuery>,
) -> Result<Response, ApiError> {
    state.auth.authenticate(&headers)?;
    let kept = state.sql_results.lock().unwrap();
    let stored = kept.iter().find(|(h, _)| *h == handle).map(|(_, r)| r.clone()).ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "333333",
            format!("Statement {handle} not found (the stand-in keeps the last {KEPT_RESULTS} results)"),
        )
    })?;
    match query.partition {
        None => Ok(Json(stored.first).into_response()),
        Some(n) => match stored.partitions.get(n) {
            Some(rows) => Ok(partition_body(&headers, &json!({ "data": rows }))),
            None => Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "000002",
                format!("partition {n} out of range: the result has {} partitions", stored.partitions.len()),
            )),
        },
    }
}

/// A partition's body: gzip-compressed when the request accepts gzip (as Snowflake sends partitions).
fn partition_body(headers: &HeaderMap, body: &Value) -> Response {
    use std::io::Write;
    let accepts_gzip = headers
        .get(header::ACCEPT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|e| e.trim().starts_with("gzip")));
    if !accepts_gzip {
        return Json(body.clone()).into_response();
    }
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let compressed = gz.write_all(body.to_string().as_bytes()).and_then(|_| gz.finish());
    match compressed {
        Ok(bytes) => {
            ([(header::CONTENT_TYPE, "application/json"), (header::CONTENT_ENCODING, "gzip")], bytes).into_response()
        }
        Err(_) => Json(body.clone()).into_response(),
    }
}

/// A value as the SQL API sends it: text, or null.
fn text_value(value: Option<&Value>) -> Value {
    match value {
        None | Some(Value::Null) => Value::Null,
        Some(Value::String(s)) => Value::String(s.clone()),
        Some(other) => Value::String(other.to_string()),
    }
}

/// Where the translated statement names the table (replaced by its quoted name once known).
const TABLE_MARK: &str = "\u{0}TABLE\u{0}";

/// Snowflake's `SELECT … FROM <table> …` in DuckDB's dialect, and the table it reads. Refuses
/// more than one statement, joins, subqueries and anything but a SELECT.
fn translate(text: &str, defaults: &(Option<String>, Option<String>)) -> Result<(String, ObjectName), String> {
    if text.contains(';') {
        return Err("one statement at a time".into());
    }
    let body = keyword(text, "SELECT").ok_or("not a SELECT")?;
    let lower = body.to_lowercase();
    for word in [" join ", "(select", "( select", " union ", " into "] {
        if lower.contains(word) {
            return Err(format!("'{}' is not supported here", word.trim()));
        }
    }
    let from = find_keyword(body, "FROM").ok_or("no FROM")?;
    let (parts, tail) = dotted(&body[from + 4..]).map_err(|e| format!("table name: {e}"))?;
    let (db, sc) = defaults.clone();
    let table = match parts.as_slice() {
        [t] => ObjectName::new(&db.ok_or("no database")?, &sc.ok_or("no schema")?, t),
        [s, t] => ObjectName::new(&db.ok_or("no database")?, s, t),
        [d, s, t] => ObjectName::new(d, s, t),
        _ => return Err("a table name has at most three parts".into()),
    };
    let sql = format!("SELECT {} FROM {TABLE_MARK}{}", paths(&body[..from])?.trim(), paths(tail)?);
    Ok((sql, table))
}

/// Byte offset of `word` as a whole keyword outside string literals.
fn find_keyword(text: &str, word: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut in_string = false;
    for (i, c) in text.char_indices() {
        if c == '\'' {
            in_string = !in_string;
        }
        if in_string || !text[i..].get(..word.len()).is_some_and(|w| w.eq_ignore_ascii_case(word)) {
            continue;
        }
        let before = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        let after = bytes.get(i + word.len()).is_none_or(|b| !(b.is_ascii_alphanumeric() || *b == b'_'));
        if before && after {
            return Some(i);
        }
    }
    None
}

/// Rewrites Snowflake's `col:path[::type]` into DuckDB's JSON functions, leaving string literals
/// and everything else as written.
fn paths(text: &str) -> Result<String, String> {
    let chars: Vec<char> = text.chars().collect();
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$';
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            let start = i;
            i += 1;
            while i < chars.len() {
                if chars[i] == '\'' {
                    if chars.get(i + 1) == Some(&'\'') {
                        i += 2;
                        continue;
                    }
                    break;
                }
                i += 1;
            }
            i += 1;
            out.extend(&chars[start..i.min(chars.len())]);
            continue;
        }
        if word(c) && (i == 0 || !word(chars[i - 1])) {
            let start = i;
            while i < chars.len() && word(chars[i]) {
                i += 1;
            }
            let ident: String = chars[start..i].iter().collect();
            if chars.get(i) == Some(&':') && chars.get(i + 1) != Some(&':') {
                i += 1;
                let path_start = i;
                while i < chars.len() && (word(chars[i]) || chars[i] == '.') {
                    i += 1;
                }
                let path: String = chars[path_start..i].iter().collect();
                if path.is_empty() {
                    return Err(format!("a path after '{ident}:'"));
                }
                let column = quote(&normalize_ident(&ident));
                let json_path = format!("'$.{}'", path.replace('\'', "''"));
                let mut cast = None;
                if chars.get(i) == Some(&':') && chars.get(i + 1) == Some(&':') {
                    i += 2;
                    let type_start = i;
                    while i < chars.len() && word(chars[i]) {
                        i += 1;
                    }
                    cast = Some(chars[type_start..i].iter().collect::<String>().to_uppercase());
                }
                out.push_str(&match cast.as_deref() {
                    None | Some("VARIANT") => format!("json_extract({column}, {json_path})"),
                    Some("STRING" | "VARCHAR" | "TEXT") => format!("json_extract_string({column}, {json_path})"),
                    Some("NUMBER" | "INT" | "INTEGER" | "BIGINT") => {
                        format!("CAST(json_extract_string({column}, {json_path}) AS DECIMAL(38,0))")
                    }
                    Some(other) => return Err(format!("cast to {other} is not supported here")),
                });
                continue;
            }
            out.push_str(&ident);
            continue;
        }
        out.push(c);
        i += 1;
    }
    Ok(out)
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
    }

    #[test]
    fn selects_read_semi_structured_paths_in_duckdb() {
        let d = (Some("DB".to_owned()), Some("SC".to_owned()));
        let (sql, table) = translate(
            "SELECT kinesisMetadata:shardId::string AS shard_id FROM db.public.events \
             WHERE kinesisMetadata:approximateArrival::number >= 5 AND kinesisMetadata:stream::string = 'a:b::c' ORDER BY shard_id",
            &d,
        )
        .unwrap();
        assert_eq!(table, ObjectName::new("DB", "PUBLIC", "EVENTS"));
        assert_eq!(
            sql,
            format!(
                "SELECT json_extract_string(\"KINESISMETADATA\", '$.shardId') AS shard_id FROM {TABLE_MARK} \
                 WHERE CAST(json_extract_string(\"KINESISMETADATA\", '$.approximateArrival') AS DECIMAL(38,0)) >= 5 \
                 AND json_extract_string(\"KINESISMETADATA\", '$.stream') = 'a:b::c' ORDER BY shard_id"
            )
        );
        assert!(translate("SELECT 1 FROM t; DROP TABLE t", &d).is_err());
        assert!(translate("SELECT * FROM a JOIN b ON a.x = b.x", &d).is_err());
        assert!(translate("SELECT c:x::date FROM t", &d).is_err());
        assert!(parse("SHOW TABLES LIKE 'x' garbage", &d).is_err());
    }
}
