#!/usr/bin/env bash
# Builds the benchmark Kinesis source (bench/kinesis-source) and its tests, at low priority in its own cached
# target dir, and prints the binary's path on the LAST line. `cargo test --no-run` builds the binary with the
# same features as the tests (a separate `cargo build` would resolve features without dev-dependencies and
# rebuild everything). KINESIS_SOURCE_JOBS sets cargo's -j (default 1: the machine's other work comes first).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ -f "$HOME/.cargo/env" ] && source "$HOME/.cargo/env"
export CARGO_TARGET_DIR="${KINESIS_SOURCE_TARGET_DIR:-$HOME/.cache/kinesnow/target-bench-source}"
nice -n 19 cargo test --release -j "${KINESIS_SOURCE_JOBS:-1}" --manifest-path "$here/Cargo.toml" --no-run >&2
echo "$CARGO_TARGET_DIR/release/kinesis-source"
