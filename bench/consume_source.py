"""ConsumeKinesis in a real NiFi draining the benchmark Kinesis source (bench/kinesis-source), which
serves a stream generated in memory far faster than kinesis-local (issue 20, part 2). Leases stay on
dynalite. For each shard count, one source process serves the stream; every run drains it from
TRIM_HORIZON with a new Application Name (a new lease table). In the same invocation, and for the
same stream, the Rust SDK's bare drain (bench/kinesis-source/examples/drain.rs: GetRecords and its
JSON/base64 decoding, nothing else) gives the ceiling of one process that only decodes.

Per run: records/s, MiB/s, NiFi CPU-seconds per million records (utime+stime of the NiFi JVM over the
run, also net of an idle NiFi), the source's CPU over the run, peak used heap (sampled every 0.25 s
after a GC, from the JVM's hsperfdata: bench/hsperf.py) and peak RSS of the NiFi JVM. NiFi's REST API is asked for
the Records Consumed counter only until the first record and after the source has served the last (until then
the source's /stats is asked), so the benchmark's own requests cost NiFi little. Success FlowFiles are auto-terminated: what is measured is
reading, the JNI hand-off, FlowFile creation and the commit.

    bench/consume-source.sh [--shards 1,16,64,256] [--records 200000] [--runs 3] [--strategies FLOW_FILE,LINE_DELIMITED]
                            [--text-payload json --output-strategy INJECT_METADATA]

Strategies (issue 18): FLOW_FILE, LINE_DELIMITED, DEMARCATOR (Message Demarcator "|~", two bytes no payload
contains), RECORD_JSON (Processing Strategy RECORD, JsonTreeReader inferring the schema, JsonRecordSetWriter
one line per record, no schema) and RECORD_AVRO (RECORD, AvroReader with the source's schema as Schema Text,
AvroRecordSetWriter with the schema embedded). The record services are created in the benchmark's process group
and enabled once, before any processor starts. A source serves one payload: FLOW_FILE, LINE_DELIMITED and
DEMARCATOR read the `--text-payload` one (ascii, as before issue 18, or json: then they read the very bytes
RECORD_JSON reads), RECORD_JSON the json payload and RECORD_AVRO the avro payload; a strategy whose payload
differs reads its own source process, with the same shards, records and record size (the output says which).
The strategies of a shard count run in turn, round by round, so every round measures each of them once.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "lib"))
sys.path.insert(0, HERE)

from consumer_flow import BUNDLE, CONSUMER, built_nar, consumer_properties, unique  # noqa: E402
import hsperf  # noqa: E402
from e2e_consume import cpu_seconds, jcmd_gc, records_consumed  # noqa: E402
import nifi_profile  # noqa: E402
import record_services  # noqa: E402
from nifi_instance import NiFiInstance, free_port  # noqa: E402
from services import dynamodb_endpoint, ensure_services  # noqa: E402

STREAM = "bench-stream"
DEMARCATOR = "|~"
STRATEGIES = ("FLOW_FILE", "LINE_DELIMITED", "DEMARCATOR", "RECORD_JSON", "RECORD_AVRO")


def payload_of(strategy: str, text_payload: str) -> str:
    """The source payload a strategy reads."""
    return {"RECORD_JSON": "json", "RECORD_AVRO": "avro"}.get(strategy, text_payload)


def strategy_properties(strategy: str, services: dict) -> dict:
    """ConsumeKinesis' properties for a strategy of this benchmark (display names)."""
    if strategy == "DEMARCATOR":
        return {"Processing Strategy": "DEMARCATOR", "Message Demarcator": DEMARCATOR}
    if strategy == "RECORD_JSON":
        return {"Processing Strategy": "RECORD", "Record Reader": services["json_reader"],
                "Record Writer": services["json_writer"]}
    if strategy == "RECORD_AVRO":
        return {"Processing Strategy": "RECORD", "Record Reader": services["avro_reader"],
                "Record Writer": services["avro_writer"]}
    return {"Processing Strategy": strategy}


