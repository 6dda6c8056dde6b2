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
import json
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


def start_consumer(nifi, stream: str, app: str, **overrides: str) -> ConsumerFlow:
    client = nifi.client
    group = client.create_process_group(unique("kcl-migration"))["id"]
    flow = ConsumerFlow.add(client, group, consumer_properties(stream, app, **overrides))
    flow.start()
    return flow


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
