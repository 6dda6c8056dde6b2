#!/usr/bin/env bash
# Prints the path of cargo-about (the version below, from the crate registry with its locked dependencies), installed on first
# use into ${KINESNOW_CACHE:-$HOME/.cache/kinesnow}/cargo-about-<version>/ (a few minutes' compile, once per machine).
# Nothing is installed system-wide. Used by tests/licenses/check.py.
set -euo pipefail
version=0.9.3
cache_root="${KINESNOW_CACHE:-$HOME/.cache/kinesnow}"
root="$cache_root/cargo-about-$version"
bin="$root/bin/cargo-about"
mkdir -p "$cache_root"
exec 9>"$cache_root/.cargo-about.lock"
flock 9
if [ ! -x "$bin" ]; then
  [ -f "$HOME/.cargo/env" ] && source "$HOME/.cargo/env"
  echo "cargo-about.sh: installing cargo-about $version into $root" >&2
  cargo install --locked --quiet cargo-about --version "$version" --features cli --root "$root" -j 2 >&2
fi
echo "$bin"
