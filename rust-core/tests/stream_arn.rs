//! ConsumeKinesis given a stream's ARN instead of its name, against real kinesis-local and
//! dynalite: every Kinesis call names the stream by `StreamARN` and none by `StreamName`; the lease
//! rows, the FlowFiles' `kinesisMetadata` and the link to PutSnowflake are what they are for the
//! name; Verify reports the stream's account.
//!
//! What the emulators cannot show: a stream of another AWS account. kinesis-local keeps one
//! account (its `AWS_ACCOUNT_ID`) and checks no credentials, let alone a stream's resource-based
//! policy. What is shown instead: kinesis-local looks a stream up by the ARN when a request carries
//! one, so an ARN of another account with the same stream name finds nothing, which a request
//! carrying the name would not; and the requests are recorded, so each is seen to carry the ARN.

use crate::support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::iam_policy::PolicyProxy;
use aws_sdk_kinesis::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_kinesis::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_kinesis::error::BoxError;
use kinesnow_core::aws::{clients, AwsClients};
use kinesnow_core::component::Component;
use kinesnow_core::config::consume_kinesis::ConsumerType;
use kinesnow_core::config::{ComponentType, ConsumeKinesisConfig, PropertyMap};
use kinesnow_core::consumer::resume::FailoverPosition;
use kinesnow_core::consumer::{ConsumerEngine, ConsumerError, EngineSettings};
use kinesnow_core::ffi::batch;
use kinesnow_core::kinesis::address::StreamRef;
use kinesnow_core::kinesis::KinesisError;
use kinesnow_core::lease::LeaseStore;
use kinesnow_core::verify::{self, Outcome};
use support::{arn_of, aws, by_shard, create_stream, drain, log, of_other_account, put, settings, Emulators};

/// Every Kinesis request's operation and body, as sent.
#[derive(Clone, Default, Debug)]
struct Recorder(Arc<Mutex<Vec<(String, String)>>>);

impl Recorder {
    fn install(&self, c: &mut AwsClients) {
        c.kinesis =
            aws_sdk_kinesis::Client::from_conf(c.kinesis.config().to_builder().interceptor(self.clone()).build());
    }

    fn requests(&self) -> Vec<(String, String)> {
        self.0.lock().unwrap().clone()
    }
}

impl Intercept for Recorder {
    fn name(&self) -> &'static str {
        "kinesnow-test-recorder"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let request = context.request();
        let operation = request.headers().get("x-amz-target").and_then(|t| t.rsplit('.').next()).unwrap_or("");
        let body = request.body().bytes().map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default();
        self.0.lock().unwrap().push((operation.to_owned(), body));
        Ok(())
    }
}

