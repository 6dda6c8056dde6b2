//! The stand-in's own admin API (no auth, loopback only), used by tests and the
//! demo: users, DDL and tables, read-only SQL, faults, settings, channel and
//! request inspection. Errors are `{"code","message"}` like the Snowflake routes.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::HashMap;

use super::Shared;
use crate::catalog::{ObjectName, PipeDef};
use crate::ddl::normalize_ident;
use crate::error::ApiError;
use crate::faults::FaultSpec;
use crate::state::{PipeSpec, StateError, TableSpec, UserSpec};

pub fn router() -> Router<Shared> {
    Router::new()
        .route("/admin/health", get(|| async { Json(json!({"ok": true})) }))
        .route("/admin/users", post(add_user))
        .route("/admin/managed-tokens", axum::routing::put(set_managed_tokens))
        .route("/admin/sql", post(run_ddl))
        .route("/admin/tables", post(add_table).get(list_tables))
        .route("/admin/pipes", post(add_pipe))
        .route("/admin/query", post(query))
        .route("/admin/faults", post(add_fault).get(list_faults).delete(clear_faults))
        .route("/admin/faults/{id}", delete(remove_fault))
        .route("/admin/settings", get(get_settings).post(set_settings))
        .route("/admin/channels", get(list_channels))
        .route("/admin/commit-now", post(commit_now))
        .route("/admin/requests", get(list_requests).delete(clear_requests))
        .route("/admin/checkpoint", post(checkpoint))
        .route("/admin/bench-counts", get(bench_counts))
        .route("/admin/bench-commits", get(bench_commits))
}

impl From<StateError> for ApiError {
    fn from(e: StateError) -> Self {
        match e {
            StateError::Storage(s) => ApiError::internal(s.to_string()),
            other => ApiError::new(StatusCode::BAD_REQUEST, "ERR_ADMIN", other.to_string()),
        }
    }
}

async fn add_user(State(state): State<Shared>, Json(spec): Json<UserSpec>) -> Result<Json<Value>, ApiError> {
    let fp = state.register_user(&spec)?;
    Ok(Json(json!({ "account": spec.account.to_uppercase(), "user": spec.user.to_uppercase(), "fingerprint": fp })))
}

#[derive(Deserialize)]
struct ManagedTokens {
    tokens: Vec<crate::auth::ManagedTokenSpec>,
}

/// `PUT /admin/managed-tokens`: exactly these managed tokens are valid from now on; earlier ones expire.
async fn set_managed_tokens(
    State(state): State<Shared>,
    Json(body): Json<ManagedTokens>,
) -> Result<Json<Value>, ApiError> {
    state.auth.set_managed_tokens(&body.tokens)?;
    let labels: Vec<&str> = body.tokens.iter().map(|t| t.label.as_str()).collect();
    Ok(Json(json!({ "valid": labels })))
}

#[derive(Deserialize)]
struct SqlRequest {
    /// One statement or a list.
    sql: Value,
    #[serde(default)]
    database: Option<String>,
    #[serde(default)]
    schema: Option<String>,
}

/// `POST /admin/sql`: runs DDL statements in order.
async fn run_ddl(State(state): State<Shared>, Json(req): Json<SqlRequest>) -> Result<Json<Value>, ApiError> {
    let statements: Vec<String> = match req.sql {
        Value::String(s) => vec![s],
        Value::Array(a) => a.into_iter().filter_map(|v| v.as_str().map(str::to_string)).collect(),
        _ => return Err(ApiError::bad_request("sql must be a string or a list of strings")),
    };
    let defaults = (req.database.as_deref().map(normalize_ident), req.schema.as_deref().map(normalize_ident));
    let st = state.clone();
    let results = tokio::task::spawn_blocking(move || {
        statements.iter().map(|s| st.execute_ddl(s, &defaults)).collect::<Result<Vec<_>, _>>()
    })
    .await
    .map_err(|e| ApiError::internal(e.to_string()))??;
    Ok(Json(json!({ "results": results })))
}

