"""The end-to-end acceptance test of issue 9, in a real NiFi with every local service: kinesis-local,
dynalite, the Snowflake stand-in, and the flow applied by parameter-contexts/apply.py.

4,000 JSON records, two thirds of them in KPL aggregates made by aws-kinesis-agg (tests/kpl/venv.sh
makes its venv), go into a 2-shard stream; shard 0 is split while the flow runs, so later records of
its keys go to the two children. The flow is stopped and started on the canvas twice (once the whole
group, once processor by processor) and NiFi is killed with SIGKILL once and restarted. Then:

- every record is in the table exactly once (count, and each record found by its id with the
  sequence and sub-sequence number Kinesis gave it, via kinesisMetadata.shardedSequenceNumber);
- kinesisMetadata is right (stream, shardId, partitionKey, sequenceNumber, subSequenceNumber);
- the records of each partition key were loaded in sequence-number order, across the split too
  (parent shard before child). Load order is the order of DuckDB's rowid in the stand-in: its
  committer inserts each channel's batches one after another with INSERT ... SELECT into a table that
  is never deleted from or updated, so a larger rowid means inserted later (see
  tests/snowflake-standin/src/commit.rs and storage.rs; the test also checks the rowids are 0..n-1).
  A batch commits a fixed lag after its append, so this is the order in which PutSnowflake appended;
- a new Application Name and a fresh table re-read the whole stream from TRIM_HORIZON into it.

A second flow with Schema Evolution Enabled = false writes into a table created without
ENABLE_SCHEMA_EVOLUTION: keys without a column are ignored, the columns stay as created, rows load.

Found here and fixed: when the parent's channel committed late (or PutSnowflake started with the parent's
last records and the children's first ones both queued), a child's records could be loaded before the
parent's last ones. ConsumeKinesis now marks a child's FlowFiles with aws.kinesis.parent.shard.ids and
PutSnowflake holds them until the parent's channel has committed what it was given;
test_a_parents_last_records_load_before_its_childrens_first checks it.

What the emulators cannot show: kinesis-local closes a split parent with an EndingSequenceNumber of
9223372036854775807 (a placeholder, not a real sequence number) and lists the children as soon as
SplitShard returns; it refuses new shards beyond 50 open ones over all its streams (SHARD_LIMIT), so
this module deletes its streams and lease tables at the end. The stand-in is a stand-in: Snowflake's
own order of commits is not observed. Its open, as Snowflake's, reports the latest committed offset token and
discards every batch not committed by then, also while a batch of the channel is being inserted (fixed in
773cbe6; tests/snowflake-standin/tests/reopen_race.rs), so the stop/starts below do not wait for its commits.

The NiFi is the session's shared one (tests/e2e/conftest.py), killed and restarted here as this module's own would
be (tests/lib/shared_nifi.py's ModuleNiFi.kill and restart).
"""

import base64
import json
import os
import re
import sys
import threading
import time
from collections import defaultdict

import pytest

import iam_proxy
from kpl import aggregate
from services import AwsJsonError, dynamodb_call, kinesis_call, local_services  # noqa: F401
from standin import Standin, make_key_pair
from consumer_flow import built_nar

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "parameter-contexts"))
import apply as flow  # noqa: E402


# The flow's ConsumeKinesis has Failover Position SNOWFLAKE_COMMIT (processor-bindings.json), so each shard's rows
# go through its shared channel, <prefix>_<account>_<region>_<stream>_<Application Name>_<shard>: the account and
# region from the stream's ARN (kinesis-local's account is 000000000000).
CHANNEL = re.compile(r"^kinesnow_(?P<account>\d{12})_(?P<region>[a-z]{2}(?:-[a-z]+)+-\d+)_(?P<rest>.+)$")


def without_account(names: list[str]) -> list[str]:
    """The channel names as kinesnow_<stream>_<app>_<shard>, once each is checked to be a shared channel."""
    matches = [CHANNEL.match(n) for n in names]
    assert all(matches), names
    assert {m["account"] for m in matches} <= {"000000000000"}, f"kinesis-local's account: {names}"
    return [f"kinesnow_{m['rest']}" for m in matches]

ACCOUNT = "kinesnow-local"
USER = "KINESNOW"
DB = "KINESNOW.PUBLIC"
RUN = str(int(time.time()))  # the emulators may be shared and outlive a run: unique names
KEYS = [f"pk-{i:02d}" for i in range(16)]
AGGREGATE_SIZE = 6  # user records per KPL aggregate


def nar() -> str:
    """The built kinesnow-nar (test_cluster_exactly_once.py and bench/cluster_failover.py import it; this module
    runs in the shared NiFi, which loads it)."""
    return built_nar()


