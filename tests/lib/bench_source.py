"""The benchmark Kinesis source (bench/kinesis-source) for tests: build it, start it on a free port, read
what it expects consumers to see (--dump), read its counters (GET /stats); and a private dynalite on a free
port for KCL's leases (not the shared one on 4571: the project's suite may be using that).

    from bench_source import SourceProcess, dump, private_dynalite
    with private_dynalite() as ddb, SourceProcess(["--shards", "4"]) as src:
        ... src.endpoint, src.stats() ...

Standard library only.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from contextlib import contextmanager
from typing import Iterator, Optional

from services import AwsJsonError, aws_json_call

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(REPO, "bench", "kinesis-source", "build.sh")
SERVICES = os.path.join(REPO, "tests", "services", "local-services.sh")

_binary: Optional[str] = None


def binary() -> str:
    """$KINESIS_SOURCE_BIN, else builds the source (build.sh, cached) and returns the binary's path."""
    global _binary
    if _binary is None:
        env = os.environ.get("KINESIS_SOURCE_BIN")
        if env:
            _binary = env
        else:
            proc = subprocess.run([BUILD], capture_output=True, text=True, timeout=3600)
            if proc.returncode != 0:
                raise RuntimeError(f"{BUILD} failed (exit {proc.returncode}):\n{proc.stderr[-5000:]}")
            _binary = proc.stdout.strip().splitlines()[-1]
    return _binary


def dump(args: list[str]) -> list[dict]:
    """Every user record the source started with `args` serves, as consumers should see them (--dump)."""
    proc = subprocess.run([binary(), *args, "--dump"], capture_output=True, text=True, timeout=300, check=True)
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


class SourceProcess:
    """The source on a free port of 127.0.0.1, stopped (by its own PID) on exit."""

    def __init__(self, args: list[str]):
        self.args = args
        self.proc: Optional[subprocess.Popen] = None
        self.port = 0

    def __enter__(self) -> "SourceProcess":
        self.proc = subprocess.Popen([binary(), "--port", "0", *self.args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first = self.proc.stdout.readline().strip()
        if not first.startswith("listening on 127.0.0.1:"):
            self.proc.kill()
            raise RuntimeError(f"kinesis-source did not start: {first!r}\n{self.proc.stderr.read()[-3000:]}")
        self.port = int(first.rsplit(":", 1)[1])
        return self

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stats(self) -> dict:
        with urllib.request.urlopen(self.endpoint + "/stats", timeout=10) as resp:
            return json.load(resp)

    def __exit__(self, *exc) -> None:
        self.stderr = ""
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                _, self.stderr = self.proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.communicate()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def private_dynalite(timeout: float = 60.0) -> Iterator[str]:
    """dynalite (the pinned one local-services.sh installs) on a free port; yields its endpoint."""
    node_dir = subprocess.run([SERVICES, "install"], capture_output=True, text=True, check=True, timeout=600).stdout.strip().splitlines()[-1]
    port = free_port()
    proc = subprocess.Popen(
        ["node", os.path.join(node_dir, "node_modules", "dynalite", "cli.js"), "--host", "127.0.0.1", "--port", str(port),
         "--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                aws_json_call(endpoint, "DynamoDB_20120810.ListTables", {}, "1.0", timeout=2)
                break
            except AwsJsonError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"dynalite did not start on {endpoint}: {proc.stderr.read()[-2000:]}")
                time.sleep(0.1)
        yield endpoint
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
