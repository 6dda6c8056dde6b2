#!/usr/bin/env bash
# ConsumeKinesis in a real NiFi draining the benchmark Kinesis source (see bench/consume_source.py for
# what it measures). Needs the NAR (./mvnw package); builds bench/kinesis-source on first use. Leases go
# to a dynalite of its own (bench/bench-env.sh: ports 14567/14568/14571, state in tests/.work/bench-services),
# started unless running and stopped at the end.
#   bench/consume-source.sh [--shards 1,16,64,256] [--records 200000] [--runs 3] [--strategies FLOW_FILE,LINE_DELIMITED]
#                           [--record-summary PREFIX]  (the medians into bench/results/summary.json, see bench/summary.py)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bench-env.sh"
exec python3 "$repo/bench/consume_source.py" "$@"
