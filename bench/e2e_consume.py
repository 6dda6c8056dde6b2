"""End-to-end benchmark of ConsumeKinesis in a real NiFi (the test harness's NiFi, kinesis-local
and dynalite): pre-loads a stream with N records of 1 KiB over several shards, then lets
ConsumeKinesis drain it, once per run and Processing Strategy, each run with a new Application
Name (a new lease table, so it starts again from TRIM_HORIZON).

Per run it measures
- records/s: N / (time from starting the processor until its "Records Consumed" counter reaches N),
- NiFi CPU-seconds per million records: utime+stime of the NiFi JVM (/proc/<pid>/stat) over the run,
- peak used heap: NiFi's /system-diagnostics sampled every 0.25 s (after a GC before each run),
- the emulators' CPU-seconds over the run (kinesis-local is single-threaded: near 1 CPU-second per
  second means it is the bottleneck).
Before the runs it measures the emulator's own ceiling: a plain GetRecords drain of the same
stream by a Python client (one thread per shard, same Limit, no pacing).

Success FlowFiles are auto-terminated, so NiFi drops them at commit: what is measured is reading,
the JNI hand-off, FlowFile creation and the commit, not a downstream processor.

    bench/e2e-consume.sh [--records 100000] [--shards 16] [--runs 3] [--strategies FLOW_FILE,LINE_DELIMITED]

The emulator sets the sizes: kinesis-local's PutRecords costs time proportional to the records
already in the shard (10,000 more records into 4 shards: 17 s at first, 148 s once 50,000 are
there), so pre-loading grows with N^2/shards; N = 100,000 over 16 shards takes about 5 minutes.
With --keep-services the emulators stay up and a later invocation reuses the pre-loaded stream.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "lib"))

from consumer_flow import BUNDLE, CONSUMER, built_nar, consumer_properties, unique  # noqa: E402
from nifi_instance import NiFiInstance, free_port  # noqa: E402
from services import AwsJsonError, aws_json_call, ensure_services, kinesis_call, kinesis_endpoint  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")
SERVICES_STATE = os.environ.get("SERVICES_STATE_DIR", os.path.join(REPO, "tests", "services", ".work", "state"))


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (fields 14 and 15)


def emulator_pids() -> dict:
    pids = {}
    for name in ("kinesis", "dynalite"):
        try:
            with open(os.path.join(SERVICES_STATE, f"{name}.pid"), encoding="utf-8") as f:
                pids[name] = int(f.read().strip())
        except (OSError, ValueError):
            pass
    return pids


def kinesis_slow_call(action: str, payload: dict) -> dict:
    """A Kinesis call that may take long (large PutRecords and GetRecords on a busy emulator)."""
    return aws_json_call(kinesis_endpoint(), f"Kinesis_20131202.{action}", payload, "1.1", timeout=300)


def record_data(i: int, size: int) -> bytes:
    head = b'{"n":%d,"pad":"' % i
    return head + b"x" * (size - len(head) - 2) + b'"}'


# ---- the stream ----------------------------------------------------------------------------------

def shard_ids(stream: str) -> list[str]:
    return sorted(s["ShardId"] for s in kinesis_call("ListShards", {"StreamName": stream})["Shards"])


def drain_with_python(stream: str, limit: int) -> tuple[int, float, dict]:
    """Reads every shard from TRIM_HORIZON to the tip, one thread per shard, as fast as the
    emulator answers. Returns (records, seconds, cores kinesis-local kept busy meanwhile)."""
    def drain(shard: str) -> int:
        it = kinesis_call("GetShardIterator", {"StreamName": stream, "ShardId": shard,
                                               "ShardIteratorType": "TRIM_HORIZON"})["ShardIterator"]
        n = 0
        while it:
            out = kinesis_slow_call("GetRecords", {"ShardIterator": it, "Limit": limit})
            n += len(out["Records"])
            if not out["Records"] and out.get("MillisBehindLatest", 0) == 0:
                break
            it = out.get("NextShardIterator")
        return n

    shards = shard_ids(stream)
    emu = emulator_pids().get("kinesis")
    emu0 = cpu_seconds(emu) if emu else 0.0
    t0 = time.monotonic()
    with ThreadPoolExecutor(len(shards)) as pool:
        counts = dict(zip(shards, pool.map(drain, shards)))
    seconds = time.monotonic() - t0
    busy = (cpu_seconds(emu) - emu0) / seconds if emu else float("nan")
    return sum(counts.values()), seconds, busy


def preload(stream: str, records: int, shards: int, size: int) -> float:
    kinesis_call("CreateStream", {"StreamName": stream, "ShardCount": shards})
    while kinesis_call("DescribeStreamSummary", {"StreamName": stream})["StreamDescriptionSummary"]["StreamStatus"] != "ACTIVE":
        time.sleep(0.1)
    t0 = time.monotonic()

    def put(start: int) -> None:
        batch = [{"PartitionKey": f"pk-{i}", "Data": base64.b64encode(record_data(i, size)).decode()}
                 for i in range(start, min(start + 500, records))]
        while batch:
            out = kinesis_slow_call("PutRecords", {"StreamName": stream, "Records": batch})
            batch = [r for r, res in zip(batch, out["Records"]) if res.get("ErrorCode")]

    done = 0
    with ThreadPoolExecutor(2) as pool:
        for _ in pool.map(put, range(0, records, 500)):
            done += 1
            if done % 40 == 0:
                print(f"  pre-loaded {min(done * 500, records)} records in {time.monotonic() - t0:.0f} s", flush=True)
    return time.monotonic() - t0


def ensure_stream(stream: str, records: int, shards: int, size: int, limit: int) -> dict:
    """The pre-loaded stream (reused when an earlier run of this script left it complete in the
    still-running emulator) and the emulator's own drain rate."""
    info = {"preload_s": None}
    try:
        kinesis_call("DescribeStreamSummary", {"StreamName": stream})
        print(f"stream {stream} exists: checking it holds {records} records", flush=True)
    except AwsJsonError as e:
        if e.error_type != "ResourceNotFoundException":
            raise
        print(f"pre-loading {records} records of {size} bytes into {stream} ({shards} shards)", flush=True)
        info["preload_s"] = preload(stream, records, shards, size)
        print(f"pre-loaded in {info['preload_s']:.0f} s ({records / info['preload_s']:.0f} records/s)", flush=True)
    n, seconds, busy = drain_with_python(stream, limit)
    if n != records:
        raise SystemExit(f"stream {stream} holds {n} records, not {records}: delete it (or restart the emulators) and rerun")
    info.update(python_drain_s=seconds, python_drain_rps=n / seconds, python_drain_kinesis_cores=busy)
    print(f"emulator ceiling: a Python client drains {n} records in {seconds:.1f} s = {n / seconds:.0f} records/s "
          f"(GetRecords Limit {limit}, one thread per shard), kinesis-local {busy:.2f} cores busy", flush=True)
    return info


