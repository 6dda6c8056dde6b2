"""PutSnowflake benchmark helper (bench/sink.sh): generates the data set, and sends it to the
Snowflake stand-in with Snowflake's official `snowpipe-streaming` Python SDK.

  sink_bench.py gen --out DIR --rows N --channels C [--row-bytes 1024] [--seed 1]
      DIR/shard-NNN.ndjson: N rows over C shards, one ~row-bytes JSON object per line with
      kinesisMetadata injected, exactly as ConsumeKinesis writes them (Processing Strategy
      LINE_DELIMITED, Output Strategy INJECT_METADATA). Deterministic for a seed.

  sink_bench.py sdk --url URL --data DIR --table NAME --key PKCS8 [--records-per-flow-file 500]
                    [--standin-pid PID]
      The same FlowFiles PutSnowflake's driver (rust-core/examples/sink_bench.rs) submits, in the
      same round-robin shard order: one SDK channel per shard, named as PutSnowflake names it;
      each FlowFile's NDJSON is decoded (msgspec, the SDK's own JSON library) and appended with
      append_rows(rows, first shardedSequenceNumber, last shardedSequenceNumber). The clock runs
      from creating the client until get_channel_statuses shows every channel's last token
      committed (polled every 250 ms, as PutSnowflake polls bulk status; the SDK answers from a
      status cache it refreshes about once a second). CPU is this process's (Python and the SDK's
      Rust core threads). Fails if the process ever holds a TCP connection to a non-loopback
      address (the SDK's "file mode" would upload to the cloud stage named in pipe-info). The stand-in must be TLS; SSL_CERT_FILE names its
      CA. Prints one JSON line prefixed with RESULT. --sdk-property KEY=VALUE sets an SDK property
      (bench/sink.sh sets two, see BENCHMARKS.md); --pace-mb-per-s appends no faster than that.

  sink_bench.py report --results RESULTS.jsonl ... [--write BENCHMARKS.md]
      Medians and ratios as a Markdown block, written between its markers in BENCHMARKS.md.
"""

import argparse
import json
import os
import random
import socket
import ssl
import struct
import sys
import time
import urllib.request
from pathlib import Path

ACCOUNT = "TESTACCT"
USER = "LOADER"
STREAM = "orders"

WORDS = (
    "order customer shipment payment refund invoice warehouse parcel courier address street city "
    "express standard priority delivered pending cancelled returned gift wrap note fragile handle "
    "with care leave at door ring bell twice signature required weekend evening morning discount "
    "coupon loyalty member tier gold silver bronze campaign spring summer autumn winter sale"
).split()
CITIES = ["Berlin", "Lisbon", "Oslo", "Dublin", "Vienna", "Prague", "Madrid", "Milan", "Lyon", "Ghent"]
EVENT_TYPES = ["order_created", "order_paid", "order_shipped", "order_delivered", "order_cancelled"]
USER_AGENT = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"
BASE_SEQUENCE = 49590338271490256608559692538361571095921575989136588898


def record(rng: random.Random, shard: int, i: int, row_bytes: int) -> str:
    sequence = str(BASE_SEQUENCE + shard * 10**40 + i * 1_000_003)
    shard_id = f"shardId-{shard:012d}"
    partition_key = f"customer-{rng.randrange(10**7)}"
    items = [
        {"sku": f"SKU-{rng.randrange(10**6):06d}", "qty": rng.randrange(1, 5), "price": round(rng.uniform(1, 200), 2)}
        for _ in range(rng.randrange(1, 4))
    ]
    obj = {
        "eventId": f"{shard:03d}-{i:010d}-{rng.getrandbits(64):016x}",
        "eventType": rng.choice(EVENT_TYPES),
        "eventTime": f"2026-11-29T{rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}.{rng.randrange(1000):03d}Z",
        "customerId": rng.randrange(1, 10**7),
        "amount": round(rng.uniform(1, 2000), 2),
        "currency": rng.choice(["EUR", "USD", "GBP", "NOK"]),
        "items": items,
        "shipping": {
            "street": f"{rng.randrange(1, 300)} {rng.choice(WORDS).title()} Street",
            "city": rng.choice(CITIES),
            "zip": f"{rng.randrange(10**5):05d}",
            "country": rng.choice(["DE", "PT", "NO", "IE", "AT", "CZ", "ES", "IT", "FR", "BE"]),
        },
        "userAgent": USER_AGENT,
        "note": "",
        "kinesisMetadata": {
            "stream": STREAM,
            "shardId": shard_id,
            "sequenceNumber": sequence,
            "subSequenceNumber": 0,
            "shardedSequenceNumber": f"{sequence}{0:020d}",
            "partitionKey": partition_key,
            "approximateArrival": 1764441000000 + i,
        },
    }
    # Compact JSON as serde_json writes it; the note fills the row up to row_bytes.
    short = len(json.dumps(obj, separators=(",", ":")))
    note = []
    while sum(len(w) + 1 for w in note) < row_bytes - short:
        note.append(rng.choice(WORDS))
    obj["note"] = " ".join(note)[: max(0, row_bytes - short)]
    return json.dumps(obj, separators=(",", ":"))


