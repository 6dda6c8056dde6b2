#!/usr/bin/env bash
# Throughput benchmark of the stand-in; writes BENCH.md next to this script.
# Usage: tests/snowflake-standin/bench.sh [--runs N] [--seconds S] [--tls]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${KINESNOW_CACHE:-$HOME/.cache/kinesnow}/target-standin}"
cargo run --release -q -p snowflake-standin --example bench -- --out "$here/BENCH.md" "$@"
