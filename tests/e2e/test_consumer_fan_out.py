"""ConsumeKinesis with Enhanced Fan-Out in a real NiFi, reading kinesis-local over SubscribeToShard:
the consumer is registered under the Application Name; records of two shards arrive once each and
in shard order across a stop/start on the canvas and a kill -9 of NiFi (repeats only for batches
whose NiFi commit had not happened, counted); removing the processor deregisters the consumer.

kinesis-local cannot end a fan-out subscription at a shard's end (no ChildShards), so resharding
with EFO is covered only by the engine's unit tests on synthetic events."""

import base64
import json
import time

import pytest

from consumer_flow import (ConsumerFlow, built_nar, consumer_properties, create_stream, flowfile_content, list_queue,
                           unique)
from nifi_instance import NiFiInstance, free_port
from services import kinesis_call, local_services  # noqa: F401  (session fixture)

SHARDS = 2


def put(stream: str, first: int, count: int) -> None:
    records = [{"PartitionKey": f"k{i % 11}", "Data": base64.b64encode(json.dumps({"n": i}).encode()).decode()}
               for i in range(first, first + count)]
    for start in range(0, len(records), 250):
        kinesis_call("PutRecords", {"StreamName": stream, "Records": records[start:start + 250]})


def consumers(stream: str) -> list[str]:
    arn = kinesis_call("DescribeStreamSummary", {"StreamName": stream})["StreamDescriptionSummary"]["StreamARN"]
    return [c["ConsumerName"] for c in kinesis_call("ListStreamConsumers", {"StreamARN": arn}).get("Consumers", [])]


def queued(flow: ConsumerFlow) -> list[tuple[str, int, list[int]]]:
    """(shard, first sequence number, values) per queued FlowFile."""
    listed = list_queue(flow.client, flow.success_queue)
    assert len(listed) < 100, "NiFi lists at most 100 FlowFiles: the listing must be complete"
    out = []
    for summary in listed:
        ff = flow.client.get(f"flowfile-queues/{flow.success_queue}/flowfiles/{summary['uuid']}")["flowFile"]
        attrs = ff["attributes"]
        content = flowfile_content(flow.client, flow.success_queue, summary["uuid"]).decode()
        out.append((attrs["aws.kinesis.shard.id"], int(attrs["aws.kinesis.first.sequence.number"]),
                    [json.loads(line)["n"] for line in content.splitlines()]))
    return out


def wait_all(flow: ConsumerFlow, total: int, timeout: float):
    deadline = time.monotonic() + timeout
    got = []
    while time.monotonic() < deadline:
        got = queued(flow)
        if {n for _, _, v in got for n in v} >= set(range(total)):
            return got
        time.sleep(1)
    missing = set(range(total)) - {n for _, _, v in got for n in v}
    raise AssertionError(f"{len(missing)} of {total} records missing, e.g. {sorted(missing)[:10]}")


@pytest.fixture(scope="module")
def nifi(local_services):
    inst = NiFiInstance.start(port=free_port(), extensions=[built_nar()])
    yield inst
    if inst.is_running():
        inst.stop()


def test_fan_out_in_nifi_across_stop_start_and_kill_9_then_removal_deregisters(nifi):
    stream, app = unique("efo"), unique("efo-app")
    create_stream(stream, SHARDS)
    put(stream, 0, 600)
    c = nifi.client
    group = c.create_process_group("fan-out")
    flow = ConsumerFlow.add(c, group["id"], consumer_properties(stream, app, **{
        "Consumer Type": "ENHANCED_FAN_OUT", "Processing Strategy": "LINE_DELIMITED", "Max Batch Size": "1 MB"}))
    flow.start()
    wait_all(flow, 600, 90)
    assert app in consumers(stream), "the consumer is registered under the Application Name"

    flow.stop()
    put(stream, 600, 600)
    flow.start()
    time.sleep(2)
    nifi.kill()  # mid-stream, with the second 600 being read
    restarted = NiFiInstance.start(port=nifi.port, instance_dir=nifi.instance_dir, keep=True)
    nifi.pid = restarted.pid
    put(stream, 1200, 300)
    got = wait_all(flow, 1500, 120)

    delivered = [n for _, _, v in got for n in v]
    repeats = len(delivered) - 1500
    print(f"fan-out: 1500 records, delivered {len(delivered)}, repeated after kill -9: {repeats}")
    assert repeats <= 600, repeats
    by_shard: dict = {}
    for shard, first, values in sorted(got, key=lambda g: (g[0], g[1])):
        by_shard.setdefault(shard, []).extend(values)
    assert len(by_shard) == SHARDS
    for shard, values in by_shard.items():
        firsts = list(dict.fromkeys(values))  # a repeated batch comes again whole, in order
        per_key: dict = {}
        for n in firsts:
            per_key.setdefault(n % 11, []).append(n)
        for key, ns in per_key.items():
            assert ns == sorted(ns), f"shard {shard}, key k{key} out of order"

    c.delete_process_group(group["id"])  # stops, empties the queues, removes the processor: @OnRemoved
    deadline = time.monotonic() + 30
    while app in consumers(stream) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert app not in consumers(stream), "removing the processor deregisters its consumer"
    kinesis_call("DeleteStream", {"StreamName": stream, "EnforceConsumerDeletion": True})

