"""Fixtures for the conformance suite: a TLS stand-in started from the built
binary, an RSA key pair registered with it, and the official SDK's properties."""

import json
import os
import re
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

HERE = Path(__file__).resolve().parent
ACCOUNT = "TESTACCT"
USER = "LOADER"


def standin_binary() -> Path:
    """The stand-in binary: $STANDIN_BIN, else the release build under $CARGO_TARGET_DIR."""
    if os.environ.get("STANDIN_BIN"):
        return Path(os.environ["STANDIN_BIN"])
    target = os.environ.get("CARGO_TARGET_DIR") or str(HERE.parents[2] / "target")
    return Path(target) / "release" / "snowflake-standin"


class Standin:
    """A running stand-in process (started by this fixture, stopped by its PID)."""

    def __init__(self, commit_lag_ms: int = 500):
        self.dir = Path(tempfile.mkdtemp(prefix="standin-conf-"))
        binary = standin_binary()
        if not binary.exists():
            raise RuntimeError(f"stand-in binary not built: {binary}")
        self.log = open(self.dir / "standin.log", "w")
        self.proc = subprocess.Popen(
            [str(binary), "--tls", "--port", "0", "--state-dir", str(self.dir), "--commit-lag-ms", str(commit_lag_ms)],
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )
        line = self.proc.stdout.readline()
        m = re.search(r"url=(\S+) port=(\d+) ca=(\S+)", line)
        if not m:
            self.stop()
            raise RuntimeError(f"stand-in did not start: {line!r}")
        self.url, self.port, self.ca = m.group(1), int(m.group(2)), m.group(3)
        self.ssl = ssl.create_default_context(cafile=self.ca)

    def admin(self, method: str, path: str, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, context=self.ssl, timeout=30) as r:
            return json.loads(r.read() or b"null")

    def sql(self, statement: str):
        return self.admin("POST", "/admin/sql", {"sql": statement})

    def query(self, sql: str):
        return self.admin("POST", "/admin/query", {"sql": sql})["rows"]

    def requests(self, path_contains: str = ""):
        return self.admin("GET", f"/admin/requests?path_contains={path_contains}")["requests"]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


@pytest.fixture(scope="session")
def standin():
    s = Standin()
    # The SDK's HTTP client trusts the stand-in's CA through SSL_CERT_FILE.
    os.environ["SSL_CERT_FILE"] = s.ca
    yield s
    s.stop()
    sys.stderr.write(f"\nstand-in log: {s.dir / 'standin.log'}\n")


@pytest.fixture(scope="session")
def key_pair(standin):
    """An RSA key pair made for this run, its public key registered for ACCOUNT.USER."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    public_pem = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    standin.admin("POST", "/admin/users", {"account": ACCOUNT, "user": USER, "public_key_pem": public_pem})
    return private_pem


@pytest.fixture(scope="session")
def sdk_properties(standin, key_pair):
    return {
        "url": standin.url,
        "account": ACCOUNT,
        "user": USER,
        "role": "LOADER_ROLE",
        "private_key": key_pair,
        "mgmt_http_timeout_seconds": "10",
        "data_http_timeout_seconds": "10",
        "mgmt_retry_total_backoff_seconds": "10",
        "data_retry_total_backoff_seconds": "10",
    }


def wait_until(predicate, timeout=30.0, interval=0.1):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError("condition not met in time")
