"""A production-like NiFi (issue 34): several Kinesis -> Snowflake flows and unrelated flows in one NiFi at once,
every record in its table exactly once.

PutSnowflake once assumed that NiFi's queue keeps each shard's FlowFiles in the order ConsumeKinesis committed
them. It does not: without a prioritizer a queue is ordered by content claim, ConsumeKinesis with Concurrent Tasks
above 1 commits batches of one shard in any order, and other flows writing content in the same NiFi change which
claims a batch gets. Records were skipped silently (FlowFiles routed to success with snowflake.rows.skipped > 0,
their rows never in the table). ConsumeKinesis now names on each FlowFile the record read before it
(kinesnow.previous.sequence.number) and PutSnowflake restores each shard's order from it.

One NiFi (the session's shared secured one: HTTPS, a login and authorization; the client trusts the CA the test made
and logs in. NiFi's single-user login providers NAR is not served by the Maven repository reachable here, so this
NiFi logs in through a test-only login provider of ours (tests/nifi/test-login-nar) with the same REST login (POST
/nifi-api/access/token with username and password, bearer token) and authorizes with NiFi's file-based managed
authorizer; NiFi's own single-user provider is not what the tests run) runs, all at the same time:

- noise: a process group of three GenerateFlowFile writing 1 KB FlowFiles every 20 ms into a RouteOnAttribute
  that drops them (content claims taken, returned and reused all the time, as other flows do);
- one flow per variant (VARIANTS), each with its own 2-shard stream, Application Name (lease table) and table in
  the stand-in: ConsumeKinesis (Processing Strategy FLOW_FILE, Output Strategy INJECT_METADATA: one FlowFile per
  record, the worst case for order; Failover Position at its default, NIFI_COMMIT: per-node channels) ->
  PutSnowflake. ConsumeKinesis' Max Batch Size is 64 KB (~100 records a batch), as when records come in as they
  are written rather than from a backlog: many batches, many sessions, many claims. PutSnowflake is slower than
  the consumer, so the queue between them builds up: Run Schedule 500 ms, Max Batch Size 64 KB, Max In-Flight
  Size 1 MB (~1,300 of these FlowFiles, fewer than the backlog), the stand-in committing as Snowflake does: each
  append's commit lag drawn from 4-10 s (SNOWFLAKE_LIKE_COMMIT_LAG), in append order per channel. Variants:
  Concurrent Tasks 1, 2 and 4 without prioritizer, 2 with FirstInFirstOutPrioritizer, 2 with
  NewestFlowFileFirstPrioritizer, and 2 with PutSnowflake's failure relationship looped back to itself while the
  stand-in refuses some of that flow's appends with a 403 (a final refusal: the FlowFiles not yet sent on the
  channel go to failure and come back behind later ones).

PutSnowflake starts only once ConsumeKinesis has queued the backlog (as after a stop for maintenance, or a sink
that fell behind): every flow's queue then holds more FlowFiles than Max In-Flight Size lets in, in whatever order
its prioritizer (or none) hands them over. PutSnowflake keeps NiFi's default Penalty Duration (30 s). Before
PutSnowflake took FlowFiles by shard order when some waited for earlier ones, a queue that hands FlowFiles over newest
first loaded about one in-flight budget per Penalty Duration (the newest-first flow had 2,213 of its 3,000 rows
after 3 minutes: nothing lost, nothing twice, only slow). The failure-loop flow may still wait out PutSnowflake's
60 s wait for missing records (FlowFiles sent to failure come back late), which then loads them through an
at-least-once channel (allowed here, the table must still hold each record once; shown in the notes).

2,000 records per stream are put before the flows start (a backlog) and 1,000 while they run. Then each table
is counted: rows, distinct ids, missing ids, ids loaded twice (printed as a table: `pytest -s` shows it, and the
assertion's message has it). Every variant must have every record exactly once, no ERROR bulletin from our
processors (but the injected refusals'), drained queues, per-node channels (an at-least-once one beside them
allowed).

That it can fail: a FilterAttribute between the processors removing kinesnow.previous.sequence.number ("Filter
Mode" Remove, "Attribute Matching Strategy" Enumerate attributes) makes PutSnowflake line FlowFiles up as they
come, the old behaviour. Copies of these flows with it, run beside them, lost records in both runs tried (of 3,000
each: 1 task 0 and 75, 2 tasks 193 and 2, 4 tasks 61 and 30, FIFO 0 and 117, newest first 1,716) while every flow
here lost none. They are not kept here: what they lose depends on timing.

kinesis-local allows 50 open shards over all its streams: the module deletes its streams and lease tables.
"""

