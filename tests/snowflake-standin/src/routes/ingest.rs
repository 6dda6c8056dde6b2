//! Ingest routes of Snowpipe Streaming v2: `:pipe-info`, open / drop / status of
//! a channel, `:bulk-channel-status`, and appending NDJSON rows (including the
//! `ELASTIC` channel). Path identifiers are normalised like Snowflake
//! identifiers (URL-decoded; `"quoted"` keeps case, bare names upper-cased).

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::Json;
use base64::Engine;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::Shared;
use crate::catalog::{CatalogError, ObjectName};
use crate::channels::{now_ms, PendingBatch};
use crate::ddl::normalize_ident;
use crate::error::ApiError;
use crate::faults::{Fired, Op};
use crate::payload;
use crate::state::AppState;

fn pipe_name(db: &str, schema: &str, pipe: &str) -> ObjectName {
    ObjectName::new(&normalize_ident(db), &normalize_ident(schema), &normalize_ident(pipe))
}

/// Checks that the pipe resolves to a table (404s as Snowflake answers them).
fn check_pipe(state: &AppState, pipe: &ObjectName) -> Result<(), ApiError> {
    match state.catalog.read().unwrap().resolve_pipe(pipe) {
        Ok(_) => Ok(()),
        Err(CatalogError::TableNotFound(t)) => Err(ApiError::table_not_found(&t)),
        Err(_) => Err(ApiError::pipe_not_found(&pipe.to_string())),
    }
}

/// Authenticates, then lets injected faults answer; a `stale_token` fault also
/// invalidates the channel's continuation token.
fn guard(
    state: &AppState,
    headers: &HeaderMap,
    op: Op,
    pipe: &ObjectName,
    channel: Option<&str>,
) -> Result<(), ApiError> {
    state.auth.authenticate(headers)?;
    match state.faults.check(op, channel) {
        None => Ok(()),
        Some(Fired::Error(e)) => Err(e),
        Some(Fired::Stale(e)) => {
            if let Some(ch) = channel {
                state.channels.invalidate(pipe, ch);
            }
            Err(e)
        }
    }
}

/// `POST …/pipes/{pipe}:pipe-info` and `POST …/pipes/{pipe}:bulk-channel-status`.
pub async fn pipe_action(
    State(state): State<Shared>,
    Path((db, schema, pipe_action)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let (pipe, action) = pipe_action
        .rsplit_once(':')
        .ok_or_else(|| ApiError::bad_request(format!("unknown pipe action in '{pipe_action}'")))?;
    let pipe = pipe_name(&db, &schema, pipe);
    match action {
        "pipe-info" => {
            guard(&state, &headers, Op::PipeInfo, &pipe, None)?;
            check_pipe(&state, &pipe)?;
            Ok(Json(pipe_info()))
        }
        "bulk-channel-status" => {
            #[derive(Deserialize)]
            struct Req {
                channel_names: Vec<String>,
            }
            guard(&state, &headers, Op::Status, &pipe, None)?;
            check_pipe(&state, &pipe)?;
            let req: Req =
                serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(format!("bad body: {e}")))?;
            Ok(Json(json!({ "channel_statuses": state.channels.statuses(&pipe, &req.channel_names) })))
        }
        other => Err(ApiError::bad_request(format!("unknown pipe action '{other}'"))),
    }
}

/// Pipe info with every field the official SDK insists on: stage locations with
/// (dummy, never used for row appends) S3 credentials and encryption material.
fn pipe_info() -> Value {
    let expiry = now_ms() + 3_600_000;
    let location = |path: &str| {
        json!({
            "location_type": "S3",
            "location": format!("standin-stage/{path}/"),
            "path": format!("{path}/"),
            "bucket_name": "standin-stage",
            "path_prefix": format!("{path}/"),
            "region": "us-west-2",
            "storage_account": null,
            "use_s3_regional_url": false,
            "creds": {"AWS_KEY_ID": "standin", "AWS_SECRET_KEY": "standin", "AWS_TOKEN": "standin"},
            "expiry_time_ms": expiry,
        })
    };
    let key = base64::engine::general_purpose::STANDARD.encode(uuid::Uuid::new_v4().as_bytes());
    json!({
        "status_code": 0,
        "message": "Success",
        "rowset_stage_location": location("rowsets"),
        "durable_stage_location": location("durable"),
        "pipe_encryption_info": {
            "pipe_key": key,
            "pipe_key_id": 1,
            "diversifier": "standin",
            "encryption_version": "AES_CTR_128_V1",
        },
    })
}

#[derive(Deserialize, Default)]
pub struct OpenRequest {
    #[serde(default)]
    offset_token: Option<String>,
    #[serde(default)]
    fail_on_uncommitted_rows: bool,
}

