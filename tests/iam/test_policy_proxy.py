"""The policy proxy's decisions (no emulators): placeholders, actions, resources, wildcards, explicit
Deny, the AccessDeniedException body; and that the shipped policy template is Snowflake's policy.
Run: python3 -m pytest tests/iam -q
"""

import json
import sys
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import policy_proxy as proxy  # noqa: E402

CFG = SimpleNamespace(region="us-east-1", account_id="123456789012", stream_name="orders", application_name="app")
VALUES = {"REGION": "us-east-1", "ACCOUNT_ID": "123456789012", "STREAM_NAME": "orders", "APPLICATION_NAME": "app"}
STREAM = "arn:aws:kinesis:us-east-1:123456789012:stream/orders"
TABLE = "arn:aws:dynamodb:us-east-1:123456789012:table/app"


def snowflake(without=()):
    return proxy.Policy(json.loads(proxy.DEFAULT_POLICY.read_text()), VALUES, set(without))


def test_the_template_is_snowflakes_policy():
    template = HERE.parent.parent / "parameter-contexts" / "template" / "iam-policy.json"
    assert json.loads(template.read_text()) == json.loads(proxy.DEFAULT_POLICY.read_text())


def test_snowflakes_policy_grants_what_it_lists_and_nothing_else():
    p = snowflake()
    for action in ("DescribeStream", "ListShards", "GetShardIterator", "GetRecords", "RegisterStreamConsumer", "DescribeStreamConsumer"):
        assert p.allows(f"kinesis:{action}", STREAM), action
    consumer = STREAM + "/consumer/app:1700000000"
    for action in ("SubscribeToShard", "DeregisterStreamConsumer", "DescribeStreamConsumer"):
        assert p.allows(f"kinesis:{action}", consumer), action
    assert not p.allows("kinesis:SubscribeToShard", STREAM), "SubscribeToShard only on the consumer"
    assert not p.allows("kinesis:DeregisterStreamConsumer", STREAM)
    for action in ("DescribeStreamSummary", "PutRecord", "ListStreams"):
        assert not p.allows(f"kinesis:{action}", STREAM), action
    for action in ("CreateTable", "DeleteTable", "DescribeTable", "GetItem", "PutItem", "Query", "Scan", "UpdateItem"):
        assert p.allows(f"dynamodb:{action}", TABLE), action
        assert p.allows(f"dynamodb:{action}", TABLE + "_migration"), action
        assert not p.allows(f"dynamodb:{action}", TABLE + "-other"), action
    for action in ("DeleteItem", "BatchWriteItem", "ListTables"):
        assert not p.allows(f"dynamodb:{action}", TABLE), action
    assert not p.allows("kinesis:GetRecords", "arn:aws:kinesis:us-east-1:123456789012:stream/other")
    assert not snowflake(["dynamodb:UpdateItem"]).allows("dynamodb:UpdateItem", TABLE)


def test_wildcards_and_an_explicit_deny():
    doc = {"Statement": [
        {"Effect": "Allow", "Action": "dynamodb:*", "Resource": "arn:aws:dynamodb:*:*:table/a?c"},
        {"Effect": "Deny", "Action": ["dynamodb:DeleteTable"], "Resource": "*"},
    ]}
    p = proxy.Policy(doc, VALUES)
    assert p.allows("dynamodb:GetItem", "arn:aws:dynamodb:eu-west-1:1:table/abc")
    assert not p.allows("dynamodb:GetItem", "arn:aws:dynamodb:eu-west-1:1:table/abbc")
    assert not p.allows("dynamodb:DeleteTable", "arn:aws:dynamodb:eu-west-1:1:table/abc")


