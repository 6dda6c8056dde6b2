"""The one-time migration from a legacy KCL lease table, end to end: a REAL KCL 2.x consumer
(tests/kcl-legacy, the library NiFi's ConsumeKinesisStream is built on) reads part of a stream against
kinesis-local and dynalite and is killed (Runtime.halt, its leases still owned); then our ConsumeKinesis
starts in a real NiFi with the same Application Name. It must carry KCL's checkpoints over (exact to the
KPL sub-record, SHARD_END parents not read again) and deliver exactly the records KCL had not processed:
KCL checkpointed after every record it printed, so its at-least-once window is empty and any repeat or
gap is a migration error.

The crash-at-every-step, two-nodes, unknown-schema and DeleteTable-denied cases run at the engine level
in rust-core/tests/lease_migration.rs."""

import base64
import gzip
import json
import os
import time

import pytest

from consumer_flow import ConsumerFlow, built_nar, consumer_properties, create_stream, put_record, unique
from kcl_legacy import records, run_legacy_consumer
from kpl import aggregate
from nifi_instance import NiFiInstance, free_port
from services import aws_json_call, dynamodb_endpoint, kinesis_call, local_services  # noqa: F401  (fixture)


@pytest.fixture(scope="module")
def nifi(local_services):
    inst = NiFiInstance.start(port=free_port(), extensions=[built_nar()])
    yield inst
    if inst.is_running():
        inst.stop()


def dynamodb(action: str, payload: dict) -> dict:
    return aws_json_call(dynamodb_endpoint(), f"DynamoDB_20120810.{action}", payload, "1.0")


def table_keys(name: str):
    try:
        return [(k["AttributeName"], k["KeyType"]) for k in dynamodb("DescribeTable", {"TableName": name})["Table"]["KeySchema"]]
    except Exception as e:  # noqa: BLE001 - absent table
        if "ResourceNotFound" in str(e):
            return None
        raise


def delivered(flow: ConsumerFlow) -> list[tuple[str, str]]:
    """(shard, record id) of every record in the success queue, in receive order."""
    out = []
    for ff in flow.flow_files():
        shard = ff["attributes"]["aws.kinesis.shard.id"]
        out.extend((shard, json.loads(line)["id"]) for line in ff["content"].decode().splitlines())
    return out


def wait_delivered(flow: ConsumerFlow, count: int, timeout: float = 90) -> list[tuple[str, str]]:
    deadline = time.monotonic() + timeout
    got = []
    while time.monotonic() < deadline:
        got = delivered(flow)
        if len(got) >= count:
            time.sleep(3)  # anything extra (a repeat) would arrive now
            return delivered(flow)
        time.sleep(1)
    raise AssertionError(f"{len(got)} of {count} records delivered; bulletins: {flow.bulletin_messages()}")


def data(record_id: str) -> bytes:
    return json.dumps({"id": record_id}).encode()


def start_consumer(nifi, stream: str, app: str, saved_first: bool = False, **overrides: str) -> ConsumerFlow:
    client = nifi.client
    group = client.create_process_group(unique("kcl-migration"))["id"]
    flow = ConsumerFlow.add(client, group, consumer_properties(stream, app, **overrides))
    if saved_first:  # a NiFi killed right after the start must still have the processor in its flow
        ids = (flow.processor_id, flow.success_queue, flow.failure_queue)
        wait_until(lambda: all(i in flow_on_disk(nifi) for i in ids), 60, interval=0.2, what="NiFi to save its flow")
    flow.start()
    return flow


def flow_on_disk(nifi) -> str:
    try:
        with gzip.open(os.path.join(nifi.instance_dir, "conf", "flow.json.gz"), "rt") as f:
            return f.read()
    except (OSError, EOFError):  # being rewritten
        return ""


