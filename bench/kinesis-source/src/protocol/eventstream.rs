//! SubscribeToShard's answer body: messages of the AWS event-stream encoding
//! (`application/vnd.amazon.eventstream`), framed by aws-smithy-eventstream: the `initial-response`
//! event, then `SubscribeToShardEvent`s whose payload is in the request's protocol.

use aws_smithy_eventstream::frame::write_message_to;
use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use bytes::Bytes;

use super::Protocol;
use crate::ops::RecordBatch;

pub const CONTENT_TYPE: &str = "application/vnd.amazon.eventstream";

fn event(protocol: Protocol, event_type: &'static str, payload: Vec<u8>) -> Bytes {
    let message = Message::new_from_parts(
        vec![
            Header::new(":message-type", HeaderValue::String("event".into())),
            Header::new(":event-type", HeaderValue::String(event_type.into())),
            Header::new(":content-type", HeaderValue::String(protocol.content_type().into())),
        ],
        payload,
    );
    let mut frame = Vec::with_capacity(message.payload().len() + 128);
    write_message_to(&message, &mut frame).expect("a message under the 16 MiB frame limit");
    Bytes::from(frame)
}

/// The first message of every subscription: an empty object.
pub fn initial_response(protocol: Protocol) -> Bytes {
    let empty = match protocol {
        Protocol::Json => b"{}".to_vec(),
        Protocol::Cbor => vec![0xA0], // a map of 0 entries
    };
    event(protocol, "initial-response", empty)
}

/// A `SubscribeToShardEvent`: `{Records, ContinuationSequenceNumber, MillisBehindLatest}`.
pub fn records_event(protocol: Protocol, batch: &RecordBatch, continuation: &str) -> Bytes {
    let tail = super::BatchTail::ContinuationSequenceNumber(continuation);
    let payload = match protocol {
        Protocol::Json => super::json::encode_records(batch, tail),
        Protocol::Cbor => super::cbor::encode_records(batch, tail),
    };
    event(protocol, "SubscribeToShardEvent", payload)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_smithy_eventstream::frame::read_message_from;

    fn header<'a>(m: &'a Message, name: &str) -> &'a str {
        m.headers().iter().find(|h| h.name().as_str() == name).unwrap().value().as_string().unwrap().as_str()
    }

    #[test]
    fn frames_decode_with_their_headers() {
        let frame = records_event(Protocol::Json, &RecordBatch::default(), "49123");
        let m = read_message_from(&frame[..]).unwrap();
        assert_eq!(header(&m, ":message-type"), "event");
        assert_eq!(header(&m, ":event-type"), "SubscribeToShardEvent");
        let payload: serde_json::Value = serde_json::from_slice(m.payload()).unwrap();
        assert_eq!(
            payload,
            serde_json::json!({"Records": [], "ContinuationSequenceNumber": "49123", "MillisBehindLatest": 0})
        );
        let first = read_message_from(&initial_response(Protocol::Cbor)[..]).unwrap();
        assert_eq!(header(&first, ":event-type"), "initial-response");
        assert_eq!(header(&first, ":content-type"), "application/x-amz-cbor-1.1");
    }
}
