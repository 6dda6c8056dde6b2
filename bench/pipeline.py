"""The whole flow (issue 38): ConsumeKinesis -> PutSnowflake in a real NiFi, as the shipped flow definition
(parameter-contexts/flow/kinesis-to-snowflake.json) has them, from the benchmark Kinesis source
(bench/kinesis-source, Kinesis' per-shard read limits on) into the Snowflake stand-in in bench mode (it checks the
protocol and counts rows, commits them after its commit lag without storing them).

Cells: shard counts x Processing Strategy. LINE_DELIMITED is the shipped definition as it is (Output Strategy
INJECT_METADATA, Failover Position SNOWFLAKE_COMMIT, PutSnowflake's values); FLOW_FILE is the same flow with
ConsumeKinesis' default Processing Strategy instead. Records are the source's json payload (one JSON object of
--record-size bytes each, which PutSnowflake loads as a row).

Per cell:
- throughput: the source serves a stream of --records records that have all arrived; the flow drains it from
  TRIM_HORIZON with a new Application Name into a new table. Clock and CPU from starting the two processors until
  the stand-in has committed every record. MiB/s, records/s, NiFi CPU-s per million records (utime+stime of the
  whole NiFi JVM, so both processors and NiFi's own work, also net of an idle NiFi), MiB/s per NiFi core (MiB/s
  divided by the cores NiFi used on average), peak used heap and peak RSS (bench/consume_source.py's sampler).
- latency at a steady --loads percent of that cell's throughput: the source serves a live stream (each shard's
  records arrive at a fixed rate from a start time and are served only once arrived, their
  ApproximateArrivalTimestamp being that time) for --latency-seconds; every committed batch is read back from the
  stand-in (GET /admin/bench-commits: channel, end offset token, rows, commit time), each row's record found from
  the offset token, and its latency is the commit time minus its arrival time. Records of the first
  --latency-warmup-seconds are left out. Also the arrival-to-append part (what NiFi adds) and the stand-in's
  measured append-to-commit time.

Every run checks that every record was committed exactly once: the stand-in's count equals the records served
(also a few seconds after the last one), each shard's committed batches cover its record indexes 0..n-1 with no
gap and no overlap, and no FlowFile waits in a failure queue. A run that does not fails the benchmark.

    bench/pipeline.sh [--shards 16,64,256] [--strategies LINE_DELIMITED,FLOW_FILE] [--records 400000] [--runs 1]
                      [--loads 50,90] [--latency-seconds 60] [--commit-lag-ms 1000 | 4000-10000] [--heap 1g] [--no-write] [--nar PATH]
                      [--sink-property NAME=VALUE]...
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "lib"))
sys.path.insert(0, os.path.join(REPO, "parameter-contexts"))
sys.path.insert(0, HERE)

import apply as flow  # noqa: E402
import nifi_profile  # noqa: E402
from consume_source import STREAM, PeakSampler, Source  # noqa: E402
from consumer_flow import built_nar, unique  # noqa: E402
from e2e_consume import cpu_seconds  # noqa: E402
from nifi_instance import NiFiInstance, free_port  # noqa: E402
from services import dynamodb_endpoint, ensure_services  # noqa: E402
from sink_bench import machine, write_between_markers  # noqa: E402
from standin import Standin, make_key_pair  # noqa: E402

DEFINITION = os.path.join(REPO, "parameter-contexts", "flow", "kinesis-to-snowflake.json")
ACCOUNT, USER = "kinesnow-local", "KINESNOW"  # the local destination context's (parameter-contexts/local)
TABLE = "KINESNOW.PUBLIC.EVENTS"
STRATEGIES = ("LINE_DELIMITED", "FLOW_FILE")
MARK_BEGIN = "<!-- bench/pipeline.sh results: begin -->"
MARK_END = "<!-- bench/pipeline.sh results: end -->"
HEADING = "## The whole flow: ConsumeKinesis -> PutSnowflake (issue 38)"
SHARD_OF_CHANNEL = re.compile(r"shardId-(\d{12})$")


def load_average() -> float:
    with open("/proc/loadavg", encoding="utf-8") as f:
        return float(f.read().split()[0])


def per_shard(records: int, shards: int) -> list[int]:
    """How kinesis-source spreads --records-total: evenly, the first shards get the remainder."""
    return [records // shards + (1 if s < records % shards else 0) for s in range(shards)]


def percentile(sorted_values: list, q: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q / 100 * len(sorted_values)))]


class Pipeline:
    """The shipped flow definition imported once into `nifi`; each run points its parameters at a source, a new
    Application Name and a freshly created table, and sets the consumer's Processing Strategy."""

    def __init__(self, nifi: NiFiInstance, standin: Standin, work: str, sink_properties: dict | None = None):
        self.nifi, self.standin, self.c = nifi, standin, nifi.client
        self.ids = flow.import_definition(self.c, DEFINITION, "local",
                                          {"KINESNOW_WORK": work, "SNOWFLAKE_URL": standin.url}, "whole-flow benchmark")
        if sink_properties:
            self.c.update_processor(self.ids["sink"], properties=sink_properties)
        self.failure_queues = [q for r, q in self.ids["connections"].items() if r != "success"]
        self.records_queue = self.ids["connections"]["success"]

    def prepare(self, source: Source, strategy: str) -> str:
        app = unique("pipeline-app")
        self.c.update_parameters(self.ids["source_context"], {
            "AWS Kinesis Stream Name": STREAM, "AWS Kinesis Application Name": app,
            "AWS Kinesis Endpoint Override URL": source.url, "AWS DynamoDB Endpoint Override URL": dynamodb_endpoint()})
        self.c.update_processor(self.ids["consumer"], properties={"Processing Strategy": strategy})
        for pid in (self.ids["consumer"], self.ids["sink"]):
            v = self.c.processor_validation(pid)
            if v["status"] != "VALID":
                raise SystemExit(f"the flow is not valid: {v}")
        self.standin.sql(f"CREATE OR REPLACE TABLE {TABLE} (ID NUMBER)")
        self.bench_commits()  # forget what earlier runs committed
        return app

    def committed(self) -> int:
        return int(self.standin.admin("GET", "/admin/bench-counts")["tables"].get(TABLE, 0))

    def bench_commits(self) -> list[dict]:
        out = self.standin.admin("GET", "/admin/bench-commits")
        if out.get("dropped"):
            raise SystemExit(f"the stand-in dropped {out['dropped']} commit records")
        return [c for c in out["commits"] if c["table"] == TABLE]

    def waiting(self) -> dict:
        return {q: self.c.connection_queue_count(q) for q in self.failure_queues + [self.records_queue]}

    def run(self, source: Source, strategy: str, size: int, timeout: float, settle: float, profile: str = "") -> dict:
        """Starts both processors, waits until the stand-in committed every record of `source`, checks exactly once.
        With `profile` (a path), perf records NiFi from the start to the last commit into that file."""
        self.prepare(source, strategy)
        n = source.records
        sampler = PeakSampler(self.nifi)
        load0 = load_average()
        cpu0, src0, sf0, throttled0 = cpu_seconds(self.nifi.pid), source.cpu(), cpu_seconds(self.standin.proc.pid), source.throttled()
        t0, start_ms = time.monotonic(), time.time() * 1000
        sampler.start()
        perf = nifi_profile.Recording(self.nifi.pid, profile) if profile else None
        self.c.start_processor(self.ids["consumer"])
        self.c.start_processor(self.ids["sink"])
        done = 0
        try:
            while done < n:
                if time.monotonic() - t0 > timeout:
                    raise SystemExit(f"{strategy}, {source.shards} shards: {done} of {n} records committed after {timeout} s; "
                                     f"queues {self.waiting()}")
                time.sleep(0.1)
                done = self.committed()
            elapsed = time.monotonic() - t0
            cpu, src = cpu_seconds(self.nifi.pid) - cpu0, source.cpu() - src0
            sf_cpu = cpu_seconds(self.standin.proc.pid) - sf0
        finally:
            sampler.stop()
            if perf is not None:
                perf.stop()
        load1 = load_average()
        time.sleep(settle)  # a record loaded twice would show up now
        done, commits, queues = self.committed(), self.bench_commits(), self.waiting()
        self.c.stop_processor(self.ids["consumer"])
        self.c.stop_processor(self.ids["sink"])
        if done != n:
            raise SystemExit(f"{strategy}, {source.shards} shards: the stand-in committed {done} rows for {n} records")
        if any(queues.values()):
            raise SystemExit(f"{strategy}, {source.shards} shards: FlowFiles left in queues {queues}")
        ranges = check_exactly_once(commits, per_shard(n, source.shards))
        return {"shards": source.shards, "strategy": strategy, "records": n, "seconds": elapsed, "rps": n / elapsed,
                "mib_s": n * size / elapsed / 2**20, "cpu_per_million": cpu / n * 1e6, "nifi_cores": cpu / elapsed,
                "source_cpu_per_million": src / n * 1e6, "standin_cpu_per_million": sf_cpu / n * 1e6,
                "throttled": source.throttled() - throttled0, "heap_base_mb": sampler.heap_base / 2**20,
                "heap_peak_mb": sampler.peak["heap"] / 2**20, "rss_peak_mb": sampler.peak["rss"] / 1024,
                "load_before": load0, "load_after": load1, "started_ms": start_ms, "_ranges": ranges}


