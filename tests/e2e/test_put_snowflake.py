"""Kinesis -> ConsumeKinesis -> PutSnowflake -> Snowflake stand-in, in a real NiFi, applied by
parameter-contexts/apply.py from the local parameter contexts. Every record lands exactly once in
the table across a PutSnowflake stop/start mid-stream and a kill -9 of NiFi; a wrong key sends
FlowFiles to failure with a bulletin; no key, token or secret shows up in NiFi's logs.

The NiFi is the session's shared one (tests/e2e/conftest.py), killed and restarted here as this module's own
would be (tests/lib/shared_nifi.py's ModuleNiFi.kill and restart); its logs are judged as far as they are this
module's (ModuleNiFi.logs)."""

import base64
import glob
import json
import os
import re
import sys
import time

import pytest

import iam_proxy
from services import kinesis_call, local_services  # noqa: F401  (session fixture)
from standin import Standin, make_key_pair
from consumer_flow import built_nar

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "parameter-contexts"))
import apply as flow  # noqa: E402


# PutSnowflake's channels are <prefix>_<instance>_<region>_<stream>_<shard>; the instance id is the processor's own
# (kept in its local state), the region ConsumeKinesis' (aws.kinesis.region).
CHANNEL = re.compile(r"^kinesnow_(?P<instance>[0-9a-f]{12})_(?P<region>[a-z]{2}(?:-[a-z]+)+-\d+)_(?P<rest>.+)$")


def without_instance(names: list[str]) -> list[str]:
    """The channel names as kinesnow_<stream>_<shard>, once each is checked to carry one instance id and a region."""
    matches = [CHANNEL.match(n) for n in names]
    assert all(matches), names
    assert len({m["instance"] for m in matches}) <= 1, f"one PutSnowflake, one instance id: {names}"
    return [f"kinesnow_{m['rest']}" for m in matches]

ACCOUNT = "kinesnow-local"
USER = "KINESNOW"
TABLE = "KINESNOW.PUBLIC.EVENTS"
RUN = str(int(time.time()))  # the emulators may outlive a run: fresh stream and application names


def nar() -> str:
    """The built kinesnow-nar (test_put_snowflake_managed.py imports it; this module runs in the shared NiFi,
    which loads it)."""
    return built_nar()


def put(stream: str, first: int, count: int) -> None:
    kinds = ["click", "view", "purchase"]
    records = []
    for i in range(first, first + count):
        event = {"id": i, "kind": kinds[i % 3], "user": f"u{i % 17}"}
        if i % 3 == 2:
            event["amount"] = i * 1.5  # a key only some records have: schema evolution adds it
        records.append({"PartitionKey": f"k{i % 11}", "Data": base64.b64encode(json.dumps(event).encode()).decode()})
    for start in range(0, len(records), 250):
        kinesis_call("PutRecords", {"StreamName": stream, "Records": records[start:start + 250]})


def table_counts(sf: Standin) -> tuple[int, int]:
    row = sf.query(f"SELECT COUNT(*) AS C, COUNT(DISTINCT ID) AS D FROM {TABLE}")[0]
    return row["C"], row["D"]


def wait_for_rows(sf: Standin, at_least: int, timeout: float) -> tuple[int, int]:
    deadline = time.monotonic() + timeout
    counts = table_counts(sf)
    while counts[1] < at_least and time.monotonic() < deadline:
        time.sleep(0.5)
        counts = table_counts(sf)
    return counts


@pytest.fixture(scope="module")
def env(local_services, shared_nifi, tmp_path_factory):
    """The stand-in, and the session's shared NiFi (which loaded the built NAR)."""
    work = str(tmp_path_factory.mktemp("kinesnow-sf"))
    _, public_key = make_key_pair(os.path.join(work, "snowflake"))
    sf = Standin.start(os.path.join(work, "standin"), commit_lag_ms=500)
    sf.register_user(ACCOUNT, USER, public_key)
    sf.sql(f"CREATE OR REPLACE TABLE {TABLE} (ID NUMBER) ENABLE_SCHEMA_EVOLUTION = TRUE ERROR_LOGGING = TRUE")
    nifi = shared_nifi
    yield {"work": work, "sf": sf, "nifi": nifi}
    try:
        nifi.clean()  # the flows stopped and removed before the stand-in they write to goes
    finally:
        sf.stop()


