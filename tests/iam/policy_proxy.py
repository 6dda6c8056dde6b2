#!/usr/bin/env python3
"""A policy-enforcing proxy between the product and the local emulators (kinesis-local, dynalite).

It reads an IAM policy JSON (by default Snowflake's, stored verbatim next to this file), fills its
${REGION}, ${ACCOUNT_ID}, ${STREAM_NAME} and ${APPLICATION_NAME} placeholders from the command line,
and for every request maps the `X-Amz-Target` header to the IAM action (`Kinesis_20131202.GetRecords`
-> `kinesis:GetRecords`, `DynamoDB_20120810.UpdateItem` -> `dynamodb:UpdateItem`) and the request body
to the resource ARN:

- Kinesis: `ConsumerARN` if the request has one; `StreamARN` + `ConsumerName` for the consumer
  actions (DescribeStreamConsumer, DeregisterStreamConsumer) -> `<StreamARN>/consumer/<ConsumerName>`;
  else `StreamARN`, else `StreamName` -> `arn:aws:kinesis:<region>:<account>:stream/<name>`. A request
  naming no stream (GetRecords carries only a ShardIterator, a ListShards page only a NextToken) is
  checked against the stream of the command line: the proxy serves one stream.
- DynamoDB: `TableName` -> `arn:aws:dynamodb:<region>:<account>:table/<name>`; BatchWriteItem and
  BatchGetItem: every table of `RequestItems`; ListTables: `*`.

Allowed requests are forwarded (bodies of long responses, such as a SubscribeToShard event stream
over HTTP/1.1, are relayed as they arrive); anything else is answered with HTTP 400 and the body AWS
sends, `{"__type": "...#AccessDeniedException", "message": "User: <principal> is not authorized to
perform: <action> on resource: <arn> because no identity-based policy allows the <action> action"}`.
Evaluation: an explicit Deny wins, then any Allow; `Action` and `Resource` (string or list) match
with IAM's wildcards `*` and `?`. Conditions, NotAction and NotResource are not supported (a
statement with them is refused at start).

HTTP/1.1 only, plain http on 127.0.0.1. Kinesis-local's TLS port (HTTP/2) is not proxied.

GET /__stats answers {"allowed": {action: n}, "denied": {action: n}, "denials": [{"action", "resource"}]}.
The first line on stdout is `listening on http://127.0.0.1:<port>`.

Usage: policy_proxy.py --kinesis http://127.0.0.1:4567 --dynamodb http://127.0.0.1:4568
         --region us-east-1 --account-id 000000000000 --stream-name S --application-name A
         [--policy FILE] [--without dynamodb:UpdateItem ...] [--port 0] [--principal ARN]
Python 3 standard library only.
"""

import argparse
import http.client
import json
import re
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_POLICY = HERE / "snowflake-kinesis-policy.json"
SERVICES = {"Kinesis_20131202": "kinesis", "DynamoDB_20120810": "dynamodb"}
HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
              "trailers", "transfer-encoding", "upgrade", "host", "content-length"}
CONSUMER_ACTIONS = {"DescribeStreamConsumer", "DeregisterStreamConsumer"}


def wildcard(pattern: str) -> "re.Pattern[str]":
    """IAM's wildcards: `*` any run of characters (including `/` and `:`), `?` one character."""
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern) + r"\Z",
                      re.IGNORECASE | re.DOTALL)


def as_list(value):
    return value if isinstance(value, list) else [value]


class Policy:
    """The statements of an IAM policy with the placeholders filled in."""

    def __init__(self, document: dict, values: dict, without=()):
        self.statements = []
        for st in as_list(document["Statement"]):
            unsupported = {"Condition", "NotAction", "NotResource", "NotPrincipal"} & set(st)
            if unsupported:
                raise SystemExit(f"policy statement {st.get('Sid')} uses {sorted(unsupported)}: not supported")
            actions = [a for a in as_list(st["Action"]) if a not in without]
            resources = [self.fill(r, values) for r in as_list(st["Resource"])]
            self.statements.append((st["Effect"], [wildcard(a) for a in actions], [wildcard(r) for r in resources]))

    @staticmethod
    def fill(text: str, values: dict) -> str:
        def one(m):
            if m.group(1) not in values:
                raise SystemExit(f"policy placeholder ${{{m.group(1)}}} has no value")
            return values[m.group(1)]
        return re.sub(r"\$\{([A-Z_]+)\}", one, text)

    def allows(self, action: str, resource: str) -> bool:
        matching = [effect for effect, actions, resources in self.statements
                    if any(a.match(action) for a in actions) and any(r.match(resource) for r in resources)]
        return "Deny" not in matching and "Allow" in matching


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.allowed, self.denied, self.denials = {}, {}, []

    def count(self, action, resource, allowed):
        with self.lock:
            book = self.allowed if allowed else self.denied
            book[action] = book.get(action, 0) + 1
            if not allowed and len(self.denials) < 1000:
                self.denials.append({"action": action, "resource": resource})

    def snapshot(self):
        with self.lock:
            return {"allowed": dict(self.allowed), "denied": dict(self.denied), "denials": list(self.denials)}


