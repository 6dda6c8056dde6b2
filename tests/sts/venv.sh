#!/usr/bin/env bash
# Creates (once) or reuses the venv holding moto's server (tests/sts/requirements.txt) at
# ${KINESNOW_CACHE:-$HOME/.cache/kinesnow}/venv-sts and prints the path of its python.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec "$here/../lib/venv.sh" sts "$here/requirements.txt"
