"""Records up to 10 MiB (issue 38) through ConsumeKinesis -> PutSnowflake in a real NiFi, into the Snowflake
stand-in: every record once, in shard order, whole; and a record no Snowflake append request can carry sent to
PutSnowflake's `failure` unsent, with the records around it loaded once.

kinesis-local cannot serve such records (UpdateMaxRecordSize and a 10 MiB PutRecord succeed, then GetRecords
answers HTTP 500, "NoSuchElementException: last on empty queue"), so the stream is the benchmark Kinesis source's
(bench/kinesis-source, started by tests/lib/bench_source.py): its maximum record size raised to 10 MiB
(`--max-record-size-kib 10240`), the json payload (`{"shard","index","sub","data"}`, each record exactly its size),
sizes taking turns along each shard (`--record-sizes`); its `--dump` of the same flags says what each record holds.
The leases are in the session's dynalite. Snowflake's IAM policy proxy (tests/lib/iam_proxy.py) is not on the way:
it fronts kinesis-local only.

The flow is parameter-contexts/apply.py's (LINE_DELIMITED, INJECT_METADATA, SNOWFLAKE_COMMIT) on the session's
shared NiFi (tests/e2e/conftest.py), with ConsumeKinesis' Max Buffer Size 4 MB and Max Batch Size 2 MB: a 10 MiB
record is larger than both, so the engine admits it alone once its buffer is empty and hands it out alone in its
batch. PutSnowflake's Max Batch Size stays 8 MB: a 10 MiB row goes alone in its append request. In the stand-in each
row's DATA is checked by its length and MD5, its place by the table's insertion order (DuckDB's rowid), its
kinesisMetadata by the record's sequence number; in the lease table, that each shard's checkpoint and loaded
position reached its last record.

- LINE_DELIMITED, two shards, records of 200-300 B, exactly 1 MiB, 1 MiB + 1 and exactly 10 MiB (10,485,760 bytes)
  of compressible JSON (`--filler repeat`: zstd makes 10 MiB a few KiB), interleaved, two 10 MiB records a shard:
  every one loads once, in shard order, whole; ConsumeKinesis' FlowFiles (its provenance) hold several records,
  but each 10 MiB record alone.
- FLOW_FILE, two shards, a 10 MiB record of incompressible data (`--filler random`, 64 letters as in base64: about
  7.9 MB after zstd, over Snowflake's 4,000,000 bytes per append request after compression) between small and
  1 MiB records: its FlowFile goes to `failure` unsent, whole, with `snowflake.error.message` naming its sizes and
  the cap, an error bulletin and one ERROR line in NiFi's log; the records around it load once, in order, without
  waiting for it (PutSnowflake's Order Wait is 10 min here, so a wait would fail the test by its timeout), and the
  lease table's positions pass it.
"""

import hashlib
import json
import os
import re
import sys
import time

import pytest

from bench_source import SourceProcess, dump
from consumer_flow import flowfile_content, list_queue, receive_events, unique
from lease_table import lease_rows
from nifi_client import parse_log_events
from services import dynamodb_endpoint, local_services  # noqa: F401  (session fixture)
from standin import Standin, make_key_pair

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "parameter-contexts"))
import apply as flow  # noqa: E402

ACCOUNT = "kinesnow-local"
USER = "KINESNOW"
MIB = 1024 * 1024
MAX = 10 * MIB  # Kinesis' largest record: MaxRecordSizeInKiB 10240
SHARDS = 2
CONSUMER = {"Max Buffer Size": "4 MB", "Max Batch Size": "2 MB"}  # both less than a 10 MiB record
LOAD_TIMEOUT = 240.0
TOO_LARGE = re.compile(
    r"row 1 of 1 is too large for any Snowflake append request: its NDJSON is (?P<ndjson>[\d,]+) bytes and "
    r"(?P<zstd>[\d,]+) bytes after zstd, over the 4,000,000 bytes Snowflake takes in one append request after "
    r"compression; none of its 1 row\(s\) were sent")


