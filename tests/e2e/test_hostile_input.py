"""Hostile input through the whole flow in a real NiFi: Kinesis -> ConsumeKinesis -> SplitJson -> PutSnowflake
-> the Snowflake stand-in (issue 15).

Into one stream go, in this order:
- plain JSON records (each a JSON array of one object);
- a KPL "bomb": one 1 MiB record holding a valid KPL aggregate whose key table has a 512 KiB partition key
  and about 260,000 empty sub-records that all use it (valid MD5). Copying the key per sub-record would ask
  for over 100 GB; it must come out whole, as one record, with a warning;
- a KPL aggregate with a single sub-record whose partition key is 70,000 bytes (more than the 64 KiB a
  16-bit length can carry across JNI): its record must reach the table with its key intact;
- records whose content is a JSON array of three objects: SplitJson makes three FlowFiles of each, all
  three carrying the same aws.kinesis.* attributes, so no token taken from the attributes is unique.
Then a FlowFile whose content is `[]` and which names the stream's shard is sent to PutSnowflake (by
GenerateFlowFile with the aws.kinesis.* attributes as dynamic properties), and more records follow it, so
a channel wedged by it would show.

Expected: NiFi stays up with a bounded RSS; every JSON record is in the table exactly once (the split
ones at least once: exactly once here, as nothing fails); the bomb, which is not JSON, is routed by
PutSnowflake to invalid with a reason; the `[]` FlowFile is routed to empty; the shard's channel keeps
loading after it.

NiFi's standard processors come from a test-only NAR built from the published nifi-standard-processors
jar (tests/nifi/standard-nar), because nifi-standard-nar itself is not served by the reachable Maven
repository; the session's shared NiFi (tests/lib/shared_nifi.py) loads it (the RSS bound is on that NiFi,
which other modules may have used before this one). kinesis-local accepts a record of 1 MiB of data whatever
its content (it does not look into aggregates), so the bomb can be put as AWS would accept it.
"""

import base64
import hashlib
import json
import os
import sys
import threading
import time

import pytest

import iam_proxy
from services import AwsJsonError, kinesis_call, local_services  # noqa: F401  (session fixture)
from standin import Standin, make_key_pair

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "parameter-contexts"))
import apply as flow  # noqa: E402

RUN = str(int(time.time()))
TABLE = "KINESNOW.PUBLIC.HOSTILE"
ACCOUNT = "kinesnow-local"
USER = "KINESNOW"
KPL_MAGIC = bytes([0xF3, 0x89, 0x9A, 0xC2])
MAX_RSS_BYTES = 3 * 1024 ** 3  # NiFi runs with a 1 GiB heap; the bomb expanded would need > 100 GB


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def kpl(keys: list[bytes], records: list[bytes]) -> bytes:
    """A KPL aggregate (messages.proto: 1 partition_key_table, 3 records) with its MD5 trailer; `records`
    are already encoded Record messages."""
    body = b"".join(field(1, k) for k in keys) + b"".join(field(3, r) for r in records)
    return KPL_MAGIC + body + hashlib.md5(body).digest()


def kpl_bomb(size: int = 1024 * 1024) -> tuple[bytes, int]:
    """A valid aggregate of `size` bytes: one 512 KiB key, then as many empty sub-records as fit. A sub-record
    with every field at its default encodes as nothing, so each costs two bytes (tag, zero length)."""
    key = b"k" * (512 * 1024)
    head = field(1, key)
    count = (size - len(KPL_MAGIC) - 16 - len(head)) // 2
    body = head + field(3, b"") * count
    return KPL_MAGIC + body + hashlib.md5(body).digest(), count


def one_record_aggregate(key: bytes, data: bytes) -> bytes:
    record = varint(1 << 3 | 0) + varint(0) + field(3, data)  # partition_key_index = 0, data
    return kpl([key], [record])


def put(stream: str, data: bytes, key: str) -> str:
    answer = kinesis_call("PutRecord", {"StreamName": stream, "PartitionKey": key,
                                        "Data": base64.b64encode(data).decode()})
    return answer["SequenceNumber"]


def put_json(stream: str, ids: list[int], phase: str) -> None:
    """One record per group of ids: a JSON array of one object per id."""
    entries = [{"PartitionKey": f"pk-{group[0] % 5}",
                "Data": base64.b64encode(json.dumps([{"id": i, "phase": phase} for i in group]).encode()).decode()}
               for group in ids]
    for start in range(0, len(entries), 200):
        answer = kinesis_call("PutRecords", {"StreamName": stream, "Records": entries[start:start + 200]})
        assert answer["FailedRecordCount"] == 0, answer


class RssWatch:
    """Samples a process's resident set size until stopped; remembers the peak and whether it died."""

    def __init__(self, pid: int):
        self.pid, self.peak, self.died, self._stop = pid, 0, False, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                with open(f"/proc/{self.pid}/status") as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            self.peak = max(self.peak, int(line.split()[1]) * 1024)
            except FileNotFoundError:
                self.died = True
                return
            time.sleep(0.2)

    def stop(self):
        self._stop.set()
        self.thread.join()


