"""KPL aggregates for end-to-end tests, made by aws-kinesis-agg (a KPL-format aggregator from outside
this project) in the venv of tests/kpl/venv.sh, which creates it on first use.

    from kpl import aggregate
    [{"partition_key", "explicit_hash_key", "data_b64"}] = aggregate([[("k1", '{"id":1}'), ("k1", '{"id":2}')]])
"""

import base64
import json
import os
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KPL = os.path.join(REPO, "tests", "kpl")


def venv_python() -> str:
    out = subprocess.run([os.path.join(KPL, "venv.sh")], check=True, stdout=subprocess.PIPE, text=True).stdout
    return out.strip().splitlines()[-1]


def aggregate(groups: list) -> list:
    """One KPL aggregate per group of (partition_key, text or bytes) user records, in order."""
    groups = [[(key, {"b64": base64.b64encode(data).decode()} if isinstance(data, bytes) else data) for key, data in group]
              for group in groups]
    proc = subprocess.run([venv_python(), os.path.join(KPL, "aggregate.py")], input=json.dumps(groups),
                          check=True, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    return json.loads(proc.stdout)
