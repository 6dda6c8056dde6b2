#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into fuzz/seeds/<target>/ from the repository's
fixtures and the inputs of the unit and integration tests, in the layouts of fuzz/src/lib.rs and the
targets. Standard library only; run it again when a fixture or words.json changes (bench/fuzz.sh
does not: the seeds are committed). Every seed stays under MAX_SEED bytes, so the committed corpora
stay small and libFuzzer's default -max_len (the largest seed) stays small too.

  kpl_deaggregate  the KPL fixtures of rust-core/tests/fixtures/kpl (made by the aws-kinesis-agg
                   package, tests/kpl/make_fixtures.sh): each as sent (mode byte 0 + the record) and
                   as its protobuf body (mode byte 0 + body, sealed again by the target), large ones
                   cut to whole sub-records; and instruction seeds (mode byte 1) shaped like the
                   aggregates of deaggregate.rs' unit tests
  snowflake_rows   the contents of rows.rs' unit tests and sink_standin.rs' records, with the
                   attribute sets those tests use, in plain and Iceberg mode
  sink_io_decode   FlowFile batches as SinkBatch.java writes them: sink_io.rs' unit test's, a batch
                   of the rows seeds, one cut short and one with a wrong magic
  kcl_convert      the lease items of kcl.rs' unit tests and lease_migration.rs' tables
