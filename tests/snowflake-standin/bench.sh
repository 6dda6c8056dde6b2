#!/usr/bin/env bash
# Throughput benchmark of the stand-in; writes BENCH.md next to this script.
# Usage: tests/snowflake-standin/bench.sh [--runs N] [--seconds S] [--tls]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../.."
source "$here/env.sh"
cargo run "${STANDIN_CARGO_FLAGS[@]}" -q --example bench -- --out "$here/BENCH.md" "$@"
