#!/usr/bin/env bash
# Builds the stand-in, runs its Rust tests, then the conformance suite with
# Snowflake's official Python SDK (installed once into a cached venv).
# Everything is built with the release profile: DuckDB is compiled once and
# serves tests, conformance and the benchmark alike.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${KINESNOW_CACHE:-$HOME/.cache/kinesnow}/target-standin}"

# One cargo invocation builds the binary too (integration tests need it); a separate
# `cargo build` would resolve features without dev-dependencies and compile DuckDB twice.
echo "== cargo test -p snowflake-standin (release, target dir $CARGO_TARGET_DIR)"
cargo test --release -p snowflake-standin
echo "== conformance: official snowpipe-streaming SDK"
venv="$("$here/conformance/setup-venv.sh" | tail -n 1)"
STANDIN_BIN="$CARGO_TARGET_DIR/release/snowflake-standin" \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider "$here/conformance"
