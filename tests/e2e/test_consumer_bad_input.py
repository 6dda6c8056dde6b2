"""ConsumeKinesis in a real NiFi with unusual and bad input: KPL aggregates mixed with plain records
over several shards, records of the maximum size, invalid UTF-8, a stream that does not exist yet,
an endpoint that refuses connections, and credentials that AWS rejects. Each gives the records
whole and in shard order, a routed FlowFile, or a clear bulletin; nothing is lost and nothing
crashes.

What the emulators cannot do, and how it is covered here:
- kinesis-local and dynalite accept any access key (they only check that a SigV4 header is there),
  so "wrong credentials" is played by a stand-in on 127.0.0.1 that answers every call as AWS
  answers an unknown access key (HTTP 400, UnrecognizedClientException) or a missing IAM
  permission (AccessDeniedException).
- kinesis-local limits a record's data to 1 MiB and does not count the partition key, as real
  Kinesis does; both the largest record real Kinesis accepts (data + key = 1 MiB) and the largest
  the emulator accepts (1 MiB of data plus the key) are read here.
"""

import http.server
import json
import os
import threading
import time

import pytest

import consumer_flow
import iam_proxy
from consumer_flow import ConsumerFlow, consumer_properties, kpl_fixture, put_record, unique
from nifi_instance import free_port
from services import AwsJsonError, kinesis_call, local_services  # noqa: F401  (session fixture)

MIB = 1024 * 1024
SUB = "aws.kinesis.first.subsequence.number"
LAST_SUB = "aws.kinesis.last.subsequence.number"


@pytest.fixture(scope="module")
def nifi(local_services, shared_nifi):
    """The session's shared NiFi (tests/e2e/conftest.py); its log as this module may judge it."""
    return shared_nifi


_streams: list[str] = []


def create_stream(name: str, shards: int) -> list[dict]:
    """Creates a stream that is deleted when this module is done (kinesis-local allows 50 shards in
    all, and the rest of the suite shares the emulator)."""
    _streams.append(name)
    return consumer_flow.create_stream(name, shards)


@pytest.fixture(scope="module")
def group(nifi):
    yield nifi.client.create_process_group("bad input")["id"]
    nifi.clean()  # every consumer stopped and removed before its stream goes
    for stream in _streams:
        try:
            kinesis_call("DeleteStream", {"StreamName": stream, "EnforceConsumerDeletion": True})
        except AwsJsonError:
            pass


_positions = iter(range(0, 100000, 600))


def add_consumer(nifi, group, props, **scheduling) -> ConsumerFlow:
    return ConsumerFlow.add(nifi.client, group, props, position=(next(_positions), 0), **scheduling)


def expect_record(flow_file: dict, shard: str, record: dict) -> None:
    """A FlowFile of the FLOW_FILE strategy holds exactly this record, with its attributes."""
    a = flow_file["attributes"]
    where = f"record {record['label']}"
    assert flow_file["content"] == record["data"], f"{where}: content differs ({len(flow_file['content'])} bytes)"
    assert a["aws.kinesis.shard.id"] == shard, where
    assert a["aws.kinesis.first.sequence.number"] == record["sequence"], where
    assert a["aws.kinesis.last.sequence.number"] == record["sequence"], where
    assert a["aws.kinesis.partition.key"] == record["key"], where
    assert a["record.count"] == "1", where
    if record["sub"] is None:
        assert SUB not in a and LAST_SUB not in a, f"{where}: a plain record has no sub-sequence number"
    else:
        assert (a.get(SUB), a.get(LAST_SUB)) == (str(record["sub"]), str(record["sub"])), where
    assert int(a["aws.kinesis.approximate.arrival.timestamp.ms"]) > 1_600_000_000_000, where


def put_plain(stream, shard_key, label, expected, shard_of):
    data = json.dumps({"plain": label}).encode()
    seq, shard = put_record(stream, data, f"plain-{label}", shard_key)
    expected.setdefault(shard, []).append({"label": label, "sequence": seq, "sub": None, "key": f"plain-{label}", "data": data})
    shard_of[label] = shard


def put_aggregate(stream, shard_key, fixture, expected):
    blob, users = kpl_fixture(fixture)
    seq, shard = put_record(stream, blob, f"agg-{fixture}", shard_key)
    for i, (key, data) in enumerate(users):
        expected.setdefault(shard, []).append({"label": f"{fixture}[{i}]", "sequence": seq, "sub": i, "key": key, "data": data})
    return shard


