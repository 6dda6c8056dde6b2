#!/usr/bin/env bash
# Creates (once) the cached virtualenv with the official Snowpipe Streaming SDK
# used by the conformance test, and prints its path on the last line.
# Location: ${KINESNOW_CACHE:-$HOME/.cache/kinesnow}/venv-standin
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${KINESNOW_CACHE:-$HOME/.cache/kinesnow}"
venv="$cache/venv-standin"
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$here/requirements.txt" | cut -d' ' -f1)"
if [[ ! -x "$venv/bin/python" || ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  mkdir -p "$cache"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt"
  echo "$want" > "$stamp"
fi
echo "$venv"