@pytest.fixture(scope="module")
def env(local_services, shared_nifi, tmp_path_factory):
    """The session's shared NiFi (tests/e2e/conftest.py), which loads the standard processors' NAR next to ours."""
    work = str(tmp_path_factory.mktemp("kinesnow-hostile"))
    _, public_key = make_key_pair(os.path.join(work, "snowflake"))
    sf = Standin.start(os.path.join(work, "standin"), commit_lag_ms=300)
    sf.register_user(ACCOUNT, USER, public_key)
    sf.sql(f"CREATE OR REPLACE TABLE {TABLE} (ID NUMBER, PHASE VARCHAR, KINESISMETADATA VARIANT) ENABLE_SCHEMA_EVOLUTION = TRUE ERROR_LOGGING = TRUE")
    nifi = shared_nifi
    state = {"work": work, "sf": sf, "nifi": nifi, "streams": []}
    yield state
    nifi.clean()  # the flow stopped and removed before the stand-in and the stream go
    sf.stop()
    for stream in state["streams"]:
        try:
            kinesis_call("DeleteStream", {"StreamName": stream, "EnforceConsumerDeletion": True})
        except AwsJsonError:
            pass


def rows(sf: Standin) -> list[dict]:
    return sf.query(f"SELECT ID, PHASE, KINESISMETADATA AS M FROM {TABLE}")


def wait_ids(sf: Standin, want: set, timeout: float) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        got = rows(sf)
        if want <= {r["ID"] for r in got} or time.monotonic() > deadline:
            return got
        time.sleep(0.5)


def build_flow(env, stream: str) -> dict:
    """The applied local flow with SplitJson put between the processors, and a GenerateFlowFile feeding
    PutSnowflake; every relationship that is not loaded ends in a visible queue."""
    c = env["nifi"].client
    ids = flow.apply(c, "local", {"KINESNOW_WORK": env["work"], "SNOWFLAKE_URL": env["sf"].url}, "hostile",
                     context_suffix=" [hostile]")
    c.update_parameters(ids["source_context"], {"AWS Kinesis Stream Name": stream,
                                                "AWS Kinesis Application Name": f"{stream}-app",
                                                "AWS Kinesis Initial Stream Position": "TRIM_HORIZON",
                                                "AWS Kinesis Endpoint Override URL": iam_proxy.proxy_for(stream, f"{stream}-app"),
                                                "AWS DynamoDB Endpoint Override URL": iam_proxy.proxy_for(stream, f"{stream}-app")})
    c.update_parameters(ids["destination_context"], {"Snowflake Destination Table": TABLE.split(".")[-1]})
    c.update_processor(ids["consumer"], properties={"Processing Strategy": "FLOW_FILE", "Output Strategy": "USE_VALUE"})
    group = ids["group"]
    c.delete_connection(ids["records_queue"])
    split = c.add_processor(group, "org.apache.nifi.processors.standard.SplitJson", name="SplitJson",
                            properties={"JsonPath Expression": "$[*]"}, auto_terminate=["original"],
                            position=(0, 150))
    c.connect(group, ids["consumer"], split["id"], ["success"])
    c.connect(group, split["id"], ids["sink"], ["split", "failure"])
    ids["split"] = split["id"]
    empty = flow.funnel(c, group, (400, 450))
    c.set_auto_terminated(ids["sink"], ["success"])
    c.connect(group, ids["sink"], empty, ["empty"], destination_type="FUNNEL")
    return ids


def add_empty_flow_file_source(env, ids: dict, attributes: dict) -> str:
    """GenerateFlowFile sending one FlowFile `[]` with these attributes to PutSnowflake."""
    c = env["nifi"].client
    gen = c.add_processor(ids["group"], "org.apache.nifi.processors.standard.GenerateFlowFile", name="EmptyArray",
                          properties={"Custom Text": "[]", "Batch Size": "1", **attributes},
                          scheduling_period="1 day", position=(-400, 150))
    c.connect(ids["group"], gen["id"], ids["sink"], ["success"])
    return gen["id"]


def sink_queues(env, ids: dict) -> dict:
    """The connections out of PutSnowflake by relationship (invalid, failure, empty)."""
    c = env["nifi"].client
    flow_ = c.get(f"flow/process-groups/{ids['group']}")["processGroupFlow"]["flow"]
    out = {}
    for conn in flow_["connections"]:
        comp = conn["component"]
        if comp["source"]["id"] == ids["sink"]:
            for rel in comp["selectedRelationships"]:
                out[rel] = conn["id"]
    return out


