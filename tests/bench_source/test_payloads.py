"""The benchmark Kinesis source's json and avro payloads (`--payload`), read by real parsers from outside this
project: every avro record of a dump decoded by fastavro (tests/avro's venv) with the schema `--avro-schema`
prints, every json record parsed by Python's json; fields, sizes and order checked against what the dump says.
"""

import base64
import json
import os
import subprocess

from bench_source import binary, dump

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STREAM = ["--shards", "3", "--records-per-shard", "40", "--aggregate-share", "0.2", "--records-per-aggregate", "4",
          "--created-at-ms", "1767225600000", "--seed", "5"]

DECODE = r"""
import base64, io, json, sys
import fastavro
schema = fastavro.parse_schema(json.loads(sys.argv[1]))
for line in sys.stdin:
    data = base64.b64decode(line)
    buf = io.BytesIO(data)
    record = fastavro.schemaless_reader(buf, schema, None)
    record["rest"] = len(data) - buf.tell()
    print(json.dumps(record))
"""


def fastavro_python() -> str:
    out = subprocess.run([os.path.join(REPO, "tests", "avro", "venv.sh")], check=True, stdout=subprocess.PIPE, text=True)
    return out.stdout.strip().splitlines()[-1]


def test_avro_payload_decodes_with_fastavro():
    schema = subprocess.run([binary(), "--avro-schema"], check=True, capture_output=True, text=True).stdout.strip()
    assert [f["name"] for f in json.loads(schema)["fields"]] == ["shard", "index", "sub", "data"]
    for size in (100, 1024):
        rows = dump(STREAM + ["--payload", "avro", "--record-size", str(size)])
        assert len(rows) == 3 * (40 - 8 + 8 * 4)
        assert all("data" not in r for r in rows)
        proc = subprocess.run([fastavro_python(), "-c", DECODE, schema], input="\n".join(r["data_base64"] for r in rows),
                              check=True, capture_output=True, text=True)
        decoded = [json.loads(line) for line in proc.stdout.splitlines()]
        assert len(decoded) == len(rows)
        for r, d in zip(rows, decoded):
            assert d["rest"] == 0, "the datum is consumed exactly"
            assert (d["shard"], d["index"], d["sub"]) == (int(r["shard"][-12:]), r["index"], r["sub"])
            assert len(base64.b64decode(r["data_base64"])) == size
            assert d["data"].isascii() and len(d["data"]) > size - 30


def test_json_payload_parses_and_has_the_record_size():
    rows = dump(STREAM + ["--payload", "json", "--record-size", "1024"])
    for r in rows:
        assert len(r["data"].encode()) == 1024
        v = json.loads(r["data"])
        assert list(v) == ["shard", "index", "sub", "data"]
        assert (v["shard"], v["index"], v["sub"]) == (int(r["shard"][-12:]), r["index"], r["sub"])


def test_small_structured_records_are_refused():
    proc = subprocess.run([binary(), "--payload", "json", "--record-size", "50", "--dump"], capture_output=True, text=True)
    assert proc.returncode == 2 and "at least 80 bytes" in proc.stderr
