#!/usr/bin/env bash
# Creates (once) or reuses the venv holding fastavro at ${KINESNOW_CACHE:-$HOME/.cache/kinesnow}/venv-avro and
# prints the path of its python. Tests call it before encode.py.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec "$here/../lib/venv.sh" avro "$here/requirements.txt"
