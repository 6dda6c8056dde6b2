#!/usr/bin/env bash
# Creates (once) or reuses the venv holding fastavro at ${KINESNOW_CACHE:-$HOME/.cache/kinesnow}/venv-avro and
# prints the path of its python. Tests call it before encode.py.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${KINESNOW_CACHE:-$HOME/.cache/kinesnow}"
venv="$cache/venv-avro"
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$here/requirements.txt" | cut -d' ' -f1)"
mkdir -p "$cache"
exec 9>"$cache/.venv-avro.lock"
flock 9
if [[ ! -x "$venv/bin/python" || ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  echo "venv.sh: installing tests/avro/requirements.txt into $venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt" >&2
  echo "$want" > "$stamp"
fi
echo "$venv/bin/python"