import base64
import json
import os
import re
import threading
import time
from dataclasses import dataclass
from typing import Optional

import pytest

from consumer_flow import BUNDLE, CONSUMER, consumer_properties, unique
from nifi_instance import anonymous_status
from services import AwsJsonError, dynamodb_call, kinesis_call, local_services  # noqa: F401  (session fixture)
from standin import SNOWFLAKE_LIKE_COMMIT_LAG, Standin, make_key_pair

SINK = "io.kinesnow.nifi.processors.PutSnowflake"
STANDARD = "org.apache.nifi.processors.standard."
FIFO = "org.apache.nifi.prioritizer.FirstInFirstOutPrioritizer"
NEWEST = "org.apache.nifi.prioritizer.NewestFlowFileFirstPrioritizer"
ACCOUNT, USER, DB = "kinesnow-local", "KINESNOW", "KINESNOW.PUBLIC"
RUN = unique("pl")

BACKLOG = 2000        # records per stream put before the flows start
WHILE_RUNNING = 1000  # and put while they run
TOTAL = BACKLOG + WHILE_RUNNING
PAD = "x" * 500       # makes each FlowFile ~0.8 KB
DEADLINE = 300        # seconds for every table to get its records, from the flows' start (a failure-loop flow may
                      # wait out PutSnowflake's 60 s gap timer more than once on a busy machine)
LIVELY = 90           # seconds after PutSnowflake's start by which a flow without the failure loop must have loaded
                      # everything (about 20 s here): a queue order that makes loading wait out penalties (30 s
                      # each) takes longer (131 s before PutSnowflake took FlowFiles by shard order)
QUIET = 20            # a flow whose queues are empty and whose table did not change for this long is done
INJECTED = "refused by test_production_like"  # the message of the stand-in's injected 403s


@dataclass(frozen=True)
class Variant:
    name: str
    tasks: int                          # ConsumeKinesis' Concurrent Tasks
    prioritizer: Optional[str] = None   # of the connection ConsumeKinesis -> PutSnowflake
    failure_loop: bool = False          # PutSnowflake's failure back to itself, with refused appends


VARIANTS = [
    Variant("tasks-1", 1),
    Variant("tasks-2", 2),
    Variant("tasks-4", 4),
    Variant("tasks-2-fifo", 2, FIFO),
    Variant("tasks-2-newest-first", 2, NEWEST),
    Variant("tasks-2-failure-loop", 2, failure_loop=True),
]


@pytest.fixture(scope="module")
def env(local_services, secured_nifi, tmp_path_factory):
    """The stand-in (Snowflake-like commit lags, 4-10 s), and the session's shared secured NiFi; at the end the flows
    go first, then the stand-in, the streams and the lease tables."""
    shared_nifi = secured_nifi
    work = str(tmp_path_factory.mktemp("kinesnow-production-like"))
    key_file, public_key = make_key_pair(os.path.join(work, "snowflake"))
    sf = Standin.start(os.path.join(work, "standin"), commit_lag_ms=SNOWFLAKE_LIKE_COMMIT_LAG)
    state = {"sf": sf, "key_file": key_file, "nifi": shared_nifi, "streams": [], "apps": []}
    try:
        sf.register_user(ACCOUNT, USER, public_key)
        yield state
    finally:
        try:
            shared_nifi.clean()
        finally:
            sf.stop()
            for call, action, key, names in ((kinesis_call, "DeleteStream", "StreamName", state["streams"]),
                                             (dynamodb_call, "DeleteTable", "TableName", state["apps"])):
                for name in names:
                    try:
                        call(action, {key: name})
                    except AwsJsonError:
                        pass


# ---- the canvas -------------------------------------------------------------------------------------------

def funnel(c, group: str, position: tuple) -> str:
    return c.post(f"process-groups/{group}/funnels", {
        "revision": {"version": 0}, "component": {"position": {"x": position[0], "y": position[1]}}})["id"]


def add_noise(c) -> str:
    """Three GenerateFlowFile (two 1 KB FlowFiles every 20 ms each) into a RouteOnAttribute that drops them."""
    group = c.create_process_group("production-like noise", position=(0, -600))["id"]
    drop = c.add_processor(group, STANDARD + "RouteOnAttribute", name="Drop", auto_terminate=["unmatched"],
                           position=(0, 300))["id"]
    for i in range(3):
        generate = c.add_processor(group, STANDARD + "GenerateFlowFile", name=f"Noise {i}",
                                   properties={"File Size": "1 KB", "Batch Size": "2", "Unique FlowFiles": "false"},
                                   scheduling_period="20 ms", position=(400 * i, 0))["id"]
        c.connect(group, generate, drop, ["success"])
    return group