type ChannelPath = Path<(String, String, String, String)>;

/// `PUT …/channels/{channel}`: open (or reopen) a channel.
pub async fn open_channel(
    State(state): State<Shared>,
    Path((db, schema, pipe, channel)): ChannelPath,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let pipe = pipe_name(&db, &schema, &pipe);
    guard(&state, &headers, Op::Open, &pipe, Some(&channel))?;
    check_pipe(&state, &pipe)?;
    let req: OpenRequest = if body.is_empty() {
        OpenRequest::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(format!("bad body: {e}")))?
    };
    state.channels.begin_open(&pipe, &channel, req.fail_on_uncommitted_rows)?;
    // A client that gives up while this open waits drops this future: the channel must not stay
    // "opening" for ever (every later open would get 409 and its batches never commit).
    let mut opening = OpeningGuard { state: state.clone(), pipe: pipe.clone(), channel: channel.clone(), armed: true };
    let latency = state.settings().open_latency_ms;
    if latency > 0 {
        tokio::time::sleep(Duration::from_millis(latency)).await;
    }
    // A batch the committer already took is being inserted: let it finish, so the committed offset
    // token this open reports covers every row that will become visible (as Snowflake's does).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while state.channels.inserting(&pipe, &channel) && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let (token, status, rec) = state.channels.finish_open(&pipe, &channel, req.offset_token);
    opening.armed = false;
    state.persist_channel(&rec);
    Ok(Json(json!({ "next_continuation_token": token, "channel_status": status })))
}

/// Ends an open that did not finish (its request was dropped): see `open_channel`.
struct OpeningGuard {
    state: Shared,
    pipe: ObjectName,
    channel: String,
    armed: bool,
}

impl Drop for OpeningGuard {
    fn drop(&mut self) {
        if self.armed {
            self.state.channels.abort_open(&self.pipe, &self.channel);
        }
    }
}

/// `GET …/channels/{channel}`: status of one channel.
pub async fn channel_status(
    State(state): State<Shared>,
    Path((db, schema, pipe, channel)): ChannelPath,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let pipe = pipe_name(&db, &schema, &pipe);
    guard(&state, &headers, Op::Status, &pipe, Some(&channel))?;
    let statuses = state.channels.statuses(&pipe, std::slice::from_ref(&channel));
    let status = statuses.get(&channel).cloned().ok_or_else(|| ApiError::channel_not_found(&channel))?;
    Ok(Json(json!({ "channel_status": status })))
}

/// `DELETE …/channels/{channel}`: drop a channel.
pub async fn drop_channel(
    State(state): State<Shared>,
    Path((db, schema, pipe, channel)): ChannelPath,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let pipe = pipe_name(&db, &schema, &pipe);
    guard(&state, &headers, Op::Drop, &pipe, Some(&channel))?;
    let committed = state.channels.drop_channel(&pipe, &channel)?;
    let _ = state.store.delete_meta("channel", &format!("{pipe}/{channel}"));
    Ok(Json(json!({ "last_committed_offset_token": committed })))
}

/// `POST /v2/streaming/data/…/channels/{channel}/rows`: append NDJSON rows.
pub async fn append_rows(
    State(state): State<Shared>,
    Path((db, schema, pipe, channel)): ChannelPath,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let pipe = pipe_name(&db, &schema, &pipe);
    guard(&state, &headers, Op::Append, &pipe, Some(&channel))?;
    let settings = state.settings();
    let key = crate::channels::channel_key(&pipe, &channel);
    if let Some(e) = state.faults.rate_limited(&key, &channel) {
        return Err(e);
    }
    check_pipe(&state, &pipe)?;
    let decoded = payload::decode_body(&headers, &body, settings.max_wire_bytes, settings.max_body_bytes)?;
    state.channel_windows.admit(&key, Instant::now(), decoded.len() as u64, settings.channel_limits())?;
    let rows = if settings.bench_mode { payload::count_ndjson(&decoded) } else { payload::parse_ndjson(&decoded) };
    let start = q.get("startOffsetToken").or_else(|| q.get("offsetToken")).cloned();
    let end = q.get("endOffsetToken").or_else(|| q.get("offsetToken")).cloned();
    let batch = PendingBatch {
        rows,
        start_offset: start,
        end_offset: end,
        due: Instant::now() + Duration::from_millis(crate::channels::draw_lag_ms(settings.commit_lag_range())),
        accepted_ms: now_ms(),
    };
    let token = state.channels.append(
        &pipe,
        &channel,
        q.get("continuationToken").map(String::as_str),
        q.get("requestId").map(String::as_str),
        batch,
    )?;
    Ok(Json(json!({ "next_continuation_token": token })))
}
