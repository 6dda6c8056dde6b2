""""Verify Properties" of both processors through NiFi's REST verification endpoint, in a real NiFi with the NAR:
POST /nifi-api/processors/{id}/config/verification-requests, poll it until it is complete, read its results, delete
it. Each step of each processor passes once and fails once.

It runs in the session's shared NiFi (tests/e2e/conftest.py), whose environment is set so that the AWS default
credentials chain finds nothing, quickly and without leaving 127.0.0.1 (no keys, no profile files, instance metadata
disabled: tests/lib/shared_nifi.py's NO_AWS_CREDENTIALS and CLEARED, checked here in the NiFi process' environment):
the failing case of "AWS Credentials".
The denied permission is played by tests/iam/policy_proxy.py with Snowflake's IAM policy minus kinesis:GetRecords.
"""

import os
import time

import pytest

import consumer_flow
import iam_proxy
from consumer_flow import BUNDLE, CONSUMER, consumer_properties, unique
from services import dynamodb_call, kinesis_call, local_services  # noqa: F401
from shared_nifi import CLEARED, NO_AWS_CREDENTIALS
from standin import Standin, make_key_pair

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SINK = "io.kinesnow.nifi.processors.PutSnowflake"
ACCOUNT, USER = "kinesnow-local", "KINESNOW"


@pytest.fixture(scope="module")
def env(local_services, shared_nifi, tmp_path_factory):
    nifi = shared_nifi
    environment = nifi.environment()
    assert {k: environment.get(k) for k in NO_AWS_CREDENTIALS} == NO_AWS_CREDENTIALS, \
        "the shared NiFi runs with no AWS credentials to find and no instance metadata lookup"
    assert not [k for k in CLEARED if k in environment], [k for k in CLEARED if k in environment]
    work = str(tmp_path_factory.mktemp("kinesnow-verify"))
    private_key, public_key = make_key_pair(os.path.join(work, "snowflake"))
    sf = Standin.start(os.path.join(work, "standin"), commit_lag_ms=200)
    sf.register_user(ACCOUNT, USER, public_key)
    group = nifi.client.create_process_group("verify")["id"]
    yield {"nifi": nifi, "sf": sf, "group": group, "key": private_key}
    nifi.clean()
    sf.stop()


def verify(client, processor_id: str, properties: dict, timeout: float = 120) -> dict:
    """NiFi's verification of `properties` for the processor: {step name: (outcome, explanation)}."""
    body = {"request": {"componentId": processor_id, "properties": properties, "attributes": {}}}
    req = client.post(f"/processors/{processor_id}/config/verification-requests", body)["request"]
    path = f"/processors/{processor_id}/config/verification-requests/{req['requestId']}"
    deadline = time.monotonic() + timeout
    while not req.get("complete") and time.monotonic() < deadline:
        time.sleep(0.5)
        req = client.get(path)["request"]
    client.delete(path)
    assert req.get("complete"), f"verification did not complete within {timeout} s: {req}"
    assert not req.get("failureReason"), req
    return {r["verificationStepName"]: (r["outcome"], r.get("explanation", "")) for r in req["results"]}


def outcome(results: dict, step: str) -> str:
    assert step in results, f"no step {step}: {results}"
    return results[step][0]


CONSUMER_STEPS = ["AWS Credentials", "Kinesis Stream", "Lease Table", "IAM Permissions"]


@pytest.fixture(scope="module")
def consumer(env):
    stream = unique("verify")
    consumer_flow.create_stream(stream, 2)
    props = consumer_properties(stream, f"{stream}-app")
    proc = env["nifi"].client.add_processor(env["group"], CONSUMER, bundle=BUNDLE, name="ConsumeKinesis", properties=props)
    yield {"id": proc["id"], "stream": stream, "props": props}
    kinesis_call("DeleteStream", {"StreamName": stream, "EnforceConsumerDeletion": True})


def test_consume_kinesis_passes_every_step(env, consumer):
    results = verify(env["nifi"].client, consumer["id"], consumer["props"])
    for step in CONSUMER_STEPS:
        assert outcome(results, step) == "SUCCESSFUL", results
    assert "2 shard(s), 2 open" in results["Kinesis Stream"][1], results
    assert "is absent" in results["Lease Table"][1], results
    assert "a probe would have to write: dynamodb:CreateTable" in results["IAM Permissions"][1], results


def through(props: dict, **changes) -> dict:
    """`props` with `changes`, reaching the emulators through Snowflake's IAM policy for the stream and
    Application Name they then name (tests/lib/iam_proxy.py)."""
    out = dict(props, **changes)
    url = iam_proxy.proxy_for(out["Stream Name"], out["Application Name"])
    return dict(out, **{"Endpoint Override URL": url, "DynamoDB Endpoint Override URL": url})


