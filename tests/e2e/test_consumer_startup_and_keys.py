"""ConsumeKinesis in a real NiFi whose scheduling timeout is lowered to 5 s: its start-up, and a partition key
beyond 64 KiB.

Start-up: NiFi's scheduling timeout is lowered to 5 s (NiFi interrupts an
@OnScheduled that runs longer, and native code ignores interrupts). The start is made slow the way it is in
production: another node holds the lock of a KCL lease table's migration (a KCL table named after the
Application Name, the `<app>_migration` table with its lock row, the lock's counter bumped every second, as
rust-core/src/lease/migration_lock.rs has a live holder do).

@OnScheduled must return at once: the processor runs and yields with a bulletin while its engine waits; a
stop during the start-up leaves no lease, no heartbeat row and no task that migrates later; once the lock
is free, a new start migrates the table and reads every record. The engine-level and cancellation-level
tests are in rust-core/tests/component_consumer.rs and rust-core/src/component/startup.rs.

Long keys: Kinesis limits a partition key to 256 characters, but a KPL aggregate's key table can hold any key;
a 70 KB key (beyond the 64 KiB the batch layout once allowed, which froze the shard) must reach NiFi whole, as
the FlowFile's attribute, and the shard must keep flowing.

The NiFi is the session's shared one (tests/e2e/conftest.py), which runs with this 5 s scheduling timeout
(tests/lib/shared_nifi.py's SCHEDULING_TIMEOUT; the first test checks it in that NiFi's nifi.properties)."""

import hashlib
import json
import os
import threading
import time

import pytest

from consumer_flow import ConsumerFlow, consumer_properties, create_stream, put_record, unique
from services import aws_json_call, dynamodb_endpoint, local_services  # noqa: F401  (fixture)

SCHEDULING_TIMEOUT_S = 5
LOCK = {"streamName": {"S": "__migration__"}, "shardId": {"S": "__lock__"}}


@pytest.fixture(scope="module")
def nifi(local_services, shared_nifi):
    """The session's shared NiFi (which loaded the built NAR), scheduling timeout 5 s; this module's groups are
    removed when it ends."""
    return shared_nifi


def dynamodb(action: str, payload: dict) -> dict:
    return aws_json_call(dynamodb_endpoint(), f"DynamoDB_20120810.{action}", payload, "1.0")


def create_table(name: str, keys: list[tuple[str, str]]) -> None:
    dynamodb("CreateTable", {
        "TableName": name, "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [{"AttributeName": k, "AttributeType": "S"} for k, _ in keys],
        "KeySchema": [{"AttributeName": k, "KeyType": t} for k, t in keys]})
    wait_until(lambda: dynamodb("DescribeTable", {"TableName": name})["Table"]["TableStatus"] == "ACTIVE", 30,
               f"table {name} to be ACTIVE")


def key_names(table: str):
    try:
        return [k["AttributeName"] for k in dynamodb("DescribeTable", {"TableName": table})["Table"]["KeySchema"]]
    except Exception as e:  # noqa: BLE001 - absent table
        if "ResourceNotFound" in str(e):
            return None
        raise


def scan(table: str) -> list[dict]:
    return dynamodb("Scan", {"TableName": table, "ConsistentRead": True}).get("Items", [])