async fn add_table(State(state): State<Shared>, Json(spec): Json<TableSpec>) -> Result<Json<Value>, ApiError> {
    let def = spec.to_def().map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "ERR_ADMIN", e))?;
    let exists = state.catalog.read().unwrap().table(&def.name).is_some();
    if exists && !spec.or_replace {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "ERR_ADMIN",
            format!("Table {} already exists (set or_replace)", def.name),
        ));
    }
    state.create_table(def.clone(), spec.or_replace)?;
    Ok(Json(describe(&def)))
}

fn describe(t: &crate::catalog::TableDef) -> Value {
    json!({
        "database": t.name.database, "schema": t.name.schema, "name": t.name.name,
        "columns": t.columns.iter().map(|c| json!({"name": c.name, "type": c.ty.to_string(), "nullable": c.nullable})).collect::<Vec<_>>(),
        "enable_schema_evolution": t.enable_schema_evolution,
        "error_logging": t.error_logging,
        "iceberg": t.iceberg.map(|v| match v { crate::schema::IcebergVersion::V2 => "v2", crate::schema::IcebergVersion::V3 => "v3" }),
        "error_table": t.name.error_table().to_string(),
    })
}

async fn list_tables(State(state): State<Shared>) -> Json<Value> {
    let cat = state.catalog.read().unwrap();
    Json(json!({
        "tables": cat.tables().map(describe).collect::<Vec<_>>(),
        "pipes": cat.pipes().map(|p| json!({"name": p.name.to_string(), "table": p.table.to_string()})).collect::<Vec<_>>(),
    }))
}

async fn add_pipe(State(state): State<Shared>, Json(spec): Json<PipeSpec>) -> Result<Json<Value>, ApiError> {
    let db = normalize_ident(&spec.database);
    let sc = normalize_ident(&spec.schema);
    let pipe = PipeDef {
        name: ObjectName::new(&db, &sc, &normalize_ident(&spec.name)),
        table: ObjectName::new(&db, &sc, &normalize_ident(&spec.table)),
    };
    state.create_pipe(pipe.clone())?;
    Ok(Json(json!({"name": pipe.name.to_string(), "table": pipe.table.to_string()})))
}

#[derive(Deserialize)]
struct QueryRequest {
    sql: String,
}