# ---- NiFi ----------------------------------------------------------------------------------------

def records_consumed(client, processor_id: str) -> int:
    counters = client.get("counters")["counters"]["aggregateSnapshot"]["counters"]
    return sum(int(c.get("valueCount", 0)) for c in counters
               if c.get("name") == "Records Consumed" and processor_id in (c.get("context") or ""))


def used_heap(client) -> int:
    snap = client.get("system-diagnostics")["systemDiagnostics"]["aggregateSnapshot"]
    return int(snap["usedHeapBytes"])


def jcmd_gc(pid: int) -> None:
    subprocess.run(["jcmd", str(pid), "GC.run"], capture_output=True, timeout=60)


def one_run(nifi: NiFiInstance, group_id: str, stream: str, records: int, strategy: str, limit: int,
            timeout: float, idle: float) -> dict:
    """One drain of the whole stream; `idle` is the idle NiFi's CPU-s per second (subtracted for
    the "net" figure)."""
    c = nifi.client
    props = consumer_properties(stream, unique("bench-app"), **{
        "Processing Strategy": strategy, "Max Records Per Request": str(limit)})
    proc = c.add_processor(group_id, CONSUMER, bundle=BUNDLE, name=f"bench {strategy}", properties=props,
                           auto_terminate=["success", "parse.failure"])
    pid = proc["id"]
    jcmd_gc(nifi.pid)
    time.sleep(1)
    heap_base = used_heap(c)
    peak = [heap_base]
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.is_set():
            try:
                peak[0] = max(peak[0], used_heap(c))
            except Exception:  # noqa: BLE001 - a missed sample is not a failure
                pass
            sampling.wait(0.25)

    sampler = threading.Thread(target=sample, daemon=True)
    emu = emulator_pids()
    emu_cpu0 = {k: cpu_seconds(p) for k, p in emu.items()}
    cpu0 = cpu_seconds(nifi.pid)
    t0 = time.monotonic()
    sampler.start()
    c.start_processor(pid)
    first = None
    done = 0
    deadline = t0 + timeout
    while done < records:
        if time.monotonic() > deadline:
            sampling.set()
            raise SystemExit(f"{strategy}: only {done} of {records} records after {timeout} s")
        time.sleep(0.2)
        done = records_consumed(c, pid)
        if first is None and done > 0:
            first = time.monotonic() - t0
    elapsed = time.monotonic() - t0
    cpu = cpu_seconds(nifi.pid) - cpu0
    emu_cpu = {k: cpu_seconds(p) - emu_cpu0[k] for k, p in emu.items()}
    sampling.set()
    sampler.join()
    c.stop_processor(pid)
    if done != records:
        raise SystemExit(f"{strategy}: {done} records consumed, expected {records}")
    c.delete_processor(pid)
    return {"strategy": strategy, "seconds": elapsed, "first_record_s": first, "rps": records / elapsed,
            "cpu_s": cpu, "cpu_per_million": cpu / records * 1e6, "cpu_share": cpu / elapsed,
            "cpu_per_million_net": (cpu - idle * elapsed) / records * 1e6,
            "heap_base_mb": heap_base / 2**20, "heap_peak_mb": peak[0] / 2**20,
            "emulator_cpu_s": emu_cpu, "kinesis_cpu_share": emu_cpu.get("kinesis", 0) / elapsed}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=100000)
    ap.add_argument("--shards", type=int, default=16,
                    help="kinesis-local's PutRecords slows down linearly with the records already in a shard, so "
                         "pre-loading takes about N^2/shards: 100,000 over 16 shards about 5 minutes")
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--warmup-runs", type=int, default=1,
                    help="rounds run first and left out of the medians (the JIT compiles NiFi's and the processor's "
                         "paths during the first drain: it cost twice the CPU of later ones)")
    ap.add_argument("--strategies", default="FLOW_FILE,LINE_DELIMITED")
    ap.add_argument("--max-records-per-request", type=int, default=1000,
                    help="GetRecords Limit of ConsumeKinesis and of the Python drain (ConsumeKinesis' default: 1000)")
    ap.add_argument("--heap", default="1g")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--json", help="also write the results to this file")
    ap.add_argument("--keep-services", action="store_true",
                    help="leave the emulators (and the pre-loaded stream) running for the next invocation")
    args = ap.parse_args()
    # A plain `kill` still stops the NiFi this script started (and the emulators, if it started them).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]

    services = ensure_services()
    nifi = None
    try:
        stream = f"bench-{args.records}x{args.record_size}-{args.shards}"
        info = ensure_stream(stream, args.records, args.shards, args.record_size, args.max_records_per_request)
        print("starting NiFi", flush=True)
        nifi = NiFiInstance.start(port=free_port(), extensions=[built_nar()], heap=args.heap)
        print(f"NiFi up (PID {nifi.pid}, heap {args.heap}) in {nifi.start_seconds:.0f} s", flush=True)
        group = nifi.client.create_process_group("e2e benchmark")["id"]
        idle0, t_idle = cpu_seconds(nifi.pid), time.monotonic()
        time.sleep(20)
        idle = (cpu_seconds(nifi.pid) - idle0) / (time.monotonic() - t_idle)
        print(f"idle NiFi: {idle:.3f} CPU-s per second", flush=True)
        results = []
        for run in range(1 - args.warmup_runs, args.runs + 1):
            for strategy in strategies:
                r = one_run(nifi, group, stream, args.records, strategy, args.max_records_per_request, args.timeout, idle)
                r["run"] = run
                if run > 0:
                    results.append(r)
                print(f"{'run ' + str(run) if run > 0 else 'warm-up'} {strategy:15s} {r['seconds']:7.1f} s  {r['rps']:7.0f} records/s  "
                      f"NiFi {r['cpu_s']:6.1f} CPU-s ({r['cpu_per_million']:6.1f} per million, net {r['cpu_per_million_net']:6.1f}, "
                      f"{r['cpu_share']:.2f} cores)  heap {r['heap_base_mb']:.0f} -> peak {r['heap_peak_mb']:.0f} MB  "
                      f"kinesis-local {r['kinesis_cpu_share']:.2f} cores  first record after {r['first_record_s']:.1f} s",
                      flush=True)
        n, seconds, busy = drain_with_python(stream, args.max_records_per_request)
        info.update(python_drain_after_rps=n / seconds, python_drain_after_kinesis_cores=busy)
        print(f"emulator ceiling after the runs: {n / seconds:.0f} records/s, kinesis-local {busy:.2f} cores busy", flush=True)
        print()
        print(f"medians of {args.runs} runs after {args.warmup_runs} warm-up round(s), {args.records} records of {args.record_size} bytes, {args.shards} shards, "
              f"GetRecords Limit {args.max_records_per_request}")
        print("| Processing Strategy | records/s | NiFi CPU-s per million records (net of idle NiFi) | NiFi cores busy "
              "| peak used heap (MB) | kinesis-local cores busy |")
        print("|---|---|---|---|---|---|")
        summary = {}
        for strategy in strategies:
            rs = [r for r in results if r["strategy"] == strategy]
            med = {k: statistics.median(r[k] for r in rs)
                   for k in ("rps", "cpu_per_million", "cpu_per_million_net", "cpu_share", "heap_peak_mb",
                             "kinesis_cpu_share")}
            summary[strategy] = med
            print(f"| {strategy} | {med['rps']:.0f} | {med['cpu_per_million']:.0f} ({med['cpu_per_million_net']:.0f}) | "
                  f"{med['cpu_share']:.2f} | "
                  f"{med['heap_peak_mb']:.0f} | {med['kinesis_cpu_share']:.2f} |")
        print(f"| Python GetRecords drain, before / after the runs | {info['python_drain_rps']:.0f} / "
              f"{info['python_drain_after_rps']:.0f} | | | | {info['python_drain_kinesis_cores']:.2f} / "
              f"{info['python_drain_after_kinesis_cores']:.2f} |")
        if args.json:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump({"args": vars(args), "stream": info, "idle_nifi_cores": idle, "runs": results,
                           "medians": summary}, f, indent=1)
    finally:
        if nifi is not None:
            nifi.stop()
        if not args.keep_services:
            services.stop_if_started()


if __name__ == "__main__":
    main()
