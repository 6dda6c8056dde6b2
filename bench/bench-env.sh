# Sourced by the benchmarks that run NiFi on emulators of their own (bench/consume-source.sh, bench/e2e-consume.sh,
# bench/pipeline.sh), so a test run's emulators are never touched: Java, and kinesis-local and dynalite on ports
# 14567/14568/14571 with their state in tests/.work/bench-services (BENCH_* override them). Sets $repo.
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$repo/build/java-home.sh"
export PYTHONDONTWRITEBYTECODE=1
export KINESIS_PORT="${BENCH_KINESIS_PORT:-14568}" KINESIS_TLS_PORT="${BENCH_KINESIS_TLS_PORT:-14567}"
export DYNAMODB_PORT="${BENCH_DYNAMODB_PORT:-14571}"
export SERVICES_STATE_DIR="${BENCH_SERVICES_STATE_DIR:-$repo/tests/.work/bench-services}"
