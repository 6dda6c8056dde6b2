"""The Openflow drop-in, in a real NiFi: a parameter context with exactly the ten parameters of Openflow's
`Kinesis` context, created through NiFi's REST API as a user following Snowflake's set-up docs would have
it, and our Openflow-shaped flow definition (parameter-contexts/flow/kinesis-to-snowflake-openflow.json)
uploaded next to it. NiFi binds the flow to that context (no second context appears); both processors are
valid with SNOWFLAKE_HOST and the SPCS token file in NiFi's environment and nothing else set; then the
unchanged flow delivers into the Snowflake stand-in.

What the run changes, and why (nothing of it is a parameter of the flow):
- NiFi's environment sets AWS_ENDPOINT_URL (the AWS SDKs' standard variable) to Snowflake's IAM policy
  proxy in front of the emulators, so ConsumeKinesis has no endpoint override, as on Openflow;
- PutSnowflake's Snowflake URL Override points at the stand-in (plain http on 127.0.0.1: the engine trusts
  only public CAs, so https://<SNOWFLAKE_HOST> cannot reach a local server), and its Session Token File
  at a file of this test (SPCS mounts /snowflake/session/token, which a test cannot write).
"""

import json
import os
import sys
import time
import urllib.error

import pytest

import iam_proxy
from consumer_flow import built_nar, create_stream, put_record, unique
from nifi_instance import NiFiInstance, free_port
from services import local_services  # noqa: F401  (session fixture)
from standin import Standin

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "parameter-contexts"))
import apply as flow  # noqa: E402

DEFINITION = os.path.join(REPO, "parameter-contexts", "flow", "kinesis-to-snowflake-openflow.json")
OPENFLOW_PARAMETERS = [
    "AWS Access Key ID", "AWS Secret Access Key", "AWS Kinesis Region", "AWS Kinesis Stream Name",
    "AWS Kinesis Application Name", "AWS Kinesis Consumer Type", "AWS Kinesis Initial Stream Position",
    "Snowflake Destination Database", "Snowflake Destination Schema", "Snowflake Destination Table",
]
SENSITIVE = {"AWS Access Key ID", "AWS Secret Access Key"}
STREAM, APP = unique("openflow"), unique("openflow-app")
SESSION_TOKEN = "openflow-session-token-" + os.urandom(8).hex()


@pytest.fixture(scope="module")
def env(local_services, tmp_path_factory):
    work = str(tmp_path_factory.mktemp("openflow"))
    sf = Standin.start(os.path.join(work, "standin"), commit_lag_ms=500)
    sf.sql("CREATE OR REPLACE TABLE KINESIS_DB.KINESIS_SCHEMA.ORDERS (kinesisMetadata OBJECT) "
           "ENABLE_SCHEMA_EVOLUTION = TRUE ERROR_LOGGING = TRUE")
    sf.admin("PUT", "/admin/managed-tokens", {"tokens": [{"kind": "session", "token": SESSION_TOKEN, "label": "spcs"}]})
    token_file = os.path.join(work, "session-token")
    with open(token_file, "w", encoding="utf-8") as f:
        f.write(SESSION_TOKEN)
    create_stream(STREAM, 2)
    proxy = iam_proxy.proxy_for(STREAM, APP)
    nifi = NiFiInstance.start(port=free_port(), extensions=[built_nar()], environment={
        "SNOWFLAKE_HOST": "openflow-test.snowflakecomputing.com", "AWS_ENDPOINT_URL": proxy})
    yield {"sf": sf, "nifi": nifi, "token_file": token_file, "proxy": proxy}
    nifi.stop()
    sf.stop()


def openflow_values() -> dict:
    return {"AWS Access Key ID": "local", "AWS Secret Access Key": "local", "AWS Kinesis Region": "us-east-1",
            "AWS Kinesis Stream Name": STREAM, "AWS Kinesis Application Name": APP,
            "AWS Kinesis Consumer Type": "SHARED_THROUGHPUT", "AWS Kinesis Initial Stream Position": "TRIM_HORIZON",
            "Snowflake Destination Database": "KINESIS_DB", "Snowflake Destination Schema": "KINESIS_SCHEMA",
            "Snowflake Destination Table": "ORDERS"}