class Producer:
    """Puts records with PutRecords and remembers, per record id, where Kinesis put it: partition key,
    shard, sequence number, sub-sequence number (None for a record that is not aggregated)."""

    def __init__(self, stream: str):
        self.stream = stream
        self.lock = threading.Lock()  # held for each PutRecords call
        self.error = None
        self.next_id = 0
        self.unit = 0
        self.phase = 1  # records of phase >= 2 carry a key that earlier ones lack
        self.expected: dict[int, dict] = {}
        self.order: dict[str, list[int]] = defaultdict(list)  # partition key -> ids in put order

    def event(self, i: int, phase: int) -> str:
        event = {"id": i, "kind": ["click", "view", "purchase"][i % 3], "user": f"u{i % 17}", "phase": phase}
        if i % 5 == 0:
            event["amount"] = i / 4  # a key only some records have: a column appears
        if phase >= 2:
            event["region"] = ["eu", "us", "ap"][i % 3]  # a key that only appears after the split
        return json.dumps(event)

    def put(self, count: int, phase: int) -> None:
        """`count` records: units cycle over the keys; every fourth unit is a KPL aggregate of
        AGGREGATE_SIZE records of one key, the others are single records."""
        units, plain_units, groups = [], [], []
        end = self.next_id + count
        u = self.unit
        while self.next_id < end:
            key = KEYS[u % len(KEYS)]
            if u % 4 == 3 and end - self.next_id >= AGGREGATE_SIZE:
                ids = list(range(self.next_id, self.next_id + AGGREGATE_SIZE))
                groups.append([(key, self.event(i, phase)) for i in ids])
                units.append(("aggregate", key, ids, len(groups) - 1))
            else:
                ids = [self.next_id]
                plain_units.append(self.event(self.next_id, phase))
                units.append(("plain", key, ids, len(plain_units) - 1))
            self.next_id += len(ids)
            u += 1
        self.unit = u
        aggregates = aggregate(groups)
        entries = []
        for kind, key, ids, index in units:
            if kind == "aggregate":
                agg = aggregates[index]
                assert agg["partition_key"] == key
                entries.append({"PartitionKey": key, "Data": agg["data_b64"]})
            else:
                entries.append({"PartitionKey": key, "Data": base64.b64encode(plain_units[index].encode()).decode()})
        for start in range(0, len(entries), 200):
            with self.lock:
                answer = kinesis_call("PutRecords", {"StreamName": self.stream, "Records": entries[start:start + 200]})
                assert answer["FailedRecordCount"] == 0, answer
                for (kind, key, ids, _), result in zip(units[start:start + 200], answer["Records"]):
                    for sub, i in enumerate(ids):
                        self.expected[i] = {"partitionKey": key, "shardId": result["ShardId"],
                                            "sequenceNumber": result["SequenceNumber"],
                                            "subSequenceNumber": sub if kind == "aggregate" else None}
                        self.order[key].append(i)

    def count(self) -> int:
        with self.lock:
            return len(self.expected)

    def wait_count(self, at_least: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.count() < at_least and self.error is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert self.count() >= at_least, f"the producer put {self.count()} records ({self.error})"

    def run_in_background(self, count: int, per_second: int) -> threading.Thread:
        """Puts `count` more records at about `per_second` (chunks of 50), of the phase set in .phase."""
        def produce():
            try:
                end = self.next_id + count
                while self.next_id < end:
                    t = time.monotonic()
                    self.put(min(50, end - self.next_id), self.phase)
                    time.sleep(max(0.0, 50 / per_second - (time.monotonic() - t)))
            except Exception as e:  # reported by the test through .error
                self.error = e

        thread = threading.Thread(target=produce, daemon=True)
        thread.start()
        return thread


def wait_active(stream: str, timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        d = kinesis_call("DescribeStream", {"StreamName": stream})["StreamDescription"]
        if d["StreamStatus"] == "ACTIVE" or time.monotonic() > deadline:
            return d
        time.sleep(0.2)


def distinct_ids(sf: Standin, table: str) -> int:
    return sf.query(f"SELECT COUNT(DISTINCT ID) AS D FROM {table}")[0]["D"]


def wait_for_rows(sf: Standin, table: str, at_least: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    n = distinct_ids(sf, table)
    while n < at_least and time.monotonic() < deadline:
        time.sleep(0.5)
        n = distinct_ids(sf, table)
    return n


def wait_for_ids_below(sf: Standin, table: str, end: int, timeout: float, producer: "Producer" = None) -> None:
    """Until every record with an id below `end` is in the table."""
    deadline = time.monotonic() + timeout
    while sf.query(f"SELECT COUNT(DISTINCT ID) AS D FROM {table} WHERE ID < {end}")[0]["D"] < end:
        if time.monotonic() >= deadline:
            have = {r["ID"] for r in sf.query(f"SELECT DISTINCT ID FROM {table} WHERE ID < {end}")}
            missing = sorted(set(range(end)) - have)
            where = [(i, producer.expected[i]["shardId"], producer.expected[i]["sequenceNumber"]) for i in missing[:8]] if producer else []
            raise AssertionError(f"{len(missing)} records below id {end} did not arrive, e.g. {where or missing[:8]}; "
                                 f"channels: {sf.admin('GET', '/admin/channels')['channels']}")
        time.sleep(0.5)


def create_table(sf: Standin, table: str, evolution: bool, columns: str = "ID NUMBER") -> None:
    sf.sql(f"CREATE TABLE {table} ({columns})" + (" ENABLE_SCHEMA_EVOLUTION = TRUE" if evolution else "")
           + " ERROR_LOGGING = TRUE")


def table_columns(sf: Standin, table: str) -> list[str]:
    name = table.split(".")[-1]
    for t in sf.admin("GET", "/admin/tables")["tables"]:
        if t["database"] == "KINESNOW" and t["schema"] == "PUBLIC" and t["name"] == name:
            return [c["name"] for c in t["columns"]]
    raise AssertionError(f"no table {table}")


def loaded_rows(sf: Standin, table: str) -> list[dict]:
    """Every row with its rowid (insertion order in the stand-in's DuckDB table), oldest first."""
    return sf.query(f"SELECT rowid AS RID, ID, KINESISMETADATA AS M FROM {table} ORDER BY rowid")


def channels_of(sf: Standin, table: str) -> list[str]:
    pipe = table.split(".")[-1] + "-STREAMING"
    return sorted(c["channel_name"] for c in sf.admin("GET", "/admin/channels")["channels"] if c["pipe_name"] == pipe)


@pytest.fixture(scope="module")
def env(local_services, shared_nifi, tmp_path_factory):
    """The stand-in, and the session's shared NiFi (which loaded the built NAR)."""
    work = str(tmp_path_factory.mktemp("kinesnow-acceptance"))
    _, public_key = make_key_pair(os.path.join(work, "snowflake"))
    sf = Standin.start(os.path.join(work, "standin"), commit_lag_ms=500)
    state = {"work": work, "sf": sf, "streams": [], "apps": [], "nifi": shared_nifi}
    try:
        sf.register_user(ACCOUNT, USER, public_key)
        yield state
    finally:
        try:
            shared_nifi.clean()  # the flows stopped and removed before the stand-in, the streams and the tables go
        finally:
            sf.stop()
    # kinesis-local limits the open shards of all its streams together, and the emulators are shared
    for call, action, key, names in ((kinesis_call, "DeleteStream", "StreamName", state["streams"]),
                                     (dynamodb_call, "DeleteTable", "TableName", state["apps"])):
        for name in names:
            try:
                call(action, {key: name})
            except AwsJsonError:
                pass


def create_stream(env, stream: str, shards: int) -> None:
    kinesis_call("CreateStream", {"StreamName": stream, "ShardCount": shards})
    env["streams"].append(stream)
    wait_active(stream)


def applied(env, name: str, stream: str, app: str, table: str, evolution: bool = True) -> dict:
    c = env["nifi"].client
    env["apps"].append(app)
    ids = flow.apply(c, "local", {"KINESNOW_WORK": env["work"], "SNOWFLAKE_URL": env["sf"].url}, name,
                     context_suffix=f" [{name}]")
    # The emulators' ports as this run has them (KINESIS_PORT, DYNAMODB_PORT), not the local context's defaults.
    c.update_parameters(ids["source_context"], {"AWS Kinesis Stream Name": stream, "AWS Kinesis Application Name": app,
                                                "AWS Kinesis Endpoint Override URL": iam_proxy.proxy_for(stream, app),
                                                "AWS DynamoDB Endpoint Override URL": iam_proxy.proxy_for(stream, app)})
    c.update_parameters(ids["destination_context"], {"Snowflake Destination Table": table.split(".")[-1],
                                                     "Schema Evolution Enabled": "true" if evolution else "false"})
    for pid in (ids["consumer"], ids["sink"]):
        v = c.processor_validation(pid)
        assert v["status"] == "VALID", v
    return ids


def check_table(sf: Standin, table: str, producer: Producer) -> list[dict]:
    """Exactly once, right kinesisMetadata, per-key load order by sequence number. Returns the rows."""
    rows = loaded_rows(sf, table)
    assert [r["RID"] for r in rows] == list(range(len(rows))), "rowids 0..n-1: rows only ever appended"
    ids = [r["ID"] for r in rows]
    total = len(producer.expected)
    missing = set(producer.expected) - set(ids)
    assert not missing, f"{len(missing)} of {total} records are missing, e.g. {sorted(missing)[:10]}"
    if len(ids) != len(set(ids)):
        seen, twice = set(), []
        for r in rows:
            if r["ID"] in seen:
                twice.append(r["ID"])
            seen.add(r["ID"])
        shown = [(r["ID"], r["M"]["shardId"], r["M"]["shardedSequenceNumber"], r["RID"]) for r in rows if r["ID"] in twice[:6]]
        raise AssertionError(f"{len(twice)} records were loaded twice; (id, shard, token, rowid): {shown}")
    assert len(ids) == total
    by_key = defaultdict(list)
    for r in rows:
        want, m = producer.expected[r["ID"]], r["M"]
        sub = want["subSequenceNumber"]
        assert m["stream"] == producer.stream, (r["ID"], m)
        assert m["shardId"] == want["shardId"], (r["ID"], m, want)
        assert m["partitionKey"] == want["partitionKey"], (r["ID"], m, want)
        assert m["sequenceNumber"] == want["sequenceNumber"], (r["ID"], m, want)
        assert m["subSequenceNumber"] == (sub or 0), (r["ID"], m, want)
        assert m["shardedSequenceNumber"] == f"{want['sequenceNumber']}{(sub or 0):020d}", (r["ID"], m)
        by_key[m["partitionKey"]].append(r)
    for key, key_rows in by_key.items():
        loaded = [r["ID"] for r in key_rows]  # already in rowid order
        if loaded != producer.order[key]:
            at = next(n for n, (a, b) in enumerate(zip(loaded, producer.order[key])) if a != b)
            early = key_rows[at]
            late = next(r for r in key_rows if r["ID"] == producer.order[key][at])
            raise AssertionError(
                f"records of {key} were not loaded in the order they were put: record {early['ID']} "
                f"({early['M']['shardId']} {early['M']['sequenceNumber']}, rowid {early['RID']}) was loaded before "
                f"record {late['ID']} ({late['M']['shardId']} {late['M']['sequenceNumber']}, rowid {late['RID']})")
        positions = [(int(r["M"]["sequenceNumber"]), r["M"]["subSequenceNumber"]) for r in key_rows]
        assert positions == sorted(positions) and len(set(positions)) == len(positions), \
            f"records of {key} were not loaded in sequence-number order"
    return rows


def wait_consumed(app: str, producer: Producer, timeout: float) -> None:
    """Until the consumer's checkpoint (in the lease table named after the Application Name) of every shard
    is at the last record put to it: everything read and committed into NiFi's queue."""
    last = {}
    for want in producer.expected.values():
        last[want["shardId"]] = max(last.get(want["shardId"], 0), int(want["sequenceNumber"]))
    deadline = time.monotonic() + timeout
    while True:
        items = dynamodb_call("Scan", {"TableName": app})["Items"]
        done = {i["shardId"]["S"]: int(i["sequenceNumber"]["S"]) for i in items
                if i.get("sequenceNumber", {}).get("S", "").isdigit()}
        if all(done.get(shard, 0) >= seq for shard, seq in last.items()):
            return
        assert time.monotonic() < deadline, f"the consumer did not read everything: {done} vs {last}"
        time.sleep(0.5)


def stop_and_start_group(c, group: str) -> None:
    """The canvas's Operate palette: stop the process group, then start it. PutSnowflake reopens its channels
    while batches it appended may still be committing: the stand-in's open, like Snowflake's, reports every
    batch that will become visible and discards the rest (tests/snowflake-standin/tests/reopen_race.rs)."""
    c.set_process_group_state(group, "STOPPED")
    c._wait_no_active_threads(group)
    c.set_process_group_state(group, "RUNNING")


def stop_and_start_processors(c, ids: dict) -> None:
    """Each processor's context menu: stop PutSnowflake, stop ConsumeKinesis, start both (no waiting for the
    stand-in's commits in between, as in stop_and_start_group)."""
    c.stop_processor(ids["sink"])
    c.stop_processor(ids["consumer"])
    c.start_processor(ids["consumer"])
    c.start_processor(ids["sink"])


def test_every_record_once_in_key_order_across_split_restarts_and_kill_9(env):
    sf, stream, table = env["sf"], f"accept-{RUN}", f"{DB}.ACCEPT_{RUN}"
    t0 = time.monotonic()
    create_table(sf, table, evolution=True)
    create_stream(env, stream, 2)
    producer = Producer(stream)
    producer.put(1000, phase=1)  # a backlog, read from TRIM_HORIZON

    ids = applied(env, "acceptance", stream, f"{stream}-app", table)
    c = env["nifi"].client
    c.start_processor(ids["consumer"])
    c.start_processor(ids["sink"])
    background = producer.run_in_background(3000, per_second=200)  # the stream keeps growing meanwhile
    events = {}

    assert wait_for_rows(sf, table, 500, 120) >= 500, "rows arrive"
    events["canvas stop/start 1 (group)"] = (distinct_ids(sf, table), producer.count())
    stop_and_start_group(c, ids["group"])

    parent = "shardId-000000000000"
    producer.wait_count(2000, 60)
    with producer.lock:  # between two PutRecords calls
        shard = next(s for s in wait_active(stream)["Shards"] if s["ShardId"] == parent)
        low, high = int(shard["HashKeyRange"]["StartingHashKey"]), int(shard["HashKeyRange"]["EndingHashKey"])
        kinesis_call("SplitShard", {"StreamName": stream, "ShardToSplit": parent,
                                    "NewStartingHashKey": str((low + high) // 2 + 1)})
        children = sorted(s["ShardId"] for s in wait_active(stream)["Shards"] if s.get("ParentShardId") == parent)
        first_after_split = len(producer.expected)  # every record put so far went to the parent or shard 1
        producer.phase = 2
        events["split"] = (distinct_ids(sf, table), first_after_split)
    assert len(children) == 2, "the split made two children"

    # Everything put before the split loaded (the parent's last records too): then stop/start 2. Doing it while
    # the parent's last records are still in PutSnowflake can load a child's records first: see the test below.
    wait_for_ids_below(sf, table, first_after_split, 180, producer)
    events["canvas stop/start 2 (processors)"] = (distinct_ids(sf, table), producer.count())
    stop_and_start_processors(c, ids)
    time.sleep(2)  # NiFi saves the flow (with the processors' run state) a moment after a change
    loaded_at_kill, put_at_kill = distinct_ids(sf, table), producer.count()
    events["kill -9"] = (loaded_at_kill, put_at_kill)
    env["nifi"].kill()  # with records in flight: queued, in PutSnowflake's sessions, appended but not committed
    c = env["nifi"].restart().client  # the same instance directory, as it was left
    for pid in (ids["consumer"], ids["sink"]):
        assert c.processor_state(pid) == "RUNNING", "NiFi resumed the processors after the crash"
    background.join()
    total = len(producer.expected)
    assert total == 4000 and producer.error is None, producer.error

    loaded = wait_for_rows(sf, table, total, 300)
    time.sleep(3)  # anything still in flight would show up now as a duplicate
    print(f"\n(loaded, put) at each event: {events}; all {loaded} of {total} after {time.monotonic() - t0:.0f} s")
    assert loaded_at_kill < put_at_kill, "the kill happened with records not yet loaded"
    rows = check_table(sf, table, producer)

    after_split = {producer.expected[i]["shardId"] for i in range(first_after_split, total)}
    assert parent not in after_split and set(children) <= after_split, after_split
    spanning = [k for k in KEYS if producer.expected[producer.order[k][0]]["shardId"] == parent]
    assert spanning and all(producer.expected[producer.order[k][-1]]["shardId"] in children for k in spanning), \
        "some keys have records on the parent and then on a child"
    assert any(r["M"]["subSequenceNumber"] > 0 for r in rows), "aggregated records were loaded"
    assert c.connection_queue_count(ids["failure_queue"]) == 0
    assert c.connection_queue_count(ids["parse_failure_queue"]) == 0
    assert sf.query(f"SELECT COUNT(*) AS N FROM ERROR_TABLE({table})")[0]["N"] == 0
    assert {"AMOUNT", "REGION", "KIND", "USER", "PHASE", "KINESISMETADATA"} <= set(table_columns(sf, table))
    assert without_account(channels_of(sf, table)) == \
        [f"kinesnow_{stream}_{stream}-app_{s}" for s in sorted([parent, "shardId-000000000001", *children])]
    env["main"] = {"ids": ids, "producer": producer, "table": table}


def test_a_new_application_name_rereads_the_stream_into_a_fresh_table(env):
    """The README's reset: stop the flow, a new Application Name (a new, empty lease table) and a new table;
    the whole stream, closed parent shard included, is read again from TRIM_HORIZON into the new table.
    The channels are the new table's pipe's own (same names, no committed offset token yet), so no
    new Channel Name Prefix is needed."""
    if "main" not in env:
        pytest.skip("needs the stream of the test above")
    sf, c = env["sf"], env["nifi"].client
    ids, producer, old_table = env["main"]["ids"], env["main"]["producer"], env["main"]["table"]
    table, app = f"{DB}.ACCEPT_RESET_{RUN}", f"{producer.stream}-app-reset"
    c.stop_processor(ids["consumer"])
    c.stop_processor(ids["sink"])
    create_table(sf, table, evolution=True)
    env["apps"].append(app)
    # The new Application Name names a new lease table: Snowflake's policy (the proxy) is granted on that one.
    c.update_parameters(ids["source_context"], {"AWS Kinesis Application Name": app,
                                                "AWS Kinesis Endpoint Override URL": iam_proxy.proxy_for(producer.stream, app),
                                                "AWS DynamoDB Endpoint Override URL": iam_proxy.proxy_for(producer.stream, app)})
    c.update_parameters(ids["destination_context"], {"Snowflake Destination Table": table.split(".")[-1]})
    c.start_processor(ids["consumer"])
    c.start_processor(ids["sink"])
    total = len(producer.expected)
    assert wait_for_rows(sf, table, total, 240) == total
    time.sleep(3)
    check_table(sf, table, producer)
    assert distinct_ids(sf, old_table) == total and \
        sf.query(f"SELECT COUNT(*) AS N FROM {old_table}")[0]["N"] == total, "the old table is untouched"
    assert dynamodb_call("DescribeTable", {"TableName": app})["Table"]["TableName"] == app, "a new lease table"
    assert len(channels_of(sf, table)) == 4
    c.stop_processor(ids["consumer"])
    c.stop_processor(ids["sink"])


def test_schema_evolution_off_ignores_unknown_keys(env):
    """A second flow, Schema Evolution Enabled = false, into a table created without ENABLE_SCHEMA_EVOLUTION.
    Note: PutSnowflake reads and validates that parameter, but nothing in rust-core uses it (only the
    table's own property decides, in Snowflake as in the stand-in), so this shows the table property at
    work with the flow set up as a user would set it up."""
    sf, stream, table = env["sf"], f"accept-noevo-{RUN}", f"{DB}.ACCEPT_NOEVO_{RUN}"
    create_table(sf, table, evolution=False, columns="ID NUMBER, KIND VARCHAR, KINESISMETADATA VARIANT")
    before = table_columns(sf, table)
    create_stream(env, stream, 1)
    producer = Producer(stream)
    producer.put(300, phase=2)  # id, kind, user, phase, region, some amount: four keys without a column
    ids = applied(env, "no-evolution", stream, f"{stream}-app", table, evolution=False)
    c = env["nifi"].client
    c.start_processor(ids["consumer"])
    c.start_processor(ids["sink"])
    assert wait_for_rows(sf, table, 300, 120) == 300
    time.sleep(2)
    assert table_columns(sf, table) == before == ["ID", "KIND", "KINESISMETADATA"], "no column was added"
    check_table(sf, table, producer)
    row = sf.query(f"SELECT * FROM {table} WHERE ID = 5")[0]
    assert row["KIND"] == "purchase" and set(row) == {"ID", "KIND", "KINESISMETADATA"}
    assert sf.query(f"SELECT COUNT(*) AS N FROM ERROR_TABLE({table})")[0]["N"] == 0, "no row was rejected"
    assert c.connection_queue_count(ids["failure_queue"]) == 0
    check_counters(c, ids, 300)
    check_view_state(c, ids["consumer"], stream)
    check_sink_view_state(c, ids["sink"])
    c.stop_processor(ids["consumer"])
    assert c.local_state(ids["consumer"]) == {}, "a stopped ConsumeKinesis shows no shard as held"
    instance = c.local_state(ids["sink"])["instance.id"]
    c.stop_processor(ids["sink"])
    assert c.local_state(ids["sink"]) == {"instance.id": instance}, "a stop removes the channels' lines, never the id"


def test_a_slow_snowflake_fires_the_freshness_warning_and_clears_it(env):
    """Freshness Warning 3 sec: while the stand-in withholds commits, FlowFiles wait in PutSnowflake and the newest
    row committed grows older than 3 s, so one bulletin names the shard; View State shows the shard's freshness on
    both processors; once commits resume, a second bulletin says the shard is fresh again, and every row loads once.
    The warning's rules (idle shards, once only, bounds) are unit-tested in rust-core/src/snowflake/freshness.rs."""
    sf, stream, table = env["sf"], f"accept-fresh-{RUN}", f"{DB}.ACCEPT_FRESH_{RUN}"
    shard = "shardId-000000000000"
    create_table(sf, table, evolution=True)
    create_stream(env, stream, 1)
    producer = Producer(stream)
    producer.put(100, phase=1)
    ids = applied(env, "freshness", stream, f"{stream}-app", table)
    c = env["nifi"].client
    c.update_processor(ids["sink"], properties={"Freshness Warning": "3 sec"})
    c.start_processor(ids["consumer"])
    c.start_processor(ids["sink"])
    assert wait_for_rows(sf, table, 100, 120) == 100
    time.sleep(5)
    assert not sink_messages(c, ids["sink"], "not fresh in Snowflake"), "nothing waits: an idle shard never warns"
    fault = sf.fault({"kind": "withhold_commits", "count": -1})
    try:
        producer.put(100, phase=1)
        stale = wait_until(lambda: sink_messages(c, ids["sink"], f"rows of shard {shard} of stream '{stream}' are not "
                                                 "fresh in Snowflake"), 60, "the freshness bulletin")
        assert "the newest row Snowflake has committed arrived in Kinesis" in stale[0], stale
        assert "FlowFile(s) of the shard wait in PutSnowflake for Snowflake to commit" in stale[0], stale
        line = wait_until(lambda: waiting_line(c, ids["sink"], f"shard.{stream}/{shard}"), 30, "the shard's View State")
        # How old Snowflake's newest row is and what waits first (NiFi's dialog cuts long values), the times after.
        assert re.match(r".+ old in Snowflake; FlowFiles waiting here [1-9]\d*; newest FlowFile in Snowflake began with "
                        r"a record that arrived 20", line), line
    finally:
        sf.admin("DELETE", f"/admin/faults/{fault['id']}")
    wait_until(lambda: sink_messages(c, ids["sink"], f"rows of shard {shard} of stream '{stream}' are fresh again"),
               60, "the fresh-again bulletin")
    assert wait_for_rows(sf, table, 200, 120) == 200
    assert len(sink_messages(c, ids["sink"], "not fresh in Snowflake")) == 1, "warned once, not on every look"
    consumer_line = wait_until(lambda: (lambda l: l if "newest FlowFile in Snowflake began with a record that arrived 20"
                                        in l else None)(c.local_state(ids["consumer"]).get(shard, "")), 30,
                               "ConsumeKinesis' View State naming the arrival of what Snowflake has")
    assert "in Snowflake through" in consumer_line, consumer_line
    c.stop_processor(ids["consumer"])
    c.stop_processor(ids["sink"])
    check_table(sf, table, producer)


def sink_messages(c, sink_id, needle: str) -> list[str]:
    return [b["message"] for b in c.bulletins(source_id=sink_id) if needle in b.get("message", "")]


def waiting_line(c, sink_id, key: str):
    line = c.local_state(sink_id).get(key, "")
    return line if re.search(r"FlowFiles waiting here [1-9]", line) else None


def wait_until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def check_sink_view_state(c, sink_id):
    """PutSnowflake's View State: its instance id (part of its per-node channels' names) and one line per open channel
    with the last offset token Snowflake reported committed (written at most every 5 s, so the test waits for it)."""
    deadline, state = time.monotonic() + 30, {}
    while time.monotonic() < deadline:
        state = c.local_state(sink_id)
        channels = {k: v for k, v in state.items() if k.startswith("channel.")}
        if channels and all("committed offset token none yet" not in v for v in channels.values()):
            break
        time.sleep(1)
    else:
        raise AssertionError(f"no channel with a committed offset token in View State: {state}")
    assert state["instance.id"], state
    # Failover Position SNOWFLAKE_COMMIT: the shard's shared channel, named for every node alike (no instance id).
    assert all(name.startswith("channel.kinesnow_") and name.endswith("_shardId-000000000000") for name in channels), state
    # The long offset token last: NiFi's dialog cuts a value at its column's width.
    assert all(re.match(r"learned 20\d\d-\S+; pipe \S+; committed offset token \S+$", v) for v in channels.values()), state


def check_view_state(c, consumer_id, stream):
    """View State of a ConsumeKinesis that read its one shard to the tip, checkpointed it and heard from PutSnowflake
    that Snowflake has all of it: the node, and the shard's line with its lease counter, checkpoint, Snowflake's
    position, lag, arrival times and what it waits for (written at most every 5 s, so the test waits for it)."""
    shard, deadline, state, line = "shardId-000000000000", time.monotonic() + 30, {}, ""
    # The lag and what the shard waits for first, the long sequence numbers last (NiFi's dialog cuts long values).
    pattern = re.compile(r"0 ms behind the tip; waits for nothing: caught up with the tip; last record read arrived 20\d\d-"
                         r".*; lease counter \d+; in Snowflake through (\d+); checkpoint (\d+)$")
    while time.monotonic() < deadline:
        state = c.local_state(consumer_id)
        line = state.get(shard, "")
        match = pattern.match(line)
        if match and match.group(1) == match.group(2):
            break
        time.sleep(1)
    else:
        raise AssertionError(f"(SNOWFLAKE_COMMIT: all 300 loaded and checkpointed, caught up) {state}")
    assert set(state) == {"node", "updated", shard}, state
    assert state["node"].endswith("leasing 1 shard(s)"), state
    assert "last record committed in NiFi arrived 20" in line, line


def check_counters(c, ids, records):
    """NiFi's counters after a calm run of `records` records from one shard, loaded once: the exact ones exact
    (the engine's counts reach NiFi within about a second), the rest at least what the run must have done."""
    deadline, consumer, sink = time.monotonic() + 20, {}, {}
    while time.monotonic() < deadline:
        consumer, sink = c.counters_of(ids["consumer"]), c.counters_of(ids["sink"])
        if consumer.get("Checkpoints Written", 0) >= 1 and consumer.get("Records Read from Kinesis", 0) >= records:
            break
        time.sleep(1)
    assert consumer.get("Records Consumed") == records, consumer
    assert consumer.get("Records Read from Kinesis") == records, consumer
    assert consumer.get("Bytes Read from Kinesis", 0) > records * 20, consumer
    assert consumer.get("Leases Taken") == 1, consumer
    assert consumer.get("GetRecords Calls", 0) >= 1 and consumer.get("Batches Handed to NiFi", 0) >= 1, consumer
    assert consumer.get("Checkpoints Written", 0) >= 1, consumer
    for absent in ("Leases Lost", "Leases Handed Back", "Records Read Again after a Rollback", "Records Parse Failure"):
        assert absent not in consumer, (absent, consumer)
    assert sink.get("Rows Sent") == records, sink
    for absent in ("Rows Skipped (already committed)", "Gaps Detected", "Gap FlowFiles Sent to Load at Least Once"):
        assert absent not in sink, (absent, sink)



def test_a_parents_last_records_load_before_its_childrens_first(env):
    """Per-key order across a split when the parent's channel is slow: Snowflake takes longer to commit the
    parent's last rows (the stand-in withholds that channel's commits for a few seconds) while ConsumeKinesis,
    whose parent shard is finished once NiFi has its records, moves on to the children. The records of each
    key must still be loaded parent first. The same race shows, less often, when PutSnowflake is stopped and
    started (or NiFi restarts) with the parent's last records and the children's first ones both queued: the
    four channels open concurrently and whichever opens first appends first."""
    sf, stream, table = env["sf"], f"accept-split-{RUN}", f"{DB}.ACCEPT_SPLIT_{RUN}"
    parent = "shardId-000000000000"
    create_table(sf, table, evolution=True)
    create_stream(env, stream, 2)
    producer = Producer(stream)
    producer.put(300, phase=1)
    ids = applied(env, "slow-parent-channel", stream, f"{stream}-app", table)
    c = env["nifi"].client
    c.start_processor(ids["consumer"])
    c.start_processor(ids["sink"])
    assert wait_for_rows(sf, table, 300, 120) == 300
    parent_channel = next(n for n in channels_of(sf, table) if n.endswith(f"_{stream}_{stream}-app_{parent}"))
    fault = sf.fault({"kind": "withhold_commits", "count": -1, "channel": parent_channel})
    try:
        producer.put(300, phase=1)  # the parent's last records
        shard = next(s for s in wait_active(stream)["Shards"] if s["ShardId"] == parent)
        low, high = int(shard["HashKeyRange"]["StartingHashKey"]), int(shard["HashKeyRange"]["EndingHashKey"])
        kinesis_call("SplitShard", {"StreamName": stream, "ShardToSplit": parent,
                                    "NewStartingHashKey": str((low + high) // 2 + 1)})
        wait_active(stream)
        producer.put(300, phase=2)  # the children's first records
        wait_consumed(f"{stream}-app", producer, 60)
        time.sleep(4)  # time to load the children's records, were they not held back
    finally:
        sf.admin("DELETE", f"/admin/faults/{fault['id']}")
    assert wait_for_rows(sf, table, 900, 120) == 900
    time.sleep(2)
    c.stop_processor(ids["consumer"])
    c.stop_processor(ids["sink"])
    check_table(sf, table, producer)
