#!/usr/bin/env python3
"""A reverse proxy that records who signed each AWS request, for the credentials tests.

Forwards every request to --upstream as it is and appends one JSON line per request to --log:

    {"t": <epoch seconds>, "action": "Kinesis_20131202.GetRecords" | "AssumeRole" | ...,
     "key": <the access key ID of the SigV4 Authorization header, or null>,
     "token": <the first 16 hex digits of the SHA-256 of X-Amz-Security-Token, or null>,
     "status": <the upstream's HTTP status>,
     "names": <which of StreamName and StreamARN a JSON request's body carries, e.g. ["StreamARN"]>}

and, for an STS answer that issues credentials (AssumeRole, AssumeRoleWithWebIdentity):

    {"t": ..., "issued": <AccessKeyId>, "expires": <epoch seconds of Expiration>,
     "token": <SHA-256 prefix of its SessionToken>}

Secrets never reach the log: the secret key is not in a request, and session tokens are hashed.
The first line on stdout is `listening on http://127.0.0.1:<port>`. HTTP/1.1, plain http, 127.0.0.1
only; bodies are relayed whole (no event streams). Python 3 standard library only.

    recording_proxy.py --upstream http://127.0.0.1:4567 --log /tmp/kinesis.jsonl [--port 0]
"""

import argparse
import hashlib
import http.client
import json
import re
import sys
import threading
import time
import urllib.parse
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
              "trailers", "transfer-encoding", "upgrade", "content-length"}


def token_hash(token):
    return hashlib.sha256(token.encode()).hexdigest()[:16] if token else None


def access_key(authorization):
    m = re.search(r"Credential=([^/,\s]+)/", authorization or "")
    return m.group(1) if m else None


def action(headers, body: bytes):
    target = headers.get("X-Amz-Target")
    if target:
        return target
    form = urllib.parse.parse_qs(body.decode("utf-8", "replace"))
    return (form.get("Action") or [None])[0]


def stream_names(body: bytes):
    """Which of StreamName and StreamARN a JSON request body carries (Kinesis' calls name the stream so)."""
    try:
        payload = json.loads(body or b"{}")
    except ValueError:
        return []
    return sorted(k for k in ("StreamName", "StreamARN") if isinstance(payload, dict) and k in payload)


def issued(body: bytes):
    """(AccessKeyId, expiry epoch, SessionToken) of an STS answer that issues credentials, else None."""
    text = body.decode("utf-8", "replace")
    key = re.search(r"<AccessKeyId>([^<]+)</AccessKeyId>", text)
    expires = re.search(r"<Expiration>([^<]+)</Expiration>", text)
    token = re.search(r"<SessionToken>([^<]+)</SessionToken>", text)
    if not (key and expires):
        return None
    when = datetime.fromisoformat(expires.group(1).replace("Z", "+00:00")).timestamp()
    return key.group(1), when, token.group(1) if token else None


def make_handler(upstream, log, lock):
    target = urllib.parse.urlsplit(upstream)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def record(self, entry):
            with lock:
                log.write(json.dumps(entry) + "\n")
                log.flush()

        def do_POST(self):
            self.relay("POST")

        def do_GET(self):
            self.relay("GET")

        def relay(self, method):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            # Host stays as the client sent it: SigV4 signs it.
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            conn = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
            try:
                conn.request(method, self.path, body=body, headers=headers)
                answer = conn.getresponse()
                payload = answer.read()
                status, reply_headers = answer.status, answer.getheaders()
            finally:
                conn.close()
            now = time.time()
            self.record({"t": now, "action": action(self.headers, body), "key": access_key(self.headers.get("Authorization")),
                         "token": token_hash(self.headers.get("X-Amz-Security-Token")), "status": status,
                         "names": stream_names(body)})
            credentials = issued(payload) if status == 200 else None
            if credentials:
                key, expires, token = credentials
                self.record({"t": now, "issued": key, "expires": expires, "token": token_hash(token)})
            self.send_response(status)
            for k, v in reply_headers:
                if k.lower() not in HOP_BY_HOP and k.lower() != "host":
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--upstream", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--port", type=int, default=0)
    args = p.parse_args(argv)
    log = open(args.log, "a", encoding="utf-8")
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(args.upstream, log, threading.Lock()))
    server.daemon_threads = True
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