"""

import json
import pathlib
import shutil
import struct

ROOT = pathlib.Path(__file__).resolve().parent.parent
FUZZ = ROOT / "fuzz"
SEEDS = FUZZ / "seeds"
KPL_FIXTURES = ROOT / "rust-core" / "tests" / "fixtures" / "kpl"
WORDS = json.loads((FUZZ / "words.json").read_text())
MAX_SEED = 16 * 1024
LONG_TEXT = 0xFE
KPL_MAGIC = bytes.fromhex("f3899ac2")

# --- the text layout of fuzz/src/lib.rs ---------------------------------------------------------


def text(value, dictionary=()):
    if value in dictionary:
        return bytes([dictionary.index(value)])
    raw = value.encode() if isinstance(value, str) else value
    if len(raw) <= 0xFF:
        return bytes([0xFF, len(raw)]) + raw
    return bytes([LONG_TEXT]) + struct.pack(">H", len(raw)) + raw


def attribute_value(value):
    """value is (kind, payload) with kind one of S N BOOL NULL SS NS L M B BS."""
    kind, payload = value
    values = WORDS["kcl_values"]
    kinds = ["S", "N", "BOOL", "NULL", "SS", "NS", "L", "M", "B", "BS"]
    out = bytes([kinds.index(kind)])
    if kind in ("S", "N", "B"):
        return out + text(payload, values)
    if kind == "BOOL":
        return out + bytes([1 if payload else 0])
    if kind == "NULL":
        return out
    assert len(payload) < 5, "lists hold at most 4 elements"
    out += bytes([len(payload)])
    for element in payload:
        if kind in ("SS", "NS", "BS"):
            out += text(element, values)
        elif kind == "L":
            out += attribute_value(element)
        else:
            name, inner = element
            out += text(name, WORDS["kcl_names"]) + attribute_value(inner)
    return out


def kcl_case(default_stream, items):
    assert len(items) < 9, "a case holds at most 8 items"
    out = text(default_stream, WORDS["streams"]) + bytes([len(items)])
    for item in items:
        assert len(item) < 16, "an item holds at most 15 attributes"
        out += bytes([len(item)])
        for name, value in item.items():
            out += text(name, WORDS["kcl_names"]) + attribute_value(value)
    return out


def rows_case(iceberg, attributes, content):
    out = bytes([1 if iceberg else 0, len(attributes)])
    for name, value in attributes.items():
        out += text(name, WORDS["rows_names"]) + text(value, WORDS["rows_values"])
    return out + content


# --- protobuf wire format, just enough to cut a KPL body to whole sub-records -------------------


def varint(data, at):
    shift = value = 0
    while True:
        b = data[at]
        at += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, at


def put_varint(value):
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def fields(body):
    """(field number, wire type, raw bytes of the whole field) of a message."""
    at = 0
    while at < len(body):
        start = at
        key, at = varint(body, at)
        wire = key & 7
        if wire == 0:
            _, at = varint(body, at)
        elif wire == 2:
            n, at = varint(body, at)
            at += n
        else:
            raise ValueError(f"wire type {wire} in a KPL body")
        yield key >> 3, wire, body[start:at]


def payload(raw):
    _, at = varint(raw, 0)
    n, at = varint(raw, at)
    return raw[at:at + n]


def field(number, data):
    return put_varint(number << 3 | 2) + put_varint(len(data)) + data


def cut_body(body, limit):
    """The key tables, then whole sub-records while the body stays under `limit`; a sub-record whose
    data alone is too large keeps its first KiB."""
    head = b"".join(raw for number, _, raw in fields(body) if number != 3)
    out = head
    for number, _, raw in fields(body):
        if number != 3:
            continue
        if len(out) + len(raw) > limit:
            record = b"".join(
                field(3, payload(r)[:1024]) if n == 3 else r for n, _, r in fields(payload(raw))
            )
            raw = field(3, record)
            if len(out) + len(raw) > limit:
                break
        out += raw
    return out


# --- the seeds ----------------------------------------------------------------------------------


def kpl_seeds():
    seeds = {}
    for path in sorted(KPL_FIXTURES.glob("*.bin")):
        data = path.read_bytes()
        assert data.startswith(KPL_MAGIC), path
        body = data[4:-16]
        if len(data) + 1 <= MAX_SEED:
            seeds[f"fixture-{path.stem}-record"] = b"\x00" + data
            seeds[f"fixture-{path.stem}-body"] = b"\x00" + body
        else:
            seeds[f"fixture-{path.stem}-body-cut"] = b"\x00" + cut_body(body, MAX_SEED - 1)

    def built(keys, groups):
        """keys: texts; groups: (key index, data, repeat in 1..192)."""
        out = bytes([1, len(keys) - 1])
        for key in keys:
            out += b"\x00" + text(key)
        out += bytes([len(groups)])
        for index, data, repeat in groups:
            assert 1 <= repeat <= 0xC0
            out += bytes([index, len(data)]) + data + bytes([repeat - 1])
        return out

    # Shaped like deaggregate.rs' unit tests: a round trip of three records over two keys, 1000
    # records over 7 keys, a single record, and one key of 300 letters shared by 50 records.
    seeds["built-round-trip"] = built(["k1", "k2"], [(0, b"one", 1), (1, b"", 1), (0, bytes([0, 255, 7]), 1)])
    seeds["built-seven-keys"] = built(["pk0", "pk1", "pk2", "pk3"], [(i % 4, str(i).encode(), 143) for i in range(7)])
    seeds["built-single"] = built(["only"], [(0, b"x", 1)])
    seeds["built-empty"] = bytes([1, 0, 0, 0, 0])
    letters = bytes([1, 0, 0x80 | 3]) + struct.pack(">H", 300) + bytes([1, 0, 2]) + b"{}" + bytes([49])
    seeds["built-long-key"] = letters
    return seeds


SHARD = {
    "aws.kinesis.stream.name": "orders",
    "aws.kinesis.shard.id": "shardId-000000000001",
    "aws.kinesis.partition.key": "pk-7",
    "aws.kinesis.last.sequence.number": "4960",
    "aws.kinesis.last.subsequence.number": "3",
    "aws.kinesis.approximate.arrival.timestamp.ms": "1700000000000",
}

STANDIN = {
    "aws.kinesis.stream.name": "orders",
    "aws.kinesis.shard.id": "shardId-000000000000",
    "aws.kinesis.partition.key": "pk-7",
    "aws.kinesis.last.sequence.number": "4959000000000007",
    "aws.kinesis.approximate.arrival.timestamp.ms": "1700000000000",
    "record.count": "1",
}

ROWS_CONTENTS = {
    "single": b'{"id":1}',
    "own-metadata": b'{"a":1,"kinesisMetadata":{"shardedSequenceNumber":"495900000000000000000000"}}\r\n\n'
    b'{"a":2,"kinesisMetadata":{"shardedSequenceNumber":"496000000000000000000003"}}\n',
    "unchanged-line": b'{"z":1,"a":2.50,"kinesisMetadata":{"shardedSequenceNumber":"495900000000000000000000"}}\r\n{"b":1}\n',
    "pretty": b'{\n  "a": 1\n}',
    "lines": b'{"a":1}\n{"a":2}\n{"a":3}',
    "array": b'[{"a":1},{"b":2}]',
    "number": b"42",
    "line-array": b'{"a":1}\n[1]',
    "line-broken": b'{"a":1}\n{oops',
    "blank": b"\n \n",
    "not-utf8": b"{\xff}",
    "array-number": b'[{"a":1},2]',
    "standin-record": b'{"n":1,"shard":"shardId-000000000000","seq":7}',
    "standin-not-a-number": b'{"n":"not a number"}',
    "standin-colour": b'{"colour":"red","n":1}',
}


def rows_seeds():
    seeds = {}
    attribute_sets = {
        "shard": SHARD,
        "direct": {},
        "standin": STANDIN,
        "no-sequence": {"aws.kinesis.stream.name": "s", "aws.kinesis.shard.id": "shardId-0"},
    }
    for name, content in ROWS_CONTENTS.items():
        for attrs_name, attrs in attribute_sets.items():
            for iceberg in (False, True):
                if iceberg and attrs_name != "shard":
                    continue
                mode = "iceberg" if iceberg else "plain"
                seeds[f"{name}-{attrs_name}-{mode}"] = rows_case(iceberg, attrs, content)
    return seeds


def flow_files(batch):
    """batch: (id, attributes, content) as SinkBatch.java writes them."""
    out = struct.pack(">ii", 0x4B534631, len(batch))
    for id_, attributes, content in batch:
        out += struct.pack(">qi", id_, len(attributes))
        for name, value in attributes.items():
            for s in (name.encode(), value.encode()):
                out += struct.pack(">i", len(s)) + s
        out += struct.pack(">i", len(content)) + content
    return out


def sink_io_seeds():
    unit = flow_files([(42, {"a": "ü"}, b'{"x":1}')])
    batch = flow_files([(i, attrs, ROWS_CONTENTS[c]) for i, (attrs, c) in enumerate(
        [(SHARD, "single"), ({}, "array"), (STANDIN, "standin-record"), (SHARD, "lines"), ({}, "not-utf8")], 1)])
    return {
        "unit-test": unit,
        "unit-test-cut": unit[:-1],
        "bad-magic": b"NOPE\0\0\0\0",
        "empty-batch": flow_files([]),
        "rows-batch": batch,
    }


def S(v):
    return ("S", v)


def N(v):
    return ("N", str(v))


def kcl(key, checkpoint, sub=None, parents=(), owner="worker-1", counter=42):
    """A lease as kcl.rs' unit tests build it."""
    item = {"leaseKey": S(key), "checkpoint": S(checkpoint), "leaseOwner": S(owner), "leaseCounter": N(counter)}
    if sub is not None:
        item["checkpointSubSequenceNumber"] = N(sub)
    if parents:
        item["parentShardId"] = ("SS", list(parents))
    return item


