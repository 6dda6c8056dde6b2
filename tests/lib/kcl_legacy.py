"""A REAL legacy KCL consumer (Amazon Kinesis Client Library for Java, tests/kcl-legacy) run against
kinesis-local and dynalite, so tests get lease tables exactly as KCL writes them (the input of the one-time
migration from KCL checkpoint tables). Standard library only.

    from kcl_legacy import run_legacy_consumer, lease_table_items
    lines = run_legacy_consumer("s1", "s1-app", max_records=15)          # KCL reads, checkpoints, halts
    items = lease_table_items("s1-app")                                   # raw DynamoDB items of the <app> table

Each printed record line is {"shard", "seq", "sub", "pk", "data"}; KCL's checkpoint covers exactly the printed
records (checkpointed one by one, record level). Other lines: {"shardEnd": shard} and, unless the process
halted, a last {"exit": reason, "records": n}.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from typing import Optional

from services import aws_json_call, dynamodb_endpoint, kinesis_endpoint

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(REPO, "tests", "kcl-legacy", "build.sh")

_built: dict[str, list[str]] = {}


def build(flavor: str = "kcl2") -> list[str]:
    """Builds tests/kcl-legacy if needed (build.sh; fast when up to date) and returns the java command
    prefix (append the program's flags). flavor "kcl3" builds KCL 3.x (which does not run on dynalite)."""
    if flavor not in _built:
        proc = subprocess.run([BUILD, flavor], capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            raise RuntimeError(f"{BUILD} {flavor} failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
        _built[flavor] = shlex.split(proc.stdout.strip().splitlines()[-1])
    return list(_built[flavor])


class LegacyConsumerError(RuntimeError):
    def __init__(self, message: str, lines: list[dict], stderr: str):
        self.lines, self.stderr = lines, stderr
        super().__init__(f"{message}\n--- stdout lines: {len(lines)}\n--- stderr tail:\n{stderr[-6000:]}")


def run_legacy_consumer(stream: str, application: str, max_records: int = 0, exit: str = "halt",
                        initial_position: str = "TRIM_HORIZON", timeout: float = 60.0,
                        idle_exit_seconds: Optional[float] = None, lease_cleanup_millis: Optional[int] = None,
                        failover_millis: Optional[int] = None, flavor: str = "kcl2",
                        extra_args: Optional[list[str]] = None) -> list[dict]:
    """Runs the KCL consumer to completion and returns its parsed stdout lines (records, shardEnd, exit).

    It stops after max_records user records (0 = no limit) with `exit` = "halt" (Runtime.halt right after the
    last checkpoint: its leases stay owned by a dead worker) or "graceful" (KCL's graceful shutdown), or after
    idle_exit_seconds without progress. Raises LegacyConsumerError (with the stderr tail) on a non-zero exit or
    a timeout."""
    cmd = build(flavor) + [
        "--stream", stream, "--application", application,
        "--kinesis-endpoint", kinesis_endpoint(), "--dynamodb-endpoint", dynamodb_endpoint(),
        "--initial-position", initial_position, "--max-records", str(max_records), "--exit", exit,
    ]
    if idle_exit_seconds is not None:
        cmd += ["--idle-exit-seconds", str(int(idle_exit_seconds))]
    if lease_cleanup_millis is not None:
        cmd += ["--lease-cleanup-millis", str(lease_cleanup_millis)]
    if failover_millis is not None:
        cmd += ["--failover-millis", str(failover_millis)]
    cmd += extra_args or []
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()  # our own child, by its handle
        out, err = proc.communicate()
        raise LegacyConsumerError(f"the KCL consumer did not finish within {timeout} s", _parse(out), err) from None
    lines = _parse(out)
    if proc.returncode != 0:
        raise LegacyConsumerError(f"the KCL consumer exited with {proc.returncode}", lines, err)
    return lines


def records(lines: list[dict]) -> list[dict]:
    """Only the record lines of run_legacy_consumer's result."""
    return [line for line in lines if "seq" in line]


def _parse(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def lease_table_items(application: str) -> list[dict]:
    """All items of KCL's lease table (named after the application), consistent Scan, raw DynamoDB JSON
    (e.g. {"leaseKey": {"S": "shardId-000000000000"}, "checkpoint": {"S": "4968..."}, ...}), by leaseKey."""
    items: list[dict] = []
    start = None
    while True:
        payload = {"TableName": application, "ConsistentRead": True}
        if start:
            payload["ExclusiveStartKey"] = start
        out = aws_json_call(dynamodb_endpoint(), "DynamoDB_20120810.Scan", payload, "1.0")
        items += out.get("Items", [])
        start = out.get("LastEvaluatedKey")
        if not start:
            return sorted(items, key=lambda i: i["leaseKey"]["S"])


def describe_lease_table(application: str) -> dict:
    """DescribeTable of the lease table (key schema, GSIs, billing mode)."""
    return aws_json_call(dynamodb_endpoint(), "DynamoDB_20120810.DescribeTable", {"TableName": application}, "1.0")["Table"]
