#!/usr/bin/env python3
"""Profiles of the NiFi JVM during a benchmark run (perf, cpu-clock: the only event this machine allows).

`Recording` wraps one run; `report` writes perf's shares by library and the top symbols (JIT-compiled Java named
through the JVM's perf map), then `parts`: the same samples summed into the parts a record's cost goes to (the
Record Reader, the Record Writer, our Java shim, the Rust engine, NiFi's session, the JVM's GC and JIT, the kernel).
The parts are matched on symbol names, so they are a guide, not an exact account: a JDK method called by the reader
counts as "other Java".
"""
from __future__ import annotations

import collections
import re
import signal
import subprocess

# (part, pattern on the symbol of a JIT-compiled Java frame), first match wins
JAVA_PARTS = [
    ("Record Reader", r"regex|[Ii]nferSchema|schema\.inference|jackson\.core\.json\.(UTF8Stream|ReaderBased)JsonParser|"
                      r"BaseNodeDeserializer|JsonTreeRowRecordReader|AbstractJsonRowRecordReader|AvroReader|avro\.Schema|"
                      r"GenericDatumReader|BinaryDecoder|convertAvroRecordToMap|AvroRecordReader|CSVRecordReader|"
                      r"JsonParser|JsonNode|ObjectNode|TextNode"),
    ("Record Writer", r"WriteJsonResult|JsonGenerator|GeneratorBase|InternalNodeMapper|createAvroRecord|GenericDatumWriter|"
                      r"BinaryEncoder|WriteAvroResult|DataFileWriter|avro\.generic"),
    ("our Java shim", r"io\.kinesnow"),
    ("NiFi session, FlowFiles, provenance", r"nifi\.(controller|repository|provenance|processor|stream)|FlowFile|Provenance|ContentClaim"),
]


class Recording:
    """perf record of a process, from construction to stop()."""

    def __init__(self, pid: int, data: str):
        self.data = data
        self.proc = subprocess.Popen(["perf", "record", "-e", "cpu-clock", "-F", "499", "-g", "-p", str(pid), "-o", data],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(60)


def part_of(dso: str, symbol: str) -> str:
    if "kinesnow_core" in dso:
        return "Rust engine"
    if dso.startswith("[kernel"):
        return "kernel (I/O, scheduling, page faults)"
    if dso.startswith("libc"):
        return "libc (memcpy, malloc)"
    if dso == "libjvm.so":
        return "JVM (GC, JIT, runtime)"
    if dso.startswith("[JIT]"):
        for part, pattern in JAVA_PARTS:
            if re.search(pattern, symbol):
                return part
        return "other Java (JDK, vtable stubs, NiFi's record API)"
    return "other native"


def parts(data: str) -> dict:
    """Percent of the samples per part."""
    out = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "dso,sym", "-g", "none", "--stdio"],
                         capture_output=True, text=True).stdout
    shares = collections.Counter()
    for line in out.splitlines():
        m = re.match(r"\s+([\d.]+)%\s+(.+?)\s+\[([.k])\]\s+(.*)", line)
        if m:
            shares[part_of(m[2], m[4])] += float(m[1])
    return dict(shares.most_common())


THREADS = [("JIT compilers (C1, C2)", r"C[12] CompilerThre"), ("NiFi's web server (REST requests)", r"NiFi Web Server"),
           ("NiFi's processor threads (Timer-Driven)", r"Timer-Driven"), ("the engine's threads", r"kinesnow"),
           ("GC", r"GC Thread|G1 ")]


def threads(data: str) -> dict:
    """Percent of the samples per kind of thread (first match of THREADS, else "other")."""
    out = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "comm", "-g", "none", "--stdio"],
                         capture_output=True, text=True).stdout
    shares = collections.Counter()
    for line in out.splitlines():
        m = re.match(r"\s+([\d.]+)%\s+(.+?)\s*$", line)
        if m:
            kind = next((k for k, pattern in THREADS if re.match(pattern, m[2])), "other")
            shares[kind] += float(m[1])
    return dict(shares.most_common())


def stack_shares(data: str, patterns: dict) -> dict:
    """Percent of the samples whose call stack has a frame matching each pattern (a sample counts once per
    pattern, callees included), and the number of samples."""
    out = subprocess.run(["perf", "script", "-i", data, "-F", "comm,ip,sym,dso"], capture_output=True, text=True).stdout
    compiled = {name: re.compile(pattern) for name, pattern in patterns.items()}
    hits, total = collections.Counter(), 0
    for sample in out.split("\n\n"):
        lines = [l.strip() for l in sample.strip().splitlines()]
        if not lines:
            continue
        total += 1
        stack = "\n".join(lines[1:])
        for name, pattern in compiled.items():
            if pattern.search(stack):
                hits[name] += 1
    return {"samples": total, **{name: 100.0 * hits[name] / max(total, 1) for name in patterns}}


def report(pid: int, data: str) -> str:
    """perf's report of a recording of the NiFi JVM (`pid`, still running: its perf map is written first)."""
    subprocess.run(["jcmd", str(pid), "Compiler.perfmap"], capture_output=True, timeout=120)
    by_dso = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "dso", "-g", "none", "--stdio"],
                            capture_output=True, text=True).stdout
    by_sym = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "dso,sym", "-g", "none", "--stdio"],
                            capture_output=True, text=True).stdout
    keep = lambda text, n: "\n".join([l for l in text.splitlines() if l.strip() and not l.startswith("#")][:n])
    shares = "\n".join(f"{share:6.1f}%  {part}" for part, share in parts(data).items())
    kinds = "\n".join(f"{share:6.1f}%  {kind}" for kind, share in threads(data).items())
    return "by part:\n" + shares + "\n\nby thread:\n" + kinds + "\n\nby library:\n" + keep(by_dso, 15) + "\n\ntop symbols:\n" + keep(by_sym, 40)


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description="shares of a recorded profile (its JVM's perf map must still be in /tmp)")
    ap.add_argument("data")
    ap.add_argument("--share", action="append", default=[], metavar="NAME=REGEX",
                    help="also the share of samples with a frame matching REGEX in their stack")
    args = ap.parse_args()
    print("by part:")
    for part, share in parts(args.data).items():
        print(f"{share:6.1f}%  {part}")
    print("by thread:")
    for kind, share in threads(args.data).items():
        print(f"{share:6.1f}%  {kind}")
    if args.share:
        shares = stack_shares(args.data, dict(item.split("=", 1) for item in args.share))
        print(f"stacks ({shares.pop('samples')} samples):")
        for name, share in shares.items():
            print(f"{share:6.2f}%  {name}")