def check_exactly_once(commits: list[dict], counts: list[int]) -> list[tuple]:
    """Each committed batch as (shard, first index, last index, accepted_ms, committed_ms), after checking that
    every shard's batches cover its records 0..n-1 once each (offset tokens are shardedSequenceNumbers: the
    sequence number's last 20 digits are the record's index in kinesis-source, then 20 digits of sub-sequence)."""
    by_shard: dict[int, list] = {}
    for c in commits:
        m = SHARD_OF_CHANNEL.search(c["channel"])
        token = c.get("offset_token") or ""
        if not m or not token.isdigit() or len(token) < 40:
            raise SystemExit(f"a committed batch this benchmark cannot place: {c}")
        last = int(token[-40:-20])
        by_shard.setdefault(int(m.group(1)), []).append((last - int(c["rows"]) + 1, last, c["accepted_ms"], c["committed_ms"]))
    out = []
    for shard, n in enumerate(counts):
        batches = sorted(by_shard.pop(shard, []))
        expected = 0
        for first, last, accepted, committed in batches:
            if first != expected:
                raise SystemExit(f"shard {shard}: a committed batch starts at record {first}, expected {expected} "
                                 f"({'a gap' if first > expected else 'a record loaded twice'})")
            expected = last + 1
            out.append((shard, first, last, accepted, committed))
        if expected != n:
            raise SystemExit(f"shard {shard}: records 0..{expected - 1} committed, the shard has {n}")
    if by_shard:
        raise SystemExit(f"batches committed for shards the stream does not have: {sorted(by_shard)}")
    return out


