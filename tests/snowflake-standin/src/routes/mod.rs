//! HTTP routing: Snowflake's control routes (hostname, OAuth token, telemetry),
//! the ingest routes (pipe info, channels, rows, status), the SQL API's metadata
//! statements (`sql_api`) and the stand-in's own
//! `/admin` routes, plus the cross-cutting checks (Accept header, auth, faults,
//! request log) they share.

pub mod admin;
pub mod control;
pub mod ingest;
pub mod sql_api;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::HeaderMap;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post, put};
use axum::Router;
use std::sync::Arc;

use crate::auth::Principal;
use crate::error::ApiError;
use crate::faults::{Fired, Op};
use crate::state::{AppState, LoggedRequest};

pub type Shared = Arc<AppState>;

/// The whole router, control and ingest on one listener.
pub fn router(state: Shared) -> Router {
    let snowflake = Router::new()
        .route("/v2/streaming/hostname", get(control::hostname))
        .route("/oauth/token", post(control::oauth_token))
        .route("/telemetry/send/sessionless", post(control::telemetry))
        .route("/api/v2/statements", post(sql_api::statements))
        .route("/api/v2/statements/{handle}", get(sql_api::statement_result))
        .route("/v2/streaming/databases/{db}/schemas/{schema}/pipes/{pipe_action}", post(ingest::pipe_action))
        .route(
            "/v2/streaming/databases/{db}/schemas/{schema}/pipes/{pipe}/channels/{channel}",
            put(ingest::open_channel).delete(ingest::drop_channel).get(ingest::channel_status),
        )
        .route(
            "/v2/streaming/data/databases/{db}/schemas/{schema}/pipes/{pipe}/channels/{channel}/rows",
            post(ingest::append_rows),
        )
        .layer(middleware::from_fn(require_accept_json));
    Router::new()
        .merge(snowflake)
        .merge(admin::router())
        .layer(DefaultBodyLimit::max(256 * 1024 * 1024))
        .layer(middleware::from_fn_with_state(state.clone(), log_requests))
        .with_state(state)
}

/// Snowflake refuses requests without `Accept: application/json` (code 391902).
async fn require_accept_json(req: Request, next: Next) -> Response {
    let ok = req
        .headers()
        .get_all(axum::http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.to_ascii_lowercase().contains("application/json"));
    if !ok {
        return axum::response::IntoResponse::into_response(ApiError::missing_accept());
    }
    next.run(req).await
}

const LOGGED_HEADERS: [&str; 9] = [
    "content-type",
    "content-encoding",
    "content-length",
    "accept",
    "user-agent",
    "x-snowflake-authorization-token-type",
    "x-snowflake-uncompressed-content-length",
    "x-snowflake-min-append-timestamp-ms",
    "x-snowflake-session",
];

/// Keeps the last requests (not `/admin`) for `GET /admin/requests`.
async fn log_requests(State(state): State<Shared>, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    if path.starts_with("/admin") {
        return next.run(req).await;
    }
    let method = req.method().to_string();
    let query = req.uri().query().map(str::to_string);
    let mut headers = serde_json::Map::new();
    for h in LOGGED_HEADERS {
        if let Some(v) = req.headers().get(h).and_then(|v| v.to_str().ok()) {
            headers.insert(h.into(), v.into());
        }
    }
    let auth = state.auth.describe(req.headers());
    let resp = next.run(req).await;
    tracing::debug!("{method} {path} -> {}", resp.status());
    state.log_request(LoggedRequest { method, path, query, status: resp.status().as_u16(), headers, auth });
    resp
}

/// Authenticates a Snowflake request after the injected faults for `op` had their say.
pub fn authorize(state: &AppState, headers: &HeaderMap, op: Op, channel: Option<&str>) -> Result<Principal, ApiError> {
    let principal = state.auth.authenticate(headers)?.0;
    if let Some(fired) = state.faults.check(op, channel) {
        return Err(match fired {
            Fired::Error(e) | Fired::Stale(e) => e,
        });
    }
    Ok(principal)
}
