"""The product's NAR in a real NiFi: loaded, documented, bound to the parameter contexts from
parameter-contexts/, validated by the native rules, started and stopped.

Needs the NAR built first (`./mvnw package`, which tests/run-all.sh does); a missing NAR fails
the test rather than skipping it. Runs in the session's shared NiFi (tests/e2e/conftest.py).
"""

import json
import os
import subprocess
import time

import pytest

import iam_proxy
from services import kinesis_call, local_services  # noqa: F401  (session fixture)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONTEXTS = os.path.join(REPO, "parameter-contexts")
BUNDLE = {"group": "io.kinesnow", "artifact": "kinesnow-nar", "version": "0.1.0"}
CONSUMER = "io.kinesnow.nifi.processors.ConsumeKinesis"
SINK = "io.kinesnow.nifi.processors.PutSnowflake"


@pytest.fixture(scope="module")
def nifi(shared_nifi):
    """The session's shared NiFi (tests/e2e/conftest.py), which loaded the built NAR (consumer_flow.built_nar)."""
    return shared_nifi


@pytest.fixture(scope="module")
def work_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("kinesnow-e2e"))


@pytest.fixture(scope="module")
def key_file(work_dir):
    """A real unencrypted PKCS#8 RSA key, as a user would generate it for Snowflake."""
    os.makedirs(os.path.join(work_dir, "snowflake"), exist_ok=True)
    path = os.path.join(work_dir, "snowflake", "rsa_key.p8")
    subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", path],
                   check=True, capture_output=True)
    return path


def local_context(name: str, work_dir: str) -> dict:
    with open(os.path.join(CONTEXTS, "local", name), encoding="utf-8") as f:
        text = f.read()
    text = text.replace("${KINESNOW_WORK}", work_dir).replace("${SNOWFLAKE_URL}", "https://127.0.0.1:8443")
    doc = json.loads(text)
    # ConsumeKinesis reaches the emulators through Snowflake's IAM policy (tests/lib/iam_proxy.py; the
    # conftest asserts 0 denials per test).
    proxy = iam_proxy.proxy_for(STREAM, "kinesnow-demo-app")
    for p in doc["parameters"]:
        if p["name"] in ("AWS Kinesis Endpoint Override URL", "AWS DynamoDB Endpoint Override URL"):
            p["value"] = proxy
    return doc


STREAM = "kinesnow-demo"


def put_records(first: int, count: int) -> None:
    """Puts JSON records {"n": i} spread over the stream's shards."""
    import base64
    records = [{"PartitionKey": f"key-{i % 11}", "Data": base64.b64encode(json.dumps({"n": i}).encode()).decode()}
               for i in range(first, first + count)]
    for start in range(0, len(records), 100):
        kinesis_call("PutRecords", {"StreamName": STREAM, "Records": records[start:start + 100]})


@pytest.fixture(scope="module")
def stream(local_services):
    kinesis_call("CreateStream", {"StreamName": STREAM, "ShardCount": 2})
    for _ in range(100):
        if kinesis_call("DescribeStreamSummary", {"StreamName": STREAM})["StreamDescriptionSummary"]["StreamStatus"] == "ACTIVE":
            break
        time.sleep(0.1)
    put_records(0, 50)
    yield STREAM
    kinesis_call("DeleteStream", {"StreamName": STREAM})