def record_services_for(client, group: str, strategies: list, binary: str) -> dict:
    """The controller services the RECORD strategies need, created and enabled in `group`."""
    out = {}
    if "RECORD_JSON" in strategies:
        out["json_reader"] = record_services.json_reader(client, group)
        out["json_writer"] = record_services.json_writer(client, group)
    if "RECORD_AVRO" in strategies:
        schema = subprocess.run([binary, "--avro-schema"], capture_output=True, text=True, check=True).stdout.strip()
        out["avro_reader"] = record_services.avro_reader(client, group, schema)
        out["avro_writer"] = record_services.avro_writer(client, group)
    return out


def check_strategies(client, group: str, strategies: list, services: dict) -> None:
    """Stops before any run, with a clear message, if this NAR's ConsumeKinesis lacks a strategy's properties."""
    pid = client.add_processor(group, CONSUMER, bundle=BUNDLE, name="strategy check")["id"]
    try:
        for strategy in strategies:
            record_services.require(client, pid, f"ConsumeKinesis strategy {strategy}",
                                    strategy_properties(strategy, services))
    finally:
        client.delete_processor(pid)


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="utf-8") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class PeakSampler:
    """Peak used heap and peak RSS of a NiFi JVM, sampled every 0.25 s in a thread between start() and stop(),
    from a base taken after a full GC (`heap_base`); with `live_heap_every` > 0, also the used heap right after a
    full GC forced that often (`peak["live"]`). Values in bytes (heap) and KiB (RSS)."""

    def __init__(self, nifi: NiFiInstance, live_heap_every: float = 0):
        self.nifi, self.live_heap_every = nifi, live_heap_every
        jcmd_gc(nifi.pid)
        time.sleep(1)
        self.heap_base = hsperf.used_heap(nifi.pid)
        self.peak = {"heap": self.heap_base, "rss": rss_kib(nifi.pid), "live": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        pid, peak = self.nifi.pid, self.peak
        forced = time.monotonic()
        while not self._stop.is_set():
            try:
                peak["heap"] = max(peak["heap"], hsperf.used_heap(pid))
                peak["rss"] = max(peak["rss"], rss_kib(pid))
                if self.live_heap_every > 0 and time.monotonic() - forced >= self.live_heap_every:
                    # What the heap holds while draining: used heap right after a full GC (no garbage in it).
                    jcmd_gc(pid)
                    forced = time.monotonic()
                    peak["live"] = max(peak["live"], hsperf.used_heap(pid))
            except Exception:  # noqa: BLE001 - a missed sample is not a failure
                pass
            self._stop.wait(0.25)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


class Source:
    """One kinesis-source process serving `shards` shards of `records` records in all."""

    def __init__(self, binary: str, shards: int, records: int, size: int, threads: int, limits: bool,
                 payload: str = "ascii", extra: tuple = ()):
        """`extra`: more kinesis-source flags (bench/pipeline.py: `--live-rate`, `--live-start-ms`)."""
        self.process = subprocess.Popen([binary, "--port", "0", "--stream", STREAM, "--shards", str(shards),
                                         "--records-total", str(records), "--record-size", str(size),
                                         "--payload", payload, "--threads", str(threads)] + (["--limits"] if limits else [])
                                        + list(extra),
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.process.stdout.readline().strip()
        if not line.startswith("listening on 127.0.0.1:"):
            raise SystemExit(f"kinesis-source did not start: {line!r}")
        self.url = "http://" + line.split("listening on ", 1)[1]
        self.shards, self.records, self.payload = shards, records, payload

    def cpu(self) -> float:
        return cpu_seconds(self.process.pid)

    def stats(self) -> dict:
        """The source's counters (`GET /stats`)."""
        import urllib.request
        with urllib.request.urlopen(self.url + "/stats", timeout=10) as r:
            return json.load(r)

    def get_records_calls(self) -> int:
        """GetRecords requests served so far, over both protocols."""
        return sum(int(ops.get("GetRecords", 0)) for ops in self.stats().get("requests", {}).values())

    def served(self) -> int:
        """Records served so far, over every run of the source (a record served twice counts twice)."""
        return int(self.stats().get("records", 0))

    def throttled(self) -> int:
        """GetRecords calls the source refused with ProvisionedThroughputExceededException (--limits)."""
        return int(self.stats().get("throttled", 0))

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


def bare_drain(binary: str, source: Source, limit: int) -> dict:
    """The Rust SDK's drain of the whole stream (one task per shard): its records/s and CPU."""
    drain = os.path.join(os.path.dirname(binary), "examples", "drain")
    s0 = source.cpu()
    t0 = time.monotonic()
    proc = subprocess.run(["/usr/bin/time", "-f", "%U %S", drain, source.url, STREAM, str(source.shards), "sdk", str(limit)],
                          capture_output=True, text=True, check=True)
    seconds = time.monotonic() - t0
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    client = sum(float(x) for x in proc.stderr.strip().splitlines()[-1].split())
    return {"records": out["records"], "rps": out["records"] / out["seconds"],
            "client_cpu_per_million": client / out["records"] * 1e6,
            "source_cpu_per_million": (source.cpu() - s0) / out["records"] * 1e6, "seconds": seconds}


def caught_up(nifi: NiFiInstance, source: Source, seconds: float, idle: float) -> dict:
    """The consumer, still running, after it has read everything: NiFi's CPU and the GetRecords calls over
    `seconds`, after 5 s for the last batches to commit and checkpoint."""
    time.sleep(5)
    cpu0, calls0, t0 = cpu_seconds(nifi.pid), source.get_records_calls(), time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - t0
    cores = (cpu_seconds(nifi.pid) - cpu0) / elapsed
    return {"caught_up_cores": cores, "caught_up_cores_net": cores - idle,
            "caught_up_get_records_per_shard_s": (source.get_records_calls() - calls0) / elapsed / source.shards}


def one_run(nifi: NiFiInstance, group: str, source: Source, strategy: str, size: int, limit: int, idle: float,
            timeout: float, profile: str = "", services: dict | None = None, caught_up_seconds: float = 0,
            live_heap_every: float = 0, output_strategy: str = "") -> dict:
    c = nifi.client
    props = consumer_properties(STREAM, unique("bench-app"), **{
        "Endpoint Override URL": source.url, "DynamoDB Endpoint Override URL": dynamodb_endpoint(),
        "Max Records Per Request": str(limit)})
    pid = c.add_processor(group, CONSUMER, bundle=BUNDLE, name=f"bench {strategy}", properties=props)["id"]
    wanted = strategy_properties(strategy, services or {})
    if output_strategy:
        wanted["Output Strategy"] = output_strategy
    try:
        record_services.require(c, pid, f"ConsumeKinesis strategy {strategy}", wanted)
    except SystemExit:
        c.delete_processor(pid)
        raise
    c.update_processor(pid, properties=wanted)
    record_services.auto_terminate_all(c, pid)  # success, and parse.failure where the strategy has it
    sampler = PeakSampler(nifi, live_heap_every)
    peak, heap_base = sampler.peak, sampler.heap_base
    cpu0, src0, throttled0, t0 = cpu_seconds(nifi.pid), source.cpu(), source.throttled(), time.monotonic()
    served0 = source.served()  # the source serves the same stream to every run: count this run's
    sampler.start()
    perf = nifi_profile.Recording(nifi.pid, profile) if profile else None
    c.start_processor(pid)
    done, first = 0, None
    while done < source.records:
        if time.monotonic() - t0 > timeout:
            sampler.stop()
            raise SystemExit(f"{strategy}, {source.shards} shards: only {done} of {source.records} records after {timeout} s")
        # NiFi's REST API runs in NiFi and counts in its CPU: ask it for the counter only to see the first record and,
        # once the source has served every record, for the last; in between ask the source (its own process).
        if first is not None and source.served() - served0 < source.records:
            time.sleep(0.2)
            continue
        time.sleep(0.1 if first is not None else 0.2)
        done = records_consumed(c, pid)
        if first is None and done:
            first = time.monotonic() - t0
    elapsed = time.monotonic() - t0
    cpu, src = cpu_seconds(nifi.pid) - cpu0, source.cpu() - src0
    if perf is not None:
        perf.stop()
    sampler.stop()
    idle_consumer = caught_up(nifi, source, caught_up_seconds, idle) if caught_up_seconds > 0 else {}
    c.stop_processor(pid)
    c.delete_processor(pid)
    n = source.records
    return {"shards": source.shards, "strategy": strategy, "seconds": elapsed, "rps": n / elapsed,
            "throttled": source.throttled() - throttled0, "mib_s_per_shard": n * size / elapsed / 2**20 / source.shards,
            "mib_s": n * size / elapsed / 2**20, "cpu_per_million": cpu / n * 1e6,
            "cpu_per_million_net": (cpu - idle * elapsed) / n * 1e6, "nifi_cores": cpu / elapsed,
            "source_cpu_per_million": src / n * 1e6, "heap_base_mb": heap_base / 2**20,
            "heap_peak_mb": peak["heap"] / 2**20, "rss_peak_mb": peak["rss"] / 1024, "first_record_s": first,
            **({"heap_live_peak_mb": peak["live"] / 2**20} if live_heap_every > 0 else {}), **idle_consumer}


FIXTURE = {"group": "com.kinesnow.tests", "artifact": "kinesnow-harness-probe-nar", "version": "1.0.0"}
FLOOR = "com.kinesnow.tests.harness.FlowFileFloor"


def counter(client, name: str, processor_id: str) -> int:
    counters = client.get("counters")["counters"]["aggregateSnapshot"]["counters"]
    return sum(int(c.get("valueCount", 0)) for c in counters if c.get("name") == name and processor_id in (c.get("context") or ""))


def floor_run(nifi: NiFiInstance, group: str, n: int, content: int, attributes: int, idle: float) -> dict:
    """NiFi's own cost of creating and committing FlowFiles (tests/nifi/fixture-nar's FlowFileFloor): batches of
    1000 per session, each FlowFile with `content` bytes and `attributes` attributes and a RECEIVE event."""
    c = nifi.client
    pid = c.add_processor(group, FLOOR, bundle=FIXTURE, name=f"floor {content} B {attributes} attributes",
                          properties={"Batch Size": "1000", "Content Size": str(content), "Attribute Count": str(attributes)},
                          auto_terminate=["success"])["id"]
    jcmd_gc(nifi.pid)
    time.sleep(1)
    cpu0, t0 = cpu_seconds(nifi.pid), time.monotonic()
    c.start_processor(pid)
    done, wait = 0, 0.2
    while done < n:
        time.sleep(wait)
        done = counter(c, "FlowFiles Created", pid)
        # Each request costs NiFi CPU (it counts here as in the drains): ask again when the rate so far says the
        # end is near, at most 1 s and at least 0.1 s later.
        rate = done / (time.monotonic() - t0)
        wait = min(1.0, max(0.1, 0.8 * (n - done) / rate)) if rate > 0 else 0.2
    elapsed, cpu = time.monotonic() - t0, cpu_seconds(nifi.pid) - cpu0
    c.stop_processor(pid)
    done = counter(c, "FlowFiles Created", pid)
    c.delete_processor(pid)
    return {"content": content, "attributes": attributes, "flowfiles": done, "rps": done / elapsed,
            "cpu_per_million": cpu / done * 1e6, "cpu_per_million_net": (cpu - idle * elapsed) / done * 1e6}


def kcl_run(source: Source, size: int) -> dict:
    """The KCL 2.7.2 consumer of tests/kcl-legacy (polling, as NiFi's ConsumeKinesisStream) draining the same
    stream with a new application name: no output per record, one checkpoint per batch (--throughput true). Its
    time and CPU include the JVM's start and KCL's lease bootstrap, as NiFi's include the processor's start."""
    java = subprocess.run([os.path.join(REPO, "tests", "kcl-legacy", "build.sh")], capture_output=True, text=True,
                          check=True).stdout.strip().splitlines()[-1].split()
    cmd = ["/usr/bin/time", "-f", "%U %S"] + java + [
        "--stream", STREAM, "--application", unique("kcl-peer"), "--kinesis-endpoint", source.url,
        "--dynamodb-endpoint", dynamodb_endpoint(), "--max-records", str(source.records), "--exit", "halt",
        "--throughput", "true", "--retrieval", "polling"]
    src0, t0 = source.cpu(), time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    elapsed = time.monotonic() - t0
    # --exit halt ends the JVM right after the checkpoint that reaches --max-records, saying so on stderr.
    if proc.returncode != 0 or f"halting: max records {source.records}" not in proc.stderr:
        raise SystemExit(f"KCL did not read {source.records} records (exit {proc.returncode}): {proc.stderr[-2000:]}")
    cpu = sum(float(x) for x in proc.stderr.strip().splitlines()[-1].split())
    n = source.records
    return {"shards": source.shards, "strategy": "KCL 2.7.2 (polling)", "seconds": elapsed, "rps": n / elapsed,
            "mib_s": n * size / elapsed / 2**20, "cpu_per_million": cpu / n * 1e6,
            "source_cpu_per_million": (source.cpu() - src0) / n * 1e6}


def record_summary(args, strategies: list, medians: dict) -> None:
    """The run's medians into bench/results/summary.json: PREFIX.<shards>.<strategy or KCL>.<figure>, the floor's
    as PREFIX.floor.<bytes>B_<attributes>attrs.<figure>, and each strategy's CPU over the first one's."""
    import summary
    cpu = "NiFi CPU-s per million records" if args.record_size != 1024 else "NiFi CPU-s per million 1 KiB records"
    figures = {}
    for key, med in medians.items():
        where, what = key.split("/", 1)
        if where == "floor":
            content, attributes = what.split("/")
            figures[f"floor.{content}B_{attributes}attrs.cpu_per_million"] = (med["cpu_per_million"], cpu.replace("records", "FlowFiles"))
        elif what == "KCL":
            figures[f"{where}.KCL.cpu_per_million"] = (med["cpu_per_million"], "CPU-s per million records of the KCL process")
            figures[f"{where}.KCL.records_per_s"] = (med["rps"], "records/s")
        elif what in strategies:
            figures[f"{where}.{what}.cpu_per_million"] = (med["cpu_per_million"], cpu)
            figures[f"{where}.{what}.cpu_per_million_net"] = (med["cpu_per_million_net"], cpu + ", net of an idle NiFi")
            figures[f"{where}.{what}.records_per_s"] = (med["rps"], "records/s")
            figures[f"{where}.{what}.mib_s_per_shard"] = (med["mib_s_per_shard"], "MiB/s per shard")
            figures[f"{where}.{what}.heap_peak_mb"] = (med["heap_peak_mb"], f"MB peak used heap ({args.heap} heap)")
            base = medians.get(f"{where}/{strategies[0]}")
            if what != strategies[0] and base:
                figures[f"{where}.{what}.cpu_over_{strategies[0]}"] = (
                    med["cpu_per_million"] / base["cpu_per_million"], f"NiFi CPU per record, ÷ {strategies[0]}'s")
    command = "bench/consume-source.sh " + " ".join(sys.argv[1:])
    summary.record(args.record_summary, figures, command)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shards", default="1,16,64,256")
    ap.add_argument("--records", type=int, default=200000, help="records per drain, over all shards")
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--warmup-runs", type=int, default=1)
    ap.add_argument("--strategies", default="FLOW_FILE,LINE_DELIMITED", help=f"comma-separated, of {', '.join(STRATEGIES)}")
    ap.add_argument("--text-payload", default="ascii", choices=("ascii", "json"),
                    help="the payload FLOW_FILE, LINE_DELIMITED and DEMARCATOR read (json: the same bytes as RECORD_JSON)")
    ap.add_argument("--output-strategy", default="", choices=("", "USE_VALUE", "USE_WRAPPER", "INJECT_METADATA"),
                    help="ConsumeKinesis' Output Strategy (empty: its default); USE_WRAPPER and INJECT_METADATA want "
                         "--text-payload json")
    ap.add_argument("--max-records-per-request", type=int, default=1000)
    ap.add_argument("--source-threads", type=int, default=1)
    ap.add_argument("--limits", action="store_true",
                    help="the source enforces Kinesis' per-shard limits (5 GetRecords/s, 2 MiB/s) and counts throttles")
    ap.add_argument("--heap", default="1g")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--kcl", action="store_true", help="also drain each stream with the KCL 2.7.2 consumer (the peer)")
    ap.add_argument("--floor", action="store_true",
                    help="also measure NiFi's own cost of FlowFiles (a trivial processor creating and committing them)")
    ap.add_argument("--profile", help="record the first measured run of each shard count and strategy with perf "
                                      "(cpu-clock samples of the NiFi JVM) and write the reports into this directory")
    ap.add_argument("--caught-up-seconds", type=float, default=0,
                    help="after each measured drain of the first strategy, keep the consumer running this long once it "
                         "has read everything, and measure its CPU and GetRecords calls per shard (the idle cost)")
    ap.add_argument("--live-heap-every", type=float, default=0,
                    help="every this many seconds of a drain, force a full GC (jcmd GC.run) and sample the used heap "
                         "right after it: the peak heap the drain holds, garbage left out. The forced GCs cost NiFi "
                         "CPU, so take CPU figures from runs without it")
    ap.add_argument("--json", help="also write the results to this file")
    ap.add_argument("--record-summary", metavar="PREFIX",
                    help="also write the medians into bench/results/summary.json under PREFIX. (bench/summary.py)")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.profile:
        os.makedirs(args.profile, exist_ok=True)
    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    unknown = [s for s in strategies if s not in STRATEGIES]
    if unknown:
        ap.error(f"unknown strategies {unknown}: use {', '.join(STRATEGIES)}")
    payloads = list(dict.fromkeys(payload_of(s, args.text_payload) for s in strategies))
    main_payload = args.text_payload if args.text_payload in payloads else payloads[0]
    for p in payloads:
        print(f"source payload {p}: {', '.join(s for s in strategies if payload_of(s, args.text_payload) == p)}"
              + ("" if p == main_payload else " (its own source process: same shards, records and record size)"),
              flush=True)
    shard_counts = [int(s) for s in args.shards.split(",") if s.strip()]
    binary = subprocess.run([os.path.join(HERE, "kinesis-source", "build.sh")], capture_output=True, text=True,
                            check=True).stdout.strip().splitlines()[-1]

    services = ensure_services()
    nifi = None
    results, ceilings, kcls = [], {}, []
    try:
        extensions = [built_nar()]
        if args.floor:
            extensions.append(subprocess.run([os.path.join(REPO, "tests", "nifi", "fixture-nar", "build.sh")], capture_output=True,
                                             text=True, check=True).stdout.strip().splitlines()[-1])
        nifi = NiFiInstance.start(port=free_port(), extensions=extensions, heap=args.heap)
        print(f"NiFi up (PID {nifi.pid}, heap {args.heap}) in {nifi.start_seconds:.0f} s", flush=True)
        group = nifi.client.create_process_group("source benchmark")["id"]
        services_ids = record_services_for(nifi.client, group, strategies, binary)
        check_strategies(nifi.client, group, strategies, services_ids)
        idle0, t_idle = cpu_seconds(nifi.pid), time.monotonic()
        time.sleep(15)
        idle = (cpu_seconds(nifi.pid) - idle0) / (time.monotonic() - t_idle)
        print(f"idle NiFi: {idle:.3f} CPU-s per second", flush=True)
        for shards in shard_counts:
            sources = {}
            for p in [main_payload] + [p for p in payloads if p != main_payload]:
                sources[p] = Source(binary, shards, args.records, args.record_size, args.source_threads, args.limits, p)
            source = sources[main_payload]  # the bare drain's and KCL's
            try:
                # The bare drain does not pace itself: with the source's limits on it would be throttled.
                ceilings[shards] = None if args.limits else bare_drain(binary, source, args.max_records_per_request)
                b = ceilings[shards]
                if b:
                        print(f"{shards:4d} shards  bare Rust SDK drain: {b['rps']:8.0f} records/s, client {b['client_cpu_per_million']:5.1f} "
                          f"CPU-s per million, source {b['source_cpu_per_million']:5.1f}", flush=True)
                for run in range(1 - args.warmup_runs, args.runs + 1):
                    if args.kcl:
                        k = kcl_run(source, args.record_size)
                        k["run"] = run
                        if run > 0:
                            kcls.append(k)
                        print(f"{shards:4d} shards  {'run ' + str(run) if run > 0 else 'warm-up'} KCL 2.7.2 polling  {k['rps']:8.0f} records/s "
                              f"{k['mib_s']:6.1f} MiB/s  KCL process {k['cpu_per_million']:6.1f} CPU-s per million  source "
                              f"{k['source_cpu_per_million']:5.1f}", flush=True)
                    for strategy in strategies:
                        data = os.path.join(args.profile, f"perf-{shards}-{strategy}.data") if args.profile and run == 1 else ""
                        idle_window = args.caught_up_seconds if run > 0 and strategy == strategies[0] else 0
                        r = one_run(nifi, group, sources[payload_of(strategy, args.text_payload)], strategy, args.record_size,
                                    args.max_records_per_request, idle, args.timeout, data, services_ids, idle_window,
                                    args.live_heap_every, args.output_strategy)
                        if data:
                            with open(data[:-5] + ".txt", "w", encoding="utf-8") as f:
                                f.write(nifi_profile.report(nifi.pid, data))
                        r["run"] = run
                        if run > 0:
                            results.append(r)
                        print(f"{shards:4d} shards  {'run ' + str(run) if run > 0 else 'warm-up'} {strategy:15s} {r['rps']:8.0f} records/s "
                              f"{r['mib_s']:6.1f} MiB/s ({r['mib_s_per_shard']:.2f} per shard, {r['throttled']} throttled)  NiFi {r['cpu_per_million']:6.1f} CPU-s per million (net {r['cpu_per_million_net']:6.1f}, "
                              f"{r['nifi_cores']:.2f} cores)  source {r['source_cpu_per_million']:5.1f}  heap {r['heap_base_mb']:.0f} -> "
                              f"{r['heap_peak_mb']:.0f} MB" + (f" (live {r['heap_live_peak_mb']:.0f} MB)" if "heap_live_peak_mb" in r else "")
                              + f"  RSS {r['rss_peak_mb']:.0f} MB  first record {r['first_record_s']:.1f} s",
                              flush=True)
                        if "caught_up_cores" in r:
                            print(f"{shards:4d} shards  caught up ({args.caught_up_seconds:.0f} s): NiFi {r['caught_up_cores']:.3f} cores "
                                  f"(net of idle NiFi {r['caught_up_cores_net']:.3f}), "
                                  f"{r['caught_up_get_records_per_shard_s']:.2f} GetRecords per shard per second", flush=True)
            finally:
                for src in sources.values():
                    src.stop()
        floors = []
        if args.floor:
            for run in range(1 - args.warmup_runs, args.runs + 1):
                for content, attributes in ((0, 0), (args.record_size, 10)):
                    f = floor_run(nifi, group, args.records, content, attributes, idle)
                    f["run"] = run
                    if run > 0:
                        floors.append(f)
                    print(f"floor {'run ' + str(run) if run > 0 else 'warm-up'} {content} B, {attributes} attributes: {f['rps']:8.0f} "
                          f"FlowFiles/s, NiFi {f['cpu_per_million']:6.1f} CPU-s per million (net {f['cpu_per_million_net']:6.1f})", flush=True)
        print()
        print(f"medians of {args.runs} runs after {args.warmup_runs} warm-up round(s) per shard count; {args.records} records of "
              f"{args.record_size} bytes per drain; GetRecords Limit {args.max_records_per_request}; NiFi heap {args.heap}; "
              f"payloads: " + "; ".join(f"{s} {payload_of(s, args.text_payload)}" for s in strategies)
              + (f"; Message Demarcator {DEMARCATOR!r}" if "DEMARCATOR" in strategies else ""))
        print("| shards | Processing Strategy | records/s | MiB/s (per shard) | throttles | NiFi CPU-s per million (net of idle) | "
              "NiFi cores | source CPU-s per million | peak used heap (MB) | peak RSS (MB) |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        summary = {}
        for shards in shard_counts:
            b = ceilings[shards]
            if b:
                print(f"| {shards} | bare Rust SDK drain (no NiFi, no pacing) | {b['rps']:.0f} | {b['rps'] * args.record_size / 2**20:.0f} | | "
                      f"{b['client_cpu_per_million']:.1f} (the drain process) | | {b['source_cpu_per_million']:.1f} | | |")
            for strategy in strategies:
                rs = [r for r in results if r["strategy"] == strategy and r["shards"] == shards]
                med = {k: statistics.median(r[k] for r in rs) for k in
                       ("rps", "mib_s", "mib_s_per_shard", "throttled", "cpu_per_million", "cpu_per_million_net", "nifi_cores", "source_cpu_per_million",
                        "heap_peak_mb", "rss_peak_mb")}
                summary[f"{shards}/{strategy}"] = med
                print(f"| {shards} | {strategy} | {med['rps']:.0f} | {med['mib_s']:.1f} ({med['mib_s_per_shard']:.2f}) | "
                      f"{med['throttled']:.0f} | {med['cpu_per_million']:.1f} "
                      f"({med['cpu_per_million_net']:.1f}) | {med['nifi_cores']:.2f} | {med['source_cpu_per_million']:.1f} | "
                      f"{med['heap_peak_mb']:.0f} | {med['rss_peak_mb']:.0f} |")
                if all("heap_live_peak_mb" in r for r in rs):
                    med["heap_live_peak_mb"] = statistics.median(r["heap_live_peak_mb"] for r in rs)
        lives = {k: v for k, v in summary.items() if "heap_live_peak_mb" in v}
        if lives:
            print()
            print(f"peak live heap while draining (used heap right after a full GC forced every {args.live_heap_every:.0f} s; medians)")
            print("| shards / Processing Strategy | peak live heap (MB) |")
            print("|---|---|")
            for key, med in lives.items():
                print(f"| {key} | {med['heap_live_peak_mb']:.0f} |")
        idles = [r for r in results if "caught_up_cores" in r]
        if idles:
            print()
            print(f"caught-up consumer ({strategies[0]}, {args.caught_up_seconds:.0f} s after each measured drain; medians)")
            print("| shards | NiFi cores | net of idle NiFi | GetRecords per shard per second |")
            print("|---|---|---|---|")
            for shards in shard_counts:
                rs = [r for r in idles if r["shards"] == shards]
                if rs:
                    med = {k: statistics.median(r[k] for r in rs) for k in
                           ("caught_up_cores", "caught_up_cores_net", "caught_up_get_records_per_shard_s")}
                    summary[f"{shards}/caught_up"] = med
                    print(f"| {shards} | {med['caught_up_cores']:.3f} | {med['caught_up_cores_net']:.3f} | "
                          f"{med['caught_up_get_records_per_shard_s']:.2f} |")
        if len(strategies) > 1:
            base = strategies[0]
            print()
            print(f"ratios to {base} (medians over medians, same run)")
            print(f"| shards | Processing Strategy | NiFi CPU-s per million ÷ {base}'s | net of idle ÷ {base}'s | records/s ÷ {base}'s |")
            print("|---|---|---|---|---|")
            for shards in shard_counts:
                b = summary[f"{shards}/{base}"]
                for strategy in strategies[1:]:
                    m = summary[f"{shards}/{strategy}"]
                    print(f"| {shards} | {strategy} | {m['cpu_per_million'] / b['cpu_per_million']:.2f} | "
                          f"{m['cpu_per_million_net'] / b['cpu_per_million_net']:.2f} | {m['rps'] / b['rps']:.2f} |")
            print()
        for shards in shard_counts:
            ks = [k for k in kcls if k["shards"] == shards]
            if ks:
                med = {k: statistics.median(x[k] for x in ks) for k in ("rps", "mib_s", "cpu_per_million", "source_cpu_per_million")}
                summary[f"{shards}/KCL"] = med
                print(f"| {shards} | KCL 2.7.2 polling (its own JVM, start included) | {med['rps']:.0f} | {med['mib_s']:.1f} | | "
                      f"{med['cpu_per_million']:.1f} (the KCL process) | | {med['source_cpu_per_million']:.1f} | | |")
        for content, attributes in ((0, 0), (args.record_size, 10)):
            fs = [f for f in floors if f["content"] == content and f["attributes"] == attributes]
            if fs:
                med = {k: statistics.median(f[k] for f in fs) for k in ("rps", "cpu_per_million", "cpu_per_million_net")}
                summary[f"floor/{content}/{attributes}"] = med
                print(f"| | NiFi's floor: FlowFiles of {content} bytes with {attributes} attributes, RECEIVE each, 1000 per "
                      f"session | {med['rps']:.0f} | | | {med['cpu_per_million']:.1f} ({med['cpu_per_million_net']:.1f}) | | | | |")
        if args.record_summary:
            record_summary(args, strategies, summary)
        if args.json:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump({"args": vars(args), "idle_nifi_cores": idle, "ceilings": ceilings, "runs": results,
                           "floors": floors, "kcl": kcls, "medians": summary}, f, indent=1)
    finally:
        if nifi is not None:
            nifi.stop()
        services.stop_if_started()


if __name__ == "__main__":
    main()