def test_hostile_records_leave_nifi_up_and_each_lands_once_or_is_routed(env):
    sf, nifi, c = env["sf"], env["nifi"], env["nifi"].client
    stream = f"e2e-hostile-{RUN}"
    kinesis_call("CreateStream", {"StreamName": stream, "ShardCount": 1})
    env["streams"].append(stream)
    time.sleep(1)

    put_json(stream, [[i] for i in range(0, 50)], "before")
    bomb, sub_records = kpl_bomb()
    assert len(bomb) == 1024 * 1024 and sub_records > 250_000
    bomb_sequence = put(stream, bomb, "bomb")
    long_key = "L" * 70_000
    put(stream, one_record_aggregate(long_key.encode(), json.dumps([{"id": 50, "phase": "long-key"}]).encode()), "x")
    put_json(stream, [[i] for i in range(51, 100)], "after")
    put_json(stream, [[i, i + 1, i + 2] for i in range(100, 250, 3)], "split")  # 50 records, 150 rows

    ids = build_flow(env, stream)
    queues = sink_queues(env, ids)
    watch = RssWatch(nifi.pid)
    try:
        c.start_processor(ids["split"])
        c.start_processor(ids["sink"])
        c.start_processor(ids["consumer"])
        got = wait_ids(sf, set(range(250)), 180)
        missing = set(range(250)) - {r["ID"] for r in got}
        assert not missing, f"{len(missing)} records missing, e.g. {sorted(missing)[:10]}; " \
                            f"bulletins: {[b.get('message') for b in c.bulletins()][-10:]}"

        # the bomb: whole, not JSON, so PutSnowflake routes it to invalid with a reason
        deadline = time.monotonic() + 60
        while c.connection_queue_count(queues["invalid"]) < 1 and time.monotonic() < deadline:
            time.sleep(0.5)
        invalid = _flow_files(c, queues["invalid"])
        bombs = [f for f in invalid if f["attributes"].get("aws.kinesis.last.sequence.number") == bomb_sequence]
        assert len(bombs) == 1, [f["attributes"] for f in invalid]
        assert bombs[0]["size"] == len(bomb), "the bomb arrived whole"
        assert bombs[0]["attributes"].get("snowflake.error.message"), "routed with a reason"
        assert any("aggregate" in (b.get("message") or "") for b in c.bulletins(source_id=ids["consumer"])), \
            "a warning bulletin names the oversized aggregate"

        # the empty array names the shard: routed to empty, and the channel keeps loading after it
        shard = rows(sf)[0]["M"]["shardId"]
        add_empty_flow_file_source(env, ids, {"aws.kinesis.stream.name": stream, "aws.kinesis.shard.id": shard,
                                              "aws.kinesis.last.sequence.number": bomb_sequence})
        queues = sink_queues(env, ids)
        gen = [p["id"] for p in c.get(f"flow/process-groups/{ids['group']}")["processGroupFlow"]["flow"]["processors"]
               if p["component"]["name"] == "EmptyArray"][0]
        c.start_processor(gen)
        deadline = time.monotonic() + 60
        while c.connection_queue_count(queues["empty"]) < 1 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert c.connection_queue_count(queues["empty"]) == 1, "the [] FlowFile went to empty"
        c.stop_processor(gen)
        put_json(stream, [[i] for i in range(250, 300)], "late")
        got = wait_ids(sf, set(range(300)), 120)
        missing = set(range(300)) - {r["ID"] for r in got}
        assert not missing, f"the channel stopped after the [] FlowFile: {len(missing)} missing"
    finally:
        watch.stop()

    time.sleep(3)  # anything in flight would show up now as a duplicate
    got = rows(sf)
    by_id: dict = {}
    for r in got:
        by_id.setdefault(r["ID"], []).append(r)
    twice = {i: len(v) for i, v in by_id.items() if len(v) > 1}
    assert not twice, f"{len(twice)} records loaded more than once: {dict(list(twice.items())[:10])}"
    assert sorted(by_id) == list(range(300))
    assert by_id[50][0]["M"]["partitionKey"] == long_key, "the 70,000-byte partition key reached the table intact"
    assert not watch.died and nifi.is_running(), "NiFi stayed up"
    assert watch.peak < MAX_RSS_BYTES, f"NiFi's RSS peaked at {watch.peak / 1024 ** 2:.0f} MiB"
    rejected = _flow_files(c, queues["invalid"])  # failure and invalid share one queue in the applied flow
    assert [f["attributes"].get("aws.kinesis.last.sequence.number") for f in rejected] == [bomb_sequence], \
        "nothing but the bomb was rejected"
    print(f"hostile input: NiFi peak RSS {watch.peak / 1024 ** 2:.0f} MiB; bomb of {sub_records} sub-records "
          f"delivered whole; 300 records once each")


def _listing(client, queue_id: str) -> list[dict]:
    from consumer_flow import list_queue
    return list_queue(client, queue_id)


def _flow_files(client, queue_id: str) -> list[dict]:
    """Attributes and size of every FlowFile queued in a connection."""
    out = []
    for s in _listing(client, queue_id):
        ff = client.get(f"flowfile-queues/{queue_id}/flowfiles/{s['uuid']}")["flowFile"]
        out.append({"attributes": ff["attributes"], "size": int(ff.get("size", 0))})
    return out
