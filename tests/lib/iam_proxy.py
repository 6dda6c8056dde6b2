"""Snowflake's IAM policy between ConsumeKinesis and the emulators, for the end-to-end tests.

Every ConsumeKinesis of the end-to-end consumer suites reaches kinesis-local and dynalite through
tests/iam/policy_proxy.py, which enforces the policy of Snowflake's set-up docs (stored verbatim in
tests/iam/snowflake-kinesis-policy.json) for one stream and one Application Name. After each test
the e2e conftest asserts that no proxy denied anything while the test ran, so a call outside
Snowflake's policy fails the test that made it.

    url = proxy_for(stream, application)      # started once per (stream, application), then reused
    stats(url)                                # {"allowed": {action: n}, "denied": {...}, "denials": [...]}
    denials(), new_denials(before, after), stop_all()

Standard library only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from dataclasses import dataclass

from services import KINESIS_ACCOUNT_ID, REGION, dynamodb_endpoint, kinesis_endpoint

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROXY = os.path.join(REPO, "tests", "iam", "policy_proxy.py")


@dataclass
class RunningProxy:
    stream: str
    application: str
    without: tuple
    url: str
    process: subprocess.Popen


_started: list[RunningProxy] = []


def start(stream: str, application: str, without: tuple = ()) -> RunningProxy:
    """A new proxy for this stream and Application Name, with `without`'s actions taken out of the policy."""
    command = [sys.executable, PROXY, "--kinesis", kinesis_endpoint(), "--dynamodb", dynamodb_endpoint(),
               "--region", REGION, "--account-id", KINESIS_ACCOUNT_ID,
               "--stream-name", stream, "--application-name", application]
    for action in without:
        command += ["--without", action]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    line = process.stdout.readline().strip()
    if not line.startswith("listening on "):
        process.kill()
        raise RuntimeError(f"policy_proxy.py did not start: {line!r}")
    proxy = RunningProxy(stream, application, tuple(without), line.removeprefix("listening on "), process)
    _started.append(proxy)
    return proxy


def proxy_for(stream: str, application: str) -> str:
    """The URL of the running full-policy proxy for this pair, started if there is none."""
    for p in _started:
        if (p.stream, p.application, p.without) == (stream, application, ()) and p.process.poll() is None:
            return p.url
    return start(stream, application).url


def stats(url: str) -> dict:
    with urllib.request.urlopen(url + "/__stats", timeout=10) as resp:
        return json.loads(resp.read())


def denials() -> dict:
    """url -> the denials so far of each full-policy proxy (each {"stream", "application", "action",
    "resource"}); a proxy that exited is one denial, "(the proxy exited)"."""
    out = {}
    for p in _started:
        if p.without:
            continue
        if p.process.poll() is not None:
            out[p.url] = [{"stream": p.stream, "application": p.application, "action": "(the proxy exited)", "resource": ""}]
            continue
        out[p.url] = [{"stream": p.stream, "application": p.application, **d} for d in stats(p.url)["denials"]]
    return out


def new_denials(before: dict, after: dict) -> list:
    return [d for url, found in after.items() for d in found[len(before.get(url, [])):]]


def stop_all() -> None:
    for p in _started:
        if p.process.poll() is None:
            p.process.terminate()
            try:
                p.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.process.kill()
                p.process.wait()
        p.process.stdout.close()
    _started.clear()
