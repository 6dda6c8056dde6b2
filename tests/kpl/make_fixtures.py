"""Makes KPL aggregate fixtures with aws-kinesis-agg, a KPL-format aggregator from outside this
project, for rust-core/tests/deaggregate_fixtures.rs.

Writes <out>/<name>.bin (the bytes of one Kinesis record as the aggregator produced them) and
<out>/manifest.json with, per fixture, the user records the package's own de-aggregator reads back
from it (partition key, explicit hash key, base64 data), checked against what was put in.
Deterministic: a fixed seed, no clock. Run it through make_fixtures.sh (which sets up the venv).
"""

import base64
import hashlib
import json
import os
import random
import sys

import aws_kinesis_agg
# aggregator first: it puts the package folder on sys.path, which its messages_pb2 needs.
from aws_kinesis_agg.aggregator import RecordAggregator
from aws_kinesis_agg.deaggregator import iter_deaggregate_records
from aws_kinesis_agg import messages_pb2

MAX_EHK = 2**128 - 1


def aggregate_one(records):
    """Aggregates (partition_key, data, explicit_hash_key) user records into exactly one
    aggregate with RecordAggregator; returns (aggregate partition key, aggregate EHK, bytes)."""
    agg = RecordAggregator()
    for pk, data, ehk in records:
        full = agg.add_user_record(pk, data, ehk)
        assert full is None, "the fixture does not fit in one aggregate"
    return agg.clear_and_get().get_contents()


def aggregate_until_full(make_record):
    """Feeds user records to RecordAggregator until it hands back a full aggregate (its own
    size accounting decides where the 1 MiB record limit falls); returns that aggregate and
    the user records in it."""
    agg = RecordAggregator()
    fed = []
    while True:
        record = make_record(len(fed))
        full = agg.add_user_record(*record)
        if full is not None:
            return full.get_contents(), fed
        fed.append(record)


def seal(message):
    """Frames an AggregatedRecord message (built with the package's own messages_pb2) the way
    the package's AggRecord does: magic, protobuf body, MD5 of the body."""
    body = message.SerializeToString()
    return aws_kinesis_agg.MAGIC + body + hashlib.md5(body).digest()


def read_back(blob):
    """The user records that the package's de-aggregator reads from one aggregate."""
    kinesis_record = {
        "kinesis": {
            "kinesisSchemaVersion": "1.0",
            "sequenceNumber": "49590338271490256608559692538361571095921575989136588898",
            "partitionKey": "outer",
            "approximateArrivalTimestamp": 1700000000.123,
            "data": base64.b64encode(blob),
        }
    }
    out = []
    for r in iter_deaggregate_records([kinesis_record]):
        k = r["kinesis"]
        assert k.get("aggregated") is True, "the package did not see an aggregate"
        out.append((k["partitionKey"], base64.b64decode(k["data"]), k["explicitHashKey"]))
    return out


def utf8(value):
    return value.encode("utf-8") if isinstance(value, str) else value


def check_same(put_in, read_out):
    """The package's de-aggregator must give back the partition keys and data that went in, and
    the explicit hash key where one went in. (For a record without one it reports the table's
    first key: it reads the unset index as 0.) Returns the records as they went in."""
    expected = [(pk, utf8(data), ehk or None) for pk, data, ehk in put_in]
    assert len(read_out) == len(expected), "record count differs"
    for i, ((pk, data, ehk), (rpk, rdata, rehk)) in enumerate(zip(expected, read_out)):
        assert (pk, data) == (rpk, rdata), "record %d: key or data differs" % i
        assert ehk is None or ehk == rehk, "record %d: explicit hash key differs" % i
    return expected


def fixture_single(rng):
    return [("user-42", b'{"event":"click","user":42}', None)]


def fixture_many_keys(rng):
    keys = ["device-%03d" % i for i in range(25)]
    return [(rng.choice(keys), rng.randbytes(rng.randrange(0, 600)), None) for _ in range(500)]


def fixture_explicit_hash_keys(rng):
    ehks = [str(rng.randrange(0, MAX_EHK)) for _ in range(5)] + ["0", str(MAX_EHK)]
    records = []
    for i in range(40):
        ehk = None if i % 4 == 3 else rng.choice(ehks)
        records.append(("order-%d" % (i % 6), rng.randbytes(rng.randrange(1, 200)), ehk))
    return records


def fixture_unicode_keys(rng):
    keys = [
        "ключ-1",
        "键🔑",
        "é",  # precomposed
        "e\u0301",  # decomposed: a different key with the same look
        "🚀" * 256,  # 256 characters, the partition key limit; 1024 bytes of UTF-8
        "tab\there",
        "\u0000nul",
    ]
    return [(keys[i % len(keys)], "ünïcödé payload %d ✓" % i, None) for i in range(21)]