def test_resumes_exactly_after_a_killed_kcl_consumer(nifi):
    stream, app = unique("kcl-mig"), unique("kcl-mig-app")
    shards = [s["ShardId"] for s in create_stream(stream, 2)]
    ids_by_seq = {}
    for i in range(30):
        seq, _ = put_record(stream, data(f"rec-{i}"), f"pk-{i}")
        ids_by_seq[(seq, 0)] = f"rec-{i}"
    # A KPL aggregate of 5 sub-records (one shard), then more plain records.
    [agg] = aggregate([[(f"agg-pk-{i}", data(f"agg-{i}").decode()) for i in range(5)]])
    agg_seq, agg_shard = put_record(stream, base64.b64decode(agg["data_b64"]), agg["partition_key"], agg["explicit_hash_key"])
    for i in range(5):
        ids_by_seq[(agg_seq, i)] = f"agg-{i}"
    for i in range(30, 40):
        seq, _ = put_record(stream, data(f"rec-{i}"), f"pk-{i}")
        ids_by_seq[(seq, 0)] = f"rec-{i}"

    # KCL processes 20 of the 45 records (checkpointing each) and is killed.
    lines = run_legacy_consumer(stream, app, max_records=20, exit="halt")
    done = {(r["seq"], r["sub"]) for r in records(lines)}
    assert len(done) == 20
    assert table_keys(app) == [("leaseKey", "HASH")], "a KCL lease table is what we migrate from"

    flow = start_consumer(nifi, stream, app, **{"Initial Stream Position": "TRIM_HORIZON"})
    expected = [ids_by_seq[k] for k in ids_by_seq if k not in done]
    got = wait_delivered(flow, len(expected))
    flow.stop()
    got_ids = [record_id for _, record_id in got]
    assert sorted(got_ids) == sorted(expected), (
        f"re-read: {sorted(set(got_ids) - set(expected))}, skipped: {sorted(set(expected) - set(got_ids))}")
    assert len(got_ids) == len(set(got_ids)), "no record twice"
    # Per shard, in the order written.
    order = {record_id: n for n, record_id in enumerate(ids_by_seq.values())}
    for shard in shards:
        seen = [order[r] for s, r in got if s == shard]
        assert seen == sorted(seen), shard
    print(f"\nKCL processed {len(done)} (inside the aggregate on {agg_shard}: "
          f"{sorted(sub for seq, sub in done if seq == agg_seq)}); ConsumeKinesis delivered the other {len(got_ids)}")
    assert table_keys(app) == [("streamName", "HASH"), ("shardId", "RANGE")], "the table is ours now"
    assert table_keys(f"{app}_migration") is None, "the temporary table is gone"


def test_resumes_inside_a_kpl_aggregate_kcl_stopped_in(nifi):
    stream, app = unique("kcl-mig-kpl"), unique("kcl-mig-kpl-app")
    create_stream(stream, 1)
    for i in range(10):
        put_record(stream, data(f"rec-{i}"), f"pk-{i}")
    [agg] = aggregate([[(f"agg-pk-{i}", data(f"agg-{i}").decode()) for i in range(5)]])
    agg_seq, _ = put_record(stream, base64.b64decode(agg["data_b64"]), agg["partition_key"], agg["explicit_hash_key"])
    for i in range(10, 15):
        put_record(stream, data(f"rec-{i}"), f"pk-{i}")
    # KCL stops after sub-record 1 of the aggregate: its checkpoint is (aggregate, 1).
    lines = run_legacy_consumer(stream, app, max_records=12, exit="halt")
    assert [(r["seq"], r["sub"]) for r in records(lines)][-1] == (agg_seq, 1)

    flow = start_consumer(nifi, stream, app, **{"Initial Stream Position": "TRIM_HORIZON"})
    expected = [f"agg-{i}" for i in (2, 3, 4)] + [f"rec-{i}" for i in range(10, 15)]
    got = [r for _, r in wait_delivered(flow, len(expected))]
    flow.stop()
    assert got == expected, "the rest of the aggregate, then the later records: nothing again, nothing skipped"