def add_flow(env, index: int, v: Variant) -> dict:
    """The variant's stream (2 shards), table and process group: ConsumeKinesis -> PutSnowflake."""
    c, sf = env["nifi"].client, env["sf"]
    stream, app = f"{RUN}-{v.name}", f"{RUN}-{v.name}-app"
    table = f"PL_{RUN.split('-')[1].upper()}_{index}"
    kinesis_call("CreateStream", {"StreamName": stream, "ShardCount": 2})
    env["streams"].append(stream)
    env["apps"].append(app)
    sf.sql(f"CREATE TABLE {DB}.{table} (ID NUMBER) ENABLE_SCHEMA_EVOLUTION = TRUE ERROR_LOGGING = TRUE")
    group = c.create_process_group(f"production-like {v.name}", position=(index * 500, 0))["id"]
    consumer = c.add_processor(group, CONSUMER, bundle=BUNDLE, name="ConsumeKinesis", concurrent_tasks=v.tasks,
                               position=(0, 0), properties=consumer_properties(stream, app, **{
                                   "Processing Strategy": "FLOW_FILE", "Output Strategy": "INJECT_METADATA",
                                   "Max Batch Size": "64 KB"}))["id"]
    sink = c.add_processor(group, SINK, bundle=BUNDLE, name="PutSnowflake", scheduling_period="500 ms",
                           auto_terminate=["success"], position=(0, 300), properties={
                               "Account Identifier": ACCOUNT, "Snowflake URL Override": sf.url, "User": USER,
                               "Role": "KINESNOW_ROLE", "Private Key File": env["key_file"], "Database": "KINESNOW",
                               "Schema": "PUBLIC", "Table": table, "Schema Evolution Enabled": "true",
                               "Max Batch Size": "64 KB", "Max In-Flight Size": "1 MB"})["id"]
    c.connect(group, consumer, sink, ["success"], prioritizers=[v.prioritizer] if v.prioritizer else [])
    c.connect(group, consumer, funnel(c, group, (400, 0)), ["parse.failure"], destination_type="FUNNEL")
    rejected = funnel(c, group, (400, 300))
    loop = None
    if v.failure_loop:
        loop = c.connect(group, sink, sink, ["failure"])["id"]
        c.connect(group, sink, rejected, ["invalid"], destination_type="FUNNEL")
    else:
        c.connect(group, sink, rejected, ["failure", "invalid"], destination_type="FUNNEL")
    for pid in (consumer, sink):
        validation = c.processor_validation(pid)
        assert validation["status"] == "VALID", (v, validation)
    return {"variant": v, "stream": stream, "table": f"{DB}.{table}", "group": group, "consumer": consumer, "sink": sink,
            "loop": loop}


# ---- records ----------------------------------------------------------------------------------------------

def put(stream: str, first: int, count: int) -> None:
    """Records first..first+count-1, JSON objects with a unique id, over 32 partition keys (both shards)."""
    entries = [{"PartitionKey": f"pk-{i % 32}",
                "Data": base64.b64encode(json.dumps({"id": i, "pad": PAD}).encode()).decode()}
               for i in range(first, first + count)]
    for start in range(0, len(entries), 500):
        answer = kinesis_call("PutRecords", {"StreamName": stream, "Records": entries[start:start + 500]})
        assert answer["FailedRecordCount"] == 0, answer


