"""A JVM's used heap read from its hsperfdata file, without asking the JVM.

HotSpot publishes its performance counters in a memory-mapped file, `/tmp/hsperfdata_<user>/<pid>`; `jstat` reads the
same file. Reading it costs the measured JVM nothing, where NiFi's `/nifi-api/system-diagnostics` runs in NiFi's web
server threads: polled four times a second during a drain it was about a fifth of NiFi's CPU in the 16-shard profile
of issue 38. The used heap here is what `jstat -gc` shows as S0U + S1U + EU + OU: the sum of every generation's
spaces' `used` counters (G1 updates eden's as it takes new regions, so it lags by at most a region).
"""
from __future__ import annotations

import getpass
import os
import re
import struct

MAGIC = 0xCAFEC0C0
_USED = re.compile(r"sun\.gc\.generation\.\d+\.space\.\d+\.used")


def perf_file(pid: int) -> str:
    return os.path.join("/tmp", f"hsperfdata_{getpass.getuser()}", str(pid))


def counters(pid: int, wanted=lambda name: True) -> dict:
    """The long counters of JVM `pid` whose names `wanted` accepts."""
    with open(perf_file(pid), "rb") as f:
        data = f.read()
    magic = struct.unpack_from(">I", data, 0)[0]
    if magic != MAGIC:
        raise ValueError(f"{perf_file(pid)} is not an hsperfdata file (magic {magic:#x})")
    order = "<" if data[4] == 1 else ">"
    entry_offset, num_entries = struct.unpack_from(order + "ii", data, 24)
    out, at = {}, entry_offset
    for _ in range(num_entries):
        length, name_offset, vector_length, data_type, _f, _u, _v, data_offset = struct.unpack_from(
            order + "iiibbbbi", data, at)
        end = data.index(b"\0", at + name_offset)
        name = data[at + name_offset:end].decode("ascii", "replace")
        if vector_length == 0 and data_type == ord("J") and wanted(name):
            out[name] = struct.unpack_from(order + "q", data, at + data_offset)[0]
        at += length
    return out


def used_heap(pid: int) -> int:
    """Bytes of heap in use, as `jstat -gc` sums them."""
    return sum(counters(pid, _USED.fullmatch).values())