def test_kpl_aggregates_and_plain_records_over_two_shards_arrive_once_in_shard_order(nifi, group):
    """Aggregates made by aws-kinesis-agg (single, tags, unicode keys incl. NUL and 256 emoji,
    explicit hash keys, a ~900 KB user record, zero records) between plain records on both shards,
    plus a record that carries the KPL magic but is no valid aggregate: every user record arrives
    once, byte-identical, in put order per shard, with its own partition key, the aggregate's
    sequence number and its index as sub-sequence number."""
    stream = unique("kpl-mixed")
    shards = create_stream(stream, 2)
    keys = {s["ShardId"]: s["HashKeyRange"]["StartingHashKey"] for s in shards}
    a, b = keys[shards[0]["ShardId"]], keys[shards[1]["ShardId"]]
    expected: dict = {}
    shard_of: dict = {}
    plan = [(a, "single"), (b, "explicit_hash_keys"), (a, "tags"), (b, "large_record"), (a, "empty"),
            (a, "CORRUPT"), (a, "unicode_keys"), (b, "single")]
    for i, (key, what) in enumerate(plan):
        put_plain(stream, key, f"{i}", expected, shard_of)
        if what == "CORRUPT":
            # KPL magic, then bytes that are no protobuf body with a matching MD5 trailer.
            blob = bytes([0xF3, 0x89, 0x9A, 0xC2]) + b"not an aggregate, but it starts like one" + bytes(16)
            seq, shard = put_record(stream, blob, "corrupt", key)
            expected.setdefault(shard, []).append({"label": "corrupt", "sequence": seq, "sub": None, "key": "corrupt", "data": blob})
        else:
            put_aggregate(stream, key, what, expected)
    put_plain(stream, a, "last-a", expected, shard_of)
    put_plain(stream, b, "last-b", expected, shard_of)
    total = sum(len(v) for v in expected.values())
    assert len(expected) == 2 and total < 100, (len(expected), total)  # NiFi lists at most 100 FlowFiles

    flow = add_consumer(nifi, group, consumer_properties(stream, unique("kpl-mixed-app"), **{
        "Processing Strategy": "FLOW_FILE", "Output Strategy": "USE_VALUE",
        "Max Records Per Request": "3", "Max Batch Size": "64 KB"}))
    flow.start()
    flow.wait_for(total)
    time.sleep(3)  # a repeated record would arrive now
    flow.stop()
    assert flow.counts() == (total, 0)
    by_shard: dict = {}
    for ff in flow.flow_files():
        by_shard.setdefault(ff["attributes"]["aws.kinesis.shard.id"], []).append(ff)
    assert set(by_shard) == set(expected)
    for shard, records in expected.items():
        got = by_shard[shard]
        assert len(got) == len(records), (shard, len(got), len(records))
        for ff, record in zip(got, records):  # got: in the order NiFi received them
            expect_record(ff, shard, record)
    assert any("is delivered whole, as one record, not de-aggregated: it starts with the KPL magic but is not a valid aggregate" in m for m in flow.bulletin_messages())


