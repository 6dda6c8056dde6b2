"""NiFi's record model end to end (issue 18), in a real NiFi 2.3.0 with NiFi's own record services
(nifi-record-serialization-services-nar: JsonTreeReader, JsonRecordSetWriter, AvroReader, AvroRecordSetWriter,
CSVReader):

- ConsumeKinesis' RECORD strategy with JSON (schema inference) loads the same rows as LINE_DELIMITED;
- Avro records written by a real Avro library (fastavro), plain and KPL-aggregated, read with an AvroReader and a
  schema text, written with AvroRecordSetWriter, read again by PutSnowflake's Record Reader: the rows equal the
  source values (a 38-digit decimal, timestamps, dates, a nested record, an array, a map, nulls); a malformed
  record goes to parse.failure whole and nothing else is lost; across a stop/start and a kill -9 every record is
  in the table once;
- a schema change mid-stream (Avro with the schema embedded in each record) starts a new FlowFile and the table
  gains the new column;
- DEMARCATOR with a multi-byte demarcator, and records that contain it;
- PutSnowflake's Record Reader on Avro and CSV FlowFiles that did not come from ConsumeKinesis: rows load, and a
  CSV record that does not fit the schema goes to invalid while the others load.

The NiFi is the session's shared one (tests/e2e/conftest.py), which loads the test-only NAR of NiFi's standard
processors next to ours (GetFile, GenerateFlowFile); it is killed and restarted here as this module's own would be
(tests/lib/shared_nifi.py's ModuleNiFi.kill and restart).
"""

import base64
import json
import os
import sys
import tempfile
import time

import pytest

import avro
import iam_proxy
import kpl
from consumer_flow import ConsumerFlow, consumer_properties, flowfile_content, list_queue
from services import kinesis_call, local_services  # noqa: F401  (session fixture)
from standin import Standin, make_key_pair

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "parameter-contexts"))
import apply as flow  # noqa: E402

ACCOUNT = "kinesnow-local"
USER = "KINESNOW"
RUN = str(int(time.time()))  # the emulators may outlive a run: fresh stream and application names