def resources(service: str, operation: str, body: dict, cfg) -> list:
    """The ARNs a request acts on, as IAM authorizes it."""
    region, account = cfg.region, cfg.account_id
    if service == "kinesis":
        if body.get("ConsumerARN"):
            return [body["ConsumerARN"]]
        stream_arn = body.get("StreamARN")
        if not stream_arn:
            name = body.get("StreamName") or cfg.stream_name
            stream_arn = f"arn:aws:kinesis:{region}:{account}:stream/{name}"
        if operation in CONSUMER_ACTIONS and body.get("ConsumerName"):
            return [f"{stream_arn}/consumer/{body['ConsumerName']}"]
        return [stream_arn]
    tables = list((body.get("RequestItems") or {}).keys()) or [body.get("TableName")]
    if operation == "ListTables" or tables == [None]:
        return ["*"]
    return [f"arn:aws:dynamodb:{region}:{account}:table/{t}" for t in tables]


def denial(service: str, action: str, resource: str, principal: str) -> bytes:
    kind = "com.amazon.coral.service#AccessDeniedException" if service == "dynamodb" else "AccessDeniedException"
    message = (f"User: {principal} is not authorized to perform: {action} on resource: {resource} "
               f"because no identity-based policy allows the {action} action")
    return json.dumps({"__type": kind, "message": message}).encode()


def make_handler(cfg, policy: Policy, stats: Stats):
    upstreams = {"kinesis": urllib.parse.urlsplit(cfg.kinesis), "dynamodb": urllib.parse.urlsplit(cfg.dynamodb)}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # TCP_NODELAY: an answer goes out as two writes (headers, then body); with Nagle's algorithm the
        # body would wait for the ACK of the headers, which the client's kernel delays by 40 ms on a
        # kept-alive connection: every call through the proxy took ~40 ms (test_policy_proxy.py).
        disable_nagle_algorithm = True

        def log_message(self, *args):
            if cfg.verbose:
                super().log_message(*args)

        def do_GET(self):
            if self.path.rstrip("/") == "/__stats":
                self.reply(200, json.dumps(stats.snapshot()).encode(), "application/json")
            else:
                self.reply(404, b"{}", "application/json")

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            target = self.headers.get("X-Amz-Target", "")
            prefix, _, operation = target.partition(".")
            service = SERVICES.get(prefix)
            if service is None:
                self.reply(400, json.dumps({"__type": "UnknownOperationException", "message": target}).encode(),
                           "application/x-amz-json-1.1")
                return
            try:
                request = json.loads(body or b"{}")
            except ValueError:
                request = {}
            action = f"{service}:{operation}"
            arns = resources(service, operation, request, cfg)
            refused = next((arn for arn in arns if not policy.allows(action, arn)), None)
            stats.count(action, refused or arns[0], refused is None)
            if refused is not None:
                kind = "application/x-amz-json-1.0" if service == "dynamodb" else "application/x-amz-json-1.1"
                self.reply(400, denial(service, action, refused, cfg.principal), kind)
                return
            self.forward(upstreams[service], body)

        def reply(self, status, payload, content_type):
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("x-amzn-RequestId", "policy-proxy")
            self.end_headers()
            self.wfile.write(payload)

        def forward(self, upstream, body):
            conn = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=600)
            try:
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
                headers["Host"] = upstream.netloc
                headers["Content-Length"] = str(len(body))
                conn.request("POST", self.path, body=body, headers=headers)
                response = conn.getresponse()
                self.send_response(response.status, response.reason)
                for k, v in response.getheaders():
                    if k.lower() not in HOP_BY_HOP:
                        self.send_header(k, v)
                length = response.getheader("Content-Length")
                if length is not None:
                    self.send_header("Content-Length", length)
                    self.end_headers()
                    self.wfile.write(response.read())
                    return
                # A body of unknown length (an event stream): relayed chunk by chunk as it arrives.
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                while True:
                    data = response.read1(64 * 1024)
                    if not data:
                        break
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client hung up: the upstream connection closes too
            finally:
                conn.close()

    return Handler


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--policy", default=str(DEFAULT_POLICY))
    p.add_argument("--kinesis", required=True)
    p.add_argument("--dynamodb", required=True)
    p.add_argument("--region", required=True)
    p.add_argument("--account-id", required=True)
    p.add_argument("--stream-name", required=True)
    p.add_argument("--application-name", required=True)
    p.add_argument("--without", action="append", default=[], help="an action to take out of the policy")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--principal")
    p.add_argument("--verbose", action="store_true")
    cfg = p.parse_args(argv)
    cfg.principal = cfg.principal or f"arn:aws:iam::{cfg.account_id}:user/kinesnow-test"
    values = {"REGION": cfg.region, "ACCOUNT_ID": cfg.account_id, "STREAM_NAME": cfg.stream_name,
              "APPLICATION_NAME": cfg.application_name}
    policy = Policy(json.loads(Path(cfg.policy).read_text()), values, set(cfg.without))
    server = ThreadingHTTPServer(("127.0.0.1", cfg.port), make_handler(cfg, policy, Stats()))
    server.daemon_threads = True
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
