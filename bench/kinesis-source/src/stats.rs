//! Counters of what the server did: requests per operation and protocol, per HTTP version, records and
//! bytes served, throttles and other errors. Shown by `GET /stats` (JSON) and printed to stderr at shutdown; tests use
//! them to prove which protocol a client really spoke.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use serde_json::{json, Map, Value};

use crate::ops::Operation;
use crate::protocol::Protocol;

#[derive(Default)]
pub struct Stats {
    requests: [[AtomicU64; Operation::ALL.len()]; Protocol::ALL.len()],
    /// Kinesis requests (not `GET /stats`) over HTTP/1.x and over HTTP/2.
    http1: AtomicU64,
    http2: AtomicU64,
    /// Kinesis records returned by GetRecords (an aggregate counts once).
    records: AtomicU64,
    /// Data bytes returned by GetRecords (before base64).
    data_bytes: AtomicU64,
    throttled: AtomicU64,
    /// Error answers other than throttles, by AWS error type (rare: a mutex is cheap enough).
    errors: Mutex<BTreeMap<&'static str, u64>>,
}

impl Stats {
    pub fn request(&self, protocol: Protocol, op: Operation) {
        self.requests[protocol.index()][op.index()].fetch_add(1, Relaxed);
    }

    pub fn http_version(&self, http2: bool) {
        if http2 { &self.http2 } else { &self.http1 }.fetch_add(1, Relaxed);
    }

    pub fn served(&self, records: usize, data_bytes: usize) {
        self.records.fetch_add(records as u64, Relaxed);
        self.data_bytes.fetch_add(data_bytes as u64, Relaxed);
    }

    pub fn throttle(&self) {
        self.throttled.fetch_add(1, Relaxed);
    }

    pub fn error(&self, type_name: &'static str) {
        *self.errors.lock().unwrap_or_else(|e| e.into_inner()).entry(type_name).or_default() += 1;
    }

    pub fn to_json(&self) -> Value {
        let mut requests = Map::new();
        for protocol in Protocol::ALL {
            let per_op: Map<String, Value> = Operation::ALL
                .iter()
                .map(|op| (op.name().to_string(), json!(self.requests[protocol.index()][op.index()].load(Relaxed))))
                .collect();
            requests.insert(protocol.name().to_string(), Value::Object(per_op));
        }
        json!({
            "requests": requests,
            "http": {"1.x": self.http1.load(Relaxed), "2": self.http2.load(Relaxed)},
            "records": self.records.load(Relaxed),
            "data_bytes": self.data_bytes.load(Relaxed),
            "throttled": self.throttled.load(Relaxed),
            "errors": *self.errors.lock().unwrap_or_else(|e| e.into_inner()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_protocol_and_operation() {
        let s = Stats::default();
        s.request(Protocol::Cbor, Operation::GetRecords);
        s.request(Protocol::Cbor, Operation::GetRecords);
        s.request(Protocol::Json, Operation::ListShards);
        s.served(3, 300);
        s.throttle();
        s.error("ResourceNotFoundException");
        s.error("ResourceNotFoundException");
        s.http_version(true);
        let v = s.to_json();
        assert_eq!(v["errors"], serde_json::json!({"ResourceNotFoundException": 2}));
        assert_eq!(v["http"], serde_json::json!({"1.x": 0, "2": 1}));
        assert_eq!(v["requests"]["cbor"]["GetRecords"], 2);
        assert_eq!(v["requests"]["json"]["GetRecords"], 0);
        assert_eq!(v["requests"]["json"]["ListShards"], 1);
        assert_eq!(v["records"], 3);
        assert_eq!(v["data_bytes"], 300);
        assert_eq!(v["throttled"], 1);
    }
}
