//! Fault injection, switched per test through `POST /admin/faults`. A fault
//! fires on matching requests (operation, optional channel) a given number of
//! times (`count`, default 1; `-1` = until cleared) and answers with the error
//! Snowflake would send; a few kinds change behaviour instead (withheld commits,
//! forced row errors, a per-channel request-rate limit).

use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use std::sync::Mutex;
use std::time::Instant;

use crate::error::ApiError;
use crate::limits::{ChannelLimits, ChannelWindows};

/// The kinds of fault the stand-in can inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// 429 `ReceiverSaturated`: back-pressure, the channel stays valid.
    Backpressure429,
    /// 429 `MemoryThresholdExceeded`: back-pressure from memory throttling, the channel stays valid.
    MemoryThreshold429,
    /// 503 back-pressure.
    Backpressure503,
    /// 500 `ERR_GENERAL_EXCEPTION_RETRY_REQUEST`.
    RetryRequest,
    /// 401 `390144` as for an expired token.
    ExpiredToken,
    /// 410 `SfApiPipeFailedOverError`: the client must be recreated; the channel's continuation token goes stale
    /// and its uncommitted rows are discarded, as after a reopen elsewhere.
    PipeFailover,
    /// 404 `InvalidClientError`: the client is invalid and must be recreated; the channel goes stale as for
    /// `pipe_failover`.
    InvalidClient,
    /// 404 with an empty body (no Snowflake envelope), as a proxy answers a request it has no route for while the
    /// ingest host moves; the channel goes stale as for `pipe_failover`.
    NoRoute404,
    /// Invalidates the channel's continuation token (as if reopened elsewhere):
    /// the next append gets 400 `STALE_CONTINUATION_TOKEN_SEQUENCER`.
    StaleToken,
    /// 409 `ERR_OPEN_CHANNEL_IN_PROGRESS` on open.
    OpenInProgress,
    /// Commits are held back (rows stay uncommitted) while the fault is active.
    WithholdCommits,
    /// The next `count` rows fail conversion (go to the error table).
    RowErrors,
    /// Requests per channel per second above `limit` (default 10) get 429.
    RateLimit,
}

/// Which request a fault applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    Hostname,
    Oauth,
    PipeInfo,
    Open,
    Append,
    Status,
    Drop,
    Telemetry,
    Any,
}

/// A fault as posted to `/admin/faults`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FaultSpec {
    pub kind: FaultKind,
    /// Times it fires; `-1` = until cleared. Default 1 (for `row_errors`: rows).
    #[serde(default)]
    pub count: Option<i64>,
    /// Only this channel (default: all).
    #[serde(default)]
    pub channel: Option<String>,
    /// Only this operation (default per kind: `append`, `open` for open_in_progress).
    #[serde(default)]
    pub on: Option<Op>,
    /// Requests per second for `rate_limit`.
    #[serde(default)]
    pub limit: Option<u32>,
    /// Overrides of the HTTP status / error code / message answered.
    #[serde(default)]
    pub status: Option<u16>,
    #[serde(default)]
    pub code: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
    /// Answer with a bare JSON string body (`"ERR_..."`).
    #[serde(default)]
    pub bare_string: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct ActiveFault {
    pub id: u64,
    #[serde(flatten)]
    pub spec: FaultSpec,
    /// Remaining firings (`None` = unlimited).
    pub remaining: Option<i64>,
    pub fired: u64,
}

#[derive(Default)]
struct Inner {
    next_id: u64,
    faults: Vec<ActiveFault>,
}

/// The active faults.
#[derive(Default)]
pub struct Faults {
    inner: Mutex<Inner>,
    /// Each channel's requests of the last second, against a `rate_limit` fault's limit.
    rate_windows: ChannelWindows,
}

impl FaultSpec {
    fn default_op(&self) -> Op {
        match self.kind {
            FaultKind::OpenInProgress => Op::Open,
            _ => Op::Append,
        }
    }

    fn matches(&self, op: Op, channel: Option<&str>) -> bool {
        let want = self.on.unwrap_or_else(|| self.default_op());
        let op_ok = want == Op::Any || want == op;
        let ch_ok = match (&self.channel, channel) {
            (None, _) => true,
            (Some(c), Some(ch)) => c.eq_ignore_ascii_case(ch),
            (Some(_), None) => false,
        };
        op_ok && ch_ok
    }

    fn error(&self) -> ApiError {
        let (status, code, message) = match self.kind {
            FaultKind::Backpressure429 => (429, "ReceiverSaturated", "Too many requests, back off and retry."),
            FaultKind::MemoryThreshold429 => {
                (429, "MemoryThresholdExceeded", "Memory throttling limits reached. Back off and retry.")
            }
            FaultKind::Backpressure503 => (503, "ReceiverSaturated", "Service is overloaded, back off and retry."),
            FaultKind::RetryRequest => {
                (500, "ERR_GENERAL_EXCEPTION_RETRY_REQUEST", "General exception, retry the request.")
            }
            FaultKind::ExpiredToken => (401, "390144", "JWT token is invalid. [token expired]"),
            FaultKind::PipeFailover => {
                (410, "SfApiPipeFailedOverError", "The pipe has failed over; recreate the client and channels.")
            }
            FaultKind::InvalidClient => (
                404,
                "InvalidClientError",
                "Client is in an invalid state. Please close and re-create the client, then reopen its channels.",
            ),
            FaultKind::NoRoute404 => (404, "", ""),
            FaultKind::StaleToken => (400, "STALE_CONTINUATION_TOKEN_SEQUENCER", "The continuation token is stale."),
            FaultKind::OpenInProgress => {
                (409, "ERR_OPEN_CHANNEL_IN_PROGRESS", "Another open of this channel is in progress.")
            }
            FaultKind::RateLimit => (429, "ERR_TOO_MANY_REQUESTS", "Channel request rate limit exceeded."),
            FaultKind::WithholdCommits | FaultKind::RowErrors => (500, "ERR_INTERNAL", "not an HTTP fault"),
        };
        let mut e = ApiError::new(
            StatusCode::from_u16(self.status.unwrap_or(status)).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            self.code.clone().unwrap_or_else(|| code.to_string()),
            self.message.clone().unwrap_or_else(|| message.to_string()),
        );
        e.bare_string = self.bare_string;
        e.empty_body = self.kind == FaultKind::NoRoute404;
        e
    }
}

