#!/usr/bin/env bash
# Regenerates the KPL aggregate fixtures of rust-core/tests/fixtures/kpl/ with the aws-kinesis-agg
# package (a KPL-format aggregator from outside this project), installed once into a cached venv:
# ${KINESNOW_CACHE:-$HOME/.cache/kinesnow}/venv-kpl. The output is deterministic.
#   tests/kpl/make_fixtures.sh           rewrite the committed fixtures
#   tests/kpl/make_fixtures.sh --check   regenerate into a temporary folder, fail if they differ
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="$repo/rust-core/tests/fixtures/kpl"
cache="${KINESNOW_CACHE:-$HOME/.cache/kinesnow}"
venv="$cache/venv-kpl"
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$here/requirements.txt" | cut -d' ' -f1)"
if [[ ! -x "$venv/bin/python" || ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  mkdir -p "$cache"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt"
  echo "$want" > "$stamp"
fi
export PYTHONDONTWRITEBYTECODE=1
if [[ "${1:-}" == "--check" ]]; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  "$venv/bin/python" "$here/make_fixtures.py" "$tmp"
  diff -r "$out" "$tmp" && echo "fixtures up to date"
else
  mkdir -p "$out"
  "$venv/bin/python" "$here/make_fixtures.py" "$out"
fi