@pytest.fixture(scope="module")
def flow(nifi, work_dir, key_file, stream):
    """Both local contexts, a combined context inheriting them, a process group bound to it, and
    both processors with every bound property referencing its parameter."""
    c = nifi.client
    ids = []
    for file in ("kinesis-source.json", "snowflake-destination.json"):
        doc = local_context(file, work_dir)
        ids.append(c.create_parameter_context(doc["name"], doc["parameters"], doc["description"])["id"])
    combined = c.post("parameter-contexts", {
        "revision": {"version": 0},
        "component": {"name": "Kinesis to Snowflake (local)", "parameters": [],
                      "inheritedParameterContexts": [{"id": i, "component": {"id": i}} for i in ids]}})
    group = c.create_process_group("Kinesis to Snowflake", parameter_context_id=combined["id"])
    with open(os.path.join(CONTEXTS, "processor-bindings.json"), encoding="utf-8") as f:
        bindings = json.load(f)
    consumer = c.add_processor(group["id"], CONSUMER, bundle=BUNDLE, name="ConsumeKinesis",
                               properties={k: "#{%s}" % v for k, v in bindings["ConsumeKinesis"].items()},
                               bulletin_level="INFO", position=(0, 0))
    sink = c.add_processor(group["id"], SINK, bundle=BUNDLE, name="PutSnowflake",
                           properties={k: "#{%s}" % v for k, v in bindings["PutSnowflake"].items()},
                           auto_terminate=["success", "failure", "invalid"], position=(0, 300))
    queue = c.connect(group["id"], consumer["id"], sink["id"], ["success"])
    c.set_auto_terminated(consumer["id"], ["parse.failure"])
    return {"source": ids[0], "destination": ids[1], "group": group["id"],
            "consumer": consumer["id"], "sink": sink["id"], "queue": queue["id"]}


def test_the_nar_is_loaded_with_both_processor_types(nifi):
    types = {t["type"]: t for t in nifi.client.processor_types(type_filter="io.kinesnow")}
    assert set(types) == {CONSUMER, SINK}
    for t in types.values():
        assert t["bundle"] == BUNDLE


def test_both_processors_are_documented(nifi):
    c = nifi.client
    consumer = c.processor_definition(CONSUMER, BUNDLE)
    assert "Amazon Kinesis" in consumer["typeDescription"]
    props = consumer["propertyDescriptors"]
    assert props["AWS Secret Access Key"]["sensitive"] is True
    assert props["Consumer Type"]["defaultValue"] == "SHARED_THROUGHPUT"
    # kinesnow-nar has no nifi-aws-service-api-nar parent: no credentials service property (kinesnow-aws-nar's is
    # checked in test_consumer_credentials_service.py).
    assert "AWS Credentials Provider Service" not in props
    assert {r["name"] for r in consumer["supportedRelationships"]} == {"success", "parse.failure"}
    sink = c.processor_definition(SINK, BUNDLE)
    assert "Snowpipe Streaming" in sink["typeDescription"]
    assert {r["name"] for r in sink["supportedRelationships"]} == {"success", "failure", "invalid", "empty"}
    assert sink["propertyDescriptors"]["Private Key"]["sensitive"] is True
    details = c.get("flow/additional-details/{group}/{artifact}/{version}/".format(**BUNDLE) + CONSUMER)
    assert "How records and checkpoints travel" in details["additionalDetails"]


def test_processors_are_valid_with_the_local_contexts(nifi, flow):
    for pid in (flow["consumer"], flow["sink"]):
        v = nifi.client.processor_validation(pid)
        assert v == {"status": "VALID", "errors": []}, v


def test_bad_parameter_values_show_the_native_messages(nifi, flow, key_file):
    c = nifi.client
    c.update_parameters(flow["source"], values={"AWS Kinesis Region": "Mars", "AWS Kinesis Application Name": "ab"})
    c.update_parameters(flow["destination"], values={"Snowflake Private Key File": "/nonexistent/key.p8"})
    try:
        consumer = c.processor_validation(flow["consumer"])
        assert consumer["status"] == "INVALID"
        text = " ".join(consumer["errors"])
        assert "'Mars' is not an AWS region code such as us-east-1" in text, text
        assert "names the DynamoDB table and the fan-out consumer" in text, text
        sink = c.processor_validation(flow["sink"])
        assert sink["status"] == "INVALID"
        assert "cannot read '/nonexistent/key.p8'" in " ".join(sink["errors"]), sink
    finally:
        source = local_context("kinesis-source.json", "")
        values = {p["name"]: p["value"] for p in source["parameters"]}
        c.update_parameters(flow["source"], values={k: values[k] for k in ("AWS Kinesis Region", "AWS Kinesis Application Name")})
        c.update_parameters(flow["destination"], values={"Snowflake Private Key File": key_file})
    assert c.processor_validation(flow["consumer"])["status"] == "VALID"
    assert c.processor_validation(flow["sink"])["status"] == "VALID"


