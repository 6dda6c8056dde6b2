#!/usr/bin/env bash
# Creates (once) or reuses the venv holding moto's server (tests/sts/requirements.txt) at
# ${KINESNOW_CACHE:-$HOME/.cache/kinesnow}/venv-sts and prints the path of its python.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${KINESNOW_CACHE:-$HOME/.cache/kinesnow}"
venv="$cache/venv-sts"
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$here/requirements.txt" | cut -d' ' -f1)"
mkdir -p "$cache"
exec 9>"$cache/.venv-sts.lock"
flock 9   # two test processes at once: the second waits, then finds the venv ready
if [[ ! -x "$venv/bin/python" || ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  echo "venv.sh: installing tests/sts/requirements.txt into $venv" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt" >&2
  echo "$want" > "$stamp"
fi
echo "$venv/bin/python"
