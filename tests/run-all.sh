#!/usr/bin/env bash
# Runs every test of the project, on a fresh machine too: builds what is missing (Rust core, NAR,
# a NiFi assembled from Maven artifacts, the npm emulators) and starts and stops what it needs.
# Prints each step's time and a summary; exits non-zero if any step failed.
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
# shellcheck source=../build/java-home.sh
source build/java-home.sh
[ -f "$HOME/.cargo/env" ] && source "$HOME/.cargo/env"
export PYTHONDONTWRITEBYTECODE=1

failed=()
summary=()
step() {
  local name="$1"; shift
  echo
  echo "=== $name: $*"
  local t0=$SECONDS
  if "$@"; then
    summary+=("ok    $(printf '%5ss' $((SECONDS - t0)))  $name")
  else
    summary+=("FAIL  $(printf '%5ss' $((SECONDS - t0)))  $name")
    failed+=("$name")
  fi
}

t_start=$SECONDS
# The Snowflake stand-in first: its tests and Snowflake's official SDK against it; the binary it
# builds (DuckDB linked from the official prebuilt library) serves PutSnowflake's tests below.
step "Snowflake stand-in (Rust tests, official SDK conformance)" tests/snowflake-standin/run-tests.sh
STANDIN_BIN="$(tests/snowflake-standin/build.sh 2>/dev/null | tail -n 1)"
export STANDIN_BIN
# One fan-out test follows a subscription across kinesis-local's 5-minute limit and mostly waits: it runs beside
# the other Rust tests (same build, its own emulators on free ports) instead of after them.
LONG_RUST_TEST=subscriptions_are_renewed_across_the_five_minute_limit_without_gaps_or_repeats
rust_tests() {
  cargo test --release --workspace --exclude snowflake-standin --no-run || return 1
  local log rc=0
  log="$(mktemp)"
  cargo test --release -p kinesnow-core --test integration -- --exact "consumer_fanout::$LONG_RUST_TEST" >"$log" 2>&1 &
  local long=$!
  cargo test --release --workspace --exclude snowflake-standin -- --skip "$LONG_RUST_TEST" || rc=1
  wait "$long" || rc=1
  echo "--- $LONG_RUST_TEST (run alongside):"
  cat "$log"
  rm -f "$log"
  return $rc
}
step "Rust tests (release profile, shared with the NAR build)" rust_tests
# The benchmark Kinesis source (issue 20): a load generator, not an emulator; its conformance tests (the Rust SDK,
# CBOR, and KCL 2.7.2 polling and fan-out read every record byte-exact). Its own crate and target dir.
step "Benchmark Kinesis source (bench/kinesis-source: Rust SDK, CBOR and KCL conformance)" env KINESIS_SOURCE_JOBS=2 bench/kinesis-source/run-tests.sh
step "Java tests and the NAR (Maven)" ./mvnw -B -q verify
step "Local emulators (kinesis-local, dynalite)" python3 -m pytest -q tests/services
step "Policy proxy (Snowflake's IAM policy, tests/iam)" python3 -m pytest -q tests/iam
# tests/nifi includes test_cluster.py: a real 3-node NiFi cluster with ConsumeKinesis on every node (about 3 min)
step "NiFi harness (real NiFi, standalone and a 3-node cluster)" python3 -m pytest -q tests/nifi
step "End-to-end: the NAR in a real NiFi" python3 -m pytest -q tests/e2e

echo
echo "=== Summary ($((SECONDS - t_start)) s)"
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED: ${failed[*]}"
  exit 1
fi
echo "All tests passed."