ORDER_SCHEMA = {
    "type": "record", "name": "Order", "namespace": "kinesnow.test",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 9}},
        {"name": "placed_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "ship_day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "customer", "type": {"type": "record", "name": "Customer", "fields": [
            {"name": "name", "type": "string"}, {"name": "tier", "type": ["null", "int"], "default": None}]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}
ORDERS_DDL = ("(ID NUMBER, AMOUNT NUMBER(38,9), PLACED_AT TIMESTAMP_TZ, SHIP_DAY DATE, CUSTOMER VARIANT, TAGS ARRAY, "
              "ATTRS OBJECT, NOTE VARCHAR, KINESISMETADATA VARIANT) ENABLE_SCHEMA_EVOLUTION = TRUE ERROR_LOGGING = TRUE")


def order(i: int) -> dict:
    """Source values as text (see tests/avro/encode.py): a 38-digit decimal, an instant, a date, nulls."""
    return {
        "id": i,
        "amount": f"{i:029d}.{(i * 7919) % 10**9:09d}" if i % 5 else "-0.000000001",
        "placed_at": f"2026-12-0{1 + i % 9}T{i % 24:02d}:{i % 60:02d}:07.{i % 1000:03d}+00:00",
        "ship_day": f"2027-0{1 + i % 9}-1{i % 10}",
        "customer": {"name": f"customer-{i % 7}", "tier": None if i % 4 == 0 else i % 3},
        "tags": [f"t{j}" for j in range(i % 4)],
        "attrs": {f"k{j}": i * j for j in range(i % 3)},
        "note": None if i % 2 else f"note {i}",
    }


# ---- the NiFi, the stand-in and the flows -----------------------------------------------------------------

@pytest.fixture(scope="module")
def env(local_services, shared_nifi, tmp_path_factory):
    """The stand-in, and the session's shared NiFi (our NAR and the standard processors' test-only NAR)."""
    work = str(tmp_path_factory.mktemp("kinesnow-records"))
    _, public_key = make_key_pair(os.path.join(work, "snowflake"))
    sf = Standin.start(os.path.join(work, "standin"), commit_lag_ms=300)
    sf.register_user(ACCOUNT, USER, public_key)
    nifi = shared_nifi
    yield {"work": work, "sf": sf, "nifi": nifi}
    try:
        nifi.clean()  # the flows stopped and removed before the stand-in they write to goes
    finally:
        sf.stop()


def service(c, group: str, type_name: str, properties: dict) -> str:
    """A NiFi controller service, enabled; `properties` by display name (NiFi 2.x keeps some old names)."""
    entity = c.create_controller_service(group, type_name)
    names = {d["displayName"]: n for n, d in entity["component"]["descriptors"].items()}
    named = {names.get(k, k): v for k, v in properties.items()}
    c.put(f"controller-services/{entity['id']}", {"revision": c._revision(f"controller-services/{entity['id']}"),
                                                  "component": {"id": entity["id"], "properties": named}})
    c.set_controller_service_state(entity["id"], "ENABLED")
    return entity["id"]


def applied(env, name: str, stream: str, table: str) -> dict:
    """The local flow (ConsumeKinesis -> PutSnowflake) in its own group, reading `stream` into `table`."""
    c = env["nifi"].client
    ids = flow.apply(c, "local", {"KINESNOW_WORK": env["work"], "SNOWFLAKE_URL": env["sf"].url}, name,
                     context_suffix=f" [{name}]")
    app = f"{stream}-{name}"
    c.update_parameters(ids["source_context"], {"AWS Kinesis Stream Name": stream,
                                                "AWS Kinesis Application Name": app,
                                                "AWS Kinesis Initial Stream Position": "TRIM_HORIZON",
                                                "AWS Kinesis Endpoint Override URL": iam_proxy.proxy_for(stream, app),
                                                "AWS DynamoDB Endpoint Override URL": iam_proxy.proxy_for(stream, app)})
    c.update_parameters(ids["destination_context"], {"Snowflake Destination Table": table})
    return ids


def json_services(c, group: str) -> dict:
    return {"reader": service(c, group, "JsonTreeReader", {"Schema Access Strategy": "infer-schema"}),
            "writer": service(c, group, "JsonRecordSetWriter", {"Schema Write Strategy": "no-schema",
                                                                "Output Grouping": "output-oneline"})}


def avro_services(c, group: str, schema_text: str = "") -> dict:
    reader = ({"Schema Access Strategy": "schema-text-property", "Schema Text": schema_text} if schema_text
              else {"Schema Access Strategy": "embedded-avro-schema"})
    return {"reader": service(c, group, "AvroReader", reader),
            "writer": service(c, group, "AvroRecordSetWriter", {"Schema Write Strategy": "avro-embedded"}),
            "embedded": service(c, group, "AvroReader", {"Schema Access Strategy": "embedded-avro-schema"})}


def put_records(stream: str, data: list[bytes], key=lambda i: f"k{i % 11}") -> None:
    records = [{"PartitionKey": key(i), "Data": base64.b64encode(d).decode()} for i, d in enumerate(data)]
    for start in range(0, len(records), 250):
        kinesis_call("PutRecords", {"StreamName": stream, "Records": records[start:start + 250]})


def create_stream(stream: str, shards: int) -> None:
    kinesis_call("CreateStream", {"StreamName": stream, "ShardCount": shards})
    deadline = time.monotonic() + 30
    while kinesis_call("DescribeStreamSummary", {"StreamName": stream})["StreamDescriptionSummary"]["StreamStatus"] != "ACTIVE":
        assert time.monotonic() < deadline
        time.sleep(0.2)


def wait_rows(sf: Standin, table: str, want: int, timeout: float) -> tuple[int, int]:
    deadline = time.monotonic() + timeout
    while True:
        row = sf.query(f"SELECT COUNT(*) AS C, COUNT(DISTINCT ID) AS D FROM KINESNOW.PUBLIC.{table}")[0]
        if row["D"] >= want or time.monotonic() > deadline:
            return row["C"], row["D"]
        time.sleep(0.5)


def queued(c, queue: str) -> list[dict]:
    """The FlowFiles queued on a connection: attributes and exact content."""
    out = []
    for summary in list_queue(c, queue):
        ff = c.get(f"flowfile-queues/{queue}/flowfiles/{summary['uuid']}")["flowFile"]
        out.append({"attributes": ff["attributes"], "content": flowfile_content(c, queue, summary["uuid"])})
    return out


def start(c, *processors: str) -> None:
    for p in processors:
        v = c.processor_validation(p)
        assert v["status"] == "VALID", v
        c.start_processor(p)


# ---- ConsumeKinesis RECORD ----------------------------------------------------------------------------

def test_json_through_record_loads_the_same_rows_as_line_delimited(env):
    """The same stream, read twice: LINE_DELIMITED with Inject Metadata, and RECORD (JsonTreeReader inferring the
    schema, JsonRecordSetWriter) with Inject Metadata. Both tables hold identical rows, each record once."""
    stream, sf, c = f"records-json-{RUN}", env["sf"], env["nifi"].client
    for table in ("JSON_LINES", "JSON_RECORDS"):
        sf.sql(f"CREATE OR REPLACE TABLE KINESNOW.PUBLIC.{table} (ID NUMBER) ENABLE_SCHEMA_EVOLUTION = TRUE")
    create_stream(stream, 2)
    events = [{"id": i, "kind": ["click", "view", "buy"][i % 3], "user": {"name": f"u{i % 17}", "vip": i % 5 == 0},
               "items": [i, i + 1], "price": round(i * 1.25, 2)} for i in range(400)]
    put_records(stream, [json.dumps(e).encode() for e in events])
    lines = applied(env, "json-lines", stream, "JSON_LINES")
    records = applied(env, "json-records", stream, "JSON_RECORDS")
    svc = json_services(c, records["group"])
    c.update_processor(records["consumer"], properties={"Processing Strategy": "RECORD", "Record Reader": svc["reader"],
                                                        "Record Writer": svc["writer"]})
    start(c, lines["consumer"], lines["sink"], records["consumer"], records["sink"])
    for table in ("JSON_LINES", "JSON_RECORDS"):
        assert wait_rows(sf, table, 400, 150) == (400, 400), table
    time.sleep(2)  # anything in flight would show up now as a duplicate
    rows = {t: sf.query(f"SELECT * FROM KINESNOW.PUBLIC.{t} ORDER BY ID") for t in ("JSON_LINES", "JSON_RECORDS")}
    assert len(rows["JSON_RECORDS"]) == 400
    for a, b in zip(rows["JSON_LINES"], rows["JSON_RECORDS"]):
        ma, mb = a.pop("KINESISMETADATA"), b.pop("KINESISMETADATA")
        assert a == b, (a, b)
        assert {k: ma[k] for k in ("stream", "shardId", "sequenceNumber", "partitionKey", "shardedSequenceNumber")} == \
            {k: mb[k] for k in ("stream", "shardId", "sequenceNumber", "partitionKey", "shardedSequenceNumber")}
    for ids in (lines, records):
        c.stop_processor(ids["consumer"])
        c.stop_processor(ids["sink"])
        assert c.connection_queue_count(ids["parse_failure_queue"]) == 0
        assert c.connection_queue_count(ids["failure_queue"]) == 0


def test_avro_plain_and_aggregated_loads_exact_values_across_stop_start_and_kill_9(env):
    """Avro datums (fastavro) read with an AvroReader's schema text, some KPL-aggregated, written as Avro with the
    schema embedded, read by PutSnowflake's AvroReader: every value equals its source, a malformed record goes to
    parse.failure whole, and a stop/start of PutSnowflake and a kill -9 of NiFi lose and repeat nothing."""
    stream, sf, c = f"records-avro-{RUN}", env["sf"], env["nifi"].client
    sf.sql(f"CREATE OR REPLACE TABLE KINESNOW.PUBLIC.ORDERS {ORDERS_DDL}")
    create_stream(stream, 2)
    source = {i: order(i) for i in range(600)}
    datums = avro.encode(ORDER_SCHEMA, [source[i] for i in range(600)], "datum")
    put_records(stream, datums[:200])
    # 200 more in KPL aggregates of 20 user records each.
    aggregates = kpl.aggregate([[(f"agg{i % 3}", datums[i]) for i in range(first, first + 20)]
                                for first in range(200, 400, 20)])
    kinesis_call("PutRecords", {"StreamName": stream, "Records": [
        {"PartitionKey": a["partition_key"], "ExplicitHashKey": a["explicit_hash_key"], "Data": a["data_b64"]}
        for a in aggregates]})
    put_records(stream, [b"\x02\x04not avro at all \xff\xfe"])  # cannot be read with the schema
    ids = applied(env, "avro", stream, "ORDERS")
    svc = avro_services(c, ids["group"], json.dumps(ORDER_SCHEMA))
    c.update_processor(ids["consumer"], properties={"Processing Strategy": "RECORD", "Record Reader": svc["reader"],
                                                    "Record Writer": svc["writer"]})
    c.update_processor(ids["sink"], properties={"Record Reader": svc["embedded"]})
    start(c, ids["consumer"], ids["sink"])

    wait_rows(sf, "ORDERS", 150, 150)
    c.stop_processor(ids["sink"])  # mid-stream: its held sessions roll back, their FlowFiles return to the queue
    c.start_processor(ids["sink"])
    time.sleep(2)  # NiFi saves the flow (with the processors' run state) shortly after a change
    put_records(stream, datums[400:500])
    wait_rows(sf, "ORDERS", 300, 150)
    env["nifi"].kill()  # kill -9 mid-stream
    c = env["nifi"].restart().client  # the same instance directory, as it was left
    put_records(stream, datums[500:600])

    count, distinct = wait_rows(sf, "ORDERS", 600, 240)
    time.sleep(3)  # anything still in flight would show up now as a duplicate
    count, distinct = wait_rows(sf, "ORDERS", 600, 1)
    assert (count, distinct) == (600, 600), f"{distinct} distinct of 600, {count - distinct} repeated"
    # The malformed record goes whole to parse.failure; a kill -9 between NiFi's commit and the checkpoint can
    # route it a second time after the restart (as any record: the checkpoint never runs ahead of NiFi).
    failures = queued(c, ids["parse_failure_queue"])
    assert 1 <= len(failures) <= 2, failures
    for failure in failures:
        assert failure["content"] == b"\x02\x04not avro at all \xff\xfe", "the malformed record goes whole"
        assert failure["attributes"].get("record.error.message"), failure["attributes"]
    assert c.connection_queue_count(ids["failure_queue"]) == 0

    rows = sf.query("SELECT ID, CAST(AMOUNT AS VARCHAR) AS AMOUNT, CAST(PLACED_AT AS VARCHAR) AS PLACED_AT, "
                    "CAST(SHIP_DAY AS VARCHAR) AS SHIP_DAY, CUSTOMER, TAGS, ATTRS, NOTE, KINESISMETADATA "
                    "FROM KINESNOW.PUBLIC.ORDERS ORDER BY ID")
    for row in rows:
        want = source[row["ID"]]
        got_amount = row["AMOUNT"]
        assert _decimal_text(got_amount) == _decimal_text(want["amount"]), (row["ID"], got_amount, want["amount"])
        assert _instant(row["PLACED_AT"]) == _instant(want["placed_at"]), (row["ID"], row["PLACED_AT"])
        assert row["SHIP_DAY"] == want["ship_day"]
        assert _json(row["CUSTOMER"]) == want["customer"], row
        assert _json(row["TAGS"]) == want["tags"], row
        assert _json(row["ATTRS"]) == want["attrs"], row
        assert row["NOTE"] == want["note"], row
        metadata = _json(row["KINESISMETADATA"])
        assert metadata["stream"] == stream and len(metadata["shardedSequenceNumber"]) > 20, metadata
    c.stop_processor(ids["consumer"])
    c.stop_processor(ids["sink"])


def _decimal_text(text: str) -> str:
    from decimal import Decimal
    return str(Decimal(text).normalize())


def _instant(text: str):
    import datetime
    t = text.replace(" ", "T")
    if t.endswith("Z"):
        t = t[:-1] + "+00:00"
    value = datetime.datetime.fromisoformat(t)
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.timezone.utc)
    return value.astimezone(datetime.timezone.utc)


