"""ConsumeKinesis with Enhanced Fan-Out in a real NiFi, reading kinesis-local over SubscribeToShard:
the consumer is registered under the Application Name; records of two shards arrive once each and
in shard order across a stop/start on the canvas and a kill -9 of NiFi (repeats only for batches
whose NiFi commit had not happened, counted); removing the processor deregisters the consumer; a
split and a merge under load deliver every record once, per key in write order.

kinesis-local never ends a fan-out subscription at a shard's end (no ChildShards event; see
rust-core/tests/consumer_fanout.rs), so there the shard ends are found by the engine's second
signal: the listing shows the shard closed, its subscription is quiet, GetRecords confirms the end.
The ChildShards event AWS sends is covered by the engine's unit tests on synthetic events.

The NiFi is the session's shared one (tests/e2e/conftest.py), killed and restarted here as this module's own
would be (tests/lib/shared_nifi.py's ModuleNiFi.kill and restart)."""

import base64
import json
import threading
import time

import pytest

from consumer_flow import ConsumerFlow, consumer_properties, create_stream, flowfile_content, list_queue, unique
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
def nifi(local_services, shared_nifi):
    """The session's shared NiFi (which loaded the built NAR); what this module leaves is removed when it ends."""
    return shared_nifi


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
    nifi.restart()  # the same instance directory, as it was left
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



def open_shards(stream: str) -> list[dict]:
    """Open shards ordered by hash key range."""
    shards = kinesis_call("ListShards", {"StreamName": stream})["Shards"]
    open_ = [s for s in shards if not s["SequenceNumberRange"].get("EndingSequenceNumber")]
    return sorted(open_, key=lambda s: int(s["HashKeyRange"]["StartingHashKey"]))


def wait_active(stream: str) -> None:
    deadline = time.monotonic() + 30
    while kinesis_call("DescribeStreamSummary", {"StreamName": stream})["StreamDescriptionSummary"]["StreamStatus"] != "ACTIVE":
        assert time.monotonic() < deadline, f"stream {stream} stayed busy"
        time.sleep(0.1)


class KeyedProducer:
    """Writes {"k": key, "n": n} with n counting per key, one PutRecord at a time, until stopped."""

    def __init__(self, stream: str, keys: int):
        self.stream, self.keys, self.counts = stream, keys, {}
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)

    def put(self, count: int) -> None:
        for _ in range(count):
            self._put_one()

    def _put_one(self) -> None:
        i = sum(self.counts.values())
        key = f"key-{i % self.keys:02d}"
        n = self.counts.get(key, 0)
        data = base64.b64encode(json.dumps({"k": key, "n": n}).encode()).decode()
        kinesis_call("PutRecord", {"StreamName": self.stream, "PartitionKey": key, "Data": data})
        self.counts[key] = n + 1

    def _run(self) -> None:
        while self.running:
            self._put_one()
            time.sleep(0.01)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> int:
        self.running = False
        self.thread.join()
        return sum(self.counts.values())


def test_fan_out_across_a_split_and_a_merge_delivers_every_record_in_key_order(nifi):
    stream, app = unique("efo-reshard"), unique("efo-reshard-app")
    create_stream(stream, SHARDS)
    producer = KeyedProducer(stream, 20)
    producer.put(200)  # records before the processor starts
    c = nifi.client
    group = c.create_process_group("fan-out-reshard")
    # Runs every 3 s, so the queue stays under NiFi's 100-FlowFile listing limit.
    flow = ConsumerFlow.add(c, group["id"], consumer_properties(stream, app, **{
        "Consumer Type": "ENHANCED_FAN_OUT", "Processing Strategy": "LINE_DELIMITED", "Max Batch Size": "1 MB"}),
        scheduling_period="3 sec")
    flow.start()
    producer.start()
    time.sleep(4)
    parent = open_shards(stream)[0]
    start, end = int(parent["HashKeyRange"]["StartingHashKey"]), int(parent["HashKeyRange"]["EndingHashKey"])
    kinesis_call("SplitShard", {"StreamName": stream, "ShardToSplit": parent["ShardId"],
                                "NewStartingHashKey": str(start + (end - start) // 2)})
    wait_active(stream)
    split_at = time.monotonic()
    time.sleep(4)
    after_split = open_shards(stream)
    assert len(after_split) == 3, after_split
    # The split's upper child merged with the other original shard.
    kinesis_call("MergeShards", {"StreamName": stream, "ShardToMerge": after_split[1]["ShardId"],
                                 "AdjacentShardToMerge": after_split[2]["ShardId"]})
    wait_active(stream)
    time.sleep(4)  # records after the merge
    total = producer.stop()
    counts = dict(producer.counts)

    deadline = time.monotonic() + 90
    while True:
        files = flow.flow_files()
        got = {(r["k"], r["n"]) for f in files for r in map(json.loads, f["content"].decode().splitlines())}
        if len(got) >= total or time.monotonic() > deadline:
            break
        time.sleep(2)
    missing = {(k, n) for k, c_ in counts.items() for n in range(c_)} - got
    shards = {f["attributes"]["aws.kinesis.shard.id"] for f in files}
    print(f"fan-out resharding in NiFi: {total} records, {len(missing)} missing, every record in "
          f"{time.monotonic() - split_at:.1f} s after the split; shards read: {sorted(shards)}")
    assert not missing, f"{len(missing)} of {total} records never arrived, e.g. {sorted(missing)[:5]}; shards: {shards}"

    delivered = [json.loads(line) for f in files for line in f["content"].decode().splitlines()]
    assert len(delivered) == total, f"{len(delivered) - total} records delivered twice"
    per_key: dict = {}
    for r in delivered:  # FlowFiles in the order NiFi received them
        per_key.setdefault(r["k"], []).append(r["n"])
    for key, ns in per_key.items():
        assert ns == list(range(counts[key])), f"{key}: not in write order across the split and merge"
    assert len(shards) == 5, f"the originals, the split's children and the merged shard: {sorted(shards)}"
    c.delete_process_group(group["id"])
    kinesis_call("DeleteStream", {"StreamName": stream, "EnforceConsumerDeletion": True})