def latencies(ranges: list[tuple], start_ms: int, rate: float, warmup_s: float) -> dict:
    """Per record arriving after the warm-up: commit time - arrival time, and append (accepted) time - arrival time;
    per batch: commit - append. Arrival of record i: start_ms + floor(i * 1000 / rate) (kinesis-source --live-rate)."""
    skip_before = start_ms + warmup_s * 1000
    e2e, to_append, lag = [], [], []
    for _shard, first, last, accepted, committed in ranges:
        lag.append(committed - accepted)
        for i in range(first, last + 1):
            arrival = start_ms + int(i * 1000.0 / rate)
            if arrival >= skip_before:
                e2e.append(committed - arrival)
                to_append.append(accepted - arrival)
    e2e.sort()
    to_append.sort()
    lag.sort()
    return {"rows_measured": len(e2e), "p50_ms": percentile(e2e, 50), "p99_ms": percentile(e2e, 99),
            "max_ms": e2e[-1] if e2e else float("nan"), "append_p50_ms": percentile(to_append, 50),
            "append_p99_ms": percentile(to_append, 99), "commit_lag_p50_ms": percentile(lag, 50),
            "commit_lag_p99_ms": percentile(lag, 99)}


def fmt_ms(ms: float) -> str:
    return f"{ms / 1000:.2f}"


def throughput_medians(results: list, idle: float) -> dict:
    """(shards, strategy) -> the medians of its throughput runs."""
    medians = {}
    for shards, strategy in dict.fromkeys((r["shards"], r["strategy"]) for r in results):
        rs = [r for r in results if (r["shards"], r["strategy"]) == (shards, strategy)]
        m = {k: statistics.median(r[k] for r in rs) for k in
             ("rps", "mib_s", "cpu_per_million", "nifi_cores", "heap_peak_mb", "rss_peak_mb", "throttled", "load_after")}
        m["cpu_per_million_net"] = statistics.median(r["cpu_per_million"] - idle * r["seconds"] / r["records"] * 1e6 for r in rs)
        m["mib_s_per_core"] = m["mib_s"] / m["nifi_cores"]
        medians[(shards, strategy)] = m
    return medians


