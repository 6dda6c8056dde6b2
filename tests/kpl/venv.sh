#!/usr/bin/env bash
# Creates (once) or reuses the venv holding aws-kinesis-agg, the KPL-format aggregator from outside this
# project, at ${KINESNOW_CACHE:-$HOME/.cache/kinesnow}/venv-kpl (the venv make_fixtures.sh uses, same
# requirements stamp), and prints the path of its python. Tests call it before aggregate.py.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec "$here/../lib/venv.sh" kpl "$here/requirements.txt"
