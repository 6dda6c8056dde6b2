"""The benchmark Kinesis source (bench/kinesis-source) read by the AWS SDK for Java v2, through the real KCL
2.7.2 consumer of tests/kcl-legacy (leases on a private dynalite): every user record of every shard, KPL
aggregates de-aggregated by KCL, compared byte-exact with what the source says it serves (--dump): shard,
sequence number, subsequence number, partition key and data. Over CBOR (the Java SDK's default for Kinesis)
and over AWS JSON 1.1, with KCL's polling retrieval (GetRecords, HTTP/1.1) and with its enhanced fan-out
(SubscribeToShard, HTTP/2 with prior knowledge); the source's counters prove which protocol and which
operation the SDK used (SubscribeToShard itself is always AWS JSON 1.1 from the Java SDK, see below).
"""

import json
import os
import subprocess
import time

import pytest

from bench_source import SourceProcess, dump, private_dynalite
from kcl_legacy import build as build_kcl, records

MAIN_CLASS = "io.kinesnow.tests.kcl.LegacyConsumer"


def stream_args(keys: str, seed: int) -> list[str]:
    """4 shards × 200 Kinesis records of 300 bytes, a fifth of them KPL aggregates of 5 user records."""
    return ["--stream", "bench-conformance", "--shards", "4", "--records-per-shard", "200", "--record-size", "300",
            "--aggregate-share", "0.2", "--records-per-aggregate", "5", "--keys", keys, "--seed", str(seed),
            "--created-at-ms", "1767225600000", "--arrival-interval-ms", "3", "--threads", "1"]


def kcl_command(cbor: bool) -> list[str]:
    """The KCL consumer's java command. Its argfile sets -Daws.cborEnabled=false (kinesis-local's CBOR is not
    what the SDK expects); a later -D of the same property wins, so CBOR runs add -Daws.cborEnabled=true."""
    prefix = build_kcl("kcl2")
    assert prefix[-1] == MAIN_CLASS, prefix
    return prefix[:-1] + [f"-Daws.cborEnabled={'true' if cbor else 'false'}", MAIN_CLASS]


def run_kcl(cbor: bool, retrieval: str, endpoint: str, dynamodb: str, stream: str, application: str,
            max_records: int, timeout: float = 300.0) -> list[dict]:
    """KCL's output lines. A run takes 10-20 s on an idle 2-core machine and up to about a minute beside six CPU
    hogs; the timeout leaves room for a CI machine running the end-to-end tests beside, and a run that still
    does not finish fails with what KCL printed, so the cause is in the test's report."""
    cmd = kcl_command(cbor) + [
        "--stream", stream, "--application", application, "--kinesis-endpoint", endpoint,
        "--dynamodb-endpoint", dynamodb, "--initial-position", "TRIM_HORIZON",
        "--max-records", str(max_records), "--exit", "halt", "--retrieval", retrieval]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        seen = sum(1 for line in out.splitlines() if '"seq"' in line)
        pytest.fail(f"KCL did not reach {max_records} records in {timeout:.0f} s ({seen} printed)\n"
                    f"--- stderr tail:\n{err[-6000:]}")
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert proc.returncode == 0, f"KCL exited {proc.returncode}\n--- stderr tail:\n{proc.stderr[-6000:]}"
    return lines


def by_shard(rows: list[dict]) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = {}
    for r in rows:
        out.setdefault(r["shard"], []).append((r["seq"], r["sub"], r["pk"], r["data"]))
    return out


@pytest.fixture(scope="module")
def dynalite():
    with private_dynalite() as endpoint:
        yield endpoint


@pytest.mark.parametrize("protocol, retrieval, keys", [
    ("cbor", "polling", "shard-pool:8"), ("cbor", "polling", "unique"), ("json", "polling", "shard-pool:8"),
    ("cbor", "fanout", "shard-pool:8"), ("json", "fanout", "unique")])
def test_kcl_reads_every_record_byte_exact(dynalite, protocol, retrieval, keys):
    cbor = protocol == "cbor"
    args = stream_args(keys, seed=31 if keys == "unique" else 30)
    expected = dump(args)
    assert len(expected) == 4 * (160 + 40 * 5)
    assert sum(1 for e in expected if e["aggregated"]) == 4 * 40 * 5

    with SourceProcess(args) as source:
        t0 = time.monotonic()
        lines = run_kcl(cbor, retrieval, source.endpoint, dynalite, "bench-conformance",
                        f"bench-{protocol}-{retrieval}-{keys.replace(':', '-')}-{os.getpid()}", len(expected))
        elapsed = time.monotonic() - t0
        stats = source.stats()

    seen = records(lines)
    print(f"\nKCL {retrieval} over {protocol} ({keys}): {len(seen)} user records in {elapsed:.1f} s; source stats {stats}")
    got, want = by_shard(seen), by_shard(expected)
    assert sorted(got) == sorted(want)
    for shard in want:
        keys_got = [(g[0], g[1]) for g in got[shard]]
        twice = len(keys_got) - len(set(keys_got))
        missing = len({(w[0], w[1]) for w in want[shard]} - set(keys_got))
        assert len(got[shard]) == len(want[shard]), \
            f"{shard}: {len(got[shard])} user records, expected {len(want[shard])} ({twice} twice, {missing} missing)"
        for i, (g, w) in enumerate(zip(got[shard], want[shard])):
            assert g == w, f"{shard} user record {i}: got {g[:3]} {g[3][:40]!r}, expected {w[:3]} {w[3][:40]!r}"

    requests = stats["requests"]
    spoken, other = ("cbor", "json") if cbor else ("json", "cbor")
    if retrieval == "polling":
        assert requests[spoken]["GetRecords"] > 0, stats
        assert requests[spoken]["SubscribeToShard"] == 0, stats
        assert all(n == 0 for n in requests[other].values()), stats
        assert stats["http"]["2"] == 0, stats
    else:
        # Found here: the Java SDK v2 sends SubscribeToShard in AWS JSON 1.1 even with CBOR on; its other
        # Kinesis calls (DescribeStreamSummary, RegisterStreamConsumer, ...) follow aws.cborEnabled.
        assert requests["json"]["SubscribeToShard"] > 0 and requests["cbor"]["SubscribeToShard"] == 0, stats
        assert requests[spoken]["RegisterStreamConsumer"] == 1, stats
        assert all(n == 0 for op, n in requests[other].items() if op != "SubscribeToShard"), stats
        assert requests["json"]["GetRecords"] == requests["cbor"]["GetRecords"] == 0, stats
        assert stats["http"]["2"] > 0 and stats["http"]["1.x"] == 0, stats  # KCL's fan-out client: HTTP/2 only
    assert stats["throttled"] == 0, stats
    if retrieval == "fanout":
        # KCL asks DescribeStreamConsumer before it registers its consumer: one "not found" is expected
        assert stats["errors"] in ({}, {"ResourceNotFoundException": 1}), stats
    else:
        assert stats["errors"] == {}, stats
