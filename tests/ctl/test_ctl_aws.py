"""kinesnow-ctl's AWS options as a user of the documented cross-account set-up runs them: `status` assumes a role with
an External ID from a real STS (moto's server with IAM authentication, tests/sts/sts_emulator.py, which checks the
caller's signature, its policy and the role's trust policy with its sts:ExternalId condition) and reads the stream
and lease table (kinesis-local and dynalite, on free ports of their own) with the role's session; and every call
goes through an authenticating HTTP proxy (tinyproxy) given by --proxy-host, --proxy-port and --proxy-user, its
password from KINESNOW_PROXY_PASSWORD. And `--stream` takes the stream's ARN, as ConsumeKinesis' Stream Name does: every
Kinesis call then names the stream by it, the region comes from it, and the lease table is read by the name.

Recording proxies (tests/sts/recording_proxy.py) in front of each service log which access key signed each call:
kinesis-local and dynalite check no signatures, so what is asserted of their calls comes from those logs.

The tool is target/suite/kinesnow-ctl (tests/run-all.sh builds it), built here when missing.
"""

import json
import os
import socket
import subprocess
import sys
import tempfile

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests", "lib"))

from proxy import Tinyproxy  # noqa: E402
from services import SCRIPT, dynamodb_call, kinesis_call  # noqa: E402
from sts import Recorder, StsEmulator, signed_by_issued_keys  # noqa: E402

STREAM, APP = "ctl-creds", "ctl-creds-app"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ctl():
    binary = os.environ.get("KINESNOW_CTL") or os.path.join(REPO, "target", "suite", "kinesnow-ctl")
    if not os.path.exists(binary):
        subprocess.run(["cargo", "build", "--profile", "suite", "-p", "kinesnow-ctl"], cwd=REPO, check=True)
    return binary