def test_a_required_parameter_left_empty_makes_the_processor_invalid(nifi, flow):
    c = nifi.client
    c.update_parameters(flow["source"], values={"AWS Kinesis Stream Name": ""})
    try:
        v = c.processor_validation(flow["consumer"])
        assert v["status"] == "INVALID"
        assert any("Stream Name" in e for e in v["errors"]), v
    finally:
        c.update_parameters(flow["source"], values={"AWS Kinesis Stream Name": "kinesnow-demo"})
    assert c.processor_validation(flow["consumer"])["status"] == "VALID"


def wait_for_bulletin(c, source_id, text, after=None, timeout=60.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for b in c.bulletins(source_id=source_id, after=after):
            if text in (b.get("message") or ""):
                return b
        time.sleep(0.5)
    raise AssertionError(f"no bulletin containing {text!r}; have {[b.get('message') for b in c.bulletins(source_id=source_id)]}")


def wait_for_queue(c, queue_id, count, timeout=90.0) -> int:
    deadline = time.monotonic() + timeout
    n = -1
    while time.monotonic() < deadline:
        n = c.connection_queue_count(queue_id)
        if n >= count:
            return n
        time.sleep(0.5)
    raise AssertionError(f"queue holds {n} FlowFiles, expected {count}")


def test_consumer_start_stop_round_trips_deliver_every_record_once(nifi, flow):
    """Records reach the queue in front of (stopped) PutSnowflake; stopping and starting twice
    neither loses nor repeats one, because checkpoints follow NiFi's commits."""
    c = nifi.client
    pid = flow["consumer"]
    c.start_processor(pid)
    assert wait_for_queue(c, flow["queue"], 50) == 50
    # Emitted by the Rust core at INFO and forwarded through the log bridge (bulletin level INFO). Checked after
    # the first start: NiFi keeps only the last 5 bulletins of a component, and the start-ups below push it out.
    wait_for_bulletin(c, pid, "ConsumeKinesis for stream 'kinesnow-demo' (application 'kinesnow-demo-app', region us-east-1) opened")
    c.stop_processor(pid)
    put_records(50, 20)
    for _ in range(2):
        c.start_processor(pid)
        assert wait_for_queue(c, flow["queue"], 70) == 70
        time.sleep(3)  # anything repeated would arrive now
        c.stop_processor(pid)
        assert c.processor_state(pid) == "STOPPED"
        assert c.connection_queue_count(flow["queue"]) == 70


def test_put_snowflake_stop_start_with_snowflake_unreachable_keeps_every_flow_file(nifi, flow):
    """Nothing listens at the local context's Snowflake URL here: PutSnowflake takes FlowFiles, says
    why it cannot deliver them, and on stop gives every one back to the queue."""
    c = nifi.client
    pid = flow["sink"]
    for _ in range(2):
        c.start_processor(pid)
        bulletin = wait_for_bulletin(c, pid, "Connection refused")
        assert "127.0.0.1:8443" in bulletin["message"]
        c.stop_processor(pid)
        assert c.processor_state(pid) == "STOPPED"
        assert c.connection_queue_count(flow["queue"]) == 70, "every FlowFile is back in the queue"


def test_nifi_log_has_no_error_from_our_bundle(nifi, flow):
    # NiFi's start-up and everything logged since this module began, nothing of another module.
    errors = nifi.log_errors(levels=("ERROR",))
    ours = [e for e in errors if "kinesnow" in e["text"].lower()]
    assert [e["text"] for e in ours] == []
    log = nifi.log_text()
    for bad in ("UnsatisfiedLinkError", "FatalNativeException", "internal error in the native engine", "local-secret-key"):
        assert bad not in log, bad
