#!/usr/bin/env bash
# Runs the README's test command as on a fresh machine, to time it (issue 33's fresh-machine figure in BENCHMARKS.md):
# a new clone of COMMIT (default HEAD) in a new directory, with a new, empty HOME, so Cargo's registry and target
# directory, Maven's repository, npm's and pip's caches and the NiFi assembly all start empty. What a fresh machine
# has installed stays: rustup's toolchains (RUSTUP_HOME), the JDK, and the Python found on PATH (with pyenv, its
# PYENV_ROOT) with the packages installed into it. Prints the suite's summary and the wall time;
# the clone, its HOME and the full log stay in the printed directory for reading (remove it afterwards).
#
#   bench/fresh-machine.sh [COMMIT]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
commit="$(git -C "$repo" rev-parse "${1:-HEAD}")"
rustup_home="${RUSTUP_HOME:-$HOME/.rustup}"
cargo_bin="$(dirname "$(command -v cargo || echo "$HOME/.cargo/bin/cargo")")"
[ -d "$rustup_home/toolchains" ] || { echo "no rustup toolchain under $rustup_home" >&2; exit 2; }

work="$(mktemp -d "${TMPDIR:-/tmp}/kinesnow-fresh.XXXXXX")"
git clone -q --no-hardlinks "$repo" "$work/repo"
git -C "$work/repo" checkout -q "$commit"
mkdir -p "$work/home"
echo "fresh-machine run of $commit in $work (log: $work/run.log)"

t0=$(date +%s)
rc=0
pyenv_root="${PYENV_ROOT:-$HOME/.pyenv}"
env -i PATH="$cargo_bin:$PATH" HOME="$work/home" RUSTUP_HOME="$rustup_home" PYENV_ROOT="$pyenv_root" \
  CARGO_HOME="$work/home/.cargo" TERM=dumb LANG=C.UTF-8 \
  bash -c 'cd "$1" && ./tests/run-all.sh' _ "$work/repo" >"$work/run.log" 2>&1 || rc=$?
t1=$(date +%s)
sed -n '/^=== Summary/,$p' "$work/run.log"
echo "fresh-machine run of $commit: exit $rc, $((t1 - t0)) s wall ($work)"
exit $rc