def loaded_ids(sf: Standin) -> int:
    """Distinct ids in the table; 0 while schema evolution has not yet added the ID column."""
    try:
        return sf.query("SELECT COUNT(DISTINCT ID) AS N FROM KINESIS_DB.KINESIS_SCHEMA.ORDERS")[0]["N"]
    except urllib.error.HTTPError as e:
        if e.code == 400:
            return 0
        raise


def test_the_openflow_context_file_has_exactly_openflows_parameters():
    with open(os.path.join(REPO, "parameter-contexts", "openflow", "kinesis.json"), encoding="utf-8") as f:
        doc = json.load(f)
    assert doc["name"] == "Kinesis"
    assert [p["name"] for p in doc["parameters"]] == OPENFLOW_PARAMETERS
    assert {p["name"] for p in doc["parameters"] if p["sensitive"]} == SENSITIVE


def test_the_flow_binds_to_openflows_context_and_is_valid_then_delivers(env):
    c, sf = env["nifi"].client, env["sf"]
    values = openflow_values()
    context = c.create_parameter_context("Kinesis", [
        {"name": n, "value": values[n], "sensitive": n in SENSITIVE, "description": ""} for n in OPENFLOW_PARAMETERS])
    contexts_before = {x["id"] for x in c.parameter_contexts()}

    with open(DEFINITION, encoding="utf-8") as f:
        definition = json.load(f)
    assert set(definition["parameterContexts"]) == {"Kinesis"}, "the definition references only Openflow's context"
    group = c.upload_flow_definition(definition, "Kinesis to Snowflake (Openflow)")
    assert group["component"]["parameterContext"]["id"] == context["id"], "bound to the existing Kinesis context"
    assert {x["id"] for x in c.parameter_contexts()} == contexts_before, "no context was created"
    bound = c.get_parameter_context(context["id"])["component"]
    assert sorted(p["parameter"]["name"] for p in bound["parameters"]) == sorted(OPENFLOW_PARAMETERS)
    ids = flow.processors_of(c, group["id"])
    for pid in (ids["consumer"], ids["sink"]):
        v = c.processor_validation(pid)
        assert v["status"] == "VALID", v
    sink = c.get_processor(ids["sink"])["component"]["config"]["properties"]
    assert sink["Authentication Strategy"] == "SNOWFLAKE_MANAGED"
    assert not sink.get("Account Identifier") and not sink.get("Snowflake URL Override"), sink
    consumer = c.get_processor(ids["consumer"])["component"]["config"]["properties"]
    assert not consumer.get("Endpoint Override URL") and not consumer.get("DynamoDB Endpoint Override URL"), consumer

    # The run: the stand-in in place of https://<SNOWFLAKE_HOST>, this test's token file in place of SPCS's.
    c.update_processor(ids["sink"], properties={"Snowflake URL Override": sf.url, "Session Token File": env["token_file"]})
    assert c.processor_validation(ids["sink"])["status"] == "VALID"
    for i in range(20):
        put_record(STREAM, json.dumps({"id": i, "kind": "openflow"}).encode(), f"k{i}")
    c.start_processor(ids["consumer"])
    c.start_processor(ids["sink"])
    deadline = time.monotonic() + 120
    count = 0
    while time.monotonic() < deadline:
        count = loaded_ids(sf)
        if count == 20:
            break
        time.sleep(0.5)
    messages = [b.get("message") for pid in (ids["consumer"], ids["sink"]) for b in c.bulletins(source_id=pid)]
    assert count == 20, f"{count} of 20 rows; bulletins: {messages}"
    requests = sf.admin("GET", "/admin/requests")
    assert SESSION_TOKEN not in json.dumps(requests), "the stand-in never logs a token"
    listed = requests["requests"] if isinstance(requests, dict) else requests
    kinds = {(r.get("auth") or {}).get("kind") for r in listed} - {None}
    assert "session" in kinds and "keypair_jwt" not in kinds, f"Openflow's session token, no key pair: {kinds}"
    c.stop_processor(ids["consumer"])
    c.stop_processor(ids["sink"])
    allowed = iam_proxy.stats(env["proxy"])["allowed"]
    assert allowed.get("kinesis:GetRecords") and allowed.get("dynamodb:UpdateItem"), allowed