def applied(env, name: str, stream: str) -> dict:
    c = env["nifi"].client
    ids = flow.apply(c, "local", {"KINESNOW_WORK": env["work"], "SNOWFLAKE_URL": env["sf"].url}, name,
                     context_suffix=f" [{name}]")
    # The emulators' ports as this run has them (KINESIS_PORT, DYNAMODB_PORT), not the local context's defaults.
    c.update_parameters(ids["source_context"], {"AWS Kinesis Stream Name": stream,
                                                "AWS Kinesis Application Name": f"{stream}-app",
                                                "AWS Kinesis Endpoint Override URL": iam_proxy.proxy_for(stream, f"{stream}-app"),
                                                "AWS DynamoDB Endpoint Override URL": iam_proxy.proxy_for(stream, f"{stream}-app")})
    return ids


def test_every_record_lands_once_across_stop_start_and_kill_9(env):
    stream, sf = f"e2e-snowflake-{RUN}", env["sf"]
    kinesis_call("CreateStream", {"StreamName": stream, "ShardCount": 2})
    time.sleep(1)
    put(stream, 0, 600)
    ids = applied(env, "exactly-once", stream)
    c = env["nifi"].client
    for pid in (ids["consumer"], ids["sink"]):
        v = c.processor_validation(pid)
        assert v["status"] == "VALID", v
    c.start_processor(ids["consumer"])
    c.start_processor(ids["sink"])

    wait_for_rows(sf, 150, 120)
    c.stop_processor(ids["sink"])  # mid-stream: held sessions roll back, their FlowFiles return to the queue
    c.start_processor(ids["sink"])
    time.sleep(2)  # NiFi saves the flow (with the processors' run state) shortly after a change
    wait_for_rows(sf, 350, 120)
    env["nifi"].kill()  # kill -9 mid-stream
    c = env["nifi"].restart().client  # the same instance directory, as it was left
    for pid in (ids["consumer"], ids["sink"]):
        assert c.processor_state(pid) == "RUNNING", "NiFi resumed the processors"
    put(stream, 600, 300)

    count, distinct = wait_for_rows(sf, 900, 240)
    time.sleep(3)  # anything still in flight would show up now as a duplicate
    count, distinct = table_counts(sf)
    assert distinct == 900, f"only {distinct} of 900 records arrived"
    assert count == 900, f"{count - distinct} records arrived twice"
    assert c.connection_queue_count(ids["failure_queue"]) == 0
    assert c.connection_queue_count(ids["parse_failure_queue"]) == 0

    row = sf.query(f"SELECT * FROM {TABLE} WHERE ID = 5")[0]
    assert row["AMOUNT"] == 7.5, "schema evolution added the column of a key only some records have"
    metadata = row["KINESISMETADATA"]
    assert metadata["stream"] == stream and metadata["shardId"].startswith("shardId-")
    assert len(metadata["shardedSequenceNumber"]) > 20
    channels = sf.admin("GET", "/admin/channels")["channels"]
    names = without_instance(sorted(ch["channel_name"] for ch in channels))
    # The flow's ConsumeKinesis has Failover Position SNOWFLAKE_COMMIT (processor-bindings.json): the shards' shared
    # channels, <prefix>_<account>_<region>_<stream>_<Application Name>_<shard> (kinesis-local's account is all zeros).
    assert names == [f"kinesnow_{stream}_{stream}-app_shardId-000000000000", f"kinesnow_{stream}_{stream}-app_shardId-000000000001"], names


def test_a_wrong_key_sends_flow_files_to_failure_with_a_bulletin(env):
    stream, sf = f"e2e-snowflake-wrong-key-{RUN}", env["sf"]
    kinesis_call("CreateStream", {"StreamName": stream, "ShardCount": 1})
    time.sleep(1)
    put(stream, 0, 5)
    ids = applied(env, "wrong-key", stream)
    c = env["nifi"].client
    foreign, _ = make_key_pair(os.path.join(env["work"], "foreign"))  # never registered
    c.update_parameters(ids["destination_context"], {"Snowflake Private Key File": foreign})
    c.start_processor(ids["consumer"])
    c.start_processor(ids["sink"])
    deadline = time.monotonic() + 90
    while c.connection_queue_count(ids["failure_queue"]) < 1 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert c.connection_queue_count(ids["failure_queue"]) >= 1, "FlowFiles go to failure"
    messages = [b["message"] for b in c.bulletins(source_id=ids["sink"])]
    assert any("refused the credentials" in m for m in messages), messages
    c.stop_processor(ids["consumer"])
    c.stop_processor(ids["sink"])


