#!/usr/bin/env bash
# Builds the stand-in binary (with the same features as its tests, so nothing is built
# twice) and prints its path on the last line.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../.."
source "$here/env.sh"
cargo test "${STANDIN_CARGO_FLAGS[@]}" --no-run >&2
echo "$STANDIN_BIN"
