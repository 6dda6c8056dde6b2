"""Avro for the end-to-end tests, with fastavro (a real Avro library from outside this project).

Reads one JSON request on stdin and writes one JSON answer on stdout:
- {"op": "encode", "schema": S, "records": [...], "format": "datum"}: each record as a bare binary datum
  (what an AvroReader with a Schema Text reads), base64, one per record;
- the same with "format": "container": each record as its own Avro object container file (the schema
  embedded), base64, one per record; "format": "file": all records in one container file;
- {"op": "decode", "data": base64, "format": "file"}: the records of a container file, with the schema.

JSON cannot carry Avro's logical types, so values are given (and returned) as text: decimals as strings,
timestamp-millis/-micros as ISO-8601 strings with an offset, dates as YYYY-MM-DD, bytes as hex.
"""

import base64
import datetime
import decimal
import io
import json
import sys

import fastavro


def to_avro(schema, value, named):
    """A JSON value as fastavro wants it for this (parsed) schema."""
    if value is None:
        return None
    if isinstance(schema, str):
        if schema in named:
            return to_avro(named[schema], value, named)
        return bytes.fromhex(value) if schema == "bytes" else value
    if isinstance(schema, list):  # a union: the first branch the value fits (null handled above)
        branches = [b for b in schema if b != "null"]
        return to_avro(branches[0], value, named) if len(branches) == 1 else value
    kind, logical = schema.get("type"), schema.get("logicalType")
    if logical == "decimal":
        return decimal.Decimal(value)
    if logical in ("timestamp-millis", "timestamp-micros"):
        return datetime.datetime.fromisoformat(value)
    if logical == "date":
        return datetime.date.fromisoformat(value)
    if kind == "record":
        named[schema["name"]] = schema
        return {f["name"]: to_avro(f["type"], value.get(f["name"]), named) for f in schema["fields"]}
    if kind == "array":
        return [to_avro(schema["items"], v, named) for v in value]
    if kind == "map":
        return {k: to_avro(schema["values"], v, named) for k, v in value.items()}
    if kind == "bytes":
        return bytes.fromhex(value)
    if isinstance(kind, (dict, list)) or kind in named:
        return to_avro(kind, value, named)
    return value


def to_json(value):
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_json(v) for v in value]
    return value


def encode(request):
    parsed = fastavro.parse_schema(request["schema"])
    records = [to_avro(request["schema"], r, {}) for r in request["records"]]
    fmt = request["format"]
    if fmt == "file":
        out = io.BytesIO()
        fastavro.writer(out, parsed, records)
        return [base64.b64encode(out.getvalue()).decode()]
    encoded = []
    for record in records:
        out = io.BytesIO()
        if fmt == "datum":
            fastavro.schemaless_writer(out, parsed, record)
        else:
            fastavro.writer(out, parsed, [record])
        encoded.append(base64.b64encode(out.getvalue()).decode())
    return encoded


def decode(request):
    reader = fastavro.reader(io.BytesIO(base64.b64decode(request["data"])))
    return {"schema": reader.writer_schema, "records": [to_json(r) for r in reader]}


def main():
    request = json.load(sys.stdin)
    answer = encode(request) if request["op"] == "encode" else decode(request)
    json.dump(answer, sys.stdout)


if __name__ == "__main__":
    main()
