"""PutSnowflake in a real NiFi, JSON content against the Record Reader path (issue 18, "Measure"): the same
1 KiB records, loaded into the Snowflake stand-in (tests/lib/standin.py) three ways, run by run in turn:

- JSON: NDJSON content, no Record Reader (PutSnowflake's JSON path, as today);
- JSON_READER: the same NDJSON read by a JsonTreeReader (Schema Access Strategy infer-schema);
- AVRO_READER: the same records as one Avro container file per FlowFile (written by fastavro, tests/avro),
  read by an AvroReader with the embedded schema.

The records are the benchmark Kinesis source's json payload (bench/kinesis-source --payload json --dump: one
object {"shard","index","sub","data"} of exactly --record-size bytes each). Each FlowFile holds
--records-per-flow-file of them, with the attributes ConsumeKinesis writes (tests/nifi/fixture-nar's
KinesisBatchSource: stream, region, shard round robin, first/last sequence numbers, record.count); the records
carry no kinesisMetadata, so every variant goes through PutSnowflake's at-least-once channels (the metadata
comes from the attributes), and the count of rows is exact.

Each variant has its own group (parameter-contexts/apply.py's local flow; ConsumeKinesis there is never
started), its own table, and its reader services enabled before anything starts. A run starts the group's
KinesisBatchSource, which emits --flow-files FlowFiles, and ends when the table holds every row of the run
(checked exactly, with nothing in the failure/invalid queue). Per run: rows/s, NiFi CPU-seconds per million rows
(utime+stime of the NiFi JVM over the run, also net of an idle NiFi measured before the runs), and the same for
INPUT (the KinesisBatchSource alone, its FlowFiles auto-terminated: the input's own share of every run's CPU).

    bench/put-records.sh [--flow-files 200] [--records-per-flow-file 500] [--runs 3] [--variants JSON,JSON_READER,AVRO_READER]

JSON_READER and AVRO_READER need PutSnowflake's "Record Reader" property (issue 18); without it in the NAR the
script stops with a message saying so before any run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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
import avro  # noqa: E402
import record_services  # noqa: E402
from consumer_flow import built_nar  # noqa: E402
from e2e_consume import cpu_seconds, jcmd_gc  # noqa: E402
import nifi_profile  # noqa: E402
from nifi_instance import NiFiInstance, free_port  # noqa: E402
from standin import Standin, make_key_pair  # noqa: E402

ACCOUNT, USER = "kinesnow-local", "KINESNOW"
VARIANTS = ("JSON", "JSON_READER", "AVRO_READER")
FIXTURE = {"group": "com.kinesnow.tests", "artifact": "kinesnow-harness-probe-nar", "version": "1.0.0"}
BATCH_SOURCE = "com.kinesnow.tests.harness.KinesisBatchSource"


def source_binary() -> str:
    """bench/kinesis-source's binary (built on first use, cached)."""
    return subprocess.run([os.path.join(HERE, "kinesis-source", "build.sh")], capture_output=True, text=True,
                          check=True).stdout.strip().splitlines()[-1]


def contents(work: str, size: int, per_flow_file: int) -> dict:
    """The content file of each variant: `per_flow_file` json-payload records of `size` bytes (the source's
    --dump) as NDJSON, and the same records as one Avro container file of the source's avro schema."""
    binary = source_binary()
    dumped = subprocess.run([binary, "--payload", "json", "--shards", "1", "--records-per-shard", str(per_flow_file),
                             "--record-size", str(size), "--created-at-ms", "1767225600000", "--dump"],
                            capture_output=True, text=True, check=True).stdout
    recs = [json.loads(line)["data"] for line in dumped.splitlines() if line.strip()]
    ndjson = os.path.join(work, "records.ndjson")
    with open(ndjson, "w", encoding="utf-8") as f:
        f.write("\n".join(recs) + "\n")
    schema = json.loads(subprocess.run([binary, "--avro-schema"], capture_output=True, text=True, check=True).stdout)
    container = avro.encode(schema, [json.loads(r) for r in recs], "file")[0]
    path = os.path.join(work, "records.avro")
    with open(path, "wb") as f:
        f.write(container)
    return {"JSON": ndjson, "JSON_READER": ndjson, "AVRO_READER": path, "INPUT": ndjson}


def counter(client, name: str, processor_id: str) -> int:
    counters = client.get("counters")["counters"]["aggregateSnapshot"]["counters"]
    return sum(int(c.get("valueCount", 0)) for c in counters if c.get("name") == name and processor_id in (c.get("context") or ""))


def table_rows(sf: Standin, table: str) -> int:
    return int(sf.query(f"SELECT COUNT(*) AS C FROM KINESNOW.PUBLIC.{table}")[0]["C"])


