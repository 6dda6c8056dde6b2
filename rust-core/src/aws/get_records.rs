//! GetRecords' answers read by [`records_answer`](super::records_answer) instead of the SDK's JSON
//! codec, inside the SDK's own call: signing, endpoints, retries, timeouts and error answers stay
//! the SDK's.
//!
//! [`FastRecords`] is an interceptor of the Kinesis client. For a GetRecords answer of HTTP 200 it
//! wraps the body: once the body has arrived, the records are split off into a slot in the call's
//! config bag and the SDK reads only the rest (`"Records":[]` and the other members). When the
//! call's output is ready the interceptor puts the records into it, so callers get the same
//! `GetRecordsOutput` as without it. An answer the splitter refuses goes to the SDK unchanged,
//! which then reads (or rejects) it as it always did.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use aws_sdk_kinesis::config::interceptors::{
    BeforeDeserializationInterceptorContextMut, FinalizerInterceptorContextMut,
};
use aws_sdk_kinesis::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_kinesis::operation::get_records::GetRecordsOutput;
use aws_sdk_kinesis::types::Record;
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::config_bag::{Storable, StoreReplace};
use bytes::Bytes;
use http_body::{Body, Frame};

use super::records_answer;

/// Answers split so far (tests check that the fast path ran, not only that outputs agree).
#[cfg(test)]
static SPLIT_ANSWERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Records split off one attempt's answer, waiting for the output.
#[derive(Debug, Clone, Default)]
struct Slot(Arc<Mutex<Option<Vec<Record>>>>);

impl Storable for Slot {
    type Storer = StoreReplace<Self>;
}

impl Slot {
    fn put(&self, records: Vec<Record>) {
        if let Ok(mut held) = self.0.lock() {
            *held = Some(records);
        }
    }

    fn take(&self) -> Option<Vec<Record>> {
        self.0.lock().ok().and_then(|mut held| held.take())
    }
}

/// The Kinesis client's interceptor that reads GetRecords' records itself.
#[derive(Debug, Default)]
pub struct FastRecords;

fn is_get_records(cfg: &ConfigBag) -> bool {
    cfg.load::<Metadata>().is_some_and(|m| m.name() == "GetRecords")
}

impl Intercept for FastRecords {
    fn name(&self) -> &'static str {
        "FastRecords"
    }

    fn modify_before_deserialization(
        &self,
        context: &mut BeforeDeserializationInterceptorContextMut<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if !is_get_records(cfg) || context.response().status().as_u16() != 200 {
            return Ok(());
        }
        let slot = Slot::default();
        cfg.interceptor_state().store_put(slot.clone());
        let body = context.response_mut().body_mut();
        let inner = std::mem::replace(body, SdkBody::taken());
        *body = SdkBody::from_body_1_x(Splitting { inner, arrived: Vec::new(), slot, done: false });
        Ok(())
    }

    fn modify_before_attempt_completion(
        &self,
        context: &mut FinalizerInterceptorContextMut<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(records) = cfg.load::<Slot>().and_then(Slot::take) else { return Ok(()) };
        if let Some(Ok(output)) = context.output_or_error_mut() {
            if let Some(output) = output.downcast_mut::<GetRecordsOutput>() {
                output.records = records;
            }
        }
        Ok(())
    }
}

/// A GetRecords body that, once whole, yields the answer without its records (or, if it cannot
/// be split, the answer as it came).
struct Splitting {
    inner: SdkBody,
    arrived: Vec<u8>,
    slot: Slot,
    done: bool,
}

impl Splitting {
    fn split(&mut self) -> Bytes {
        let whole = std::mem::take(&mut self.arrived);
        match records_answer::split(&whole) {
            Ok(split) => {
                #[cfg(test)]
                SPLIT_ANSWERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                self.slot.put(split.records);
                Bytes::from(split.remainder)
            }
            Err(_) => Bytes::from(whole),
        }
    }
}

impl Body for Splitting {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(None);
        }
        loop {
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        this.arrived.extend_from_slice(&data);
                    }
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(None) => {
                    this.done = true;
                    return Poll::Ready(Some(Ok(Frame::data(this.split()))));
                }
            }
        }
    }
}

/// A Kinesis client answering every call with one GetRecords answer held in memory, sent in
/// chunks as a network would: for tests and the decode benchmark (`benches/get_records_decode.rs`).
#[cfg(any(test, feature = "test-support"))]
pub mod canned {
    use aws_sdk_kinesis::config::{BehaviorVersion, Credentials, Region};
    use aws_smithy_runtime_api::client::http::{
        HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpConnector,
    };
    use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
    use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
    use aws_smithy_runtime_api::http::StatusCode;
    use aws_smithy_types::body::SdkBody;
    use bytes::Bytes;

    /// Bytes of each chunk the canned body arrives in.
    const CHUNK: usize = 16 * 1024;

    #[derive(Debug, Clone)]
    struct Canned(Bytes);

