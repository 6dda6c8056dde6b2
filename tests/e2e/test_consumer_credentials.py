"""ConsumeKinesis' own credential properties in a real NiFi (issue 19): an assumed role with an external ID,
a web identity token, and a refused role, against a real STS (moto's server from PyPI, tests/sts), with
recording proxies in front of kinesis-local, dynalite and STS that log which access key signed each call.

kinesis-local and dynalite check no signatures: the proxies' logs are what shows that every Kinesis and
DynamoDB call of the processor carried the role session's credentials. The engine-level tests (a session
renewed across two 60-second lifetimes, a profile of a credentials file) are in rust-core/tests/aws_credentials.rs;
NiFi's validation keeps the session time at 900 s or more, as AWS does.
"""

import json
import time

import pytest

from consumer_flow import ConsumerFlow, consumer_properties, create_stream, put_record, unique
from services import dynamodb_endpoint, kinesis_endpoint, local_services  # noqa: F401  (fixture)
from sts import Recorder, StsEmulator, signed_by_issued_keys


@pytest.fixture(scope="module")
def nifi(local_services, shared_nifi):
    """The session's shared NiFi (tests/e2e/conftest.py); this module's groups are removed when it ends."""
    return shared_nifi


@pytest.fixture(scope="module")
def sts():
    with StsEmulator() as emulator:
        yield emulator


@pytest.fixture()
def recorders(sts):
    with Recorder(kinesis_endpoint()) as kinesis, Recorder(dynamodb_endpoint()) as dynamodb, \
            Recorder(sts.facts["sts"]) as assume, Recorder(sts.facts["sts_web"]) as web:
        yield {"kinesis": kinesis, "dynamodb": dynamodb, "sts": assume, "sts_web": web}


def stream_with_records(prefix: str, n: int) -> tuple[str, str]:
    stream, app = unique(prefix), unique(f"{prefix}-app")
    create_stream(stream, 2)
    for i in range(n):
        put_record(stream, json.dumps({"n": i}).encode(), f"key-{i % 5}")
    return stream, app


def through(recorders: dict, stream: str, app: str, **credentials: str) -> dict:
    props = consumer_properties(stream, app, **{
        "Endpoint Override URL": recorders["kinesis"].url,
        "DynamoDB Endpoint Override URL": recorders["dynamodb"].url})
    for name in ("AWS Access Key ID", "AWS Secret Access Key"):
        props.pop(name)
    props.update(credentials)
    return props


def run_flow(nifi, props: dict, n: int) -> ConsumerFlow:
    group = nifi.client.create_process_group(unique("creds"))["id"]
    flow = ConsumerFlow.add(nifi.client, group, props)
    flow.start()
    try:
        flow.wait_for(n, timeout=120)
    finally:
        flow.stop()
    return flow


def test_an_assumed_role_with_an_external_id_signs_every_call(nifi, sts, recorders):
    stream, app = stream_with_records("assumed", 20)
    base = sts.facts["base"]
    props = through(recorders, stream, app, **{
        "AWS Access Key ID": base["id"], "AWS Secret Access Key": base["secret"],
        "Assume Role ARN": sts.facts["role_arn"], "Assume Role External ID": sts.facts["external_id"],
        "Assume Role Session Name": "nifi-e2e", "Assume Role Session Time": "900",
        "Assume Role STS Endpoint Override": recorders["sts"].url})
    flow = run_flow(nifi, props, 20)
    assert sorted(json.loads(f["content"])["n"] for f in flow.flow_files()) == list(range(20))

    issued = recorders["sts"].issued()
    assert issued, "STS issued no credentials"
    for r in recorders["sts"].requests():
        assert (r["action"], r["key"], r["status"]) == ("AssumeRole", base["id"], 200), r
    signed_by_issued_keys(recorders["kinesis"], issued)
    signed_by_issued_keys(recorders["dynamodb"], issued)
    assert not any(base["secret"] in m for m in flow.bulletin_messages())


def test_a_web_identity_token_file_signs_every_call(nifi, sts, recorders, tmp_path):
    stream, app = stream_with_records("irsa", 10)
    token = tmp_path / "token"
    token.write_text("eyJhbGciOiJSUzI1NiJ9.e2e-token.sig\n")
    props = through(recorders, stream, app, **{
        "Web Identity Token File": str(token), "Assume Role ARN": sts.facts["web_role_arn"],
        "Assume Role STS Endpoint Override": recorders["sts_web"].url})
    run_flow(nifi, props, 10)
    issued = recorders["sts_web"].issued()
    assert all(r["action"] == "AssumeRoleWithWebIdentity" and r["key"] is None for r in recorders["sts_web"].requests())
    signed_by_issued_keys(recorders["kinesis"], issued)
    signed_by_issued_keys(recorders["dynamodb"], issued)


def test_a_refused_role_is_a_bulletin_naming_the_role_and_the_reason_without_secrets(nifi, sts, recorders):
    stream, app = stream_with_records("refused", 1)
    denied = sts.facts["denied_base"]
    props = through(recorders, stream, app, **{
        "AWS Access Key ID": denied["id"], "AWS Secret Access Key": denied["secret"],
        "Assume Role ARN": sts.facts["role_arn"], "Assume Role External ID": sts.facts["external_id"],
        "Assume Role STS Endpoint Override": recorders["sts"].url})
    group = nifi.client.create_process_group(unique("refused"))["id"]
    flow = ConsumerFlow.add(nifi.client, group, props)
    flow.start()
    deadline = time.monotonic() + 60
    errors = []
    while time.monotonic() < deadline and not errors:
        errors = [b["message"] for b in nifi.client.bulletins(source_id=flow.processor_id) if b.get("level") == "ERROR"]
        time.sleep(0.5)
    flow.stop()
    assert errors, f"no ERROR bulletin: {flow.bulletin_messages()}"
    message = errors[0]
    assert sts.facts["role_arn"] in message and "not authorized" in message, message
    for secret in (denied["secret"], sts.facts["base"]["secret"], sts.facts["external_id"]):
        assert all(secret not in m for m in flow.bulletin_messages()), secret
    assert all(r["key"] is None for r in recorders["kinesis"].requests() + recorders["dynamodb"].requests())
