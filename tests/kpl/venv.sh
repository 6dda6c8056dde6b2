#!/usr/bin/env bash
# Creates (once) or reuses the venv holding aws-kinesis-agg, the KPL-format aggregator from outside this
# project, at ${KINESNOW_CACHE:-$HOME/.cache/kinesnow}/venv-kpl (the venv make_fixtures.sh uses, same
# requirements stamp), and prints the path of its python. Tests call it before aggregate.py.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${KINESNOW_CACHE:-$HOME/.cache/kinesnow}"
venv="$cache/venv-kpl"
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$here/requirements.txt" | cut -d' ' -f1)"
mkdir -p "$cache"
exec 9>"$cache/.venv-kpl.lock"
flock 9   # two test sessions at once: the second waits, then finds the venv ready
if [[ ! -x "$venv/bin/python" || ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  echo "venv.sh: installing tests/kpl/requirements.txt into $venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt" >&2
  echo "$want" > "$stamp"
fi
echo "$venv/bin/python"
