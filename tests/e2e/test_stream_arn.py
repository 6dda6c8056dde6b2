"""ConsumeKinesis in a real NiFi given a stream's ARN as its Stream Name: it reads every record, its FlowFiles carry
the stream's name in aws.kinesis.stream.name and kinesisMetadata (as with the name) and the ARN in
kinesnow.stream.arn, its lease rows are keyed by the name, and every call passes the policy proxy with Snowflake's
IAM policy (tests/e2e/conftest.py fails the test on any denial). An ARN whose region is not the processor's
Region leaves the processor invalid with a message that says so.

What this cannot show: a stream of another AWS account. kinesis-local keeps one account and checks no credentials
or resource-based policies; rust-core/tests/stream_arn.rs shows that every call names the stream by its ARN."""

import json
import time

import pytest

import iam_proxy
from consumer_flow import ConsumerFlow, consumer_properties, create_stream, put_record, unique
from services import aws_json_call, dynamodb_endpoint, kinesis_call, local_services  # noqa: F401  (fixture)


@pytest.fixture(scope="module")
def nifi(local_services, shared_nifi):
    return shared_nifi


def arn_of(stream: str) -> str:
    return kinesis_call("DescribeStreamSummary", {"StreamName": stream})["StreamDescriptionSummary"]["StreamARN"]


def arn_properties(stream: str, arn: str, app: str, **overrides: str) -> dict:
    """ConsumeKinesis' properties with the ARN as Stream Name, through the policy proxy of the stream's name."""
    url = iam_proxy.proxy_for(stream, app)
    return consumer_properties(arn, app, **{"Endpoint Override URL": url, "DynamoDB Endpoint Override URL": url},
                               **overrides)


def test_a_stream_named_by_its_arn_is_read_and_its_flow_files_carry_its_name(nifi):
    stream, app = unique("arn-e2e"), unique("arn-e2e-app")
    create_stream(stream, 2)
    arn = arn_of(stream)
    sent = {json.dumps({"n": i}) for i in range(20)}
    for i, data in enumerate(sorted(sent)):
        put_record(stream, data.encode(), f"key-{i}")

    group = nifi.client.create_process_group(unique("stream-arn"))["id"]
    flow = ConsumerFlow.add(nifi.client, group, arn_properties(
        stream, arn, app, **{"Output Strategy": "INJECT_METADATA", "Failover Position": "SNOWFLAKE_COMMIT"}))
    flow.start()
    flow.wait_for(len(sent))
    flow.stop()

    flow_files = flow.flow_files()
    assert {json.dumps({"n": json.loads(f["content"])["n"]}) for f in flow_files} == sent
    for f in flow_files:
        assert f["attributes"]["aws.kinesis.stream.name"] == stream, f["attributes"]
        assert f["attributes"]["kinesnow.stream.arn"] == arn, f["attributes"]
        assert json.loads(f["content"])["kinesisMetadata"]["stream"] == stream
    rows = aws_json_call(dynamodb_endpoint(), "DynamoDB_20120810.Scan", {"TableName": app, "ConsistentRead": True},
                         "1.0")["Items"]
    leases = [r for r in rows if r["shardId"]["S"].startswith("shardId-")]
    assert {r["streamName"]["S"] for r in leases} == {stream}, rows
    assert len(leases) == 2, rows


def test_an_arn_of_another_region_makes_the_processor_invalid(nifi):
    stream, app = unique("arn-region"), unique("arn-region-app")
    create_stream(stream, 1)
    elsewhere = arn_of(stream).replace(":us-east-1:", ":eu-west-1:")
    group = nifi.client.create_process_group(unique("stream-arn-region"))["id"]
    flow = ConsumerFlow.add(nifi.client, group, arn_properties(stream, elsewhere, app))
    deadline = time.monotonic() + 30
    while (component := nifi.client.get(f"processors/{flow.processor_id}")["component"])["validationStatus"] == "VALIDATING":
        assert time.monotonic() < deadline, "still validating after 30 s"
        time.sleep(0.2)
    assert component["validationStatus"] == "INVALID", component
    errors = " ".join(component.get("validationErrors") or [])
    assert "region 'eu-west-1' is not the Region 'us-east-1'" in errors, errors