class Variant:
    """One variant's group: PutSnowflake (with its reader) fed by a KinesisBatchSource, into its own table."""

    def __init__(self, c, sf: Standin, work: str, name: str, content: str, args):
        self.c, self.sf, self.name = c, sf, name
        self.table = f"BENCH_{name}"
        sf.sql(f"CREATE OR REPLACE TABLE KINESNOW.PUBLIC.{self.table} (SHARD NUMBER) ENABLE_SCHEMA_EVOLUTION = TRUE")
        ids = flow.apply(c, "local", {"KINESNOW_WORK": work, "SNOWFLAKE_URL": sf.url}, f"put {name}",
                         context_suffix=f" [{name}]")
        c.update_parameters(ids["destination_context"], {"Snowflake Destination Table": self.table})
        self.sink, self.failures = ids["sink"], ids["failure_queue"]
        if name == "JSON_READER":
            reader = record_services.json_reader(c, ids["group"])
        elif name == "AVRO_READER":
            reader = record_services.avro_reader(c, ids["group"])  # the container file's embedded schema
        else:
            reader = None
        if reader:
            try:
                record_services.require(c, self.sink, f"PutSnowflake variant {name}", {"Record Reader": reader})
            except SystemExit as e:
                raise SystemExit(f"{e}\n(PutSnowflake's \"Record Reader\" property is issue 18's; run --variants JSON "
                                 f"until it is in the NAR)") from None
            c.update_processor(self.sink, properties={"Record Reader": reader})
        self.source = c.add_processor(ids["group"], BATCH_SOURCE, bundle=FIXTURE, name=f"input {name}",
                                      properties={"Content File": content, "FlowFile Count": str(args.flow_files),
                                                  "Records Per FlowFile": str(args.records_per_flow_file),
                                                  "Batch Size": "50", "Shards": str(args.shards)},
                                      position=(-400, 150))["id"]
        c.connect(ids["group"], self.source, self.sink, ["success"])
        v = c.processor_validation(self.sink)
        if v["status"] != "VALID":
            raise SystemExit(f"PutSnowflake of {name} is {v['status']}: {v['errors']}")
        c.start_processor(self.sink)


def run(nifi: NiFiInstance, v: Variant, rows: int, idle: float, timeout: float, profile: str = "") -> dict:
    c = nifi.client
    base = table_rows(v.sf, v.table)
    jcmd_gc(nifi.pid)
    time.sleep(1)
    cpu0, t0 = cpu_seconds(nifi.pid), time.monotonic()
    perf = nifi_profile.Recording(nifi.pid, profile) if profile else None
    c.start_processor(v.source)
    got = base
    while got < base + rows:
        if time.monotonic() - t0 > timeout:
            raise SystemExit(f"{v.name}: {got - base} of {rows} rows after {timeout} s")
        if c.connection_queue_count(v.failures):
            raise SystemExit(f"{v.name}: FlowFiles in PutSnowflake's failure/invalid queue (see NiFi's bulletins)")
        time.sleep(0.25)
        got = table_rows(v.sf, v.table)
    elapsed, cpu = time.monotonic() - t0, cpu_seconds(nifi.pid) - cpu0
    if perf is not None:
        perf.stop()
        with open(profile[:-5] + ".txt", "w", encoding="utf-8") as f:
            f.write(nifi_profile.report(nifi.pid, profile))
    c.stop_processor(v.source)
    time.sleep(1)
    extra = table_rows(v.sf, v.table) - base - rows
    if extra:
        raise SystemExit(f"{v.name}: {extra} rows more than sent (at-least-once redelivery?): the run does not count")
    return {"variant": v.name, "rows": rows, "seconds": elapsed, "rows_s": rows / elapsed,
            "cpu_per_million": cpu / rows * 1e6, "cpu_per_million_net": (cpu - idle * elapsed) / rows * 1e6}


