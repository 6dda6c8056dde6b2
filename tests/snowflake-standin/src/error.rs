//! Errors answered on the wire, shaped like Snowflake's: an HTTP status and a
//! `{"code": ..., "message": ...}` JSON body (or, for one retry variant, a bare
//! JSON string). Every handler returns `Result<_, ApiError>`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

/// An error the stand-in answers with. `code` is Snowflake's error code string.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: String,
    pub message: String,
    /// Answer with a bare JSON string (`"CODE"`) instead of an object, as Snowflake
    /// sometimes does for 5xx.
    pub bare_string: bool,
    /// Answer with an empty body (no Snowflake envelope), as a proxy in front of Snowflake may.
    pub empty_body: bool,
}

impl ApiError {
    pub fn new(status: StatusCode, code: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError { status, code: code.into(), message: message.into(), bare_string: false, empty_body: false }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "ERR_INVALID_REQUEST", message)
    }

    /// 401 with Snowflake's "JWT token is invalid" code, used for every auth failure.
    pub fn jwt_invalid(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "390144", format!("JWT token is invalid. [{}]", detail.into()))
    }

    /// 401 for an OAuth access token Snowflake does not know (also a managed token).
    pub fn oauth_invalid() -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "390303", "Invalid OAuth access token. ")
    }

    /// 401 for an OAuth access token that was valid and is no longer.
    pub fn oauth_expired() -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "390318", "OAuth access token expired. ")
    }

    pub fn missing_accept() -> Self {
        Self::new(StatusCode::NOT_ACCEPTABLE, "391902", "Unsupported Accept header. Use 'Accept: application/json'.")
    }

    pub fn pipe_not_found(pipe: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "ERR_PIPE_DOES_NOT_EXIST_OR_NOT_AUTHORIZED",
            format!("Pipe '{pipe}' does not exist or not authorized."),
        )
    }

    pub fn table_not_found(table: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "ERR_TABLE_DOES_NOT_EXIST_NOT_AUTHORIZED",
            format!("Table '{table}' does not exist or not authorized."),
        )
    }

    pub fn channel_not_found(channel: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "ERR_CHANNEL_DOES_NOT_EXIST_OR_NOT_AUTHORIZED",
            format!("Channel '{channel}' does not exist or not authorized."),
        )
    }

    pub fn stale_token(channel: &str) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "STALE_CONTINUATION_TOKEN_SEQUENCER",
            format!("Channel '{channel}' was reopened; the continuation token is stale."),
        )
    }

    pub fn open_in_progress(channel: &str) -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "ERR_OPEN_CHANNEL_IN_PROGRESS",
            format!("Another open of channel '{channel}' is in progress."),
        )
    }

    pub fn uncommitted_rows(channel: &str) -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "ERR_CHANNEL_HAS_UNCOMMITTED_DATA",
            format!("Channel '{channel}' has uncommitted rows."),
        )
    }

    pub fn payload_too_large(message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "ERR_PAYLOAD_TOO_LARGE", message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "ERR_INTERNAL", message)
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.status.as_u16(), self.code, self.message)
    }
}

impl std::error::Error for ApiError {}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.empty_body {
            return self.status.into_response();
        }
        if self.bare_string {
            return (self.status, Json(json!(self.code))).into_response();
        }
        let body = json!({ "code": self.code, "message": self.message, "success": false });
        (self.status, Json(body)).into_response()
    }
}

impl From<crate::storage::StorageError> for ApiError {
    fn from(e: crate::storage::StorageError) -> Self {
        ApiError::internal(e.to_string())
    }
}
