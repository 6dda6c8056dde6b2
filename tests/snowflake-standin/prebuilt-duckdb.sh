#!/usr/bin/env bash
# Prints a directory holding a prebuilt libduckdb.so matching the duckdb crate in
# Cargo.lock (DuckDB 1.5.6), fetched once from the npm registry, where DuckDB's own
# Node bindings package ships the official C-API library. Compiling DuckDB from source
# takes over an hour on two cores; this takes seconds. Cached under ~/.cache/kinesnow.
set -euo pipefail
version="1.5.6"
npm_package="@duckdb/node-bindings-linux-x64@1.5.6-r.1"
cache="${KINESNOW_CACHE:-$HOME/.cache/kinesnow}/duckdb-$version"
if [[ ! -f "$cache/libduckdb.so" ]]; then
  if [[ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]]; then
    echo "prebuilt DuckDB is only wired for Linux x86_64; build with KINESNOW_DUCKDB_BUNDLED=1" >&2
    exit 1
  fi
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "$npm_package" >/dev/null && tar xzf ./*.tgz)
  mkdir -p "$cache"
  cp "$tmp/package/libduckdb.so" "$cache/libduckdb.so.part"
  mv "$cache/libduckdb.so.part" "$cache/libduckdb.so"
fi
echo "$cache"
