"""ConsumeKinesis with NiFi's AWS credentials controller service in a real NiFi (issue 19): kinesnow-aws-nar, whose
parent is nifi-aws-service-api-nar, next to that parent (a stand-in built from the published jar, since the Maven
repository here does not serve NiFi's own) and a test-only credentials service NAR whose service assumes a role
through the AWS Java SDK's STS client (tests/nifi/aws-nars). STS is moto's server (tests/sts), which checks the
trust policy and the external ID; recording proxies in front of kinesis-local, dynalite and STS log which access key
signed each call.

- A service whose sessions last 60 s: the processor reads records for more than a session's lifetime, the engine
  asks the service again before each session ends, and every Kinesis and DynamoDB call carries a session's key and
  token while it is valid.
- A service whose keys may not assume the role: an ERROR bulletin names the service and STS' reason, with no secret,
  and no Kinesis or DynamoDB call is made.
- Verify Properties resolves the service's credentials through the engine.

That kinesnow-nar (no AWS parent) loads in a NiFi without nifi-aws-service-api-nar is what every other end-to-end
test shows: their NiFi has no such NAR. The last test shows what the docs say of kinesnow-aws-nar in such a NiFi:
NiFi skips it, saying its parent is missing.
"""

import glob
import json
import os
import subprocess
import time

import pytest

from consumer_flow import AWS_BUNDLE, REPO, ConsumerFlow, built_aws_nar, consumer_properties, create_stream, \
    put_record, unique
from nifi_instance import NiFiInstance, free_port
from services import dynamodb_endpoint, kinesis_endpoint, local_services  # noqa: F401  (fixture)
from sts import Recorder, StsEmulator, signed_by_issued_keys

SERVICE_TYPE = "com.kinesnow.tests.awscreds.TestAwsCredentialsService"
PROPERTY = "AWS Credentials Provider Service"


def test_nars() -> list[str]:
    out = subprocess.run([f"{REPO}/tests/nifi/aws-nars/build.sh"], check=True, capture_output=True, text=True)
    return out.stdout.split()


test_nars.__test__ = False  # a helper, not a test


@pytest.fixture(scope="module")
def nifi(local_services):
    inst = NiFiInstance.start(port=free_port(), extensions=[built_aws_nar(), *test_nars()])
    yield inst
    if inst.is_running():
        inst.stop()


@pytest.fixture(scope="module")
def sts():
    with StsEmulator() as emulator:
        yield emulator


@pytest.fixture()
def recorders(sts):
    with Recorder(kinesis_endpoint()) as kinesis, Recorder(dynamodb_endpoint()) as dynamodb, \
            Recorder(sts.facts["sts"]) as assume:
        yield {"kinesis": kinesis, "dynamodb": dynamodb, "sts": assume}


def add_service(client, group: str, name: str, properties: dict) -> str:
    service = client.create_controller_service(group, SERVICE_TYPE, properties=properties, name=name)["id"]
    client.set_controller_service_state(service, "ENABLED")
    return service


def role_service(sts, recorders, keys: dict, seconds: int) -> dict:
    return {"Access Key ID": keys["id"], "Secret Access Key": keys["secret"], "Assume Role ARN": sts.facts["role_arn"],
            "External ID": sts.facts["external_id"], "Session Name": "nifi-service-e2e",
            "Session Seconds": str(seconds), "STS Endpoint": recorders["sts"].url}


def consumer_with_service(recorders, stream: str, app: str, service: str) -> dict:
    props = consumer_properties(stream, app, **{
        "Endpoint Override URL": recorders["kinesis"].url,
        "DynamoDB Endpoint Override URL": recorders["dynamodb"].url})
    for name in ("AWS Access Key ID", "AWS Secret Access Key"):
        props.pop(name)
    props[PROPERTY] = service
    return props


def stream_with_records(prefix: str, n: int) -> tuple[str, str]:
    stream, app = unique(prefix), unique(f"{prefix}-app")
    create_stream(stream, 2)
    for i in range(n):
        put_record(stream, json.dumps({"n": i}).encode(), f"key-{i % 5}")
    return stream, app


def verify(client, processor_id: str, properties: dict, timeout: float = 120) -> dict:
    """NiFi's verification of `properties`: {step name: (outcome, explanation)} (as tests/e2e/test_verify.py)."""
    body = {"request": {"componentId": processor_id, "properties": properties, "attributes": {}}}
    req = client.post(f"/processors/{processor_id}/config/verification-requests", body)["request"]
    path = f"/processors/{processor_id}/config/verification-requests/{req['requestId']}"
    deadline = time.monotonic() + timeout
    while not req.get("complete") and time.monotonic() < deadline:
        time.sleep(0.5)
        req = client.get(path)["request"]
    client.delete(path)
    assert req.get("complete") and not req.get("failureReason"), req
    return {r["verificationStepName"]: (r["outcome"], r.get("explanation", "")) for r in req["results"]}


def test_kinesnow_aws_nar_offers_the_service_property(nifi):
    definition = nifi.client.processor_definition("io.kinesnow.nifi.processors.ConsumeKinesis", AWS_BUNDLE)
    documented = definition["propertyDescriptors"][PROPERTY]
    assert documented["typeProvidedByValue"]["type"] == \
        "org.apache.nifi.processors.aws.credentials.provider.AwsCredentialsProviderService", documented
    group = nifi.client.create_process_group(unique("svc-offered"))["id"]
    flow = ConsumerFlow.add(nifi.client, group, consumer_properties("s", "s-app"), bundle=AWS_BUNDLE)
    descriptor = nifi.client.get_processor(flow.processor_id)["component"]["config"]["descriptors"][PROPERTY]
    assert descriptor["identifiesControllerService"] == \
        "org.apache.nifi.processors.aws.credentials.provider.AwsCredentialsProviderService", descriptor
    assert descriptor["required"] is False