def test_full_aggregates_split_across_batches_and_a_restart_resume_at_the_sub_record(nifi, group):
    """Three ~1 MiB aggregates of 1005 user records (1 KiB JSON each) between plain records on two
    shards, read LINE_DELIMITED in batches of at most 100 KB, so aggregates are split across many
    FlowFiles, and the processor is stopped and started while aggregates are half delivered: the
    lines of each shard, in the order NiFi received the FlowFiles, are exactly the put order, and
    each FlowFile's first/last sequence and sub-sequence attributes name its first and last line."""
    stream = unique("kpl-full")
    shards = create_stream(stream, 2)
    a, b = (s["HashKeyRange"]["StartingHashKey"] for s in shards)
    expected: dict = {}
    shard_of: dict = {}
    for i, key in enumerate([a, b, a]):
        put_plain(stream, key, f"before-{i}", expected, shard_of)
        put_aggregate(stream, key, "full_1kib", expected)
    put_plain(stream, a, "end-a", expected, shard_of)
    put_plain(stream, b, "end-b", expected, shard_of)
    total = sum(len(v) for v in expected.values())

    flow = add_consumer(nifi, group, consumer_properties(stream, unique("kpl-full-app"), **{
        "Processing Strategy": "LINE_DELIMITED", "Output Strategy": "USE_VALUE",
        "Max Batch Size": "100 KB", "Max Batch Duration": "1 sec"}), scheduling_period="300 ms")
    flow.start()
    flow.wait_for(4)
    flow.stop()
    partial = sum(int(ff["attributes"]["record.count"]) for ff in flow.flow_files(content=False))
    print(f"stopped after {partial} of {total} records")
    assert 0 < partial < total, f"the stop must fall mid-stream (delivered {partial} of {total})"
    flow.start()
    deadline = time.monotonic() + 120
    delivered = partial
    while delivered < total and time.monotonic() < deadline:
        time.sleep(1)
        delivered = sum(int(ff["attributes"]["record.count"]) for ff in flow.flow_files(content=False))
    time.sleep(3)
    flow.stop()
    flow_files = flow.flow_files()
    for shard, records in expected.items():
        got = [ff for ff in flow_files if ff["attributes"]["aws.kinesis.shard.id"] == shard]
        lines = [line for ff in got for line in ff["content"].split(b"\n")]
        assert len(lines) == len(records), f"shard {shard}: {len(lines)} lines for {len(records)} records"
        for i, (line, record) in enumerate(zip(lines, records)):
            assert line == record["data"], f"shard {shard}, line {i}: expected {record['label']}"
        k = 0
        for ff in got:
            attrs = ff["attributes"]
            n = int(attrs["record.count"])
            first, last = records[k], records[k + n - 1]
            assert attrs["aws.kinesis.first.sequence.number"] == first["sequence"]
            assert attrs["aws.kinesis.last.sequence.number"] == last["sequence"]
            assert attrs.get(SUB) == (None if first["sub"] is None else str(first["sub"])), (shard, k)
            assert attrs.get(LAST_SUB) == (None if last["sub"] is None else str(last["sub"])), (shard, k + n - 1)
            k += n
    splits = sum(1 for ff in flow_files if ff["attributes"].get(SUB) not in (None, "0"))
    assert splits >= 10, f"aggregates must be split across FlowFiles mid-aggregate (only {splits} were)"
    assert flow.counts()[1] == 0


def test_a_missing_stream_gives_a_clear_bulletin_then_the_consumer_recovers_once_it_exists(nifi, group):
    stream = unique("not-yet")
    flow = add_consumer(nifi, group, consumer_properties(stream, unique("not-yet-app")))
    flow.start()
    deadline = time.monotonic() + 60
    while not any(f"stream '{stream}' was not found" in m for m in flow.bulletin_messages()):
        assert time.monotonic() < deadline, flow.bulletin_messages()
        time.sleep(0.5)
    message = [m for m in flow.bulletin_messages() if stream in m][-1]
    print("bulletin:", message)
    assert_one_readable_line(message)
    time.sleep(5)
    assert flow.counts() == (0, 0)
    assert nifi.client.processor_state(flow.processor_id) == "RUNNING"
    assert nifi.is_running()
    # NiFi retries the start after its administrative yield (1 s in tests/nifi/conf); creating the
    # stream is all the user has to do.
    create_stream(stream, 1)
    payloads = [f"after creation {i}".encode() for i in range(5)]
    for p in payloads:
        put_record(stream, p, "k")
    flow.wait_for(5, timeout=60)
    flow.stop()
    assert [ff["content"] for ff in flow.flow_files()] == payloads


def test_records_of_the_maximum_size_arrive_whole_and_byte_identical(nifi, group):
    """The largest records real Kinesis takes (data plus partition key = 1 MiB, with a 1- and a
    256-character key) and the largest the emulator takes (1 MiB of data plus the key), read with
    the default batch settings and with a batch limit and a memory budget smaller than one record."""
    stream = unique("max-size")
    create_stream(stream, 1)
    with pytest.raises(AwsJsonError) as rejected:
        put_record(stream, bytes(MIB + 1), "k")
    assert "exceeds" in rejected.value.body, "the emulator's limit is 1 MiB of data"
    long_key = "K" * 256
    records = [(b"small before", "k"), (os.urandom(MIB - 1), "k"), (os.urandom(MIB - 256), long_key),
               (os.urandom(MIB), "k"), (os.urandom(MIB), long_key), (b"small after", "k")]
    for data, key in records:
        put_record(stream, data, key)
    flows = [
        add_consumer(nifi, group, consumer_properties(stream, unique("max-size-app"))),
        add_consumer(nifi, group, consumer_properties(stream, unique("max-size-tight"), **{
            "Max Batch Size": "64 KB", "Max Buffer Size": "1 MB", "Max Records Per Request": "2"})),
    ]
    for flow in flows:
        flow.start()
    for flow in flows:
        flow.wait_for(len(records))
        flow.stop()
        got = flow.flow_files()
        assert [(ff["content"], ff["attributes"]["aws.kinesis.partition.key"]) for ff in got] == records
        assert flow.counts() == (len(records), 0)