/// Replaces `ERROR_TABLE(db.schema.t)` with the DuckDB name of t's error table.
fn rewrite_error_table(sql: &str) -> String {
    let mut out = String::new();
    let mut rest = sql;
    while let Some(i) = rest.to_uppercase().find("ERROR_TABLE(") {
        let after = &rest[i + "ERROR_TABLE(".len()..];
        let Some(close) = after.find(')') else { break };
        let parts: Vec<String> =
            crate::schema::split_top_level(&after[..close], '.').iter().map(|p| normalize_ident(p)).collect();
        out.push_str(&rest[..i]);
        if parts.len() == 3 {
            out.push_str(&ObjectName::new(&parts[0], &parts[1], &parts[2]).error_table().quoted());
        } else {
            out.push_str(&rest[i..i + "ERROR_TABLE(".len() + close + 1]);
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    out
}

/// `POST /admin/query {"sql"}`: read-only SQL, rows as JSON objects.
async fn query(State(state): State<Shared>, Json(req): Json<QueryRequest>) -> Result<Json<Value>, ApiError> {
    let sql = rewrite_error_table(&req.sql);
    let st = state.clone();
    let result = tokio::task::spawn_blocking(move || st.store.query(&sql))
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
    match result {
        Ok(r) => Ok(Json(json!({ "columns": r.columns, "rows": r.rows, "row_count": r.rows.len() }))),
        Err(e) => Err(ApiError::new(StatusCode::BAD_REQUEST, "ERR_QUERY", e.to_string())),
    }
}

async fn add_fault(State(state): State<Shared>, Json(spec): Json<FaultSpec>) -> Json<Value> {
    Json(serde_json::to_value(state.faults.add(spec)).unwrap_or_default())
}

async fn list_faults(State(state): State<Shared>) -> Json<Value> {
    Json(json!({ "faults": state.faults.list() }))
}

async fn clear_faults(State(state): State<Shared>) -> Json<Value> {
    state.faults.clear();
    state.channel_windows.clear();
    Json(json!({"cleared": true}))
}

async fn remove_fault(State(state): State<Shared>, Path(id): Path<u64>) -> Result<Json<Value>, ApiError> {
    if state.faults.remove(id) {
        Ok(Json(json!({"removed": id})))
    } else {
        Err(ApiError::new(StatusCode::NOT_FOUND, "ERR_ADMIN", format!("no fault {id}")))
    }
}

async fn get_settings(State(state): State<Shared>) -> Json<Value> {
    Json(serde_json::to_value(state.settings()).unwrap_or_default())
}

/// `POST /admin/settings`: partial update, e.g. `{"commit_lag_ms": 0}` or `{"commit_lag_ms": "4000-10000"}`.
async fn set_settings(State(state): State<Shared>, Json(patch): Json<Value>) -> Result<Json<Value>, ApiError> {
    let mut current = serde_json::to_value(state.settings()).unwrap_or_default();
    let Value::Object(mut p) = patch else { return Err(ApiError::bad_request("settings patch must be an object")) };
    // `commit_lag_ms` alone sets a fixed lag; as a string it may be a range, "4000-10000" (see `--commit-lag-ms`).
    if let Some(lag) = p.get("commit_lag_ms").cloned() {
        if let Some(text) = lag.as_str() {
            let (low, high) = crate::state::parse_commit_lag(text).map_err(ApiError::bad_request)?;
            p.insert("commit_lag_ms".into(), json!(low));
            p.insert("commit_lag_max_ms".into(), json!(high));
        } else if !p.contains_key("commit_lag_max_ms") {
            p.insert("commit_lag_max_ms".into(), json!(0));
        }
    }
    for (k, v) in p {
        if current.get(&k).is_none() {
            return Err(ApiError::bad_request(format!("unknown setting '{k}'")));
        }
        current[&k] = v;
    }
    let new: crate::state::Settings =
        serde_json::from_value(current).map_err(|e| ApiError::bad_request(e.to_string()))?;
    state.auth.set_scoped_ttl(new.scoped_token_ttl_s);
    *state.settings.write().unwrap() = new.clone();
    Ok(Json(serde_json::to_value(new).unwrap_or_default()))
}

async fn list_channels(State(state): State<Shared>) -> Json<Value> {
    Json(json!({ "channels": state.channels.all(), "uncommitted_batches": state.channels.uncommitted_batches() }))
}

/// `GET /admin/bench-counts`: in bench mode, the rows committed per table (`{"tables": {"DB.SCHEMA.T": n}}`).
async fn bench_counts(State(state): State<Shared>) -> Json<Value> {
    Json(json!({ "bench_mode": state.settings().bench_mode, "tables": *state.bench_counts.lock().unwrap() }))
}

/// `GET /admin/bench-commits`: in bench mode, the batches committed since the last call, oldest first, and taken
/// (`{"commits": [{"table","channel","offset_token","rows","accepted_ms","committed_ms"}], "dropped": n}`).
async fn bench_commits(State(state): State<Shared>) -> Json<Value> {
    let (commits, dropped) = std::mem::take(&mut *state.bench_commits.lock().unwrap());
    Json(json!({ "bench_mode": state.settings().bench_mode, "commits": commits, "dropped": dropped }))
}

async fn commit_now(State(state): State<Shared>) -> Json<Value> {
    state.channels.commit_now();
    Json(json!({"ok": true}))
}

async fn list_requests(State(state): State<Shared>, Query(q): Query<HashMap<String, String>>) -> Json<Value> {
    let filter = q.get("path_contains").cloned().unwrap_or_default();
    let log = state.requests.lock().unwrap();
    let items: Vec<_> = log.iter().filter(|r| r.path.contains(&filter)).cloned().collect();
    Json(
        json!({ "requests": items, "telemetry_batches": state.telemetry_batches.load(std::sync::atomic::Ordering::Relaxed) }),
    )
}

async fn clear_requests(State(state): State<Shared>) -> Json<Value> {
    state.requests.lock().unwrap().clear();
    Json(json!({"cleared": true}))
}

async fn checkpoint(State(state): State<Shared>) -> Result<Json<Value>, ApiError> {
    let st = state.clone();
    tokio::task::spawn_blocking(move || st.store.checkpoint())
        .await
        .map_err(|e| ApiError::internal(e.to_string()))??;
    Ok(Json(json!({"ok": true})))
}