def fixture_large_record(rng):
    # ~900 KB, mostly structured text (compresses in git) with a random tail.
    text = "".join('{"i":%d,"v":"%s"}\n' % (i, "x" * (i % 50)) for i in range(20000)).encode()
    large = (text * 3)[: 900 * 1024 - 4096] + rng.randbytes(4096)
    return [("small-before", b"a", None), ("big", large, None), ("small-after", b"z", None)]


def full_aggregate_of_1kib_records(rng):
    def make_record(i):
        line = ('{"seq":%d,"sensor":"s-%02d","reading":%d,"pad":"' % (i, i % 17, rng.randrange(10**6))).encode()
        return ("sensor-%02d" % (i % 17), line + b"p" * (1024 - len(line) - 2) + b'"}', None)

    return aggregate_until_full(make_record)


def tags_message(rng):
    """An aggregate with tags and explicit hash keys, which RecordAggregator never writes,
    built with the package's own protobuf classes."""
    m = messages_pb2.AggregatedRecord()
    m.partition_key_table.extend(["tagged-a", "tagged-b"])
    m.explicit_hash_key_table.extend(["170141183460469231731687303715884105728"])
    for i in range(6):
        r = m.records.add()
        r.partition_key_index = i % 2
        if i % 3 == 0:
            r.explicit_hash_key_index = 0
        r.data = rng.randbytes(32)
        for t in range(i % 3):
            tag = r.tags.add()
            tag.key = "tag-%d" % t
            if t % 2 == 0:
                tag.value = "value-%d" % i
    return m


def empty_message():
    """An aggregate with a partition key table but no records: zero user records."""
    m = messages_pb2.AggregatedRecord()
    m.partition_key_table.append("orphan")
    return m


def manifest_entry(name, description, built_with, blob, records, outer_pk=None, outer_ehk=None):
    return {
        "file": name + ".bin",
        "description": description,
        "built_with": built_with,
        "size": len(blob),
        "md5_trailer_hex": blob[-16:].hex(),
        "aggregate_partition_key": outer_pk,
        "aggregate_explicit_hash_key": outer_ehk,
        "records": [
            {"partition_key": pk, "explicit_hash_key": ehk, "data_b64": base64.b64encode(data).decode()}
            for pk, data, ehk in records
        ],
    }


def main(out_dir):
    rng = random.Random(20240603)
    entries = []
    blobs = {}

    aggregated = [
        ("single", "one user record", fixture_single),
        ("many_keys", "500 records of 0-599 random bytes over 25 partition keys", fixture_many_keys),
        ("explicit_hash_keys", "40 records, most with explicit hash keys (0, 2^128-1, random)", fixture_explicit_hash_keys),
        ("unicode_keys", "non-ASCII partition keys (Cyrillic, CJK, emoji, NFC vs NFD, 256 emoji, NUL)", fixture_unicode_keys),
        ("large_record", "a ~900 KB record between two 1-byte records", fixture_large_record),
    ]
    for name, description, make in aggregated:
        records = make(rng)
        outer_pk, outer_ehk, blob = aggregate_one(records)
        read_out = check_same(records, read_back(blob))
        blobs[name] = blob
        entries.append(manifest_entry(name, description, "RecordAggregator", blob, read_out, outer_pk, outer_ehk))

    (outer_pk, outer_ehk, blob), records = full_aggregate_of_1kib_records(rng)
    read_out = check_same(records, read_back(blob))
    blobs["full_1kib"] = blob
    entries.append(manifest_entry(
        "full_1kib", "1 KiB records until RecordAggregator emitted a full (~1 MiB) aggregate",
        "RecordAggregator", blob, read_out, outer_pk, outer_ehk))

    for name, description, message in [
        ("tags", "tags and explicit hash keys (RecordAggregator writes neither tags)", tags_message(rng)),
        ("empty", "a partition key table and zero records", empty_message()),
    ]:
        blob = seal(message)
        put_in = [
            (message.partition_key_table[r.partition_key_index], r.data,
             message.explicit_hash_key_table[r.explicit_hash_key_index] if r.HasField("explicit_hash_key_index") else None)
            for r in message.records
        ]
        read_out = check_same(put_in, read_back(blob))
        blobs[name] = blob
        entries.append(manifest_entry(name, description, "messages_pb2 + MD5 (package classes)", blob, read_out))

    for name, blob in blobs.items():
        with open(os.path.join(out_dir, name + ".bin"), "wb") as f:
            f.write(blob)
    manifest = {
        "generator": "tests/kpl/make_fixtures.py with aws-kinesis-agg (see tests/kpl/requirements.txt)",
        "magic_hex": aws_kinesis_agg.MAGIC.hex(),
        "fixtures": entries,
    }
    with open(os.path.join(out_dir, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1, ensure_ascii=False)
        f.write("\n")
    for e in entries:
        print("%-20s %8d bytes %5d user records" % (e["file"], e["size"], len(e["records"])))


if __name__ == "__main__":
    main(sys.argv[1])