def test_table_expression_language_loads_each_shard_into_its_own_table(env):
    """Table set to Expression Language on an attribute ConsumeKinesis writes: one PutSnowflake loads shard 1's
    records into EVENTS_ODD and shard 0's into EVENTS_EVEN, each record once, each table through its own pipe."""
    stream, sf = f"e2e-snowflake-el-{RUN}", env["sf"]
    tables = {"EVENTS_ODD": "shardId-000000000001", "EVENTS_EVEN": "shardId-000000000000"}
    for table in tables:
        sf.sql(f"CREATE OR REPLACE TABLE KINESNOW.PUBLIC.{table} (ID NUMBER) ENABLE_SCHEMA_EVOLUTION = TRUE")
    kinesis_call("CreateStream", {"StreamName": stream, "ShardCount": 2})
    time.sleep(1)
    put(stream, 0, 60)
    ids = applied(env, "expression-language", stream)
    c = env["nifi"].client
    c.update_processor(ids["sink"], properties={"Table": "EVENTS_${aws.kinesis.shard.id:endsWith('1'):ifElse('ODD', 'EVEN')}"})
    assert c.processor_validation(ids["sink"])["status"] == "VALID"
    c.start_processor(ids["consumer"])
    c.start_processor(ids["sink"])

    def counts() -> dict:
        return {t: sf.query(f"SELECT COUNT(*) AS C, COUNT(DISTINCT ID) AS D FROM KINESNOW.PUBLIC.{t}")[0] for t in tables}

    deadline = time.monotonic() + 90
    while sum(r["D"] for r in counts().values()) < 60 and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(2)  # anything still in flight would show up now as a duplicate
    c.stop_processor(ids["consumer"])
    c.stop_processor(ids["sink"])
    got = counts()
    assert sum(r["D"] for r in got.values()) == 60 and all(r["C"] == r["D"] > 0 for r in got.values()), got
    appends = [r["path"] for r in sf.admin("GET", "/admin/requests?path_contains=/rows")["requests"] if stream in r["path"]]
    assert appends, "appends were seen"
    for path in appends:
        table = next(t for t in tables if f"/pipes/{t}-STREAMING/" in path)
        assert tables[table] in path, f"a shard's channel is in its own table's pipe: {path}"


def test_the_versioned_flow_definition_imports_and_delivers(env):
    """parameter-contexts/flow/kinesis-to-snowflake.json, imported as the canvas's "Upload flow definition"
    does, filled with the local values, runs: records land in the table."""
    stream, sf = f"e2e-definition-{RUN}", env["sf"]
    kinesis_call("CreateStream", {"StreamName": stream, "ShardCount": 1})
    time.sleep(1)
    put(stream, 100_000, 20)
    c = env["nifi"].client
    ids = flow.import_definition(c, os.path.join(REPO, "parameter-contexts", "flow", "kinesis-to-snowflake.json"),
                                 "local", {"KINESNOW_WORK": env["work"], "SNOWFLAKE_URL": sf.url}, "from-definition")
    c.update_parameters(ids["source_context"], {"AWS Kinesis Stream Name": stream,
                                                "AWS Kinesis Application Name": f"{stream}-app",
                                                "AWS Kinesis Endpoint Override URL": iam_proxy.proxy_for(stream, f"{stream}-app"),
                                                "AWS DynamoDB Endpoint Override URL": iam_proxy.proxy_for(stream, f"{stream}-app")})
    assert set(ids["connections"]) >= {"success", "parse.failure", "failure"}, ids["connections"]
    for pid in (ids["consumer"], ids["sink"]):
        v = c.processor_validation(pid)
        assert v["status"] == "VALID", v
    c.start_processor(ids["consumer"])
    c.start_processor(ids["sink"])
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if sf.query(f"SELECT COUNT(*) AS N FROM {TABLE} WHERE ID >= 100000")[0]["N"] == 20:
            break
        time.sleep(0.5)
    assert sf.query(f"SELECT COUNT(*) AS N FROM {TABLE} WHERE ID >= 100000")[0]["N"] == 20
    c.stop_processor(ids["consumer"])
    c.stop_processor(ids["sink"])


def test_no_secret_reaches_the_logs(env):
    """Runs last in this module: the whole module's NiFi logs, after every call above. Each log file (nifi-app.log,
    rolled or not, and the JVM's nifi-stdout.log) as far as it is this module's: NiFi's start-up and everything
    since the module began, across its kill -9 and restart (tests/lib/shared_nifi.py's ModuleNiFi.logs)."""
    secrets = []
    for path in glob.glob(os.path.join(env["work"], "**", "rsa_key.p8"), recursive=True):
        lines = [line for line in open(path).read().splitlines() if line and not line.startswith("-----")]
        secrets += lines[1:3]  # pieces of each private key's body
    secrets += ["local-secret-key"]  # the AWS secret of the local source context
    logs = env["nifi"].logs()
    assert logs["nifi-app.log"], "NiFi wrote logs"
    for name, text in logs.items():
        for secret in secrets:
            assert secret not in text, f"a secret appears in {name}"
        assert "Bearer ey" not in text and "BEGIN PRIVATE KEY" not in text, f"a token or key in {name}"