@pytest.fixture(scope="module")
def env(local_services, shared_nifi, tmp_path_factory):
    """The stand-in (in memory: nothing written per commit) and the session's shared NiFi."""
    work = str(tmp_path_factory.mktemp("kinesnow-large"))
    _, public_key = make_key_pair(os.path.join(work, "snowflake"))
    sf = Standin.start(os.path.join(work, "standin"), commit_lag_ms=300, in_memory=True)
    sf.register_user(ACCOUNT, USER, public_key)
    try:
        yield {"work": work, "sf": sf, "nifi": shared_nifi}
    finally:
        try:
            shared_nifi.clean()  # the flows stopped and removed before the stand-in they write to goes
        finally:
            sf.stop()


def source_args(stream: str, sizes: list[int], filler: str, per_shard: int) -> list[str]:
    # A fixed creation time, so the server and --dump give the same sequence numbers.
    created = int(time.time() * 1000) - 60_000
    return ["--stream", stream, "--shards", str(SHARDS), "--records-per-shard", str(per_shard),
            "--record-sizes", ",".join(map(str, sizes)), "--filler", filler, "--payload", "json",
            "--max-record-size-kib", "10240", "--created-at-ms", str(created), "--threads", "2"]


def expected_records(args: list[str]) -> dict[str, list[dict]]:
    """shard id -> its records in order: index, sequence number, the record's length, DATA's length and MD5."""
    out: dict[str, list[dict]] = {}
    for r in dump(args):
        data = json.loads(r["data"])["data"].encode()
        out.setdefault(r["shard"], []).append({"index": r["index"], "seq": r["seq"], "length": len(r["data"]),
                                               "data_length": len(data), "md5": hashlib.md5(data).hexdigest()})
    return out


def applied(env, name: str, stream: str, table: str, source: SourceProcess, consumer: dict, sink: dict) -> dict:
    """apply.py's flow in a group of its own, reading the source with a new Application Name into `table`."""
    c = env["nifi"].client
    env["sf"].sql(f"CREATE OR REPLACE TABLE KINESNOW.PUBLIC.{table} (ID NUMBER) ENABLE_SCHEMA_EVOLUTION = TRUE")
    ids = flow.apply(c, "local", {"KINESNOW_WORK": env["work"], "SNOWFLAKE_URL": env["sf"].url}, name,
                     context_suffix=f" [{name}]")
    ids["app"] = unique(f"{stream}-app")
    c.update_parameters(ids["source_context"], {
        "AWS Kinesis Stream Name": stream, "AWS Kinesis Application Name": ids["app"],
        "AWS Kinesis Endpoint Override URL": source.endpoint, "AWS DynamoDB Endpoint Override URL": dynamodb_endpoint()})
    c.update_parameters(ids["destination_context"], {"Snowflake Destination Table": table})
    c.update_processor(ids["consumer"], properties={**CONSUMER, **consumer})
    c.update_processor(ids["sink"], properties=sink)
    for pid in (ids["consumer"], ids["sink"]):
        v = c.processor_validation(pid)
        assert v["status"] == "VALID", v
    return ids


def table_rows(sf: Standin, table: str) -> list[dict]:
    """Every row in the order the stand-in inserted it (DuckDB's rowid): the record's fields, DATA's length and
    MD5 (not DATA itself), its kinesisMetadata. Schema evolution adds the columns with the first row."""
    if sf.query(f'SELECT COUNT(*) AS "N" FROM KINESNOW.PUBLIC.{table}')[0]["N"] == 0:
        return []
    return sf.query(f'SELECT rowid AS "R", "SHARD", "INDEX", "SUB", LENGTH("DATA") AS "L", md5("DATA") AS "H", '
                    f'"KINESISMETADATA" AS "M" FROM KINESNOW.PUBLIC.{table} ORDER BY rowid')


def wait_until(what, condition, timeout: float = LOAD_TIMEOUT, interval: float = 0.5):
    deadline = time.monotonic() + timeout
    value = condition()
    while not value and time.monotonic() < deadline:
        time.sleep(interval)
        value = condition()
    assert value, f"{what}: not within {timeout:.0f} s"
    return value


