"""A real STS and recording proxies for the credentials tests (issue 19), from Python.

    with StsEmulator() as sts:            # moto's servers (tests/sts/sts_emulator.py): sts.facts
        with Recorder(kinesis_endpoint()) as rec:   # tests/sts/recording_proxy.py in front of a service
            ... rec.url ... rec.requests() ... rec.issued()

The Rust engine tests (rust-core/tests/aws_credentials.rs) use the same two programs.
Standard library only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STS_DIR = os.path.join(REPO, "tests", "sts")


class StsEmulator:
    """moto's two servers; `facts` holds their endpoints ("sts", "sts_web"), the keys of the IAM users
    ("base" may assume the role, "denied_base" may not), "role_arn", "external_id" and "web_role_arn"."""

    def __enter__(self) -> "StsEmulator":
        python = subprocess.run(["bash", os.path.join(STS_DIR, "venv.sh")], check=True, capture_output=True,
                                text=True).stdout.strip()
        self.process = subprocess.Popen([python, os.path.join(STS_DIR, "sts_emulator.py")], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        try:
            self.facts = json.loads(line)
        except ValueError:
            self.process.kill()
            raise AssertionError(f"the STS emulator did not start: {line!r}")
        return self

    def __exit__(self, *exc) -> None:
        self.process.stdin.close()  # it stops both servers when its stdin closes
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class Recorder:
    """A recording proxy in front of `upstream` (see tests/sts/recording_proxy.py)."""

    def __init__(self, upstream: str):
        self.upstream = upstream

    def __enter__(self) -> "Recorder":
        fd, self.log = tempfile.mkstemp(prefix="kinesnow-recorder-", suffix=".jsonl")
        os.close(fd)
        self.process = subprocess.Popen([sys.executable, os.path.join(STS_DIR, "recording_proxy.py"),
                                         "--upstream", self.upstream, "--log", self.log],
                                        stdout=subprocess.PIPE, text=True)
        line = self.process.stdout.readline().strip()
        assert line.startswith("listening on "), f"recording proxy: {line!r}"
        self.url = line[len("listening on "):]
        return self

    def __exit__(self, *exc) -> None:
        self.process.kill()
        self.process.wait()
        os.unlink(self.log)

    def entries(self) -> list[dict]:
        with open(self.log, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    def requests(self) -> list[dict]:
        return [e for e in self.entries() if "action" in e]

    def issued(self) -> dict:
        """Access key -> {"expires", "token"} of every set of credentials STS issued through this proxy."""
        return {e["issued"]: {"expires": e["expires"], "token": e["token"]} for e in self.entries() if "issued" in e}


def signed_by_issued_keys(recorder: Recorder, issued: dict) -> set:
    """Asserts every request through `recorder` carried a key STS issued, with its session token, before it
    expired; returns the keys seen."""
    requests = recorder.requests()
    assert requests, f"no request went through {recorder.url}"
    seen = set()
    for r in requests:
        key = r["key"]
        assert key in issued, f"a request signed by {key}, which STS did not issue: {r}"
        assert r["token"] == issued[key]["token"], f"the session token of {key}: {r}"
        assert r["t"] < issued[key]["expires"], f"{key} used after it expired: {r}"
        seen.add(key)
    return seen
