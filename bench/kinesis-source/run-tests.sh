#!/usr/bin/env bash
# The benchmark Kinesis source's tests: builds it (cached in ~/.cache/kinesnow/target-bench-source, at low
# priority), runs its Rust tests (unit tests and the conformance tests with the AWS SDK for Rust and raw
# CBOR), then the Java conformance (tests/bench_source: the KCL consumer of tests/kcl-legacy over CBOR and
# JSON, leases on a private dynalite). Exits non-zero if anything fails.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$repo"
[ -f "$HOME/.cargo/env" ] && source "$HOME/.cargo/env"
export CARGO_TARGET_DIR="${KINESIS_SOURCE_TARGET_DIR:-$HOME/.cache/kinesnow/target-bench-source}"
export PYTHONDONTWRITEBYTECODE=1

echo "== build (cargo test --no-run, profile ${KINESIS_SOURCE_PROFILE:-release}, target dir $CARGO_TARGET_DIR)"
KINESIS_SOURCE_BIN="$("$here/build.sh" | tail -n 1)"
export KINESIS_SOURCE_BIN
echo "== Rust tests"
nice -n 19 cargo test --profile "${KINESIS_SOURCE_PROFILE:-release}" -j "${KINESIS_SOURCE_JOBS:-1}" --manifest-path "$here/Cargo.toml"
echo "== Java SDK v2 (KCL 2.7.2) conformance, CBOR and JSON"
python3 -m pytest -q "$repo/tests/bench_source"