def check_rows(rows: list[dict], expected: dict[str, list[dict]], stream: str) -> None:
    """Each shard's rows are its expected records, each once, in order, whole."""
    by_shard: dict[str, list[dict]] = {}
    for row in rows:
        meta = row["M"]
        assert meta["stream"] == stream, meta
        by_shard.setdefault(meta["shardId"], []).append(row)
    assert sorted(by_shard) == sorted(expected), f"shards {sorted(by_shard)}"
    for shard, records in expected.items():
        got = by_shard[shard]
        assert [r["INDEX"] for r in got] == [e["index"] for e in records], f"{shard}: once each, in order"
        for row, e in zip(got, records):
            where = f"{shard} record {e['index']}"
            assert row["SHARD"] == int(shard.rsplit("-", 1)[1]) and row["SUB"] == 0, where
            assert row["M"]["sequenceNumber"] == e["seq"], where
            assert (row["L"], row["H"]) == (e["data_length"], e["md5"]), f"{where}: DATA's length and MD5"


def positions(app: str, stream: str) -> dict[str, tuple]:
    """shard id -> (checkpoint, position loaded into Snowflake) as its lease row names them (sequence numbers)."""
    return {r["shardId"]["S"]: (r.get("sequenceNumber", {}).get("S"), r.get("loadedSequenceNumber", {}).get("S"))
            for r in lease_rows(app, stream) if not r["shardId"]["S"].startswith("__")}


def wait_for_checkpoints(ids: dict, stream: str, expected: dict[str, list[dict]]) -> None:
    """Each shard's checkpoint and loaded position (Failover Position SNOWFLAKE_COMMIT) reach its last record, so a
    node taking the shard over would read nothing again."""
    last = {shard: (records[-1]["seq"],) * 2 for shard, records in expected.items()}
    try:
        wait_until("checkpoints", lambda: positions(ids["app"], stream) == last, timeout=60)
    except AssertionError:
        raise AssertionError(f"(checkpoint, loaded) {positions(ids['app'], stream)}, expected {last}") from None


def received(c, processor_id: str) -> list[dict]:
    """ConsumeKinesis' FlowFiles as its RECEIVE provenance events have them: {"size", "attributes"}."""
    out = []
    for event in receive_events(c, processor_id, max_results=1000):
        detail = c.get(f"provenance-events/{event['id']}")["provenanceEvent"]
        out.append({"size": int(detail["fileSizeBytes"]),
                    "attributes": {a["name"]: a["value"] for a in detail.get("attributes", [])}})
    return out


def our_errors(nifi, mark) -> list[str]:
    """ERROR lines of NiFi's log since `mark` that name our bundle."""
    return [e["text"] for e in parse_log_events(nifi.log_since(mark), levels=("ERROR",)) if "kinesnow" in e["text"].lower()]


def test_records_of_1_and_10_mib_load_once_in_shard_order_with_a_smaller_buffer(env):
    stream, table, sf, nifi = unique("large"), "LARGE_RECORDS", env["sf"], env["nifi"]
    sizes = [200, MIB, 300, MAX, MIB + 1, 250]
    args = source_args(stream, sizes, "repeat", per_shard=12)  # two 10 MiB records per shard
    expected = expected_records(args)
    assert [e["length"] for e in expected["shardId-000000000000"]] == sizes * 2
    mark = nifi.log_mark()
    with SourceProcess(args) as source:
        ids = applied(env, "large-records", stream, table, source, {"Processing Strategy": "LINE_DELIMITED"}, {})
        c = nifi.client
        t0 = time.monotonic()
        c.start_processor(ids["consumer"])
        c.start_processor(ids["sink"])
        total = SHARDS * 12
        wait_until(f"{total} rows", lambda: len(table_rows(sf, table)) >= total)
        loaded = time.monotonic() - t0
        time.sleep(3)  # anything still in flight would show up now as a duplicate
        wait_for_checkpoints(ids, stream, expected)
        rows = table_rows(sf, table)
        c.stop_processor(ids["consumer"])
        c.stop_processor(ids["sink"])
        served = source.stats()
        flow_files = received(c, ids["consumer"])
    print(f"\n{total} records ({sum(e['length'] for r in expected.values() for e in r) / MIB:.1f} MiB) loaded in "
          f"{loaded:.1f} s; the source served {served['records']} records, {served['data_bytes'] / MIB:.1f} MiB")
    assert len(rows) == total, f"{len(rows) - total} rows more than records"
    check_rows(rows, expected, stream)
    # LINE_DELIMITED put several records in a FlowFile, but a 10 MiB record (over Max Batch Size) alone in its own.
    counts = [int(f["attributes"]["record.count"]) for f in flow_files]
    assert sum(counts) == total and max(counts) > 1, counts
    alone = [f for f in flow_files if f["size"] >= MAX]
    assert len(alone) == 2 * SHARDS and all(f["attributes"]["record.count"] == "1" for f in alone), alone
    for queue in ("failure_queue", "parse_failure_queue", "records_queue"):
        assert c.connection_queue_count(ids[queue]) == 0, queue
    assert our_errors(nifi, mark) == []