def test_resources_of_requests():
    r = proxy.resources
    assert r("kinesis", "ListShards", {"StreamName": "orders"}, CFG) == [STREAM]
    assert r("kinesis", "ListShards", {"NextToken": "t"}, CFG) == [STREAM], "the proxy's own stream"
    assert r("kinesis", "GetRecords", {"ShardIterator": "i"}, CFG) == [STREAM]
    assert r("kinesis", "RegisterStreamConsumer", {"StreamARN": STREAM, "ConsumerName": "app"}, CFG) == [STREAM]
    assert r("kinesis", "DescribeStreamConsumer", {"StreamARN": STREAM, "ConsumerName": "app"}, CFG) == [STREAM + "/consumer/app"]
    assert r("kinesis", "SubscribeToShard", {"ConsumerARN": STREAM + "/consumer/app:1"}, CFG) == [STREAM + "/consumer/app:1"]
    assert r("dynamodb", "UpdateItem", {"TableName": "app"}, CFG) == [TABLE]
    assert r("dynamodb", "BatchWriteItem", {"RequestItems": {"app": [], "b": []}}, CFG) == [TABLE, TABLE[:-3] + "b"]
    assert r("dynamodb", "ListTables", {}, CFG) == ["*"]


def test_denials_have_the_shape_aws_sends():
    body = json.loads(proxy.denial("dynamodb", "dynamodb:UpdateItem", TABLE, "arn:aws:iam::123456789012:user/u"))
    assert body["__type"] == "com.amazon.coral.service#AccessDeniedException"
    assert body["message"] == (f"User: arn:aws:iam::123456789012:user/u is not authorized to perform: dynamodb:UpdateItem on "
                               f"resource: {TABLE} because no identity-based policy allows the dynamodb:UpdateItem action")
    assert json.loads(proxy.denial("kinesis", "kinesis:GetRecords", STREAM, "u"))["__type"] == "AccessDeniedException"


def test_a_kept_alive_connection_gets_each_answer_at_once():
    """The engine's HTTP client keeps its connection to the proxy alive; on such a connection the
    client's kernel delays its ACKs (by 40 ms on Linux), so an answer the proxy sends as two small
    writes (headers, then body) with Nagle's algorithm on waits 40 ms for that ACK before its body
    leaves. That stall made every call through the proxy take ~40 ms (a 3,001-lease KCL migration
    took 202 s through the proxy against 6.9 s straight to dynalite; the e2e kill -9 migration test
    timed out). Sequential requests on one connection, as the engine sends them, must be answered in
    well under that."""
    import socket
    import statistics
    import time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from threading import Thread

    answer = b'{"Item": {}}'

    class Upstream(BaseHTTPRequestHandler):  # an emulator that answers in one write
        disable_nagle_algorithm = True

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self.wfile.write(b"HTTP/1.0 200 OK\r\nContent-Type: application/x-amz-json-1.0\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(answer), answer))

        def log_message(self, *args):
            pass

    servers = [ThreadingHTTPServer(("127.0.0.1", 0), Upstream)]
    upstream = f"http://127.0.0.1:{servers[0].server_address[1]}"
    cfg = SimpleNamespace(kinesis=upstream, dynamodb=upstream, verbose=False, principal="u", **vars(CFG))
    servers.append(ThreadingHTTPServer(("127.0.0.1", 0), proxy.make_handler(cfg, snowflake(), proxy.Stats())))
    for server in servers:
        server.daemon_threads = True
        Thread(target=server.serve_forever, daemon=True).start()
    body = json.dumps({"TableName": "app", "Key": {"streamName": {"S": "orders"}, "shardId": {"S": "s"}}}).encode()
    request = (b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Amz-Target: DynamoDB_20120810.GetItem\r\n"
               b"Content-Type: application/x-amz-json-1.0\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    try:
        client = socket.create_connection(servers[1].server_address)
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        seconds = []
        for _ in range(60):
            started = time.monotonic()
            client.sendall(request)
            received = b""
            while not (received.count(b"\r\n\r\n") and received.endswith(answer)):
                chunk = client.recv(65536)
                assert chunk, f"the proxy closed the connection after {received!r}"
                received += chunk
            assert received.startswith(b"HTTP/1.1 200"), received
            seconds.append(time.monotonic() - started)
        client.close()
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
    # Answered at once: 1-3 ms each (more on a loaded machine); with the stall: 40 ms or more.
    assert statistics.median(seconds) < 0.02, f"median {statistics.median(seconds) * 1000:.1f} ms per request"