/// What an HTTP-level fault asks the handler to do.
pub enum Fired {
    /// Answer with this error.
    Error(ApiError),
    /// Invalidate the channel's token (and discard its uncommitted rows), then answer with this error.
    Stale(ApiError),
}

impl Faults {
    pub fn add(&self, spec: FaultSpec) -> ActiveFault {
        let mut inner = self.inner.lock().unwrap();
        inner.next_id += 1;
        let remaining = match spec.count {
            Some(n) if n < 0 => None,
            Some(n) => Some(n),
            None => Some(1),
        };
        let fault = ActiveFault { id: inner.next_id, spec, remaining, fired: 0 };
        inner.faults.push(fault.clone());
        fault
    }

    pub fn list(&self) -> Vec<ActiveFault> {
        self.inner.lock().unwrap().faults.clone()
    }

    pub fn clear(&self) {
        let mut inner = self.inner.lock().unwrap();
        inner.faults.clear();
        self.rate_windows.clear();
    }

    pub fn remove(&self, id: u64) -> bool {
        let mut inner = self.inner.lock().unwrap();
        let before = inner.faults.len();
        inner.faults.retain(|f| f.id != id);
        before != inner.faults.len()
    }

    /// Checks the error-answering faults for a request; consumes one firing.
    pub fn check(&self, op: Op, channel: Option<&str>) -> Option<Fired> {
        let mut inner = self.inner.lock().unwrap();
        let inner = &mut *inner;
        for f in inner.faults.iter_mut() {
            if matches!(f.spec.kind, FaultKind::WithholdCommits | FaultKind::RowErrors | FaultKind::RateLimit) {
                continue;
            }
            if f.remaining == Some(0) || !f.spec.matches(op, channel) {
                continue;
            }
            if let Some(r) = f.remaining.as_mut() {
                *r -= 1;
            }
            f.fired += 1;
            let err = f.spec.error();
            let invalidates = matches!(
                f.spec.kind,
                FaultKind::StaleToken | FaultKind::PipeFailover | FaultKind::InvalidClient | FaultKind::NoRoute404
            );
            return Some(if invalidates { Fired::Stale(err) } else { Fired::Error(err) });
        }
        inner.faults.retain(|f| f.remaining != Some(0) || f.spec.kind == FaultKind::RowErrors);
        None
    }

    /// Applies a `rate_limit` fault's per-channel request rate (the always-on limits are in `limits`),
    /// answering with the fault's error.
    pub fn rate_limited(&self, channel_key: &str, channel: &str) -> Option<ApiError> {
        let (limit, err) = self
            .inner
            .lock()
            .unwrap()
            .faults
            .iter()
            .find(|f| f.spec.kind == FaultKind::RateLimit && f.spec.matches(Op::Append, Some(channel)))
            .map(|f| (f.spec.limit.unwrap_or(10), f.spec.error()))?;
        let limits = ChannelLimits { requests_per_second: limit, bytes_per_second: 0 };
        self.rate_windows.admit(channel_key, Instant::now(), 0, limits).err().map(|_| err)
    }

    /// Whether commits of this channel are held back.
    pub fn commits_withheld(&self, channel: &str) -> bool {
        let inner = self.inner.lock().unwrap();
        inner.faults.iter().any(|f| {
            f.spec.kind == FaultKind::WithholdCommits
                && f.remaining != Some(0)
                && f.spec.channel.as_deref().is_none_or(|c| c.eq_ignore_ascii_case(channel))
        })
    }

    /// How many of `rows` rows of this channel must be turned into row errors.
    pub fn take_row_errors(&self, channel: &str, rows: usize) -> usize {
        let mut inner = self.inner.lock().unwrap();
        let mut taken = 0;
        for f in inner.faults.iter_mut() {
            if f.spec.kind != FaultKind::RowErrors
                || !f.spec.channel.as_deref().is_none_or(|c| c.eq_ignore_ascii_case(channel))
            {
                continue;
            }
            let want = rows - taken;
            let n = match f.remaining {
                None => want,
                Some(r) => (r.max(0) as usize).min(want),
            };
            if let Some(r) = f.remaining.as_mut() {
                *r -= n as i64;
            }
            f.fired += n as u64;
            taken += n;
        }
        inner.faults.retain(|f| !(f.spec.kind == FaultKind::RowErrors && f.remaining == Some(0)));
        taken
    }
}