def test_a_10_mib_record_that_cannot_compress_goes_to_failure_and_the_records_around_it_load_once(env):
    stream, table, sf, nifi = unique("large-refused"), "LARGE_REFUSED", env["sf"], env["nifi"]
    sizes = [200, MIB, MAX, 300]
    args = source_args(stream, sizes, "random", per_shard=6)  # 200 B, 1 MiB, 10 MiB (refused), 300 B, 200 B, 1 MiB
    expected = expected_records(args)
    refused = {shard: records[2] for shard, records in expected.items()}
    assert all(r["length"] == MAX for r in refused.values())
    loadable = {shard: [r for r in records if r["index"] != 2] for shard, records in expected.items()}
    mark = nifi.log_mark()
    with SourceProcess(args) as source:
        ids = applied(env, "large-refused", stream, table, source, {"Processing Strategy": "FLOW_FILE"},
                      {"Order Wait": "10 min"})
        c = nifi.client
        t0 = time.monotonic()
        c.start_processor(ids["consumer"])
        c.start_processor(ids["sink"])
        total = sum(len(r) for r in loadable.values())
        wait_until(f"{total} rows and {SHARDS} FlowFiles in failure",
                   lambda: len(table_rows(sf, table)) >= total and c.connection_queue_count(ids["failure_queue"]) >= SHARDS)
        loaded = time.monotonic() - t0
        time.sleep(3)
        wait_for_checkpoints(ids, stream, expected)  # past the refused records too
        rows = table_rows(sf, table)
        c.stop_processor(ids["consumer"])
        c.stop_processor(ids["sink"])
    print(f"\n{total} records loaded and {SHARDS} refused in {loaded:.1f} s")
    assert len(rows) == total, f"{len(rows) - total} rows more than records"
    check_rows(rows, loadable, stream)

    failed = list_queue(c, ids["failure_queue"])
    assert len(failed) == SHARDS, failed
    seen = set()
    for summary in failed:
        attributes = c.get(f"flowfile-queues/{ids['failure_queue']}/flowfiles/{summary['uuid']}")["flowFile"]["attributes"]
        shard = attributes["aws.kinesis.shard.id"]
        assert attributes["aws.kinesis.first.sequence.number"] == refused[shard]["seq"], attributes
        message = attributes["snowflake.error.message"]
        m = TOO_LARGE.search(message)
        assert m, message
        ndjson, zstd = (int(m[k].replace(",", "")) for k in ("ndjson", "zstd"))
        assert MAX < ndjson < 16_000_000 and zstd > 4_000_000, message
        content = flowfile_content(c, ids["failure_queue"], summary["uuid"])
        record = json.loads(content)
        data = record["data"].encode()
        assert (len(data), hashlib.md5(data).hexdigest()) == (refused[shard]["data_length"], refused[shard]["md5"])
        assert record["kinesisMetadata"]["sequenceNumber"] == refused[shard]["seq"]
        seen.add(shard)
    assert seen == set(refused), "one refused record per shard"
    for queue in ("parse_failure_queue", "records_queue"):
        assert c.connection_queue_count(ids[queue]) == 0, queue
    bulletins = [b for b in c.bulletins(source_id=ids["sink"]) if "goes to failure without being sent" in (b.get("message") or "")]
    assert bulletins and all(b["level"] == "ERROR" for b in bulletins), bulletins
    errors = our_errors(nifi, mark)
    assert len(errors) == SHARDS and all("goes to failure without being sent" in e for e in errors), errors
