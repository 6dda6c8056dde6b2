"""Starts the pinned Kinesis/DynamoDB emulators with tests/services/local-services.sh on free ports
(own state dir, so a developer's running emulators are not touched), makes real API calls, stops them.
Run: python3 -m pytest tests/services -v
"""

import base64
import json
import os
import socket
import subprocess
import time

import pytest

import services
from services import AwsJsonError, dynamodb_call, ensure_services, kinesis_call

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "local-services.sh")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _pid(state_dir, name):
    with open(os.path.join(state_dir, f"{name}.pid")) as f:
        return int(f.read())


@pytest.fixture(scope="module")
def emulators(tmp_path_factory):
    saved = {k: os.environ.get(k) for k in ("KINESIS_PORT", "KINESIS_TLS_PORT", "DYNAMODB_PORT", "SERVICES_STATE_DIR")}
    ports = {"KINESIS_PORT": _free_port(), "KINESIS_TLS_PORT": _free_port(), "DYNAMODB_PORT": _free_port()}
    state = str(tmp_path_factory.mktemp("services-state"))
    os.environ.update({k: str(v) for k, v in ports.items()})
    os.environ["SERVICES_STATE_DIR"] = state
    t0 = time.monotonic()
    proc = subprocess.run([SCRIPT, "start"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    print(f"\nlocal-services.sh start: {time.monotonic() - t0:.2f}s; {proc.stdout.strip()}")
    yield {"state": state, **ports, "kinesis": services.kinesis_endpoint(), "dynamodb": services.dynamodb_endpoint()}
    subprocess.run([SCRIPT, "stop"], capture_output=True, text=True, timeout=120)
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def test_lockfile_pins_versions_without_registry_urls():
    with open(os.path.join(HERE, "package-lock.json")) as f:
        lock = json.load(f)
    pkgs = lock["packages"]
    assert pkgs["node_modules/kinesis-local"]["version"] == "0.6.2"
    assert pkgs["node_modules/dynalite"]["version"] == "4.0.0"
    assert not [name for name, p in pkgs.items() if "resolved" in p]
    assert all(p.get("integrity") for name, p in pkgs.items() if name)


def test_status_reports_running(emulators):
    out = subprocess.run([SCRIPT, "status"], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert str(emulators["KINESIS_PORT"]) in out.stdout and str(emulators["DYNAMODB_PORT"]) in out.stdout


def test_kinesis_local_answers_real_calls(emulators):
    ep = emulators["kinesis"]
    name = f"harness-{time.time_ns()}"
    assert name not in kinesis_call("ListStreams", {}, ep)["StreamNames"]
    kinesis_call("CreateStream", {"StreamName": name, "ShardCount": 2}, ep)
    summary = kinesis_call("DescribeStreamSummary", {"StreamName": name}, ep)["StreamDescriptionSummary"]
    assert summary["StreamStatus"] == "ACTIVE"  # *_DURATION=0ms: active at once
    assert summary["OpenShardCount"] == 2
    assert name in kinesis_call("ListStreams", {}, ep)["StreamNames"]

    put = kinesis_call("PutRecord", {"StreamName": name, "PartitionKey": "k",
                                     "Data": base64.b64encode(b"hello").decode()}, ep)
    it = kinesis_call("GetShardIterator", {"StreamName": name, "ShardId": put["ShardId"],
                                           "ShardIteratorType": "TRIM_HORIZON"}, ep)["ShardIterator"]
    recs = kinesis_call("GetRecords", {"ShardIterator": it, "Limit": 10}, ep)["Records"]
    assert [base64.b64decode(r["Data"]) for r in recs] == [b"hello"]

    with pytest.raises(AwsJsonError) as err:
        kinesis_call("DescribeStreamSummary", {"StreamName": name + "-missing"}, ep)
    assert err.value.status == 400 and "ResourceNotFound" in err.value.error_type
    kinesis_call("DeleteStream", {"StreamName": name}, ep)


def test_dynalite_answers_real_calls(emulators):
    ep = emulators["dynamodb"]
    table = f"leases-{time.time_ns()}"
    assert table not in dynamodb_call("ListTables", {}, ep)["TableNames"]
    dynamodb_call("CreateTable", {
        "TableName": table, "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [{"AttributeName": "leaseKey", "AttributeType": "S"}],
        "KeySchema": [{"AttributeName": "leaseKey", "KeyType": "HASH"}]}, ep)
    # dynalite, like DynamoDB, answers CREATING first; on a loaded machine it can stay so for a while
    deadline = time.monotonic() + 30
    while dynamodb_call("DescribeTable", {"TableName": table}, ep)["Table"]["TableStatus"] != "ACTIVE":
        assert time.monotonic() < deadline, "the table never became ACTIVE"
        time.sleep(0.1)
    assert table in dynamodb_call("ListTables", {}, ep)["TableNames"]

    item = {"leaseKey": {"S": "shard-0"}, "owner": {"S": "w1"}}
    cond = {"ConditionExpression": "attribute_not_exists(leaseKey)"}
    dynamodb_call("PutItem", {"TableName": table, "Item": item, **cond}, ep)
    with pytest.raises(AwsJsonError) as err:
        dynamodb_call("PutItem", {"TableName": table, "Item": item, **cond}, ep)
    assert "ConditionalCheckFailed" in err.value.error_type
    got = dynamodb_call("GetItem", {"TableName": table, "Key": {"leaseKey": {"S": "shard-0"}},
                                    "ConsistentRead": True}, ep)
    assert got["Item"]["owner"] == {"S": "w1"}
    dynamodb_call("DeleteTable", {"TableName": table}, ep)


def test_ensure_services_reuses_running_emulators(emulators):
    svc = ensure_services()
    assert svc.started_by_us is False
    assert svc.kinesis_endpoint == emulators["kinesis"] and svc.dynamodb_endpoint == emulators["dynamodb"]
    svc.stop_if_started()  # no-op: not ours
    assert services.services_running()


def test_stop_kills_exactly_the_recorded_pids(emulators):
    state = emulators["state"]
    pids = {name: _pid(state, name) for name in ("kinesis", "dynalite")}
    for pid in pids.values():
        assert os.path.exists(f"/proc/{pid}")
    proc = subprocess.run([SCRIPT, "stop"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for pid in pids.values():
        assert not os.path.exists(f"/proc/{pid}")
    for port in ("KINESIS_PORT", "KINESIS_TLS_PORT", "DYNAMODB_PORT"):
        assert not _open(emulators[port])
    assert subprocess.run([SCRIPT, "status"], capture_output=True).returncode == 3
    assert not services.services_running()


def test_ensure_services_starts_and_then_stops_what_it_started(emulators):
    assert not services.services_running()
    svc = ensure_services()
    try:
        assert svc.started_by_us is True
        assert kinesis_call("ListStreams", {}, svc.kinesis_endpoint)["StreamNames"] == []  # fresh in-memory state
        assert dynamodb_call("ListTables", {}, svc.dynamodb_endpoint)["TableNames"] == []
    finally:
        svc.stop_if_started()
    assert not services.services_running()
    assert not _open(emulators["KINESIS_PORT"]) and not _open(emulators["DYNAMODB_PORT"])


@pytest.mark.parametrize("taken", ["KINESIS_PORT", "DYNAMODB_PORT"])
def test_a_port_taken_after_the_check_fails_the_start_at_once_with_its_own_exit_code(tmp_path, taken):
    """Callers pick free ports and the script checks them, but another process can take one in between (an
    outgoing connection's ephemeral port, another test's emulator): seen in the Rust integration tests with four
    test threads, where kinesis-local logged EADDRINUSE and hung until the 60-second start timeout. A socket bound
    but not listening passes the script's check (nothing answers) and makes the emulator's bind fail, as that race
    does. The start must fail within seconds with exit code 4, so a caller can retry on other ports, and leave no
    emulator behind."""
    holder = socket.socket()
    holder.bind(("0.0.0.0", 0))  # bound, not listening: port_open() sees it free, the emulator cannot bind it
    ports = {"KINESIS_PORT": _free_port(), "KINESIS_TLS_PORT": _free_port(), "DYNAMODB_PORT": _free_port()}
    ports[taken] = holder.getsockname()[1]
    env = {**os.environ, **{k: str(v) for k, v in ports.items()}, "SERVICES_STATE_DIR": str(tmp_path),
           "SERVICES_START_TIMEOUT": "60"}
    try:
        t0 = time.monotonic()
        proc = subprocess.run([SCRIPT, "start"], capture_output=True, text=True, timeout=120, env=env)
        elapsed = time.monotonic() - t0
    finally:
        subprocess.run([SCRIPT, "stop"], capture_output=True, text=True, timeout=60, env=env)
        holder.close()
    assert proc.returncode == 4, (proc.returncode, proc.stderr)
    assert str(ports[taken]) in proc.stderr and "in use" in proc.stderr, proc.stderr
    assert elapsed < 30, f"took {elapsed:.1f} s: the start waited for its timeout instead of seeing the bind fail"
    assert not os.path.exists(os.path.join(tmp_path, "kinesis.pid")), "an emulator was left behind"
    assert not os.path.exists(os.path.join(tmp_path, "dynalite.pid")), "an emulator was left behind"
