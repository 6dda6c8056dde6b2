#!/usr/bin/env bash
# An hour of faults (issues 34 and 51): a real 3-node NiFi cluster, one Application Name, SNOWFLAKE_COMMIT, a steady
# producer (--rate records/s, default 500, into a --shards stream, default 8) with every --malformed-every-th record
# malformed (default 200: `oops <id>`, `[<id>]`, `<id>`), and every few minutes a random fault (see bench/chaos.py;
# among them refuse_4xx: appends refused with 403/400 while PutSnowflake's failure loops back to it). At the end:
# losses and duplicates of the good records, and malformed records in no parse.failure file (all must be 0: exit 1
# otherwise), the producer's rate reached, RSS and heap of each NiFi every minute, lease-table rows and tombstones.
# Builds the NAR and the Snowflake stand-in if missing; the cluster loads the test-only NAR of NiFi's standard
# processors too (tests/nifi/standard-nar: PutFile writes parse.failure's FlowFiles to bench/.work/chaos-RUN/).
# Emulators of its own (ports 14567/14568/14571, state in tests/.work/bench-services, as bench/cluster-failover.sh),
# started unless running and stopped at the end, so a test run's emulators are never touched; the NiFi nodes take
# free ports picked when the cluster starts.
# The stand-in commits as Snowflake does by default (each append's commit lag drawn from 4-10 s, in append order).
#   bench/chaos.sh [--minutes 60] [--fault-every 180] [--rate 500] [--shards 8] [--malformed-every 200] [--seed S]
#                  [--warmup MIN] [--drain SEC] [--commit-lag-ms 4000-10000] [--record-summary PREFIX]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
source build/java-home.sh
[ -f "$HOME/.cargo/env" ] && source "$HOME/.cargo/env"
export PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
export KINESIS_PORT="${BENCH_KINESIS_PORT:-14568}" KINESIS_TLS_PORT="${BENCH_KINESIS_TLS_PORT:-14567}"
export DYNAMODB_PORT="${BENCH_DYNAMODB_PORT:-14571}"
export SERVICES_STATE_DIR="${BENCH_SERVICES_STATE_DIR:-$repo/tests/.work/bench-services}"
ls nar-packaging/target/kinesnow-nar-*.nar >/dev/null 2>&1 || ./mvnw -B -q package -DskipTests
STANDIN_BIN="${STANDIN_BIN:-$(tests/snowflake-standin/build.sh 2>/dev/null | tail -n 1)}"
export STANDIN_BIN
tests/nifi/assemble.sh >/dev/null
exec python3 "$repo/bench/chaos.py" "$@"