    impl HttpConnector for Canned {
        fn call(&self, _request: HttpRequest) -> HttpConnectorFuture {
            let chunks: Vec<Result<Bytes, std::io::Error>> =
                self.0.chunks(CHUNK).map(|c| Ok(self.0.slice_ref(c))).collect();
            let stream = futures_util_stream(chunks);
            let mut response = HttpResponse::new(StatusCode::try_from(200).expect("200"), stream);
            response.headers_mut().insert("content-type", "application/x-amz-json-1.1");
            HttpConnectorFuture::ready(Ok(response))
        }
    }

    /// A body of the given chunks, one frame each.
    fn futures_util_stream(chunks: Vec<Result<Bytes, std::io::Error>>) -> SdkBody {
        struct Chunks(std::collections::VecDeque<Result<Bytes, std::io::Error>>);
        impl http_body::Body for Chunks {
            type Data = Bytes;
            type Error = std::io::Error;
            fn poll_frame(
                mut self: std::pin::Pin<&mut Self>,
                _cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
                std::task::Poll::Ready(self.0.pop_front().map(|c| c.map(http_body::Frame::data)))
            }
        }
        SdkBody::from_body_1_x(Chunks(chunks.into()))
    }

    impl HttpClient for Canned {
        fn http_connector(&self, _: &HttpConnectorSettings, _: &RuntimeComponents) -> SharedHttpConnector {
            SharedHttpConnector::new(self.clone())
        }
    }

    /// A Kinesis client whose every call gets `answer`; with the engine's [`super::FastRecords`]
    /// or, when `fast` is false, the SDK's codec alone.
    pub fn client(answer: Bytes, fast: bool) -> aws_sdk_kinesis::Client {
        let mut config = aws_sdk_kinesis::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("AKIDEXAMPLE", "secret", None, None, "canned"))
            .endpoint_url("http://127.0.0.1:1")
            .http_client(Canned(answer));
        if fast {
            config = config.interceptor(super::FastRecords);
        }
        aws_sdk_kinesis::Client::from_conf(config.build())
    }

    /// A GetRecords answer of `count` records of `size` bytes each (printable, pseudo-random), as
    /// Kinesis writes it.
    pub fn answer(count: usize, size: usize) -> Bytes {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut records = Vec::with_capacity(count);
        for i in 0..count {
            let data: Vec<u8> = (0..size)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    b' ' + (state % 95) as u8
                })
                .collect();
            records.push(serde_json::json!({
                "SequenceNumber": format!("4959033827149025660855969253836157109592157598913658{i:04}"),
                "ApproximateArrivalTimestamp": 1_700_000_000.0 + i as f64 / 1000.0,
                "Data": aws_smithy_types::base64::encode(&data),
                "PartitionKey": format!("partition-{}", i % 64),
            }));
        }
        let body = serde_json::json!({
            "Records": records,
            "NextShardIterator": "AAAAAAAAAAG5QSf2ZqYKJ4VYxKJ0jr6m2v0sF3vfkC9EJ/0cNqkh1+4dM6Rp7wD4ifFZTtOGw5x0q4vBgJ6Hyg==",
            "MillisBehindLatest": 0,
        });
        Bytes::from(serde_json::to_vec(&body).expect("JSON"))
    }
}

#[cfg(test)]
mod tests {
    use super::canned;

    async fn read(fast: bool, answer: bytes::Bytes) -> aws_sdk_kinesis::operation::get_records::GetRecordsOutput {
        canned::client(answer, fast).get_records().shard_iterator("it").send().await.expect("GetRecords")
    }

    #[tokio::test]
    async fn the_output_is_the_sdks_own_record_for_record() {
        for (count, size) in [(1000, 1024), (3, 10), (0, 0), (2, 3 * 1024 * 1024)] {
            let answer = canned::answer(count, size);
            let before = super::SPLIT_ANSWERS.load(std::sync::atomic::Ordering::Relaxed);
            let ours = read(true, answer.clone()).await;
            assert!(super::SPLIT_ANSWERS.load(std::sync::atomic::Ordering::Relaxed) > before, "the answer was split");
            let sdks = read(false, answer).await;
            assert_eq!(ours.records().len(), count);
            assert_eq!(ours, sdks, "{count} records of {size} bytes");
        }
    }

    #[tokio::test]
    async fn an_answer_the_splitter_refuses_is_read_by_the_sdk_as_before() {
        // A member the splitter does not know stays the SDK's (an unknown one is skipped by both);
        // a record whose data is not base64 makes both refuse the answer.
        let odd = bytes::Bytes::from_static(
            br#"{"Records":[{"SequenceNumber":"1","Data":"YQ==","Extra":{"a":[1]}}],"MillisBehindLatest":5,"New":1}"#,
        );
        assert_eq!(read(true, odd.clone()).await, read(false, odd).await);
        let bad = bytes::Bytes::from_static(br#"{"Records":[{"SequenceNumber":"1","Data":"!!"}]}"#);
        let (ours, sdks) = (
            canned::client(bad.clone(), true).get_records().shard_iterator("it").send().await,
            canned::client(bad, false).get_records().shard_iterator("it").send().await,
        );
        assert!(ours.is_err() && sdks.is_err(), "{ours:?} / {sdks:?}");
    }
}
