#!/usr/bin/env bash
# Builds the benchmark Kinesis source (bench/kinesis-source) and its tests, at low priority in its own cached
# target dir, and prints the binary's path on the LAST line. `cargo test --no-run` builds the binary with the
# same features as the tests (a separate `cargo build` would resolve features without dev-dependencies and
# rebuild everything). KINESIS_SOURCE_JOBS sets cargo's -j (default 1: the machine's other work comes first).
# KINESIS_SOURCE_PROFILE picks the cargo profile: release (the default, for benchmarks) or suite (tests/run-all.sh:
# release optimisations without LTO). KINESIS_SOURCE_TARGET_DIR overrides the target dir (run-all.sh: the root's).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ -f "$HOME/.cargo/env" ] && source "$HOME/.cargo/env"
export CARGO_TARGET_DIR="${KINESIS_SOURCE_TARGET_DIR:-$HOME/.cache/kinesnow/target-bench-source}"
profile="${KINESIS_SOURCE_PROFILE:-release}"
nice -n 19 cargo test --profile "$profile" -j "${KINESIS_SOURCE_JOBS:-1}" --manifest-path "$here/Cargo.toml" --no-run >&2
echo "$CARGO_TARGET_DIR/$profile/kinesis-source"