def input_run(nifi: NiFiInstance, group: str, content: str, args, idle: float) -> dict:
    """The KinesisBatchSource alone (FlowFiles auto-terminated): the input's share of a run's CPU."""
    c = nifi.client
    pid = c.add_processor(group, BATCH_SOURCE, bundle=FIXTURE, name="input only",
                          properties={"Content File": content, "FlowFile Count": str(args.flow_files),
                                      "Records Per FlowFile": str(args.records_per_flow_file), "Batch Size": "50",
                                      "Shards": str(args.shards)}, auto_terminate=["success"])["id"]
    jcmd_gc(nifi.pid)
    time.sleep(1)
    cpu0, t0 = cpu_seconds(nifi.pid), time.monotonic()
    c.start_processor(pid)
    while counter(c, "FlowFiles Created", pid) < args.flow_files:
        time.sleep(0.1)
    elapsed, cpu = time.monotonic() - t0, cpu_seconds(nifi.pid) - cpu0
    c.delete_processor(pid)
    rows = args.flow_files * args.records_per_flow_file
    return {"variant": "INPUT", "rows": rows, "seconds": elapsed, "rows_s": rows / elapsed,
            "cpu_per_million": cpu / rows * 1e6, "cpu_per_million_net": (cpu - idle * elapsed) / rows * 1e6}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {', '.join(VARIANTS)}")
    ap.add_argument("--flow-files", type=int, default=200, help="FlowFiles per run")
    ap.add_argument("--records-per-flow-file", type=int, default=500)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--shards", type=int, default=4, help="shards the FlowFiles' attributes name, round robin")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--warmup-runs", type=int, default=1)
    ap.add_argument("--heap", default="1g")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--no-input-run", action="store_true", help="skip measuring the input processor alone")
    ap.add_argument("--json", help="also write the results to this file")
    ap.add_argument("--profile", help="record the first measured run of each variant with perf (cpu-clock) into this "
                    "directory: perf-<variant>.data and a report by part, library and symbol in perf-<variant>.txt; those "
                    "runs' CPU includes perf's overhead")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (contents, key, stand-in state)")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        ap.error(f"unknown variants {unknown}: use {', '.join(VARIANTS)}")
    rows = args.flow_files * args.records_per_flow_file
    if args.profile:
        os.makedirs(args.profile, exist_ok=True)
    os.makedirs(os.path.join(REPO, "bench", ".work"), exist_ok=True)
    work = tempfile.mkdtemp(prefix="put-records-", dir=os.path.join(REPO, "bench", ".work"))
    files = contents(work, args.record_size, args.records_per_flow_file)
    sizes = {k: os.path.getsize(p) for k, p in files.items()}
    print(f"content per FlowFile: {args.records_per_flow_file} records of {args.record_size} B; NDJSON {sizes['JSON']} B, "
          f"Avro container {sizes['AVRO_READER']} B", flush=True)
    fixture = subprocess.run([os.path.join(REPO, "tests", "nifi", "fixture-nar", "build.sh")], capture_output=True,
                             text=True, check=True).stdout.strip().splitlines()[-1]
    _, public_key = make_key_pair(os.path.join(work, "snowflake"))
    sf = Standin.start(os.path.join(work, "standin"), commit_lag_ms=300)
    nifi = None
    results = []
    try:
        sf.register_user(ACCOUNT, USER, public_key)
        nifi = NiFiInstance.start(port=free_port(), extensions=[built_nar(), fixture], heap=args.heap)
        print(f"NiFi up (PID {nifi.pid}, heap {args.heap}) in {nifi.start_seconds:.0f} s; stand-in PID {sf.proc.pid}", flush=True)
        groups = {name: Variant(nifi.client, sf, work, name, files[name], args) for name in variants}
        input_group = nifi.client.create_process_group("put benchmark input")["id"]
        idle0, t_idle = cpu_seconds(nifi.pid), time.monotonic()
        time.sleep(15)
        idle = (cpu_seconds(nifi.pid) - idle0) / (time.monotonic() - t_idle)
        print(f"idle NiFi (the PutSnowflakes started, no input): {idle:.3f} CPU-s per second", flush=True)
        for r in range(1 - args.warmup_runs, args.runs + 1):
            order = variants + ([] if args.no_input_run else ["INPUT"])
            for name in order:  # in turn, so slow drifts of the machine hit every variant alike
                res = (input_run(nifi, input_group, files["INPUT"], args, idle) if name == "INPUT"
                       else run(nifi, groups[name], rows, idle, args.timeout,
                                os.path.join(args.profile, f"perf-{name}.data") if args.profile and r == 1 else ""))
                res["run"] = r
                if r > 0:
                    results.append(res)
                print(f"{'run ' + str(r) if r > 0 else 'warm-up'} {name:12s} {res['rows_s']:8.0f} rows/s  NiFi "
                      f"{res['cpu_per_million']:6.1f} CPU-s per million rows (net of idle {res['cpu_per_million_net']:6.1f})"
                      + ("" if name == "INPUT" else f"  table +{res['rows']} rows, exact"), flush=True)
        print()
        print(f"medians of {args.runs} runs after {args.warmup_runs} warm-up round(s); {rows} rows of {args.record_size} B per run, "
              f"{args.flow_files} FlowFiles of {args.records_per_flow_file} records; NiFi heap {args.heap}")
        print("| variant | rows/s | NiFi CPU-s per million rows (net of idle) | ratio to JSON (net) |")
        print("|---|---|---|---|")
        med = {}
        for name in variants + ([] if args.no_input_run else ["INPUT"]):
            rs = [x for x in results if x["variant"] == name]
            med[name] = {k: statistics.median(x[k] for x in rs) for k in ("rows_s", "cpu_per_million", "cpu_per_million_net")}
        for name, m in med.items():
            ratio = (f"{m['cpu_per_million_net'] / med['JSON']['cpu_per_million_net']:.2f}"
                     if "JSON" in med and name not in ("JSON", "INPUT") else "")
            label = "INPUT (KinesisBatchSource alone, in every run's figure)" if name == "INPUT" else name
            print(f"| {label} | {m['rows_s']:.0f} | {m['cpu_per_million']:.1f} ({m['cpu_per_million_net']:.1f}) | {ratio} |")
        if args.json:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump({"args": vars(args), "idle_nifi_cores": idle, "runs": results, "medians": med}, f, indent=1)
    finally:
        if nifi is not None:
            nifi.stop()
        sf.stop()
        if args.keep:
            print(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