def test_a_split_parent_kcl_finished_is_not_read_again(nifi):
    stream, app = unique("kcl-mig-split"), unique("kcl-mig-split-app")
    [parent] = create_stream(stream, 1)
    parent_id = parent["ShardId"]
    ids = {}
    for i in range(5):
        ids[put_record(stream, data(f"p-{i}"), f"p-{i}")[0]] = f"p-{i}"
    # KCL starts before the split, as a running application would (see test_kcl_legacy_tables.py).
    lines = run_legacy_consumer(stream, app, max_records=2, exit="halt")
    done = {r["seq"] for r in records(lines)}

    kinesis_call("SplitShard", {"StreamName": stream, "ShardToSplit": parent_id, "NewStartingHashKey": str(2 ** 127)})
    deadline = time.monotonic() + 30
    while kinesis_call("DescribeStreamSummary", {"StreamName": stream})["StreamDescriptionSummary"]["StreamStatus"] != "ACTIVE":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    for i in range(4):
        ids[put_record(stream, data(f"low-{i}"), f"low-{i}", explicit_hash_key=str(i + 1))[0]] = f"low-{i}"
    for i in range(3):
        ids[put_record(stream, data(f"high-{i}"), f"high-{i}", explicit_hash_key=str(2 ** 128 - 1 - i))[0]] = f"high-{i}"

    # A new KCL worker reads the parent to its end (SHARD_END) and two child records, then is killed.
    lines = run_legacy_consumer(stream, app, max_records=5, exit="halt", timeout=90)
    done |= {r["seq"] for r in records(lines)}
    assert {"shardEnd": parent_id} in lines, lines
    assert {ids[s] for s in done} >= {f"p-{i}" for i in range(5)}

    # LATEST: the children must still start where KCL left them (TRIM_HORIZON or their checkpoint).
    flow = start_consumer(nifi, stream, app, **{"Initial Stream Position": "LATEST"})
    expected = sorted(ids[s] for s in ids if s not in done)
    got = sorted(r for _, r in wait_delivered(flow, len(expected)))
    flow.stop()
    assert got == expected, f"KCL did {sorted(ids[s] for s in done)}"
    assert not [r for r in got if r.startswith("p-")], "the finished parent is not read again"


FAKE_LEASES = 3000


def put_kcl_leases(table: str, count: int) -> None:
    """KCL lease items (as KCL 2.x writes them) of shards that left the stream long ago: they make the
    migration long enough to kill NiFi in the middle of it."""
    items = [{"PutRequest": {"Item": {
        "leaseKey": {"S": f"shardId-9{i:011d}"}, "checkpoint": {"S": f"4960{i:052d}"},
        "checkpointSubSequenceNumber": {"N": str(i % 7)}, "leaseOwner": {"S": "kcl-worker-gone"},
        "leaseCounter": {"N": "99"}, "ownerSwitchesSinceCheckpoint": {"N": "0"}}}} for i in range(count)]
    for start in range(0, len(items), 25):
        pending = {table: items[start:start + 25]}
        while pending:
            pending = dynamodb("BatchWriteItem", {"RequestItems": pending}).get("UnprocessedItems") or None


def scan(table: str) -> list[dict]:
    items, start = [], None
    while True:
        page = dynamodb("Scan", {"TableName": table, "ConsistentRead": True, **({"ExclusiveStartKey": start} if start else {})})
        items += page.get("Items", [])
        start = page.get("LastEvaluatedKey")
        if not start:
            return items


def kcl_positions(items: list[dict]) -> dict:
    return {i["leaseKey"]["S"]: (i["checkpoint"]["S"], i["checkpointSubSequenceNumber"]["N"]) for i in items}


def our_positions(items: list[dict]) -> dict:
    # A checkpoint at a plain record (not a KPL sub-record) has no subSequenceNumber: sub-sequence 0.
    return {i["shardId"]["S"]: (i["sequenceNumber"]["S"], i.get("subSequenceNumber", {"N": "0"})["N"]) for i in items
            if not i["shardId"]["S"].startswith("__") and not i["streamName"]["S"].startswith("__")
            and "sequenceNumber" in i}


def position_order(position: tuple) -> tuple:
    """A checkpoint as a comparable key: sentinels (TRIM_HORIZON, LATEST) before every sequence number."""
    seq, sub = position
    return (int(seq), int(sub)) if seq.isdigit() else (-1, 0)


def a_complete_copy_exists(app: str, expected: dict) -> str:
    """Which complete copy of the checkpoints exists right now (KCL's table or the marked migration copy)."""
    if table_keys(app) == [("leaseKey", "HASH")] and kcl_positions(scan(app)) == expected:
        return "the KCL table"
    copy = f"{app}_migration"
    if table_keys(copy):
        items = scan(copy)
        marked = any(i["streamName"]["S"] == "__migration__" and i["shardId"]["S"] == "__copied__" for i in items)
        if marked and our_positions(items) == expected:
            return f"{copy} (marked complete)"
    raise AssertionError("no complete copy of the checkpoints exists")