def test_consume_kinesis_fails_each_step(env, consumer):
    c, pid = env["nifi"].client, consumer["id"]
    no_keys = dict(consumer["props"], **{"AWS Access Key ID": None, "AWS Secret Access Key": None})
    results = verify(c, pid, no_keys)
    assert outcome(results, "AWS Credentials") == "FAILED", results
    assert all(outcome(results, s) == "SKIPPED" for s in CONSUMER_STEPS[1:]), results

    results = verify(c, pid, through(consumer["props"], **{"Stream Name": "no-such-stream-verify"}))
    assert outcome(results, "Kinesis Stream") == "FAILED" and "does not exist" in results["Kinesis Stream"][1], results

    foreign = unique("foreign-app")
    dynamodb_call("CreateTable", {"TableName": foreign, "BillingMode": "PAY_PER_REQUEST",
                                  "AttributeDefinitions": [{"AttributeName": "id", "AttributeType": "S"}],
                                  "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}]})
    time.sleep(1)
    results = verify(c, pid, through(consumer["props"], **{"Application Name": foreign}))
    assert outcome(results, "Lease Table") == "FAILED" and "another Application Name" in results["Lease Table"][1], results

    proxy = iam_proxy.start(consumer["stream"], f"{consumer['stream']}-app", without=("kinesis:GetRecords",))
    results = verify(c, pid, dict(consumer["props"], **{"Endpoint Override URL": proxy.url, "DynamoDB Endpoint Override URL": proxy.url}))
    assert outcome(results, "IAM Permissions") == "FAILED", results
    assert results["IAM Permissions"][1].startswith("denied: kinesis:GetRecords"), results
    assert outcome(results, "Kinesis Stream") == "SUCCESSFUL", results


SINK_STEPS = ["Snowflake Authentication", "Scoped Token", "Destination Pipe", "Table Columns", "Table Settings"]


@pytest.fixture(scope="module")
def sink(env):
    sf = env["sf"]
    sf.sql("CREATE OR REPLACE TABLE KINESNOW.PUBLIC.EVENTS (ID NUMBER, KIND VARCHAR) ENABLE_SCHEMA_EVOLUTION = TRUE ERROR_LOGGING = TRUE")
    props = {"Account Identifier": ACCOUNT, "Snowflake URL Override": sf.url, "User": USER,
             "Private Key File": env["key"], "Database": "KINESNOW", "Schema": "PUBLIC", "Table": "EVENTS",
             "Schema Evolution Enabled": "true"}
    proc = env["nifi"].client.add_processor(env["group"], SINK, bundle=BUNDLE, name="PutSnowflake", properties=props)
    return {"id": proc["id"], "props": props}


def test_put_snowflake_passes_every_step(env, sink):
    results = verify(env["nifi"].client, sink["id"], sink["props"])
    for step in SINK_STEPS:
        assert outcome(results, step) == "SUCCESSFUL", results
    assert "ID NUMBER(38,0), KIND VARCHAR" in results["Table Columns"][1], results
    assert "ERROR_LOGGING is on" in results["Table Settings"][1], results
    assert not env["sf"].admin("GET", "/admin/channels")["channels"], "verification opens no channel"


def test_put_snowflake_fails_each_step(env, sink):
    c, pid, sf = env["nifi"].client, sink["id"], env["sf"]
    results = verify(c, pid, dict(sink["props"], User="NOBODY"))
    assert outcome(results, "Snowflake Authentication") == "FAILED", results
    assert all(outcome(results, s) == "SKIPPED" for s in SINK_STEPS[1:]), results

    sf.admin("POST", "/admin/faults", {"kind": "expired_token", "on": "oauth", "count": 2})
    try:
        results = verify(c, pid, sink["props"])
    finally:
        sf.admin("DELETE", "/admin/faults")
    assert outcome(results, "Scoped Token") == "FAILED", results

    results = verify(c, pid, dict(sink["props"], Table="MISSING"))
    for step in ["Destination Pipe", "Table Columns", "Table Settings"]:
        assert outcome(results, step) == "FAILED", results

    sf.sql("CREATE OR REPLACE TABLE KINESNOW.PUBLIC.PLAIN (ID NUMBER)")
    results = verify(c, pid, dict(sink["props"], Table="PLAIN"))
    assert outcome(results, "Table Settings") == "FAILED", results  # Schema Evolution Enabled, but the table has it off
    assert "Warning: ERROR_LOGGING is off" in results["Table Settings"][1], results
    results = verify(c, pid, dict(sink["props"], Table="PLAIN", **{"Schema Evolution Enabled": "false"}))
    assert outcome(results, "Table Settings") == "SUCCESSFUL", results  # ERROR_LOGGING off is a warning only
    assert "Warning: ERROR_LOGGING is off" in results["Table Settings"][1], results
