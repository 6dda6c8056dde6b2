#!/usr/bin/env bash
# Creates (once) or reuses the venv NAME at ${KINESNOW_CACHE:-$HOME/.cache/kinesnow}/venv-NAME holding REQUIREMENTS,
# and prints the path of its python. A venv whose requirements changed since it was made is made again. Two test
# processes at once: the second waits on the lock, then finds the venv ready.
#
#   tests/lib/venv.sh NAME REQUIREMENTS
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: $0 NAME REQUIREMENTS" >&2; exit 2; }
name="$1" requirements="$2"
cache="${KINESNOW_CACHE:-$HOME/.cache/kinesnow}"
venv="$cache/venv-$name"
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$requirements" | cut -d' ' -f1)"
mkdir -p "$cache"
exec 9>"$cache/.venv-$name.lock"
flock 9
if [[ ! -x "$venv/bin/python" || ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  echo "venv.sh: installing $requirements into $venv" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements" >&2
  echo "$want" > "$stamp"
fi
echo "$venv/bin/python"
