"""The stuck-shard watchdog in a real NiFi: a shard whose records wait while NiFi does not take them (the success
queue at its back-pressure threshold, so NiFi stops triggering ConsumeKinesis) gets one warning bulletin naming the
shard and what it waits for once Stuck Shard Warning has passed, View State says the same, and once the queue is
emptied the shard moves on and a second bulletin says so. A parent shard held at its end the same way (split while
its records wait) is named with its children, which no node reads before it ends. The watchdog's decisions themselves are unit-tested in
rust-core/src/consumer/watchdog.rs; what a shard waits for, in rust-core/src/consumer/status.rs.
The NiFi is the session's shared one (tests/e2e/conftest.py). The stream is deleted at the end: the session's
kinesis-local refuses shards beyond 50 over all its streams, and later modules create theirs."""
import time

import pytest

from consumer_flow import ConsumerFlow, consumer_properties, create_stream, put_record, unique
from services import kinesis_call, local_services  # noqa: F401  (fixture)

SHARD = "shardId-000000000000"


@pytest.fixture(scope="module")
def nifi(local_services, shared_nifi):
    return shared_nifi


def messages(flow: ConsumerFlow, needle: str) -> list[str]:
    return [m for m in flow.bulletin_messages() if needle in m]


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def test_a_shard_held_up_by_back_pressure_is_named_once_and_again_when_it_moves(nifi):
    stream, app = unique("stuck"), unique("stuck-app")
    create_stream(stream, 1)
    try:
        held_up_then_moving(nifi, stream, app)
    finally:
        kinesis_call("DeleteStream", {"StreamName": stream, "EnforceConsumerDeletion": True})


def held_up_then_moving(nifi, stream, app):
    for i in range(20):
        put_record(stream, f'{{"id":{i}}}'.encode(), f"k{i}")
    group = nifi.client.create_process_group(unique("stuck"))["id"]
    flow = ConsumerFlow.add(nifi.client, group, consumer_properties(stream, app, **{"Stuck Shard Warning": "10 sec"}),
                            back_pressure_count=5)
    flow.start()
    flow.wait_for(5, timeout=90)  # the first batch fills the queue past its threshold: NiFi stops triggering
    first = flow.counts()[0]
    for i in range(20, 40):
        put_record(stream, f'{{"id":{i}}}'.encode(), f"k{i}")
    stuck = wait_for(lambda: messages(flow, f"shard {SHARD} has made no progress for"), 60, "the stuck-shard bulletin")
    assert "while records wait: it waits for NiFi to take the buffered records" in stuck[0], stuck
    assert flow.counts()[0] == first, "nothing was taken meanwhile"
    status = nifi.client.local_state(flow.processor_id).get(SHARD, "")
    assert "waits for NiFi to take the buffered records" in status, status
    time.sleep(5)
    assert len(messages(flow, "has made no progress for")) == 1, "warned once, not on every look"
    nifi.client.empty_queue(flow.success_queue)
    moving = wait_for(lambda: messages(flow, f"shard {SHARD} moves again after"), 60, "the moving-again bulletin")
    assert len(moving) == 1, moving
    flow.wait_for(40 - first, timeout=60)
    flow.stop()
    assert nifi.is_running()


def test_a_parent_held_at_its_end_names_the_children_that_wait_for_it(nifi):
    stream, app = unique("stuck-split"), unique("stuck-split-app")
    shards = create_stream(stream, 1)
    try:
        parent_held_at_its_end(nifi, stream, app, shards[0])
    finally:
        kinesis_call("DeleteStream", {"StreamName": stream, "EnforceConsumerDeletion": True})


def parent_held_at_its_end(nifi, stream, app, parent):
    for i in range(20):
        put_record(stream, f'{{"id":{i}}}'.encode(), f"k{i}")
    group = nifi.client.create_process_group(unique("stuck-split"))["id"]
    flow = ConsumerFlow.add(nifi.client, group, consumer_properties(stream, app, **{"Stuck Shard Warning": "10 sec"}),
                            back_pressure_count=5)
    flow.start()
    flow.wait_for(5, timeout=90)  # the parent's first batch fills the queue past its threshold: NiFi stops triggering
    for i in range(20, 40):  # the parent's last records: they wait, so the parent cannot end
        put_record(stream, f'{{"id":{i}}}'.encode(), f"k{i}")
    low, high = int(parent["HashKeyRange"]["StartingHashKey"]), int(parent["HashKeyRange"]["EndingHashKey"])
    kinesis_call("SplitShard", {"StreamName": stream, "ShardToSplit": parent["ShardId"],
                                "NewStartingHashKey": str((low + high) // 2 + 1)})
    stuck = wait_for(lambda: messages(flow, f"shard {parent['ShardId']} has made no progress for"), 60,
                     "the stuck parent's bulletin")
    children = sorted(s["ShardId"] for s in kinesis_call("ListShards", {"StreamName": stream})["Shards"]
                      if s.get("ParentShardId") == parent["ShardId"])
    assert len(children) == 2, children
    assert f"no node reads its child shard(s) {children[0]}, {children[1]} before it ends" in stuck[0] or \
        f"no node reads its child shard(s) {children[1]}, {children[0]} before it ends" in stuck[0], stuck
    flow.stop()
    assert nifi.is_running()
