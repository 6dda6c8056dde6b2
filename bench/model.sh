#!/usr/bin/env bash
# Runs every model test of kinesnow-core's lib (test functions named model_..., e.g. the consumer's
# shard bookkeeping in src/consumer/model.rs) with many more random cases than the test suite.
#   bench/model.sh [CASES]        # cases per model test, default 100000 (PROPTEST_CASES)
# Prints each test's verdict, the cases and the time they took. (model_consumer_covers_the_hostile_paths
# runs a fixed 500 cases: it checks that the random sequences reach the paths the model is about.)
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cases="${1:-100000}"
source "$HOME/.cargo/env" 2>/dev/null || true
cd "$repo"
cargo test --release -p kinesnow-core --lib --no-run 2>&1 | tail -n 2
start=$(date +%s.%N)
out=$(PROPTEST_CASES="$cases" cargo test --release -p kinesnow-core --lib model_ -- --test-threads=1 2>&1) || status=$?
end=$(date +%s.%N)
echo "$out" | grep -E '^test |test result|panicked|minimal failing input' || true
tests=$(echo "$out" | grep -cE '^test .*model_.* \.\.\. ' || true)
awk -v c="$cases" -v n="$tests" -v s="$start" -v e="$end" \
  'BEGIN { printf "model tests: %d, PROPTEST_CASES: %d per property test, time: %.1f s\n", n, c, e - s }'
exit "${status:-0}"