def test_the_service_s_short_sessions_sign_every_call_across_their_renewal(nifi, sts, recorders):
    stream, app = stream_with_records("svc", 20)
    group = nifi.client.create_process_group(unique("svc"))["id"]
    base = sts.facts["base"]
    service = add_service(nifi.client, group, "Reader role (e2e)", role_service(sts, recorders, base, 60))
    props = consumer_with_service(recorders, stream, app, service)
    flow = ConsumerFlow.add(nifi.client, group, props, bundle=AWS_BUNDLE)
    validation = nifi.client.processor_validation(flow.processor_id)
    assert validation["status"] == "VALID", validation

    started = time.monotonic()
    flow.start()
    try:
        flow.wait_for(20, timeout=120)
        # Outlive the first session (60 s), then read records written after it ended.
        time.sleep(max(0.0, 75 - (time.monotonic() - started)))
        for i in range(20, 30):
            put_record(stream, json.dumps({"n": i}).encode(), f"key-{i % 5}")
        flow.wait_for(30, timeout=90)
    finally:
        flow.stop()
    assert sorted(json.loads(f["content"])["n"] for f in flow.flow_files()) == list(range(30))

    issued = recorders["sts"].issued()
    for r in recorders["sts"].requests():
        assert (r["action"], r["key"], r["status"]) == ("AssumeRole", base["id"], 200), r
    assert len(issued) >= 2, f"one session in {time.monotonic() - started:.0f} s: the service was not asked again"
    seen = signed_by_issued_keys(recorders["kinesis"], issued)
    seen |= signed_by_issued_keys(recorders["dynamodb"], issued)
    assert len(seen) >= 2, f"every call was signed by one session's key: {seen}"
    messages = flow.bulletin_messages()
    assert not any(base["secret"] in m for m in messages)
    assert not any(v["token"] in m for v in issued.values() for m in messages)


def test_a_service_whose_role_is_refused_is_a_bulletin_naming_it_and_the_reason_without_secrets(nifi, sts, recorders):
    stream, app = stream_with_records("svc-refused", 1)
    group = nifi.client.create_process_group(unique("svc-refused"))["id"]
    denied = sts.facts["denied_base"]
    service = add_service(nifi.client, group, "Refused role (e2e)", role_service(sts, recorders, denied, 900))
    flow = ConsumerFlow.add(nifi.client, group, consumer_with_service(recorders, stream, app, service),
                            bundle=AWS_BUNDLE)
    flow.start()
    deadline = time.monotonic() + 60
    errors = []
    while time.monotonic() < deadline and not errors:
        errors = [b["message"] for b in nifi.client.bulletins(source_id=flow.processor_id) if b.get("level") == "ERROR"]
        time.sleep(0.5)
    flow.stop()
    assert errors, f"no ERROR bulletin: {flow.bulletin_messages()}"
    message = errors[0]
    assert "no credentials from the AWS credentials service 'Refused role (e2e)'" in message, message
    assert "not authorized" in message and "sts:AssumeRole" in message, message
    for secret in (denied["secret"], sts.facts["base"]["secret"], sts.facts["external_id"]):
        assert all(secret not in m for m in flow.bulletin_messages()), secret
    assert all(r["key"] is None for r in recorders["kinesis"].requests() + recorders["dynamodb"].requests())


def test_verify_properties_resolves_the_service_s_credentials(nifi, sts, recorders):
    stream, app = stream_with_records("svc-verify", 1)
    group = nifi.client.create_process_group(unique("svc-verify"))["id"]
    service = add_service(nifi.client, group, "Verified role (e2e)", role_service(sts, recorders, sts.facts["base"], 900))
    props = consumer_with_service(recorders, stream, app, service)
    flow = ConsumerFlow.add(nifi.client, group, props, bundle=AWS_BUNDLE)
    results = verify(nifi.client, flow.processor_id, props)
    outcome, text = results["AWS Credentials"]
    assert outcome == "SUCCESSFUL", results
    assert "temporary credentials from the AWS credentials service 'Verified role (e2e)'" in text, text
    assert results["Kinesis Stream"][0] == "SUCCESSFUL", results
    issued = recorders["sts"].issued()
    assert issued, "the verification did not go through the service's STS session"
    signed_by_issued_keys(recorders["kinesis"], issued)

    # With a credential property of its own as well, the processor is invalid, naming both.
    nifi.client.update_processor(flow.processor_id, properties={"Assume Role ARN": sts.facts["role_arn"]})
    validation = nifi.client.processor_validation(flow.processor_id)
    assert validation["status"] == "INVALID", validation
    assert any(PROPERTY in e and "Assume Role ARN" in e for e in validation["errors"]), validation


def test_kinesnow_aws_nar_is_skipped_by_a_nifi_without_its_parent(local_services):
    inst = NiFiInstance.start(port=free_port(), extensions=[built_aws_nar()])
    try:
        bundles = [t["bundle"]["artifact"] for t in inst.client.processor_types()
                   if t["type"] == "io.kinesnow.nifi.processors.ConsumeKinesis"]
        assert bundles == [], bundles
        logs = glob.glob(os.path.join(inst.instance_dir, "logs", "*app*.log"))
        text = "".join(open(path, encoding="utf-8", errors="replace").read() for path in logs)
        assert "Unable to resolve required dependency 'nifi-aws-service-api-nar'. Skipping NAR" in text
        assert "kinesnow-aws-nar-0.1.0.nar" in text
    finally:
        inst.stop()
