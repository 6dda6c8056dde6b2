//! Control-plane routes: ingest hostname (plain text), `/oauth/token` (plain-text
//! scoped token for a key-pair JWT) and the SDK's telemetry sink.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::IntoResponse;
use axum::Json;
use serde_json::json;

use super::{authorize, Shared};
use crate::auth::TokenKind;
use crate::error::ApiError;
use crate::faults::Op;

/// `GET /v2/streaming/hostname`: the ingest host, as plain text.
pub async fn hostname(State(state): State<Shared>, headers: HeaderMap) -> Result<impl IntoResponse, ApiError> {
    authorize(&state, &headers, Op::Hostname, None)?;
    Ok(([(header::CONTENT_TYPE, "text/plain")], state.settings().hostname))
}

/// `POST /oauth/token` with a key-pair JWT: a scoped token, as plain text.
pub async fn oauth_token(
    State(state): State<Shared>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<impl IntoResponse, ApiError> {
    let (principal, kind) = state.auth.authenticate(&headers)?;
    if kind != TokenKind::KeypairJwt {
        return Err(ApiError::jwt_invalid("/oauth/token needs a key-pair JWT"));
    }
    authorize(&state, &headers, Op::Oauth, None)?;
    let form: Vec<(String, String)> = url_form(&body);
    let grant = form.iter().find(|(k, _)| k == "grant_type").map(|(_, v)| v.as_str()).unwrap_or("");
    if grant != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
        return Err(ApiError::bad_request(format!("unsupported grant_type '{grant}'")));
    }
    let scope = form.iter().find(|(k, _)| k == "scope").map(|(_, v)| v.clone()).unwrap_or_default();
    let token = state.auth.mint_scoped(&principal, &scope)?;
    Ok(([(header::CONTENT_TYPE, "text/plain")], token))
}

/// `POST /telemetry/send/sessionless`: accepted and counted.
pub async fn telemetry(
    State(state): State<Shared>,
    headers: HeaderMap,
    _body: Bytes,
) -> Result<impl IntoResponse, ApiError> {
    authorize(&state, &headers, Op::Telemetry, None)?;
    state.telemetry_batches.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Ok(Json(json!({"data": "Log Received", "code": null, "message": null, "success": true})))
}

/// Parses an `application/x-www-form-urlencoded` body.
fn url_form(body: &[u8]) -> Vec<(String, String)> {
    let decode = |s: &str| percent_encoding::percent_decode_str(&s.replace('+', " ")).decode_utf8_lossy().into_owned();
    String::from_utf8_lossy(body)
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (decode(k), decode(v)),
            None => (decode(p), String::new()),
        })
        .collect()
}
