"""Avro records for the tests, written and read by fastavro in its own venv (tests/avro)."""

import base64
import json
import os
import subprocess

AVRO = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "avro")


def _python() -> str:
    out = subprocess.run([os.path.join(AVRO, "venv.sh")], check=True, stdout=subprocess.PIPE, text=True).stdout
    return out.strip().splitlines()[-1]


def _call(request: dict):
    proc = subprocess.run([_python(), os.path.join(AVRO, "encode.py")], input=json.dumps(request), check=True,
                          stdout=subprocess.PIPE, text=True)
    return json.loads(proc.stdout)


def encode(schema: dict, records: list, fmt: str = "datum") -> list[bytes]:
    """Each record as a bare datum ("datum"), or its own container file ("container"); all in one file ("file")."""
    return [base64.b64decode(b) for b in _call({"op": "encode", "schema": schema, "records": records, "format": fmt})]


def decode_file(data: bytes) -> dict:
    """{"schema": ..., "records": [...]} of an Avro container file, logical types as text."""
    return _call({"op": "decode", "data": base64.b64encode(data).decode(), "format": "file"})