fn by_arn(stream: &str, arn: &str, app: &str) -> EngineSettings {
    EngineSettings {
        stream_arn: Some(arn.to_owned()),
        failover_position: FailoverPosition::SnowflakeCommit,
        ..settings(stream, app)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_named_by_its_arn_is_read_with_the_arn_on_every_call() {
    log();
    let emulators = Emulators::start("stream-arn");
    let c = clients(&aws(&emulators)).await;
    create_stream(&c, "arn-orders", 2).await;
    let arn = arn_of(&c, "arn-orders").await;
    let records = put(&c, "arn-orders", 0, 60).await;

    let recorder = Recorder::default();
    let mut engine_clients = clients(&aws(&emulators)).await;
    recorder.install(&mut engine_clients);
    let engine = ConsumerEngine::start(by_arn("arn-orders", &arn, "arn-app"), engine_clients).await.unwrap();
    let (got, _) = drain(&engine, records.len(), true).await;
    assert_eq!(got, by_shard(&records), "every record, once, in shard order");
    let link = engine.link().expect("SNOWFLAKE_COMMIT links the FlowFiles").clone();
    engine.stop().await;

    // The link to PutSnowflake (kinesnow.stream.arn) is the stream owner's ARN, as DescribeStream gave it.
    assert_eq!((link.stream.as_str(), link.application.as_str()), (arn.as_str(), "arn-app"));
    // The lease rows are keyed by the stream's name, as with a name.
    let rows = LeaseStore::new(c.dynamodb.clone(), "arn-app", "arn-orders").rows().await.unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");

    let requests = recorder.requests();
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (operation, body) in &requests {
        *seen.entry(operation.as_str()).or_default() += 1;
        assert!(!body.contains("\"StreamName\""), "{operation} named the stream by name: {body}");
        let paged = operation == "ListShards" && body.contains("\"NextToken\"");
        assert!(paged || body.contains(&format!("\"StreamARN\":\"{arn}\"")), "{operation} without the ARN: {body}");
    }
    for operation in ["DescribeStream", "ListShards", "GetShardIterator", "GetRecords"] {
        assert!(seen.get(operation).is_some_and(|n| *n > 0), "no {operation} among {seen:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_arn_of_another_account_does_not_reach_the_stream_of_the_same_name() {
    log();
    let emulators = Emulators::start("stream-arn-account");
    let c = clients(&aws(&emulators)).await;
    create_stream(&c, "arn-elsewhere", 1).await;
    let other = of_other_account(&arn_of(&c, "arn-elsewhere").await);
    let started =
        ConsumerEngine::start(by_arn("arn-elsewhere", &other, "elsewhere-app"), clients(&aws(&emulators)).await).await;
    match started {
        Err(ConsumerError::Kinesis(KinesisError::StreamNotFound { stream, .. })) => assert_eq!(stream, other),
        Err(e) => panic!("expected the stream not to be found, got {e}"),
        Ok(_) => panic!("the engine started on an ARN of another account: the ARN was not what named the stream"),
    }
}

fn props<'a>(e: &'a Emulators, stream: &'a str, app: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("Stream Name", stream),
        ("Application Name", app),
        ("Region", "us-east-1"),
        ("AWS Access Key ID", "local"),
        ("AWS Secret Access Key", "local"),
        ("Endpoint Override URL", e.kinesis.as_str()),
        ("DynamoDB Endpoint Override URL", e.dynamodb.as_str()),
    ]
}

#[test]
fn flow_files_of_a_stream_named_by_its_arn_carry_its_name_and_verify_names_its_account() {
    log();
    let emulators = Emulators::start("stream-arn-component");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let c = runtime.block_on(clients(&aws(&emulators)));
    runtime.block_on(create_stream(&c, "arn-clicks", 1));
    let arn = runtime.block_on(arn_of(&c, "arn-clicks"));
    let account = arn.split(':').nth(4).unwrap().to_owned();
    runtime.block_on(put(&c, "arn-clicks", 0, 3));

    let mut pairs = props(&emulators, &arn, "clicks-app");
    pairs.extend([("Output Strategy", "INJECT_METADATA"), ("Max Batch Duration", "200 ms")]);
    let component = Component::open(ComponentType::ConsumeKinesis, &PropertyMap::from_pairs(pairs)).unwrap();
    component.start().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while let Some(status) = component.startup_status() {
        assert!(Instant::now() < deadline, "the engine did not start: {status}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut flow_files = Vec::new();
    while flow_files.len() < 3 {
        assert!(Instant::now() < deadline, "only {} FlowFiles arrived", flow_files.len());
        if let Some(bytes) = component.poll_batch().unwrap().map(|b| batch::outgoing_bytes(b).unwrap()) {
            let (id, shards) = batch::decode(&bytes).expect("a well-formed batch");
            flow_files.extend(shards.into_iter().flat_map(|s| s.flow_files));
            component.ack(id).unwrap();
        } else {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    component.stop();
    for f in &flow_files {
        let json: serde_json::Value = serde_json::from_slice(&f.content).unwrap();
        assert_eq!(json["kinesisMetadata"]["stream"], "arn-clicks", "{json}");
    }

    let config = ConsumeKinesisConfig::parse(&PropertyMap::from_pairs(props(&emulators, &arn, "clicks-app"))).unwrap();
    let steps = runtime.block_on(verify::consume_kinesis::verify(&config));
    let stream = steps.iter().find(|s| s.name == verify::consume_kinesis::STREAM_STEP).unwrap();
    assert_eq!(stream.outcome, Outcome::Successful, "{}", stream.explanation);
    let expected = format!("stream 'arn-clicks' of account {account} in us-east-1, named by its ARN: 1 shard(s)");
    assert!(stream.explanation.contains(&expected), "{}", stream.explanation);

    let other = of_other_account(&arn);
    let config =
        ConsumeKinesisConfig::parse(&PropertyMap::from_pairs(props(&emulators, &other, "clicks-app"))).unwrap();
    let steps = runtime.block_on(verify::consume_kinesis::verify(&config));
    let stream = steps.iter().find(|s| s.name == verify::consume_kinesis::STREAM_STEP).unwrap();
    assert_eq!(stream.outcome, Outcome::Failed, "{}", stream.explanation);
    assert!(stream.explanation.contains("check its account, region and name"), "{}", stream.explanation);
}

/// Snowflake's IAM policy (enforced by `tests/iam/policy_proxy.py`, which takes a request's
/// resource from its `StreamARN`) allows every call of a stream named by its ARN: polling, Enhanced
/// Fan-Out and the consumer's removal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_named_by_its_arn_needs_only_snowflakes_policy_polling_and_fan_out() {
    log();
    let e = Emulators::start("stream-arn-iam");
    let direct = clients(&aws(&e)).await;
    create_stream(&direct, "arn-iam", 2).await;
    let arn = arn_of(&direct, "arn-iam").await;
    let proxy = PolicyProxy::start(&e, "arn-iam", "arn-iam-app", &[]).await;
    let polling = EngineSettings { stream_arn: Some(arn.clone()), ..settings("arn-iam", "arn-iam-app") };

    let first = put(&direct, "arn-iam", 0, 20).await;
    let engine = ConsumerEngine::start(polling.clone(), clients(&proxy.aws(&e)).await).await.unwrap();
    let (got, _) = drain(&engine, first.len(), true).await;
    assert_eq!(got, by_shard(&first), "polling");
    engine.stop().await;

    let fan_out = EngineSettings { consumer_type: ConsumerType::EnhancedFanOut, ..polling };
    let second = put(&direct, "arn-iam", 20, 10).await;
    let engine = ConsumerEngine::start(fan_out, clients(&proxy.aws(&e)).await).await.unwrap();
    let (got, _) = drain(&engine, second.len(), true).await;
    assert_eq!(got, by_shard(&second), "Enhanced Fan-Out, from the polling checkpoints");
    engine.stop().await;
    let kinesis = clients(&proxy.aws(&e)).await.kinesis;
    kinesnow_core::kinesis::fan_out::deregister(&kinesis, StreamRef::Arn(&arn), "arn-iam-app").await.unwrap();
    let consumers = direct.kinesis.list_stream_consumers().stream_arn(&arn).send().await.unwrap();
    let deleting = aws_sdk_kinesis::types::ConsumerStatus::Deleting;
    assert!(consumers.consumers().iter().all(|c| c.consumer_status() == &deleting), "{consumers:?}");

    proxy.assert_only_allowed(&[
        "kinesis:DescribeStream",
        "kinesis:ListShards",
        "kinesis:GetShardIterator",
        "kinesis:GetRecords",
        "kinesis:RegisterStreamConsumer",
        "kinesis:DescribeStreamConsumer",
        "kinesis:SubscribeToShard",
        "kinesis:DeregisterStreamConsumer",
    ]);
}