def _json(value):
    return json.loads(value) if isinstance(value, str) else value


def test_a_schema_change_mid_stream_starts_a_new_flow_file_and_the_table_evolves(env):
    """Each Kinesis record an Avro container with its schema; the producer adds a field half-way. ConsumeKinesis
    (RECORD) cuts the shard's batch where the schema changes; PutSnowflake's AvroReader loads both and schema
    evolution adds the new column."""
    stream, sf, c = f"records-evolve-{RUN}", env["sf"], env["nifi"].client
    sf.sql("CREATE OR REPLACE TABLE KINESNOW.PUBLIC.PEOPLE (ID NUMBER) ENABLE_SCHEMA_EVOLUTION = TRUE")
    create_stream(stream, 1)
    v1 = {"type": "record", "name": "Person", "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}]}
    v2 = {"type": "record", "name": "Person", "fields": v1["fields"] + [{"name": "email", "type": ["null", "string"], "default": None}]}
    put_records(stream, avro.encode(v1, [{"id": i, "name": f"p{i}"} for i in range(30)], "container")
                + avro.encode(v2, [{"id": i, "name": f"p{i}", "email": f"p{i}@example.com"} for i in range(30, 60)], "container"))

    # The FlowFiles themselves, from a consumer of their own (same stream, its own Application Name).
    group = c.create_process_group("records-evolve-flowfiles")["id"]
    svc = avro_services(c, group)
    consumer = ConsumerFlow.add(c, group, consumer_properties(
        stream, f"{stream}-ff", **{"Processing Strategy": "RECORD", "Record Reader": svc["reader"],
                                   "Record Writer": svc["writer"], "Max Batch Duration": "3 sec"}))
    consumer.start()
    deadline = time.monotonic() + 120
    contents = []
    while time.monotonic() < deadline:
        contents = [avro.decode_file(f["content"]) for f in queued(c, consumer.success_queue)]
        if sum(len(x["records"]) for x in contents) >= 60:
            break
        time.sleep(1)
    consumer.stop()
    ids_seen = [r["id"] for x in contents for r in x["records"]]
    assert sorted(ids_seen) == list(range(60)), ids_seen
    for x in contents:
        fields = [f["name"] for f in x["schema"]["fields"]]
        has_email = "email" in fields
        assert all((r["id"] >= 30) == has_email for r in x["records"]), "one schema per FlowFile, cut where it changed"
    assert {("email" in [f["name"] for f in x["schema"]["fields"]]) for x in contents} == {True, False}

    ids = applied(env, "evolve", stream, "PEOPLE")
    svc = avro_services(c, ids["group"])
    c.update_processor(ids["consumer"], properties={"Processing Strategy": "RECORD", "Record Reader": svc["reader"],
                                                    "Record Writer": svc["writer"]})
    c.update_processor(ids["sink"], properties={"Record Reader": svc["embedded"]})
    start(c, ids["consumer"], ids["sink"])
    assert wait_rows(sf, "PEOPLE", 60, 150) == (60, 60)
    c.stop_processor(ids["consumer"])
    c.stop_processor(ids["sink"])
    rows = {r["ID"]: r for r in sf.query("SELECT ID, NAME, EMAIL FROM KINESNOW.PUBLIC.PEOPLE")}
    assert rows[3]["NAME"] == "p3" and rows[3]["EMAIL"] is None
    assert rows[42]["EMAIL"] == "p42@example.com"


# ---- DEMARCATOR -----------------------------------------------------------------------------------------

def test_demarcator_joins_a_shards_records_and_does_not_escape_it(env):
    """A multi-byte demarcator joins the records of a shard's batch; a record that contains the demarcator is
    written as it is (documented: splitting the FlowFile on the demarcator would cut that record)."""
    stream, c = f"records-demarcator-{RUN}", env["nifi"].client
    create_stream(stream, 1)
    data = [b"alpha", "b\u00e9ta|~|inside".encode(), b"gamma", b""]
    put_records(stream, data)
    group = c.create_process_group("records-demarcator")["id"]
    consumer = ConsumerFlow.add(c, group, consumer_properties(
        stream, f"{stream}-app", **{"Processing Strategy": "DEMARCATOR", "Message Demarcator": "|~|",
                                    "Max Batch Duration": "3 sec"}))
    consumer.start()
    deadline = time.monotonic() + 90
    got = []
    while time.monotonic() < deadline:
        got = queued(c, consumer.success_queue)
        if sum(int(f["attributes"]["record.count"]) for f in got) >= 4:
            break
        time.sleep(0.5)
    consumer.stop()
    joined = b"|~|".join(f["content"] for f in got)
    assert joined == b"|~|".join(data), joined
    assert sum(int(f["attributes"]["record.count"]) for f in got) == 4


# ---- PutSnowflake's Record Reader on FlowFiles from elsewhere ----------------------------------------------

def test_put_snowflake_reads_avro_flow_files_that_never_saw_kinesis(env):
    """Avro container files (GetFile) with no Kinesis attributes: PutSnowflake's AvroReader loads every record
    (at least once, on the at-least-once channel)."""
    sf, c = env["sf"], env["nifi"].client
    sf.sql("CREATE OR REPLACE TABLE KINESNOW.PUBLIC.FROM_AVRO_FILES (ID NUMBER, NAME VARCHAR) ENABLE_SCHEMA_EVOLUTION = TRUE")
    ids = applied(env, "avro-files", f"records-avro-files-{RUN}", "FROM_AVRO_FILES")  # its consumer never starts
    svc = avro_services(c, ids["group"])
    drop = tempfile.mkdtemp(prefix="avro-in-", dir=env["work"])
    schema = {"type": "record", "name": "Row", "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}]}
    with open(os.path.join(drop, "rows.avro.tmp"), "wb") as f:
        f.write(avro.encode(schema, [{"id": i, "name": f"file-{i}"} for i in range(10, 20)], "file")[0])
    os.rename(os.path.join(drop, "rows.avro.tmp"), os.path.join(drop, "rows.avro"))
    getter = c.add_processor(ids["group"], "org.apache.nifi.processors.standard.GetFile", name="AvroFiles",
                             properties={"Input Directory": drop, "File Filter": r".*\.avro"}, position=(-400, 150))
    c.connect(ids["group"], getter["id"], ids["sink"], ["success"])
    c.update_processor(ids["sink"], properties={"Record Reader": svc["embedded"]})
    start(c, ids["sink"], getter["id"])
    count, distinct = wait_rows(sf, "FROM_AVRO_FILES", 10, 90)
    time.sleep(1)
    for p in (getter["id"], ids["sink"]):
        c.stop_processor(p)
    rows = {r["ID"]: r for r in sf.query("SELECT ID, NAME FROM KINESNOW.PUBLIC.FROM_AVRO_FILES")}
    assert set(rows) == set(range(10, 20)) and len(sf.query("SELECT ID FROM KINESNOW.PUBLIC.FROM_AVRO_FILES")) == 10, sorted(rows)
    assert rows[12]["NAME"] == "file-12"
    assert c.connection_queue_count(ids["failure_queue"]) == 0


def test_put_snowflake_reads_csv_and_sends_a_bad_record_to_invalid(env):
    """CSV (GenerateFlowFile) that never saw Kinesis: its records load; a record that does not fit the schema goes
    to invalid with the reason while the others load."""
    sf, c = env["sf"], env["nifi"].client
    sf.sql("CREATE OR REPLACE TABLE KINESNOW.PUBLIC.FROM_CSV (ID NUMBER, NAME VARCHAR, PRICE NUMBER(38,9)) "
           "ENABLE_SCHEMA_EVOLUTION = TRUE")
    csv = applied(env, "csv", f"records-csv-{RUN}", "FROM_CSV")  # its consumer never starts
    reader = service(c, csv["group"], "CSVReader", {
        "Schema Access Strategy": "schema-text-property",
        "Schema Text": json.dumps({"type": "record", "name": "Row", "fields": [
            {"name": "id", "type": "long"}, {"name": "name", "type": "string"},
            {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 9}}]}),
        "Treat First Line as Header": "true"})
    c.update_processor(csv["sink"], properties={"Record Reader": reader})
    text = "id,name,price\n1,one,1.5\n2,two,12345678901234567890123456789.000000001\nthree,bad,3\n4,four,4\n"
    gen = c.add_processor(csv["group"], "org.apache.nifi.processors.standard.GenerateFlowFile", name="Csv",
                          # NiFi 2.3.0 keeps GenerateFlowFile's old property name; its display name "Custom Text"
                          # would become a dynamic property (an attribute) and the FlowFile would be empty.
                          properties={"generate-ff-custom-text": text, "Batch Size": "1"}, scheduling_period="1 day",
                          position=(-400, 150))
    c.connect(csv["group"], gen["id"], csv["sink"], ["success"])
    empty = c.connect(csv["group"], csv["sink"], flow.funnel(c, csv["group"], (600, 600)), ["empty"], destination_type="FUNNEL")
    start(c, csv["sink"], gen["id"])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        got = {r["ID"] for r in sf.query("SELECT ID FROM KINESNOW.PUBLIC.FROM_CSV")}
        if got >= {1, 2, 4} and c.connection_queue_count(csv["failure_queue"]) >= 1:
            break
        time.sleep(0.5)
    for p in (gen["id"], csv["sink"]):
        c.stop_processor(p)
    rows = {r["ID"]: r for r in sf.query("SELECT ID, NAME, CAST(PRICE AS VARCHAR) AS PRICE FROM KINESNOW.PUBLIC.FROM_CSV")}
    assert set(rows) == {1, 2, 4}, (sorted(rows), queued(c, csv["failure_queue"]))
    assert _decimal_text(rows[2]["PRICE"]) == _decimal_text("12345678901234567890123456789.000000001")
    assert c.connection_queue_count(empty["id"]) == 0, list_queue(c, empty["id"])
    invalid = queued(c, csv["failure_queue"])
    assert len(invalid) == 1, invalid
    assert invalid[0]["attributes"].get("snowflake.records.invalid"), invalid[0]["attributes"]