@pytest.fixture(scope="module")
def emulators():
    """kinesis-local and dynalite on free ports, with the stream and its (empty) lease table."""
    for _ in range(3):
        env = {**os.environ, "KINESIS_PORT": str(free_port()), "KINESIS_TLS_PORT": str(free_port()),
               "DYNAMODB_PORT": str(free_port()), "SERVICES_STATE_DIR": tempfile.mkdtemp(prefix="kinesnow-ctl-svc-")}
        started = subprocess.run([SCRIPT, "start"], env=env, capture_output=True, text=True, timeout=300)
        if started.returncode == 0:
            break
        assert started.returncode == 4, started.stderr  # 4: a port was taken meanwhile; try others
    kinesis, dynamodb = f"http://127.0.0.1:{env['KINESIS_PORT']}", f"http://127.0.0.1:{env['DYNAMODB_PORT']}"
    try:
        kinesis_call("CreateStream", {"StreamName": STREAM, "ShardCount": 2}, kinesis)
        dynamodb_call("CreateTable", {
            "TableName": APP, "BillingMode": "PAY_PER_REQUEST",
            "AttributeDefinitions": [{"AttributeName": "streamName", "AttributeType": "S"},
                                     {"AttributeName": "shardId", "AttributeType": "S"}],
            "KeySchema": [{"AttributeName": "streamName", "KeyType": "HASH"},
                          {"AttributeName": "shardId", "KeyType": "RANGE"}],
        }, dynamodb)
        yield kinesis, dynamodb
    finally:
        subprocess.run([SCRIPT, "stop"], env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def sts():
    with StsEmulator() as emulator:
        yield emulator


def status(ctl, sts, keys, flags, extra_env=None):
    """`kinesnow-ctl status --json` with `keys` of the STS emulator's IAM users in the environment (the default
    chain's first source) and nothing else of AWS's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k != "KINESNOW_PROXY_PASSWORD"}
    env.update({"AWS_ACCESS_KEY_ID": sts.facts[keys]["id"], "AWS_SECRET_ACCESS_KEY": sts.facts[keys]["secret"],
                "AWS_EC2_METADATA_DISABLED": "true", **(extra_env or {})})
    return subprocess.run([ctl, "status", "--stream", STREAM, "--application", APP, "--region", "us-east-1",
                           "--json", *flags], env=env, capture_output=True, text=True, timeout=120)


def role_flags(sts, sts_url, external_id):
    return ["--assume-role-arn", sts.facts["role_arn"], "--assume-role-external-id", external_id,
            "--assume-role-session-name", "ctl-test", "--assume-role-sts-endpoint", sts_url]


def test_status_assumes_the_role_with_its_external_id_and_reads_with_the_session(ctl, emulators, sts):
    kinesis, dynamodb = emulators
    with Recorder(kinesis) as k, Recorder(dynamodb) as d, Recorder(sts.facts["sts"]) as s:
        run = status(ctl, sts, "base", ["--endpoint-url", k.url, "--dynamodb-endpoint-url", d.url,
                                        *role_flags(sts, s.url, sts.facts["external_id"])])
        assert run.returncode == 0, run.stderr
        report = json.loads(run.stdout)
        assert sorted(x["shard_id"] for x in report["shards"]) == ["shardId-000000000000", "shardId-000000000001"]
        calls = s.requests()
        assert [c["action"] for c in calls] == ["AssumeRole"], calls
        assert calls[0]["key"] == sts.facts["base"]["id"] and calls[0]["status"] == 200, calls
        issued = s.issued()
        assert len(issued) == 1, issued
        assert signed_by_issued_keys(k, issued) == set(issued), "every Kinesis call with the role's session"
        assert signed_by_issued_keys(d, issued) == set(issued), "every DynamoDB call with the role's session"


def test_a_wrong_external_id_is_refused_by_sts_and_nothing_is_read(ctl, emulators, sts):
    kinesis, dynamodb = emulators
    with Recorder(kinesis) as k, Recorder(dynamodb) as d, Recorder(sts.facts["sts"]) as s:
        run = status(ctl, sts, "base", ["--endpoint-url", k.url, "--dynamodb-endpoint-url", d.url,
                                        *role_flags(sts, s.url, "ext-not-this-one")])
        assert run.returncode == 2, run.stdout + run.stderr
        assert sts.facts["role_arn"] in run.stderr, run.stderr
        assert sts.facts["base"]["secret"] not in run.stderr + run.stdout
        assert [c["status"] for c in s.requests()] == [403] * len(s.requests()) and s.requests(), s.requests()
        assert not s.issued()
        assert not [r for r in k.requests() + d.requests() if r["key"]], "no call signed by any key reached them"


def test_every_call_goes_through_the_authenticating_proxy(ctl, emulators, sts):
    kinesis, dynamodb = emulators
    flags = ["--endpoint-url", kinesis, "--dynamodb-endpoint-url", dynamodb,
             *role_flags(sts, sts.facts["sts"], sts.facts["external_id"])]
    with Tinyproxy(user="ctl", password="proxy-pw") as proxy:
        proxied = flags + ["--proxy-host", "127.0.0.1", "--proxy-port", str(proxy.port), "--proxy-user", "ctl"]
        no_password = status(ctl, sts, "base", proxied)
        assert no_password.returncode == 2 and "KINESNOW_PROXY_PASSWORD" in no_password.stderr, no_password.stderr
        wrong = status(ctl, sts, "base", proxied, {"KINESNOW_PROXY_PASSWORD": "not-it"})
        assert wrong.returncode == 2, wrong.stdout
        assert "not-it" not in wrong.stderr and "proxy-pw" not in wrong.stderr
        run = status(ctl, sts, "base", proxied, {"KINESNOW_PROXY_PASSWORD": "proxy-pw"})
        assert run.returncode == 0, run.stderr
        assert "proxy-pw" not in run.stdout + run.stderr
        seen = proxy.requests()
        for what, url in (("STS", sts.facts["sts"]), ("Kinesis", kinesis), ("DynamoDB", dynamodb)):
            assert any(m == "POST" and t.startswith(url.rstrip("/") + "/") for m, t in seen), f"{what}: {seen}"


def stream_arn(kinesis):
    return kinesis_call("DescribeStreamSummary", {"StreamName": STREAM}, kinesis)["StreamDescriptionSummary"]["StreamARN"]


def status_of(ctl, sts, stream, extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k != "KINESNOW_PROXY_PASSWORD"}
    env.update({"AWS_ACCESS_KEY_ID": sts.facts["base"]["id"], "AWS_SECRET_ACCESS_KEY": sts.facts["base"]["secret"],
                "AWS_EC2_METADATA_DISABLED": "true"})
    return subprocess.run([ctl, "status", "--stream", stream, "--application", APP, "--json", *extra],
                          env=env, capture_output=True, text=True, timeout=120)


def test_status_names_the_stream_by_its_arn_in_every_kinesis_call(ctl, emulators, sts):
    """kinesis-local looks a stream up by the ARN a request carries: an ARN of another account with the same name finds
    nothing, so the ARN is what names the stream. The recording proxy shows each Kinesis call carrying StreamARN."""
    kinesis, dynamodb = emulators
    arn = stream_arn(kinesis)
    region = arn.split(":")[3]
    with Recorder(kinesis) as k:
        run = status_of(ctl, sts, arn, ["--endpoint-url", k.url, "--dynamodb-endpoint-url", dynamodb])
        assert run.returncode == 0, run.stderr
        report = json.loads(run.stdout)
        assert (report["stream"], report["stream_arn"]) == (STREAM, arn)
        assert sorted(x["shard_id"] for x in report["shards"]) == ["shardId-000000000000", "shardId-000000000001"]
        calls = k.requests()
        assert calls and all(c["names"] == ["StreamARN"] for c in calls), calls
    other = arn.replace(":" + arn.split(":")[4] + ":", ":210987654321:", 1)
    assert other != arn
    elsewhere = status_of(ctl, sts, other, ["--endpoint-url", kinesis, "--dynamodb-endpoint-url", dynamodb])
    assert elsewhere.returncode == 2 and other in elsewhere.stderr, elsewhere.stdout + elsewhere.stderr
    wrong_region = "eu-west-1" if region != "eu-west-1" else "us-west-2"
    mismatch = status_of(ctl, sts, arn, ["--region", wrong_region, "--endpoint-url", kinesis])
    assert mismatch.returncode == 2, mismatch.stdout
    assert f"the stream ARN's region '{region}' is not the region '{wrong_region}'" in mismatch.stderr, mismatch.stderr
    bad = status_of(ctl, sts, "arn:aws:kinesis:us-east-1:12345:stream/x", ["--endpoint-url", kinesis])
    assert bad.returncode == 2 and "not a 12-digit AWS account ID" in bad.stderr, bad.stderr