def wait_until(condition, timeout: float, what: str, interval: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(interval)


class OtherNode:
    """Another node migrating the KCL table `app`: it holds the migration lock and bumps its counter."""

    def __init__(self, app: str):
        self.copy = f"{app}_migration"
        create_table(app, [("leaseKey", "HASH")])
        dynamodb("PutItem", {"TableName": app, "Item": {
            "leaseKey": {"S": "shardId-000000000000"}, "checkpoint": {"S": "TRIM_HORIZON"},
            "checkpointSubSequenceNumber": {"N": "0"}, "leaseOwner": {"S": "kcl-worker-gone"},
            "leaseCounter": {"N": "7"}, "ownerSwitchesSinceCheckpoint": {"N": "0"}}})
        create_table(self.copy, [("streamName", "HASH"), ("shardId", "RANGE")])
        dynamodb("PutItem", {"TableName": self.copy,
                             "Item": {**LOCK, "owner": {"S": "kinesnow-other-node"}, "beat": {"N": "0"}}})
        self._alive = threading.Event()
        self._alive.set()
        self._thread = threading.Thread(target=self._beat, daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while self._alive.is_set():
            time.sleep(1)
            try:
                dynamodb("UpdateItem", {"TableName": self.copy, "Key": LOCK, "UpdateExpression": "ADD beat :one",
                                        "ExpressionAttributeValues": {":one": {"N": "1"}}})
            except Exception:  # noqa: BLE001 - the emulators stop after a failed test; the test has failed already
                return

    def release(self) -> None:
        self._alive.clear()
        self._thread.join()
        dynamodb("DeleteItem", {"TableName": self.copy, "Key": LOCK})


def messages(flow: ConsumerFlow) -> list[str]:
    return flow.bulletin_messages()


def test_a_start_waiting_for_another_nodes_migration_yields_stops_cleanly_and_reads_once_free(nifi):
    with open(os.path.join(nifi.instance_dir, "conf", "nifi.properties"), encoding="utf-8") as f:
        assert f"nifi.processor.scheduling.timeout={SCHEDULING_TIMEOUT_S} secs" in f.read().splitlines()
    stream, app = unique("slow-start"), unique("slow-start-app")
    create_stream(stream, 1)
    for i in range(3):
        put_record(stream, json.dumps({"id": i}).encode(), f"k{i}")
    other = OtherNode(app)
    log_start = nifi.log_mark()

    group = nifi.client.create_process_group(unique("slow-start"))["id"]
    flow = ConsumerFlow.add(nifi.client, group, consumer_properties(stream, app))
    started = time.monotonic()
    flow.start()
    # A trigger runs only once @OnScheduled has returned: its bulletin comes well inside the timeout.
    wait_until(lambda: any("Not reading yet" in m for m in messages(flow)), SCHEDULING_TIMEOUT_S,
               "the yielding trigger's bulletin")
    first_bulletin_s = time.monotonic() - started
    assert any("the engine is starting" in m for m in messages(flow)), messages(flow)
    # Past the scheduling timeout (and the 10 s after which the wait is a warning): still running, never interrupted.
    wait_until(lambda: any("waiting for node kinesnow-other-node to finish migrating" in m for m in messages(flow)), 30,
               "the engine's bulletin about the other node's migration")
    wait_until(lambda: time.monotonic() - started > 12, 15, "12 s after the start")
    assert nifi.client.processor_state(flow.processor_id) == "RUNNING"
    warnings = [b for b in nifi.client.bulletins(source_id=flow.processor_id)
                if b.get("level") in ("WARN", "WARNING") and "Not reading yet" in (b.get("message") or "")]
    assert warnings, f"a warning once the start takes long: {messages(flow)}"
    log = nifi.log_since(log_start)
    assert "Timed out while waiting for OnScheduled" not in log
    assert flow.counts() == (0, 0)

    # Stopped during the start-up: quickly, and nothing of the start stays behind or runs later.
    t0 = time.monotonic()
    flow.stop()
    stop_s = time.monotonic() - t0
    assert stop_s < 10, f"stop took {stop_s:.1f} s"
    other.release()
    time.sleep(4)  # an orphaned start would take the free lock and migrate the table now
    assert key_names(app) == ["leaseKey"], "the KCL table is untouched"
    assert scan(f"{app}_migration") == [], "no lock taken, nothing copied, no row of this node"

    # Started again with the lock free: it migrates the KCL table and reads every record.
    flow.start()
    flow.wait_for(3, timeout=90)
    got = sorted(json.loads(f["content"])["id"] for f in flow.flow_files())
    assert got == [0, 1, 2], got
    assert sorted(key_names(app)) == ["shardId", "streamName"], "the table is ours now"
    flow.stop()
    rows = scan(app)
    # Snowflake's IAM policy grants no DeleteItem: a stopped node's heartbeat row becomes a tombstone (its key
    # and `removedAt`, with `expiresAt` for DynamoDB's Time to Live, nothing else), which every reader takes for
    # an absent row.
    nodes = [r for r in rows if r["shardId"]["S"].startswith("__")]
    assert all(set(r) == {"streamName", "shardId", "removedAt", "expiresAt"} for r in nodes), \
        f"no live heartbeat row after the stop: {nodes}"
    owners = [r.get("leaseOwner") for r in rows]
    assert not any(o and o.get("S") for o in owners), f"no lease kept: {rows}"
    print(f"\nfirst bulletin {first_bulletin_s:.1f} s after the start (scheduling timeout {SCHEDULING_TIMEOUT_S} s); "
          f"stop during start-up {stop_s:.1f} s")


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(tag: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return varint(tag << 3 | 2) + varint(len(payload)) + payload


def kpl_aggregate(records: list[tuple[str, bytes]]) -> bytes:
    """A KPL aggregate, encoded here by hand (aws-kinesis-agg refuses keys over 256 characters): magic, the
    AggregatedRecord protobuf (partition_key_table = 1, records = 3 with partition_key_index = 1, data = 3),
    then its MD5."""
    keys = list(dict.fromkeys(k for k, _ in records))
    body = b"".join(field(1, k.encode()) for k in keys)
    for key, data in records:
        body += field(3, varint(1 << 3 | 0) + varint(keys.index(key)) + field(3, data))
    return bytes.fromhex("f3899ac2") + body + hashlib.md5(body).digest()


def long_key(size: int) -> str:
    key = "".join("é" if n % 7 == 0 else chr(ord("a") + n % 26) for n in range(size))
    return key.encode()[:size].decode(errors="ignore")


def test_a_70_kb_partition_key_arrives_whole_and_the_shard_keeps_flowing(nifi):
    stream, app = unique("long-key"), unique("long-key-app")
    create_stream(stream, 1)
    key = long_key(70_000)
    assert len(key.encode()) > 65_535
    blob = kpl_aggregate([("before", b'{"id":0}'), (key, b'{"id":1}'), ("after", b'{"id":2}')])
    put_record(stream, blob, "outer")
    put_record(stream, b'{"id":3}', "plain")
    group = nifi.client.create_process_group(unique("long-key"))["id"]
    flow = ConsumerFlow.add(nifi.client, group, consumer_properties(stream, app))
    flow.start()
    flow.wait_for(4, timeout=90)
    got = [(json.loads(f["content"])["id"], f["attributes"]["aws.kinesis.partition.key"]) for f in flow.flow_files()]
    assert [i for i, _ in got] == [0, 1, 2, 3], got
    assert got[1][1] == key, f"the key arrived with {len(got[1][1].encode())} of {len(key.encode())} bytes"
    assert [k for i, k in got if i != 1] == ["before", "after", "plain"]
    put_record(stream, b'{"id":4}', "later")
    flow.wait_for(5, timeout=60)
    flow.stop()
    assert nifi.is_running()
