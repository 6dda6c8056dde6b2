#!/usr/bin/env bash
# Enhanced Fan-Out against polling on kinesis-local (started and stopped by the benchmark): records/s and
# CPU seconds per million records draining a backlog, and put-to-poll latency on a live stream with both
# consumers reading it at once. Prints Markdown table rows for BENCHMARKS.md.
#   bench/fan-out.sh                  # 3 rounds (medians of 3)
set -euo pipefail
cd "$(dirname "$0")/../rust-core"
cargo test --release -p kinesnow-core --test integration consumer_fanout::bench_fan_out_against_polling -- --ignored --nocapture 2>&1 | grep -E '^\|' || {
  echo "the fan-out benchmark failed; rerun with KINESNOW_TEST_LOG=1 for the engine's events" >&2
  exit 1
}