def record_summary(args, results: list, idle: float) -> None:
    """The throughput medians into bench/results/summary.json: PREFIX.<shards>.<strategy>.<figure>."""
    import summary
    figures = {}
    for (shards, strategy), m in throughput_medians(results, idle).items():
        cell = f"{shards}.{strategy}"
        figures.update({
            f"{cell}.cpu_per_million": (m["cpu_per_million"], "NiFi CPU-s per million records, whole flow (both processors and NiFi)"),
            f"{cell}.mib_s": (m["mib_s"], "MiB/s, whole flow"),
            f"{cell}.nifi_cores": (m["nifi_cores"], "NiFi cores busy"),
            f"{cell}.mib_s_per_core": (m["mib_s_per_core"], "MiB/s per NiFi core, whole flow"),
            f"{cell}.heap_peak_mb": (m["heap_peak_mb"], f"MB peak used heap ({args.heap} heap)"),
        })
    summary.record(args.record_summary, figures, args.command)


def report(args, results: list, lat: list, idle: float, started: float, load_samples: list) -> str:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True,
                           cwd=REPO).stdout.strip()
    loads = ", ".join(f"{x:.1f}" for x in load_samples)
    lines = [
        MARK_BEGIN,
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(started))} at commit {head}"
        + (" (with uncommitted changes in the tree)" if dirty else "")
        + f" by `{args.command}` ({time.time() - started:.0f} s in all).",
        f"Machine: {machine()}. **Load average (1 min) during the runs: {min(load_samples):.1f} to {max(load_samples):.1f}** "
        f"(each run's start and end: {loads}); the machine was shared with compiles and tests of other work, so these "
        "figures were measured on a busy machine and must be re-run on a quiet one before they are quoted.",
        f"Each throughput run: {args.records} records of {args.record_size} bytes (kinesis-source json payload), "
        f"Kinesis' read limits on (5 GetRecords/s and 2 MiB/s per shard); NiFi heap {args.heap}; idle NiFi "
        f"{idle:.3f} cores. Medians of {args.runs} run(s) after {args.warmup_runs} warm-up round(s) per shard count.",
        f"Stand-in: bench mode, plain HTTP on 127.0.0.1 (PutSnowflake in NiFi trusts only public roots), state "
        + ("on disk (the channels each commit check changed written to DuckDB, one write per check)"
           if args.standin_on_disk else "in memory") + ", **commit lag "
        f"{args.commit_lag_ms} ms** (a batch is committed {args.commit_lag_ms} ms after its append, drawn per append "
        f"when a range, in append order per channel; checked every {min(100, max(5, lag_low(args) // 4))} ms).",
        "NiFi CPU = utime+stime of the whole NiFi JVM (both processors, NiFi's framework, GC, the engine's threads) "
        "from starting the processors until the last record's commit, per million records; MiB/s per NiFi core = "
        "MiB/s / (NiFi CPU-s / wall s). Every run checked every record committed exactly once.",
        "",
        "| shards | Processing Strategy | records/s | MiB/s | NiFi CPU-s per million (net of idle) | NiFi cores | "
        "MiB/s per NiFi core | peak used heap (MB) | peak RSS (MB) | throttles | load avg (1 min) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    medians = throughput_medians(results, idle)
    for (shards, strategy), m in medians.items():
        lines.append(f"| {shards} | {strategy} | {m['rps']:.0f} | {m['mib_s']:.1f} | {m['cpu_per_million']:.1f} "
                     f"({m['cpu_per_million_net']:.1f}) | {m['nifi_cores']:.2f} | **{m['mib_s_per_core']:.1f}** | "
                     f"{m['heap_peak_mb']:.0f} | {m['rss_peak_mb']:.0f} | {m['throttled']:.0f} | {m['load_after']:.1f} |")
    if lat:
        lines += [
            "",
            f"End-to-end latency at a steady share of each cell's throughput: a live stream for {args.latency_seconds:.0f} s "
            f"(the first {args.latency_warmup_seconds:.0f} s of records left out), from a record's Kinesis arrival "
            "(ApproximateArrivalTimestamp) to the stand-in's commit of its row; \"to append\" is the part until "
            f"PutSnowflake's append was accepted, \"stand-in lag\" the measured append-to-commit time (commit lag "
            f"{args.commit_lag_ms} ms). Seconds. NiFi CPU over the whole run (its {args.latency_lead_seconds:.0f} s lead "
            f"included) per record served. Target at half load: p99 within the commit lag plus one second, "
            f"{(lag_high(args) + 1000) / 1000:.2f} s.",
            "",
            "| shards | Processing Strategy | load | records/s (MiB/s) | p50 | p99 | max | to append p50 / p99 | "
            "stand-in lag p50 / p99 | NiFi CPU-s per million | peak used heap (MB) | load avg (1 min) |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for x in lat:
            lines.append(
                f"| {x['shards']} | {x['strategy']} | {x['load']} % | {x['rps']:.0f} ({x['mib_s']:.1f}) | {fmt_ms(x['p50_ms'])} | "
                f"**{fmt_ms(x['p99_ms'])}** | {fmt_ms(x['max_ms'])} | {fmt_ms(x['append_p50_ms'])} / {fmt_ms(x['append_p99_ms'])} | "
                f"{fmt_ms(x['commit_lag_p50_ms'])} / {fmt_ms(x['commit_lag_p99_ms'])} | "
                f"{x['cpu_per_million']:.1f} | {x['heap_peak_mb']:.0f} | {x['load_after']:.1f} |")
    lines += ["", "Against the targets (issue 38):", ""]
    for (shards, strategy), m in medians.items():
        half = [x for x in lat if (x["shards"], x["strategy"], x["load"]) == (shards, strategy, 50)]
        p99 = f"; p99 at half load {fmt_ms(half[0]['p99_ms'])} s against {(lag_high(args) + 1000) / 1000:.2f} s: " \
              f"{'met' if half[0]['p99_ms'] <= lag_high(args) + 1000 else 'not met'}" if half else ""
        share = m["mib_s_per_core"] / 80
        verdict = "met" if share >= 1 else f"not met ({share:.2f} of it)"
        lines.append(f"- {shards} shards, {strategy}: {m['mib_s_per_core']:.1f} MiB/s per NiFi core against 80: {verdict}{p99}")
    # The stand-in commits a batch at the first check after its commit lag: a measured append-to-commit time well
    # above that means the stand-in fell behind, and those latencies measure it, not NiFi.
    allowed = lag_high(args) + min(100, max(5, lag_low(args) // 4)) + 200
    for x in lat:
        if x["commit_lag_p99_ms"] > allowed:
            lines.append(f"- **{x['shards']} shards, {x['strategy']}, {x['load']} %: the stand-in's append-to-commit p99 "
                         f"{fmt_ms(x['commit_lag_p99_ms'])} s is above its commit lag plus check interval plus 0.2 s "
                         f"({fmt_ms(allowed)} s): this cell's latency is bounded by the stand-in, not NiFi**")
    lines += ["", MARK_END]
    return "\n".join(lines)


def lag_low(args) -> int:
    """The stand-in's smallest commit lag, in ms (`--commit-lag-ms` is a number or a range LOW-HIGH)."""
    return int(str(args.commit_lag_ms).split("-")[0])


def lag_high(args) -> int:
    """The stand-in's largest commit lag, in ms."""
    return int(str(args.commit_lag_ms).split("-")[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shards", default="16,64,256")
    ap.add_argument("--strategies", default="LINE_DELIMITED,FLOW_FILE", help=f"comma-separated, of {', '.join(STRATEGIES)}")
    ap.add_argument("--records", type=int, default=400000, help="records per throughput run, over all shards")
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=1, help="measured throughput runs per cell (medians)")
    ap.add_argument("--warmup-runs", type=int, default=1, help="unreported throughput rounds per shard count first")
    ap.add_argument("--loads", default="50,90", help="latency runs at these percents of the cell's throughput (empty: none)")
    ap.add_argument("--latency-seconds", type=float, default=60, help="how long a latency run's live stream lasts")
    ap.add_argument("--latency-warmup-seconds", type=float, default=10,
                    help="records arriving this long after a live stream's start are left out of the latency figures")
    ap.add_argument("--latency-lead-seconds", type=float, default=10,
                    help="a live stream's first records arrive this long after the processors are started")
    ap.add_argument("--commit-lag-ms", default="1000",
                    help="the stand-in's commit lag: a fixed one (1000) or a range each append draws from (4000-10000)")
    ap.add_argument("--standin-on-disk", action="store_true",
                    help="give the stand-in a state directory: it then also writes the state of the channels each commit "
                         "check changed to DuckDB on disk, one write per check (by default all in memory)")
    ap.add_argument("--source-threads", type=int, default=1)
    ap.add_argument("--heap", default="1g")
    ap.add_argument("--sink-property", action="append", default=[], metavar="NAME=VALUE",
                    help="set a PutSnowflake property away from the flow definition's (e.g. 'Max In-Flight Size=256 MB')")
    ap.add_argument("--nar", help="the kinesnow NAR to run (default: the one ./mvnw package built), e.g. an earlier "
                    "commit's, to measure before and after side by side")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--json", help="also write every run's figures to this file")
    ap.add_argument("--record-summary", metavar="PREFIX",
                    help="also write the throughput medians into bench/results/summary.json under PREFIX. (bench/summary.py)")
    ap.add_argument("--profile", help="record the first measured throughput run of each cell with perf (cpu-clock "
                                      "samples of the NiFi JVM) and write the reports into this directory")
    ap.add_argument("--no-write", action="store_true", help="print the results block, do not write it into BENCHMARKS.md")
    args = ap.parse_args()
    args.command = "bench/pipeline.sh" + "".join(" " + a for a in sys.argv[1:])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.profile:
        os.makedirs(args.profile, exist_ok=True)
    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    if any(s not in STRATEGIES for s in strategies):
        ap.error(f"strategies are {', '.join(STRATEGIES)}")
    loads = [int(x) for x in args.loads.split(",") if x.strip()]
    shard_counts = [int(s) for s in args.shards.split(",") if s.strip()]
    started = time.time()
    # KINESIS_SOURCE_BIN: a kinesis-source binary built elsewhere (while the tree's does not build), else build.sh's.
    binary = os.environ.get("KINESIS_SOURCE_BIN") or subprocess.run(
        [os.path.join(HERE, "kinesis-source", "build.sh")], capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    work = tempfile.mkdtemp(prefix="kinesnow-pipeline.")
    print(f"work directory: {work}", flush=True)
    _, public = make_key_pair(os.path.join(work, "snowflake"))  # where the local context's Private Key File points
    services = ensure_services()
    standin = nifi = None
    results, lat, load_samples = [], [], []
    try:
        standin = Standin.start(os.path.join(work, "standin"), commit_lag_ms=args.commit_lag_ms, bench_mode=True,
                                in_memory=not args.standin_on_disk)
        standin.register_user(ACCOUNT, USER, public)
        nifi = NiFiInstance.start(port=free_port(), extensions=[args.nar or built_nar()], heap=args.heap)
        print(f"NiFi up (PID {nifi.pid}, heap {args.heap}) in {nifi.start_seconds:.0f} s; stand-in {standin.url} "
              f"(commit lag {args.commit_lag_ms} ms, bench mode)", flush=True)
        pipeline = Pipeline(nifi, standin, work, dict(kv.split("=", 1) for kv in args.sink_property))
        idle0, t_idle = cpu_seconds(nifi.pid), time.monotonic()
        time.sleep(15)
        idle = (cpu_seconds(nifi.pid) - idle0) / (time.monotonic() - t_idle)
        print(f"idle NiFi: {idle:.3f} CPU-s per second", flush=True)
        settle = 2 + lag_high(args) / 1000
        for shards in shard_counts:
            source = Source(binary, shards, args.records, args.record_size, args.source_threads, True, "json")
            try:
                for run in range(1 - args.warmup_runs, args.runs + 1):
                    for strategy in strategies:
                        data = (os.path.join(args.profile, f"perf-{shards}-{strategy}.data")
                                if args.profile and run == 1 else "")
                        r = pipeline.run(source, strategy, args.record_size, args.timeout, settle, data)
                        if data:
                            with open(data[:-len(".data")] + ".txt", "w", encoding="utf-8") as f:
                                f.write(nifi_profile.report(nifi.pid, data))
                        r.pop("_ranges")
                        r["run"] = run
                        load_samples += [r["load_before"], r["load_after"]]
                        if run > 0:
                            results.append(r)
                        print(f"{shards:4d} shards  {'run ' + str(run) if run > 0 else 'warm-up'} {strategy:15s} {r['rps']:8.0f} records/s "
                              f"{r['mib_s']:6.1f} MiB/s ({r['throttled']} throttled)  NiFi {r['cpu_per_million']:6.1f} CPU-s per million "
                              f"({r['nifi_cores']:.2f} cores, {r['mib_s'] / r['nifi_cores']:.1f} MiB/s per core)  source "
                              f"{r['source_cpu_per_million']:.1f}, stand-in {r['standin_cpu_per_million']:.1f}  heap "
                              f"{r['heap_base_mb']:.0f} -> {r['heap_peak_mb']:.0f} MB  RSS {r['rss_peak_mb']:.0f} MB  "
                              f"load {r['load_before']:.1f} -> {r['load_after']:.1f}", flush=True)
            finally:
                source.stop()
            for strategy in strategies:
                rps = statistics.median(r["rps"] for r in results if (r["shards"], r["strategy"]) == (shards, strategy))
                for load in loads:
                    rate = rps * load / 100 / shards  # records per second per shard
                    n = max(1, int(rate * args.latency_seconds)) * shards
                    start_ms = int(time.time() * 1000 + args.latency_lead_seconds * 1000)
                    live = Source(binary, shards, n, args.record_size, args.source_threads, True, "json",
                                  extra=("--live-rate", repr(rate), "--live-start-ms", str(start_ms)))
                    try:
                        r = pipeline.run(live, strategy, args.record_size,
                                         args.latency_lead_seconds + args.latency_seconds + args.timeout, settle)
                    finally:
                        live.stop()
                    ranges = r.pop("_ranges")
                    span = (start_ms - r["started_ms"]) / 1000 + args.latency_seconds  # seconds from start to last arrival
                    r.update(load=load, rate_per_shard=rate, start_ms=start_ms,
                             **latencies(ranges, start_ms, rate, args.latency_warmup_seconds))
                    # over a live run the rate is the source's, not the flow's: CPU figures still per record
                    r["rps"], r["mib_s"] = rate * shards, rate * shards * args.record_size / 2**20
                    r["live_span_s"] = span
                    load_samples += [r["load_before"], r["load_after"]]
                    lat.append(r)
                    print(f"{shards:4d} shards  {strategy:15s} {load:3d} % ({r['rps']:.0f} records/s, {r['mib_s']:.1f} MiB/s): "
                          f"latency p50 {fmt_ms(r['p50_ms'])} s, p99 {fmt_ms(r['p99_ms'])} s, max {fmt_ms(r['max_ms'])} s "
                          f"(to append p50 {fmt_ms(r['append_p50_ms'])}, p99 {fmt_ms(r['append_p99_ms'])}; stand-in lag p50 "
                          f"{fmt_ms(r['commit_lag_p50_ms'])}) over {r['rows_measured']} records; NiFi "
                          f"{r['cpu_per_million']:.1f} CPU-s per million; load {r['load_before']:.1f} -> {r['load_after']:.1f}",
                          flush=True)
            if not args.no_write and shards != shard_counts[-1]:  # what is measured so far, should a later cell fail
                write_between_markers(os.path.join(REPO, "BENCHMARKS.md"), MARK_BEGIN, MARK_END, HEADING,
                                      report(args, results, lat, idle, started, load_samples))
        block = report(args, results, lat, idle, started, load_samples)
        print()
        print(block)
        if not args.no_write:
            write_between_markers(os.path.join(REPO, "BENCHMARKS.md"), MARK_BEGIN, MARK_END, HEADING, block)
            print("written into BENCHMARKS.md", flush=True)
        if args.record_summary:
            record_summary(args, results, idle)
        if args.json:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump({"args": vars(args), "idle_nifi_cores": idle, "throughput": results, "latency": lat}, f, indent=1)
    finally:
        if nifi is not None:
            nifi.stop()
        if standin is not None:
            standin.stop()
        services.stop_if_started()


if __name__ == "__main__":
    main()
