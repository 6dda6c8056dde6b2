//! Counters of what the server did: requests per operation and protocol, records and bytes served,
//! throttles and other errors. Shown by `GET /stats` (JSON) and printed to stderr at shutdown; tests use
//! them to prove which protocol a client really spoke.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use serde_json::{json, Map, Value};

use crate::ops::Operation;
use crate::protocol::Protocol;

#[derive(Default)]
pub struct Stats {
    requests: [[AtomicU64; Operation::ALL.len()]; Protocol::ALL.len()],
    /// Kinesis records returned by GetRecords (an aggregate counts once).
    records: AtomicU64,
    /// Data bytes returned by GetRecords (before base64).
    data_bytes: AtomicU64,
    throttled: AtomicU64,
    errors: AtomicU64,
}

impl Stats {
    pub fn request(&self, protocol: Protocol, op: Operation) {
        self.requests[protocol.index()][op.index()].fetch_add(1, Relaxed);
    }

    pub fn served(&self, records: usize, data_bytes: usize) {
        self.records.fetch_add(records as u64, Relaxed);
        self.data_bytes.fetch_add(data_bytes as u64, Relaxed);
    }

    pub fn throttle(&self) {
        self.throttled.fetch_add(1, Relaxed);
    }

    pub fn error(&self) {
        self.errors.fetch_add(1, Relaxed);
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
            "records": self.records.load(Relaxed),
            "data_bytes": self.data_bytes.load(Relaxed),
            "throttled": self.throttled.load(Relaxed),
            "errors": self.errors.load(Relaxed),
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
        let v = s.to_json();
        assert_eq!(v["requests"]["cbor"]["GetRecords"], 2);
        assert_eq!(v["requests"]["json"]["GetRecords"], 0);
        assert_eq!(v["requests"]["json"]["ListShards"], 1);
        assert_eq!(v["records"], 3);
        assert_eq!(v["data_bytes"], 300);
        assert_eq!(v["throttled"], 1);
    }
}