def kcl_lease(key, checkpoint, sub, parents=()):
    """A lease as lease_migration.rs builds it (as a real KCL 2.7.2 wrote it)."""
    item = kcl(key, checkpoint, sub, parents, owner="kcl-worker-7", counter=1234)
    item["ownerSwitchesSinceCheckpoint"] = N(0)
    return item


def kcl_seeds():
    many = []
    for i in range(8):
        key = f"shardId-{i:012}"
        if i % 3 == 0:
            many.append(kcl_lease(key, f"49{i:040}", i % 5))
        elif i % 3 == 1:
            many.append(kcl_lease(key, "SHARD_END", 0))
        else:
            many.append(kcl_lease(key, "TRIM_HORIZON", 0, [f"shardId-{i - 1:012}"]))
    return {
        "unit-checkpoints": kcl_case("s", [kcl("shardId-0", "4959000000000000000001", 3), kcl("shardId-1", "SHARD_END", 0)]),
        "unit-sentinels": kcl_case("s", [kcl("a", "TRIM_HORIZON", None, ["p"]), kcl("b", "LATEST"), kcl("c", "AT_TIMESTAMP")]),
        "unit-multi-stream": kcl_case("ignored", [kcl("123456789012:orders:1700000000:shardId-000000000007", "17", 0)]),
        "unit-bad-key": kcl_case("s", [kcl("a:b", "17")]),
        "unit-deleted-parent": kcl_case("s", [kcl("child", "TRIM_HORIZON", None, ["gone-parent", "kept"]), kcl("kept", "SHARD_END")]),
        "unit-bad-checkpoint": kcl_case("s", [kcl("shardId-9", "oops")]),
        "unit-to-item": kcl_case("s", [kcl("shardId-0", "100", 2, ["p"])]),
        "migration-many-leases": kcl_case("s", many),
        "migration-hand-built": kcl_case("s", [
            kcl_lease("shardId-000000000000", "49600000000000000000000000000000000000000000000000000001", 3),
            kcl_lease("shardId-000000000001", "SHARD_END", 0),
            kcl_lease("shardId-000000000002", "TRIM_HORIZON", 0, ["shardId-000000000001", "shardId-000000000009"]),
            kcl_lease("shardId-000000000003", "LATEST", 0),
            kcl_lease("000000000000:other-stream:1700000000:shardId-000000000005", "4961", 0),
        ]),
        "parents-as-list": kcl_case("s", [{"leaseKey": S("c"), "checkpoint": S("TRIM_HORIZON"),
                                           "parentShardIds": ("L", [S("p1"), S("123456789012:orders:1700000000:p2")])}]),
    }


def main():
    for target, seeds in [("kpl_deaggregate", kpl_seeds()), ("snowflake_rows", rows_seeds()),
                          ("sink_io_decode", sink_io_seeds()), ("kcl_convert", kcl_seeds())]:
        directory = SEEDS / target
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        for name, data in seeds.items():
            assert len(data) <= MAX_SEED, f"{target}/{name} is {len(data)} bytes"
            (directory / name).write_bytes(data)
        print(f"{target}: {len(seeds)} seeds, {sum(map(len, seeds.values()))} bytes")


if __name__ == "__main__":
    main()