INVALID_UTF8 = b"\xff\xfe\xfd not UTF-8 \xc3\x28 \x80"
JSON_WITH_INVALID_UTF8 = b'{"name": "caf\xe9"}'  # Latin-1 e-acute inside a JSON string


def test_invalid_utf8_is_kept_byte_identical_or_routed_to_parse_failure(nifi, group):
    stream = unique("utf8")
    create_stream(stream, 1)
    records = [b'{"ok": 1}', INVALID_UTF8, JSON_WITH_INVALID_UTF8, b"[1, 2]", b'{"ok": 2}']
    sequences = [put_record(stream, r, f"k{i}")[0] for i, r in enumerate(records)]
    value = add_consumer(nifi, group, consumer_properties(stream, unique("utf8-value"), **{"Output Strategy": "USE_VALUE"}))
    wrapper = add_consumer(nifi, group, consumer_properties(stream, unique("utf8-wrap"), **{"Output Strategy": "USE_WRAPPER"}))
    inject = add_consumer(nifi, group, consumer_properties(stream, unique("utf8-inject"), **{
        "Output Strategy": "INJECT_METADATA", "Processing Strategy": "LINE_DELIMITED"}))
    for flow in (value, wrapper, inject):
        flow.start()
    value.wait_for(5)
    wrapper.wait_for(3, 2)
    inject.wait_for(1, 3)
    time.sleep(2)
    for flow in (value, wrapper, inject):
        flow.stop()

    assert value.counts() == (5, 0)
    assert [ff["content"] for ff in value.flow_files()] == records

    def check_failures(flow, expected_records, reason):
        failures = flow.flow_files("parse.failure")
        assert [ff["content"] for ff in failures] == expected_records  # whole and byte-identical
        for ff in failures:
            a = ff["attributes"]
            assert reason(ff["content"]) in a["record.error.message"], a["record.error.message"]
            assert a["aws.kinesis.first.sequence.number"] == sequences[records.index(ff["content"])]
            assert a["record.count"] == "1" and "mime.type" not in a

    assert wrapper.counts() == (3, 2)
    check_failures(wrapper, [INVALID_UTF8, JSON_WITH_INVALID_UTF8], lambda _: "the record is not valid JSON")
    wrapped = [json.loads(ff["content"]) for ff in wrapper.flow_files()]
    assert [w["value"] for w in wrapped] == [{"ok": 1}, [1, 2], {"ok": 2}]
    assert [w["kinesisMetadata"]["sequenceNumber"] for w in wrapped] == [sequences[0], sequences[3], sequences[4]]
    assert all(ff["attributes"]["mime.type"] == "application/json" for ff in wrapper.flow_files())

    assert inject.counts() == (1, 3)
    check_failures(inject, [INVALID_UTF8, JSON_WITH_INVALID_UTF8, b"[1, 2]"],
                   lambda c: "not an object" if c.startswith(b"[") else "the record is not valid JSON")
    (lines,) = [ff["content"].split(b"\n") for ff in inject.flow_files()]
    injected = [json.loads(line) for line in lines]
    assert [(r["ok"], r["kinesisMetadata"]["sequenceNumber"]) for r in injected] == [(1, sequences[0]), (2, sequences[4])]


class _AwsRejects(http.server.BaseHTTPRequestHandler):
    """Answers every call as AWS answers credentials it does not accept."""
    error = ("UnrecognizedClientException", "The security token included in the request is invalid.")
    calls = 0

    def do_POST(self):  # noqa: N802 (http.server's naming)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).calls += 1
        json_version = (self.headers.get("Content-Type") or "").rsplit("-", 1)[-1]
        code, message = self.error
        body = json.dumps({"__type": code, "message": message}).encode()
        self.send_response(400)
        self.send_header("Content-Type", f"application/x-amz-json-{json_version}")
        self.send_header("x-amzn-RequestId", "00000000-0000-0000-0000-000000000000")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def aws_rejects():
    """A 127.0.0.1 HTTP server answering like AWS for unknown credentials; yields (url, handler class)."""
    handler = type("Handler", (_AwsRejects,), {"calls": 0})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()
    server.server_close()


def assert_one_readable_line(message: str) -> None:
    """The AWS SDK's error text with its Debug form appended (the raw HTTP response, headers and
    body) once made such bulletins kilobytes long; they say what failed and why, nothing more."""
    for dump in ("SdkBody", "headers:", "ServiceError {", "DispatchFailure("):
        assert dump not in message, f"raw SDK error dump in the bulletin: {message}"


