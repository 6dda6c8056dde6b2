#!/usr/bin/env bash
# The whole flow (issue 38): the shipped flow definition's ConsumeKinesis -> PutSnowflake in a real NiFi, from the
# benchmark Kinesis source (Kinesis' limits on) into the Snowflake stand-in in bench mode: throughput, NiFi CPU per
# million records, heap, RSS, and end-to-end latency at a steady share of that rate (see bench/pipeline.py). Needs
# the NAR (./mvnw package); builds bench/kinesis-source and the stand-in on first use; leases on the benchmarks'
# dynalite (bench/bench-env.sh). Writes its results into BENCHMARKS.md between its markers unless --no-write.
# KINESIS_SOURCE_BIN names a kinesis-source binary to use instead of building one.
#   bench/pipeline.sh [--shards 16,64,256] [--strategies LINE_DELIMITED,FLOW_FILE] [--records 400000] [--runs 1]
#                     [--loads 50,90] [--latency-seconds 60] [--commit-lag-ms 1000 | 4000-10000] [--heap 1g] [--no-write]
#                     [--sink-property NAME=VALUE]... [--nar PATH] [--record-summary PREFIX]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bench-env.sh"
exec python3 "$repo/bench/pipeline.py" "$@"