def wait_active(streams: list, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    for stream in streams:
        while kinesis_call("DescribeStreamSummary", {"StreamName": stream})[
                "StreamDescriptionSummary"]["StreamStatus"] != "ACTIVE":
            assert time.monotonic() < deadline, f"stream {stream} not ACTIVE"
            time.sleep(0.1)


# ---- the refused appends of the failure-loop flow ------------------------------------------------------------

def channels_of(sf: Standin, table: str) -> list:
    pipe = table.split(".")[-1] + "-STREAMING"
    return sorted(ch["channel_name"] for ch in sf.admin("GET", "/admin/channels")["channels"] if ch["pipe_name"] == pipe)


def refuse_appends(sf: Standin, flow: dict, report: dict, rounds: int = 3) -> None:
    """Once the flow's two channels are open, `rounds` times, 1.5 s apart: the next append of each channel refused
    with a 403. `report` gets how many refusals fired (or the error that stopped this)."""
    try:
        deadline = time.monotonic() + 60
        channels = channels_of(sf, flow["table"])
        while len(channels) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
            channels = channels_of(sf, flow["table"])
        for _ in range(rounds):
            ids = {sf.fault({"kind": "retry_request", "status": 403, "code": "ERR_REFUSED_BY_TEST",
                             "message": INJECTED, "count": 1, "channel": ch})["id"] for ch in channels}
            until = time.monotonic() + 10
            active = ids
            while active and time.monotonic() < until:  # a fault that fired is gone from the list
                time.sleep(0.1)
                active = ids & {f["id"] for f in sf.admin("GET", "/admin/faults")["faults"]}
            report["fired"] = report.get("fired", 0) + len(ids - active)
            for i in active:
                sf.admin("DELETE", f"/admin/faults/{i}")
            time.sleep(1.5)
    except Exception as e:  # reported by the test
        report["error"] = repr(e)


# ---- counting ---------------------------------------------------------------------------------------------

def table_counts(sf: Standin, table: str) -> tuple:
    row = sf.query(f"SELECT COUNT(*) AS C, COUNT(DISTINCT ID) AS D FROM {table}")[0]
    return row["C"], row["D"]


def group_queued(c, group: str) -> int:
    return int(c.get(f"flow/process-groups/{group}/status")["processGroupStatus"]["aggregateSnapshot"]["flowFilesQueued"])


def looped_back(c, flow: dict) -> int:
    """FlowFiles that went round the failure loop (NiFi's 5-minute count of the connection)."""
    snap = c.get(f"flow/connections/{flow['loop']}/status")["connectionStatus"]["aggregateSnapshot"]
    return int(snap["flowFilesIn"])


def tally(sf: Standin, table: str) -> dict:
    rows, distinct = table_counts(sf, table)
    present = {r["ID"] for r in sf.query(f"SELECT DISTINCT ID FROM {table}")}
    twice = [r["ID"] for r in sf.query(f"SELECT ID FROM {table} GROUP BY ID HAVING COUNT(*) > 1 ORDER BY ID")]
    missing = sorted(set(range(TOTAL)) - present)
    return {"rows": rows, "distinct": distinct, "missing": missing, "twice": twice}


def render(flows: list, results: dict) -> str:
    head = (f"{'variant':<22} {'tasks':>5} {'prioritizer':<30} {'put':>5} {'rows':>5} {'distinct':>8} {'missing':>7} "
            f"{'dup ids':>7} {'done s':>6}  notes")
    lines = [head, "-" * len(head)]
    for flow in flows:
        v, r = flow["variant"], results[flow["variant"].name]
        prioritizer = v.prioritizer.rsplit(".", 1)[-1] if v.prioritizer else "(none)"
        done = f"{flow['done_after']:.0f}" if "done_after" in flow else "-"
        loop = f"{flow['looped']} FlowFiles back" if v.failure_loop else ""
        fallback = len([n for n in flow["channels"] if n.endswith("_atleastonce")])
        notes = [note for note in (loop, f"{fallback} at-least-once channel(s)" if fallback else "") if note]
        lines.append(f"{v.name:<22} {v.tasks:>5} {prioritizer:<30} {TOTAL:>5} {r['rows']:>5} {r['distinct']:>8} "
                     f"{len(r['missing']):>7} {len(r['twice']):>7} {done:>6}  {'; '.join(notes)}")
        if r["missing"] or r["twice"]:
            lines.append(f"    missing e.g. {r['missing'][:10]}, twice e.g. {r['twice'][:10]}")
    return "\n".join(lines)


# ---- the test -----------------------------------------------------------------------------------------------

def test_every_record_lands_once_with_many_flows_and_noise_in_one_nifi(env):
    t0 = time.monotonic()
    c, sf = env["nifi"].client, env["sf"]
    assert c.base_url.startswith("https://127.0.0.1:") and anonymous_status(c) == 401, "NiFi is not secured"
    flows = [add_flow(env, i, v) for i, v in enumerate(VARIANTS)]
    loop_flow = next(f for f in flows if f["variant"].failure_loop)
    noise = add_noise(c)
    wait_active([f["stream"] for f in flows])
    for flow in flows:
        put(flow["stream"], 0, BACKLOG)
    bulletin_after = max([b["id"] for b in c.bulletins()], default=0)

    c.set_process_group_state(noise, "RUNNING")
    for flow in flows:
        c.start_processor(flow["consumer"])
    started = time.monotonic()
    queued_by = time.monotonic() + 120  # PutSnowflake starts once the backlog waits in front of it
    while time.monotonic() < queued_by and any(group_queued(c, f["group"]) < BACKLOG for f in flows):
        time.sleep(0.5)
    backlog = {f["variant"].name: group_queued(c, f["group"]) for f in flows}
    assert all(n >= BACKLOG for n in backlog.values()), f"the backlog did not reach the queues: {backlog}"
    for flow in flows:
        c.start_processor(flow["sink"])
    sinks_after = time.monotonic() - started
    refusals: dict = {}
    refuser = threading.Thread(target=refuse_appends, args=(sf, loop_flow, refusals), daemon=True)
    refuser.start()
    for first in range(BACKLOG, TOTAL, 100):  # the rest while the flows run: 100 records per stream at a time
        for flow in flows:
            put(flow["stream"], first, 100)
        time.sleep(0.3)
    put_after = time.monotonic() - started

    # Until every table has its records, or its flow is quiet (queues empty, table unchanged for QUIET s). The
    # bulletin board keeps only a component's last few bulletins: they are gathered as they come.
    bulletins: dict = {}
    changed = {f["group"]: (None, time.monotonic()) for f in flows}
    pending = list(flows)
    while pending and time.monotonic() - started < DEADLINE:
        bulletins.update((b["id"], b) for b in c.bulletins(after=bulletin_after))
        for flow in list(pending):
            counts = table_counts(sf, flow["table"])
            if counts != changed[flow["group"]][0]:
                changed[flow["group"]] = (counts, time.monotonic())
            quiet = time.monotonic() - changed[flow["group"]][1] > QUIET and group_queued(c, flow["group"]) == 0
            if counts[1] >= TOTAL or quiet:
                pending.remove(flow)
                flow["done_after"] = time.monotonic() - started
        loop_flow["looped"] = max(loop_flow.get("looped", 0), looped_back(c, loop_flow))
        time.sleep(1)
    loaded_after = time.monotonic() - started
    time.sleep(3)  # anything still on its way would show up now as a duplicate
    refuser.join(timeout=30)

    deadline = time.monotonic() + 30  # queues drain: nothing left between the processors or on the failure loop
    queued = {f["variant"].name: group_queued(c, f["group"]) for f in flows}
    while any(queued.values()) and time.monotonic() < deadline:
        time.sleep(1)
        queued = {f["variant"].name: group_queued(c, f["group"]) for f in flows}
    bulletins.update((b["id"], b) for b in c.bulletins(after=bulletin_after))
    loop_flow["looped"] = max(loop_flow.get("looped", 0), looped_back(c, loop_flow))

    results = {f["variant"].name: tally(sf, f["table"]) for f in flows}
    for flow in flows:
        flow["channels"] = channels_of(sf, flow["table"])
    table = render(flows, results)
    print(f"\n{table}\n(backlog queued and PutSnowflake started at {sinks_after:.0f} s; records put by {put_after:.0f} s, flows done by {loaded_after:.0f} s after the start; module "
          f"{time.monotonic() - t0:.0f} s so far; appends refused on the failure loop: {refusals})")

    bad = [n for n, r in results.items() if r["missing"] or r["twice"] or r["rows"] != TOTAL]
    assert not bad, f"records lost or loaded twice in {bad}:\n{table}"
    slow = [f["variant"].name for f in flows if not f["variant"].failure_loop
            and f.get("done_after", DEADLINE) - sinks_after > LIVELY]
    assert not slow, f"flows that took over {LIVELY} s after PutSnowflake's start: {slow}\n{table}"
    ours = {f["group"] for f in flows}
    errors = [(b.get("sourceName"), b.get("message")) for b in bulletins.values()
              if b.get("level") == "ERROR" and b.get("groupId") in ours
              and not (b.get("groupId") == loop_flow["group"] and INJECTED in (b.get("message") or ""))]
    assert not errors, f"ERROR bulletins: {errors[:10]}\n{table}"
    assert not any(queued.values()), f"FlowFiles still queued: {queued}\n{table}"
    assert "error" not in refusals and refusals.get("fired", 0) > 0, f"the stand-in refused no append: {refusals}"
    assert loop_flow["looped"] > 0, f"no FlowFile went round the failure loop\n{table}"
    for flow in flows:  # Failover Position NIFI_COMMIT: per-node channels, kinesnow_<instance>_<region>_<stream>_<shard>
        per_node = rf"kinesnow_[0-9a-f]{{12}}_us-east-1_{flow['stream']}_shardId-\d+(_atleastonce)?"
        assert all(re.fullmatch(per_node, n) for n in flow["channels"]), flow["channels"]
        assert len([n for n in flow["channels"] if not n.endswith("_atleastonce")]) == 2, flow["channels"]
