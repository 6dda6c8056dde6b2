#!/usr/bin/env bash
# ConsumeKinesis in a real NiFi draining the benchmark Kinesis source (see bench/consume_source.py for
# what it measures). Needs the NAR (./mvnw package); builds bench/kinesis-source on first use. Leases go
# to a dynalite of its own (ports 14567/14568/14571, state in tests/.work/bench-services), started unless
# running and stopped at the end.
#   bench/consume-source.sh [--shards 1,16,64,256] [--records 200000] [--runs 3] [--strategies FLOW_FILE,LINE_DELIMITED]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$repo/build/java-home.sh"
export PYTHONDONTWRITEBYTECODE=1
export KINESIS_PORT="${BENCH_KINESIS_PORT:-14568}" KINESIS_TLS_PORT="${BENCH_KINESIS_TLS_PORT:-14567}"
export DYNAMODB_PORT="${BENCH_DYNAMODB_PORT:-14571}"
export SERVICES_STATE_DIR="${BENCH_SERVICES_STATE_DIR:-$repo/tests/.work/bench-services}"
exec python3 "$repo/bench/consume_source.py" "$@"
