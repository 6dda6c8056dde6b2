#!/usr/bin/env bash
# Failover in a real 3-node NiFi cluster, SNOWFLAKE_COMMIT beside NIFI_COMMIT in one run (see
# bench/cluster_failover.py for what it measures). Builds the NAR and the Snowflake stand-in if missing.
# Emulators of its own (ports 14567/14568/14571, state in tests/.work/bench-services), started unless
# running and stopped at the end, so a test run's emulators are never touched.
#   bench/cluster-failover.sh [--rounds 3] [--rate 100] [--steady 60]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
source build/java-home.sh
[ -f "$HOME/.cargo/env" ] && source "$HOME/.cargo/env"
export PYTHONDONTWRITEBYTECODE=1
export KINESIS_PORT="${BENCH_KINESIS_PORT:-14568}" KINESIS_TLS_PORT="${BENCH_KINESIS_TLS_PORT:-14567}"
export DYNAMODB_PORT="${BENCH_DYNAMODB_PORT:-14571}"
export SERVICES_STATE_DIR="${BENCH_SERVICES_STATE_DIR:-$repo/tests/.work/bench-services}"
ls nar-packaging/target/kinesnow-nar-*.nar >/dev/null 2>&1 || ./mvnw -B -q package -DskipTests
STANDIN_BIN="${STANDIN_BIN:-$(tests/snowflake-standin/build.sh 2>/dev/null | tail -n 1)}"
export STANDIN_BIN
tests/nifi/assemble.sh >/dev/null
exec python3 "$repo/bench/cluster_failover.py" "$@"
