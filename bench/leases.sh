#!/usr/bin/env bash
# Lease benchmark: failover after kill -9, hand-over after a stop, parent end to first child record,
# and DynamoDB writes per lease per second, with ConsumeKinesis's default timings, on kinesis-local and
# dynalite (started and stopped by the benchmark itself). Prints Markdown table rows for BENCHMARKS.md.
#   bench/leases.sh            # 3 rounds (medians of 3)
#   KINESNOW_BENCH_ROUNDS=5 bench/leases.sh
set -euo pipefail
cd "$(dirname "$0")/../rust-core"
cargo test --release -p kinesnow-core --test integration consumer_cluster::bench_lease_timings -- --ignored --nocapture 2>&1 | grep -E '^\|' || {
  echo "the lease benchmark failed; rerun with KINESNOW_TEST_LOG=1 for the engine's events" >&2
  exit 1
}