def gen(args):
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    per_shard = args.rows // args.channels
    rng = random.Random(args.seed)
    for shard in range(args.channels):
        with open(out / f"shard-{shard:03d}.ndjson", "w") as f:
            for i in range(per_shard):
                f.write(record(rng, shard, i, args.row_bytes))
                f.write("\n")
    print(out)


def cpu_seconds(pid="self") -> float:
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rfind(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def remote_peers() -> set:
    """Remote addresses of this process's TCP sockets that are not loopback (must stay empty)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    peers = set()
    for table, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if parts[9] not in inodes:
                continue
            addr, port = parts[2].split(":")
            raw = bytes.fromhex(addr)
            if v6:
                words = struct.unpack("<4I", raw)
                packed = struct.pack(">4I", *words)
                ip = socket.inet_ntop(socket.AF_INET6, packed)
                if ip.startswith("::ffff:"):
                    ip = ip[7:]
            else:
                ip = socket.inet_ntop(socket.AF_INET, raw[::-1])
            if ip in ("::", "0.0.0.0") or ip.startswith("127.") or ip == "::1":
                continue
            peers.add(f"{ip}:{int(port, 16)}")
    return peers


class Admin:
    def __init__(self, url):
        self.url = url
        self.ctx = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, context=self.ctx, timeout=120) as r:
            return json.loads(r.read() or b"null")


def flow_files(data: Path, per_flow_file: int):
    """[(shard_id, content, first token, last token, rows)] in round-robin shard order; rows; bytes."""
    shards, rows, nbytes = [], 0, 0
    for path in sorted(data.glob("*.ndjson")):
        lines = [l for l in path.read_bytes().split(b"\n") if l]
        rows += len(lines)
        nbytes += sum(len(l) + 1 for l in lines)
        ffs = []
        for start in range(0, len(lines), per_flow_file):
            chunk = lines[start : start + per_flow_file]
            first, last = json.loads(chunk[0])["kinesisMetadata"], json.loads(chunk[-1])["kinesisMetadata"]
            ffs.append((first["shardId"], b"\n".join(chunk), first["shardedSequenceNumber"], last["shardedSequenceNumber"], len(chunk)))
        shards.append(ffs)
    out = []
    for i in range(max(len(s) for s in shards)):
        out.extend(s[i] for s in shards if i < len(s))
    return out, rows, nbytes, len(shards)


def sdk(args):
    import msgspec
    from snowflake.ingest.streaming import StreamingIngestClient

    admin = Admin(args.url)
    ffs, rows, nbytes, nshards = flow_files(Path(args.data), args.records_per_flow_file)
    properties = {
        "url": args.url,
        "account": ACCOUNT,
        "user": USER,
        "role": "LOADER_ROLE",
        "private_key": Path(args.key).read_text(),
    }
    properties.update(dict(kv.split("=", 1) for kv in args.sdk_property))
    decoder = msgspec.json.Decoder()
    standin_cpu0 = cpu_seconds(args.standin_pid) if args.standin_pid else None
    peers = set()
    cpu0 = cpu_seconds()
    t0 = time.monotonic()

    client = StreamingIngestClient.from_table(f"bench_{args.table}", "DB", "PUBLIC", args.table, properties=properties)
    channels = {}
    last_token = {}
    for shard_id, _, _, last, _ in ffs:
        name = f"kinesnow_{STREAM}_{shard_id}"
        if shard_id not in channels:
            channels[shard_id] = client.open_channel(name)[0]
        last_token[name] = int(last)
    t_open = time.monotonic() - t0
    parse_cpu = 0.0
    sent = 0
    for shard_id, content, first, last, _ in ffs:
        if args.pace_mb_per_s:
            ahead = sent / 1e6 / args.pace_mb_per_s - (time.monotonic() - t0)
            if ahead > 0:
                time.sleep(ahead)
            sent += len(content)
        p0 = time.thread_time()
        batch = decoder.decode_lines(content)
        parse_cpu += time.thread_time() - p0
        channels[shard_id].append_rows(batch, first, last)
    t_appended = time.monotonic() - t0
    client.initiate_flush()
    names = list(last_token)
    while True:
        peers |= remote_peers()
        statuses = client.get_channel_statuses(names)
        bad = {n: s.status_code for n, s in statuses.items() if s.status_code != "SUCCESS"}
        if bad or any(ch.is_closed() for ch in channels.values()):
            raise SystemExit(f"channel(s) invalid: {bad}")
        tokens = {n: s.latest_committed_offset_token for n, s in statuses.items()}
        if all(tokens.get(n) is not None and int(tokens[n]) >= last_token[n] for n in names):
            break
        if time.monotonic() - t0 > args.timeout:
            raise TimeoutError(f"not committed after {args.timeout} s: {tokens}")
        time.sleep(0.25)
    seconds = time.monotonic() - t0
    cpu = cpu_seconds() - cpu0
    standin_cpu = cpu_seconds(args.standin_pid) - standin_cpu0 if args.standin_pid else None
    peers |= remote_peers()
    client.close(wait_for_flush=False, timeout_seconds=10)
    if peers:
        raise SystemExit(f"the SDK talked to non-loopback peers: {sorted(peers)}")

    table = f"DB.PUBLIC.{args.table}"
    bench = admin.call("GET", "/admin/bench-counts")
    if bench["bench_mode"]:  # the stand-in counted rows without storing them: exactly the rows sent (no distinct check)
        if bench["tables"].get(table) != rows:
            raise SystemExit(f"expected {rows} rows committed, the stand-in counted {bench['tables'].get(table)}")
    else:
        counted = admin.call("POST", "/admin/query", {"sql": f"SELECT COUNT(*) AS C, COUNT(DISTINCT EVENTID) AS D FROM {table}"})["rows"][0]
        if (counted["C"], counted["D"]) != (rows, rows):
            raise SystemExit(f"expected {rows} rows once each, found {counted}")
    admin.call("POST", "/admin/sql", {"sql": f"DROP TABLE {table}"})
    report = {
        "client": "sdk",
        "channels": nshards,
        "rows": rows,
        "bytes": nbytes,
        "flow_files": len(ffs),
        "seconds": seconds,
        "open_s": t_open,
        "appended_s": t_appended,
        "cpu_s": cpu,
        "parse_cpu_s": parse_cpu,
        "standin_cpu_s": standin_cpu,
        "peak_rss_mb": peak_rss_mb(),
        "rows_per_s": rows / seconds,
        "mb_per_s": nbytes / 1e6 / seconds,
        "cpu_s_per_million_rows": cpu / (rows / 1e6),
        "verified_rows": rows,
    }
    sys.stdout.flush()
    print("RESULT " + json.dumps(report), flush=True)


def record_result(args):
    r = json.loads(args.result)
    r.update(table_kind=args.table_kind, run=args.run)
    if args.refused is not None:
        r["refused"] = args.refused
    if args.client:
        r["client"] = args.client
    if args.commits:
        # The stand-in's commits of this run's table (bench mode): one per append it accepted.
        table = f"DB.PUBLIC.{args.table}" if args.table else None
        commits = [c for c in json.load(open(args.commits)).get("commits", []) if table is None or c["table"] == table]
        if commits:
            accepted = sorted(c["accepted_ms"] for c in commits)
            r.update(appends=len(commits), append_span_s=(accepted[-1] - accepted[0]) / 1000)
    with open(args.append, "a") as f:
        f.write(json.dumps(r) + "\n")
    sys.stderr.write(
        f"   {r['client']:8} {r['table_kind']:6} c={r['channels']} run {r['run']}: {r['rows_per_s']:7.0f} rows/s "
        f"{r['mb_per_s']:5.1f} MB/s, CPU {r['cpu_s_per_million_rows']:5.1f} s/M rows, "
        f"stand-in {r['standin_cpu_s'] / r['rows'] * 1e6:5.1f} s/M rows, {r['seconds']:.1f} s"
        + (f", {r['appends']} appends in {r['append_span_s']:.2f} s" if "appends" in r else "") + "\n"
    )


MARK_BEGIN = "<!-- bench/sink.sh results: begin -->"
MARK_END = "<!-- bench/sink.sh results: end -->"
HEADING = "## PutSnowflake vs the official SDK (issue 8)"
# With the stand-in in bench mode (--standin-bench-mode) the block has markers of its own.
BENCH_MARK_BEGIN = "<!-- bench/sink.sh --standin-bench-mode results: begin -->"
BENCH_MARK_END = "<!-- bench/sink.sh --standin-bench-mode results: end -->"
BENCH_HEADING = "### With the stand-in in bench mode (issue 20, §4)"


def median(values):
    values = sorted(values)
    n = len(values)
    return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2


def machine() -> str:
    model = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = 0
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores, {mem:.0f} GiB RAM, Linux {os.uname().release}"


def report(args):
    import subprocess
    from importlib import metadata

    begin, end, heading = (BENCH_MARK_BEGIN, BENCH_MARK_END, BENCH_HEADING) if args.standin_bench_mode else (MARK_BEGIN, MARK_END, HEADING)
    storage = ("bench mode: rows counted, not parsed or stored, no DuckDB" if args.standin_bench_mode
               else "DuckDB files on disk")

    runs = [json.loads(l) for l in open(args.results) if l.strip()]
    cells = {}
    for r in runs:
        cells.setdefault((r["table_kind"], r["channels"], r["client"]), []).append(r)
    kinds = list(dict.fromkeys(r["table_kind"] for r in runs))
    names = {"kinesnow": "PutSnowflake engine", "sdk": "snowpipe-streaming SDK",
             "baseline": f"PutSnowflake engine ({args.baseline_label})"}
    clients = ("kinesnow", "baseline", "sdk") if args.baseline_label else ("kinesnow", "sdk")

    def stats(rs):
        return {
            "rows_per_s": median([r["rows_per_s"] for r in rs]),
            "mb_per_s": median([r["mb_per_s"] for r in rs]),
            "cpu": median([r["cpu_s_per_million_rows"] for r in rs]),
            "decode": median([r.get("parse_cpu_s", 0) / r["rows"] * 1e6 for r in rs]),
            "standin": median([r["standin_cpu_s"] / r["rows"] * 1e6 for r in rs]),
            "standin_busy": median([r["standin_cpu_s"] / r["seconds"] for r in rs]),
            "seconds": median([r["seconds"] for r in rs]),
            "rss": median([r["peak_rss_mb"] for r in rs]),
            "appends": median([r["appends"] for r in rs]) if all("appends" in r for r in rs) else None,
            "append_span": median([r["append_span_s"] for r in rs]) if all("append_span_s" in r for r in rs) else None,
            "refused": median([r["refused"] for r in rs]) if all("refused" in r for r in rs) else None,
            "each": ", ".join(f"{r['rows_per_s']:.0f}" for r in sorted(rs, key=lambda r: r["run"])),
            "n": len(rs),
        }

    with_appends = any("appends" in r for r in runs)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    first = runs[0]
    lines = [
        begin,
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} at commit {head} by `{args.command}` ({args.elapsed} s in all, builds cached).",
        f"Machine: {machine()}; load average {args.load_before} before, {args.load_after} after (shared with other work).",
        f"Each run: {args.rows} rows, {first['bytes'] / 1e6:.1f} MB of NDJSON (~1 KiB Kinesis-like JSON objects with `kinesisMetadata`),",
        f"FlowFiles of {args.records_per_flow_file} records as ConsumeKinesis writes them (LINE_DELIMITED, INJECT_METADATA);",
        f"one channel per shard; one stand-in over TLS for everything (commit lag {args.commit_lag_ms} ms, Snowflake's per-channel limits enforced: 429 past 10 requests or 20 MB of rows a second, {storage});",
        f"snowpipe-streaming {metadata.version('snowpipe-streaming')}. Medians of {max(s['n'] for s in map(stats, cells.values()))} runs per cell, the {'three' if args.baseline_label else 'two'} clients alternating"
        + (f" (\"{names['baseline']}\": the engine's driver built from {args.baseline_label}, for before and after)." if args.baseline_label else "."),
        "MB = 10^6 bytes of row NDJSON before compression; CPU = user+system seconds of the client process (all threads) from start to the",
        "last commit seen, per million rows; stand-in CPU likewise for the stand-in process; \"stand-in cores busy\" = its CPU seconds / wall seconds.",
        *(["Appends: the append requests the stand-in accepted in a run; \"first to last append\": the seconds between the first and the last (not rounded by status polls)."] if with_appends else []),
        "",
        "| table | channels | client | rows/s | MB/s | client CPU s / M rows | (of which JSON decode in Python) | stand-in CPU s / M rows | stand-in cores busy | wall s | peak RSS MB | appends refused (429) | rows/s of each run |"
        + (" appends | first to last append s |" if with_appends else ""),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if with_appends else ""),
    ]
    ratios = []
    against_baseline = []
    figures = {}  # for --record-summary
    for kind in kinds:
        for c in (1, 8):
            got = {}
            for client in clients:
                rs = cells.get((kind, c, client))
                if not rs:
                    continue
                s = got[client] = stats(rs)
                decode = f"{s['decode']:.1f}" if client == "sdk" else "-"
                refused = "-" if s["refused"] is None else f"{s['refused']:.0f}"
                lines.append(
                    f"| {kind} | {c} | {names[client]} | {s['rows_per_s']:,.0f} | {s['mb_per_s']:.1f} | {s['cpu']:.1f} | {decode} | "
                    f"{s['standin']:.1f} | {s['standin_busy']:.2f} | {s['seconds']:.1f} | {s['rss']:.0f} | {refused} | {s['each']} |"
                    + (f" {s['appends']:.0f} | {s['append_span']:.2f} |" if with_appends and s["appends"] is not None else
                       " - | - |" if with_appends else "")
                )
            if "kinesnow" in got and "sdk" in got:
                k, d = got["kinesnow"], got["sdk"]
                cell = f"{kind}.{c}ch"
                figures.update({
                    f"{cell}.engine.cpu_per_million_rows": (k["cpu"], "client CPU-s per million ~1 KiB rows"),
                    f"{cell}.sdk.cpu_per_million_rows": (d["cpu"], "client CPU-s per million ~1 KiB rows"),
                    f"{cell}.engine.rows_per_s": (k["rows_per_s"], "rows/s"),
                    f"{cell}.sdk.rows_per_s": (d["rows_per_s"], "rows/s"),
                    f"{cell}.throughput_engine_over_sdk": (k["rows_per_s"] / d["rows_per_s"], "rows/s, engine ÷ SDK"),
                    f"{cell}.cpu_sdk_over_engine": (d["cpu"] / k["cpu"], "client CPU per row, SDK ÷ engine"),
                    f"{cell}.cpu_sdk_core_over_engine": ((d["cpu"] - d["decode"]) / k["cpu"],
                                                         "client CPU per row, SDK without its Python JSON decode ÷ engine"),
                })
                ratios.append(
                    f"| {kind} | {c} | {k['rows_per_s'] / d['rows_per_s']:.2f} | {d['cpu'] / k['cpu']:.2f} | "
                    f"{(d['cpu'] - d['decode']) / k['cpu']:.2f} | {d['standin'] / k['standin']:.2f} |"
                )
            if "baseline" in got and "kinesnow" in got and "sdk" in got:
                k, b, d = got["kinesnow"], got["baseline"], got["sdk"]
                against_baseline.append(
                    f"| {kind} | {c} | {k['rows_per_s'] / b['rows_per_s']:.2f} | {k['cpu'] / b['cpu']:.2f} | "
                    f"{b['cpu'] / d['cpu']:.2f} | {k['cpu'] / d['cpu']:.2f} |"
                )
    lines += [
        "",
        "Ratios (medians; above 1 favours PutSnowflake's engine):",
        "",
        "| table | channels | throughput, engine ÷ SDK | client CPU per row, SDK ÷ engine | same, SDK without its Python JSON decode | stand-in CPU per row, SDK ÷ engine |",
        "|---|---|---|---|---|---|",
        *ratios,
    ]
    if against_baseline:
        lines += [
            "",
            f"Before and after (medians): this commit's engine against {args.baseline_label}, and each one's CPU per row against the SDK's:",
            "",
            f"| table | channels | throughput, engine ÷ {args.baseline_label} | CPU per row, engine ÷ {args.baseline_label} | CPU per row, {args.baseline_label} ÷ SDK | CPU per row, engine ÷ SDK |",
            "|---|---|---|---|---|---|",
            *against_baseline,
        ]
    lines += [
        "",
        end,
    ]
    block = "\n".join(lines)
    print(block)
    if args.write:
        write_between_markers(args.write, begin, end, heading, block)
    if args.record_summary:
        import summary
        summary.record(args.record_summary, figures, args.command, section=heading.lstrip("# "), commit=head)


def write_between_markers(path, begin: str, end: str, heading: str, block: str) -> None:
    """Puts `block` (which starts with `begin` and ends with `end`) in place of the one between these markers in
    the file, or appends it under `heading` at the end when the markers are not there yet."""
    path = Path(path)
    text = path.read_text()
    if begin in text and end in text:
        before, rest = text.split(begin, 1)
        after = rest.split(end, 1)[1]
        text = before + block + after
    else:
        text = text.rstrip("\n") + f"\n\n{heading}\n\n{block}\n"
    path.write_text(text)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen")
    g.add_argument("--out", required=True)
    g.add_argument("--rows", type=int, required=True)
    g.add_argument("--channels", type=int, required=True)
    g.add_argument("--row-bytes", type=int, default=1024)
    g.add_argument("--seed", type=int, default=1)
    s = sub.add_parser("sdk")
    s.add_argument("--url", required=True)
    s.add_argument("--data", required=True)
    s.add_argument("--table", required=True)
    s.add_argument("--key", required=True)
    s.add_argument("--records-per-flow-file", type=int, default=500)
    s.add_argument("--standin-pid")
    s.add_argument("--timeout", type=float, default=300)
    s.add_argument("--pace-mb-per-s", type=float, default=0)
    s.add_argument("--sdk-property", action="append", default=[], metavar="KEY=VALUE")
    t = sub.add_parser("record")
    t.add_argument("--result", required=True)
    t.add_argument("--client", help="the client's name in the results (default: as the driver says)")
    t.add_argument("--refused", type=int, help="appends the stand-in refused with 429 during the run")
    t.add_argument("--commits", help="GET /admin/bench-commits after the run (bench mode): appends and their span")
    t.add_argument("--table", help="the run's table, to pick its commits")
    t.add_argument("--table-kind", required=True)
    t.add_argument("--run", type=int, required=True)
    t.add_argument("--append", required=True)
    r = sub.add_parser("report")
    r.add_argument("--results", required=True)
    r.add_argument("--command", required=True)
    r.add_argument("--rows", type=int, required=True)
    r.add_argument("--records-per-flow-file", type=int, required=True)
    r.add_argument("--commit-lag-ms", type=int, required=True)
    r.add_argument("--load-before", required=True)
    r.add_argument("--load-after", required=True)
    r.add_argument("--elapsed", required=True)
    r.add_argument("--write")
    r.add_argument("--standin-bench-mode", action="store_true")
    r.add_argument("--baseline-label", help="the engine built from another commit (bench/sink.sh --baseline-driver)")
    r.add_argument("--record-summary", metavar="PREFIX",
                   help="also write the medians and ratios into bench/results/summary.json under PREFIX.")
    args = p.parse_args()
    {"gen": gen, "sdk": sdk, "record": record_result, "report": report}[args.cmd](args)


if __name__ == "__main__":
    main()