def wait_until(condition, timeout: float, interval: float = 0.02, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(interval)


def restart(nifi, flow: ConsumerFlow) -> float:
    """Starts the killed NiFi again; the processor resumes RUNNING if NiFi had saved that state before the
    kill (its flow is saved a moment after a change), else it is started, as a user would. Returns the
    seconds NiFi took to answer again."""
    restarted = NiFiInstance.start(port=nifi.port, instance_dir=nifi.instance_dir, keep=True)
    nifi.pid = restarted.pid
    if nifi.client.processor_state(flow.processor_id) != "RUNNING":
        flow.start()
    return restarted.start_seconds


def lock_owner(app: str):
    """The node holding the migration lock in <app>_migration (None: free, released, or no copy table)."""
    try:
        item = dynamodb("GetItem", {"TableName": f"{app}_migration", "ConsistentRead": True, "Key": {
            "streamName": {"S": "__migration__"}, "shardId": {"S": "__lock__"}}}).get("Item")
    except Exception as e:  # noqa: BLE001 - absent table
        if "ResourceNotFound" in str(e):
            return None
        raise
    return None if not item or "removedAt" in item else item["owner"]["S"]


def migration_phase(app: str, dead_owner) -> str:
    """Which step of the migration the tables show (cheap reads only: no scan of the copy)."""
    copy = f"{app}_migration"
    main, copy_keys = table_keys(app), table_keys(copy)
    if copy_keys is None:
        return "complete (the copy table is gone)" if main == [("streamName", "HASH"), ("shardId", "RANGE")] \
            else f"no copy table ({app}: {main})"
    owner = lock_owner(app)
    if owner is None:
        return "the lock is free: the restarted processor has not begun its migration"
    if owner == dead_owner:
        return "the killed node still holds the lock (taken over after 30 s of silence)"
    if main == [("leaseKey", "HASH")]:
        marked = "Item" in dynamodb("GetItem", {"TableName": copy, "ConsistentRead": True, "Key": {
            "streamName": {"S": "__migration__"}, "shardId": {"S": "__copied__"}}})
        return "copied out; deleting the KCL table" if marked else "copying the KCL rows into the copy table"
    if main is None:
        return "the KCL table is deleted; creating the lease table"
    return "copying the rows into the recreated table"


def rows(table: str) -> int:
    try:
        return dynamodb("Scan", {"TableName": table, "Select": "COUNT", "ConsistentRead": True}).get("Count", 0)
    except Exception as e:  # noqa: BLE001 - absent table
        return 0 if "ResourceNotFound" in str(e) else -1


def wait_for_phase(app: str, condition, timeout: float, what: str, dead_owner=None,
                   interval: float = 0.02) -> list[tuple[float, str]]:
    """wait_until, noting every phase of the migration it passes and when (seconds since the call, read at
    most once a second); a timeout names the phase it was stuck in and since when. Returns the phases and
    when the condition held."""
    started = time.monotonic()
    phases, sampled = [], -1.0
    while not condition():
        now = time.monotonic() - started
        if now - sampled >= 1:
            sampled = now
            phase = migration_phase(app, dead_owner)
            if not phases or phases[-1][1] != phase:
                phases.append((round(now, 1), phase))
        if now >= timeout:
            seen = "; ".join(f"{t:.0f} s: {phase}" for t, phase in phases)
            raise AssertionError(
                f"timed out after {timeout:.0f} s waiting for {what}, stuck at: {phases[-1][1]} (since "
                f"{phases[-1][0]:.0f} s; phases seen: {seen}); rows: {app} {rows(app)}, {app}_migration "
                f"{rows(app + '_migration')} (of {FAKE_LEASES + 1} and the marker)")
        time.sleep(interval)
    return phases + [(round(time.monotonic() - started, 1), f"reached {what}")]


def test_kill_9_during_the_migration_loses_no_checkpoint(nifi):
    """NiFi is killed with SIGKILL twice while ConsumeKinesis migrates a KCL table (once while the rows
    go to <app>_migration, once while they are copied into the recreated table); each time a complete
    copy exists, and the restarted NiFi completes the migration (after taking over the dead node's lock,
    silent for 30 s)."""
    stream, app = unique("kcl-mig-kill"), unique("kcl-mig-kill-app")
    create_stream(stream, 1)
    ids = {}
    for i in range(20):
        ids[put_record(stream, data(f"rec-{i}"), f"pk-{i}")[0]] = f"rec-{i}"
    done = {r["seq"] for r in records(run_legacy_consumer(stream, app, max_records=8, exit="halt"))}
    put_kcl_leases(app, FAKE_LEASES)
    expected = kcl_positions(scan(app))
    assert len(expected) == FAKE_LEASES + 1

    flow = start_consumer(nifi, stream, app, saved_first=True, **{"Initial Stream Position": "TRIM_HORIZON"})
    wait_until(lambda: table_keys(f"{app}_migration") is not None, 60, what="the migration to start")
    nifi.kill()
    dead = lock_owner(app)  # None if NiFi was killed before it took the lock
    first = a_complete_copy_exists(app, expected)
    took = restart(nifi, flow)

    # The limits count from NiFi answering again (its restart, 26-44 s on a loaded 2-core machine, is not in
    # them). The restarted node then starts the processor (about 1 s); waits out the killed node's lock if that
    # node held it: 30 s from its own first read of the lock (the lock's timeout; no clocks are compared across
    # nodes, so nothing shortens it); copies 3,001 rows to <app>_migration, one PutItem each through the policy
    # proxy (1-2 ms a row: 5 s measured at load 4-6 on this machine); deletes the KCL table and creates ours
    # (about 1 s each in dynalite). At most about 40 s: 120 s leaves three times that for a slower or busier
    # machine. (Until tests/iam/policy_proxy.py set TCP_NODELAY, every call through it stalled 40 ms on a
    # delayed ACK: the copy took 77 s, 30 + 77 + 2 s came within 11 s of the limit, and a fresh machine timed out.)
    ours = [("streamName", "HASH"), ("shardId", "RANGE")]
    phases_1 = wait_for_phase(app, lambda: table_keys(app) == ours and table_keys(f"{app}_migration") is not None,
                              120, "the rows being copied into the recreated table", dead)
    nifi.kill()
    dead = lock_owner(app)
    second = a_complete_copy_exists(app, expected)
    assert second.startswith(f"{app}_migration"), second
    took_2 = restart(nifi, flow)

    # As above, with the killed node's lock always held now (30 s), then 3,001 conditional PutItems into <app>
    # and the copy's deletion: about 40 s.
    phases_2 = wait_for_phase(app, lambda: table_keys(app) == ours and table_keys(f"{app}_migration") is None,
                              180, "the migration to complete", dead, interval=0.5)
    positions = our_positions(scan(app))
    assert set(positions) == set(expected), "a row for every KCL lease"
    # The shards that left the stream are never read, so their migrated checkpoints must be exactly KCL's. The
    # stream's own shard is read on as soon as the migration completes, so its checkpoint may already have moved
    # past KCL's (it must never be behind it); the records delivered below show that none was lost or repeated.
    gone = {k for k in expected if k.startswith("shardId-9")}
    assert {k: positions[k] for k in gone} == {k: expected[k] for k in gone}, \
        "every checkpoint intact, exact to the sub-sequence number"
    for shard in set(expected) - gone:
        assert position_order(positions[shard]) >= position_order(expected[shard]), (shard, positions[shard], expected[shard])
    expected_records = sorted(ids[s] for s in ids if s not in done)
    got = sorted(r for _, r in wait_delivered(flow, len(expected_records)))
    flow.stop()
    assert got == expected_records
    print(f"\nkilled while a complete copy was in {first}, then in {second}; {len(expected)} checkpoints intact")
    for n, (seconds, phases) in enumerate(((took, phases_1), (took_2, phases_2)), 1):
        print(f"restart {n}: NiFi answered after {seconds:.0f} s, then " + "; ".join(f"{t:.0f} s: {p}" for t, p in phases))