def wait_for_message(flow, *parts, timeout=60.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for m in flow.bulletin_messages():
            if all(p in m for p in parts):
                print("bulletin:", m)
                assert_one_readable_line(m)
                return m
        time.sleep(0.5)
    raise AssertionError(f"no bulletin with {parts}; have {flow.bulletin_messages()}")


def assert_idle_and_stoppable(nifi, flow):
    time.sleep(3)
    assert flow.counts() == (0, 0)
    assert nifi.client.processor_state(flow.processor_id) == "RUNNING"
    assert nifi.is_running()
    flow.stop()
    assert nifi.client.processor_state(flow.processor_id) == "STOPPED"


def test_an_unreachable_endpoint_gives_a_clear_bulletin_and_no_flow_files(nifi, group):
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there: connections are refused
    app = unique("unreachable-app")
    flow = add_consumer(nifi, group, consumer_properties("orders", app, **{
        "Endpoint Override URL": closed, "DynamoDB Endpoint Override URL": ""}))
    flow.start()
    message = wait_for_message(flow, f"DynamoDB call on table '{app}' failed")
    assert "onnect" in message, message  # says that it could not connect
    assert_idle_and_stoppable(nifi, flow)


def test_credentials_dynamodb_rejects_give_a_clear_bulletin_and_no_flow_files(nifi, group, aws_rejects):
    url, handler = aws_rejects
    app = unique("rejected-app")
    flow = add_consumer(nifi, group, consumer_properties("orders", app, **{
        "Endpoint Override URL": url, "DynamoDB Endpoint Override URL": "",
        "AWS Access Key ID": "AKIAWRONGWRONGWRONG1", "AWS Secret Access Key": "wrong-secret-do-not-print"}))
    t0 = time.monotonic()
    flow.start()
    message = wait_for_message(flow, f"DynamoDB access is denied for table '{app}'", "security token included in the request is invalid")
    assert_idle_and_stoppable(nifi, flow)
    rate = handler.calls / (time.monotonic() - t0)
    # NiFi retries a failed start after its administrative yield (1 s in these tests): no hot loop.
    print(f"{handler.calls} calls in {time.monotonic() - t0:.0f} s")
    assert rate < 5, f"{handler.calls} calls in {time.monotonic() - t0:.0f} s"
    assert "wrong-secret-do-not-print" not in message


def test_kinesis_access_denied_with_working_dynamodb_names_the_stream(nifi, group, aws_rejects):
    url, handler = aws_rejects
    handler.error = ("AccessDeniedException", "User: arn:aws:iam::000000000000:user/x is not authorized to perform: "
                                              "kinesis:DescribeStream")
    flow = add_consumer(nifi, group, consumer_properties("orders", unique("denied-app"), **{"Endpoint Override URL": url}))
    flow.start()
    # The bulletin quotes AWS's message, which names the missing action.
    wait_for_message(flow, "access to stream 'orders' is denied; check the credentials and the IAM policy",
                     "not authorized to perform: kinesis:DescribeStream")
    assert_idle_and_stoppable(nifi, flow)


@pytest.mark.parametrize("missing", ["dynamodb:UpdateItem", "kinesis:ListShards"])
def test_snowflakes_policy_without_one_action_gives_a_bulletin_naming_it(nifi, group, missing):
    """Snowflake's IAM policy (tests/iam) with one action taken out: the start fails, the bulletin
    names the action AWS refused, nothing is delivered, and NiFi retries calmly."""
    stream, app = unique("denied"), unique("denied-app")
    create_stream(stream, 1)
    put_record(stream, b"{}", "k")
    proxy = iam_proxy.start(stream, app, without=(missing,))
    flow = add_consumer(nifi, group, consumer_properties(stream, app, **{
        "Endpoint Override URL": proxy.url, "DynamoDB Endpoint Override URL": proxy.url}))
    flow.start()
    wait_for_message(flow, "denied", f"not authorized to perform: {missing}")
    assert_idle_and_stoppable(nifi, flow)
    refused = iam_proxy.stats(proxy.url)["denied"]
    assert list(refused) == [missing], f"only the missing action is refused: {refused}"
    flow.stop()


def test_nifi_log_has_no_crash_or_secret(nifi):
    # NiFi's start-up and everything logged since this module began, nothing of another module.
    log = nifi.log_text()
    for bad in ("UnsatisfiedLinkError", "FatalNativeException", "internal error in the native engine", "panicked",
                "wrong-secret-do-not-print", "SIGSEGV"):
        assert bad not in log, bad
    errors = [e["text"] for e in nifi.log_errors(levels=("ERROR",))]
    assert not any("OutOfMemoryError" in e for e in errors)
