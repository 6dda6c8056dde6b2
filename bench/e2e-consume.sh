#!/usr/bin/env bash
# End-to-end benchmark of ConsumeKinesis in a real NiFi (see bench/e2e_consume.py for what it
# measures). Needs the NAR (./mvnw package).
# It uses emulators of its own (kinesis-local and dynalite on ports 14567/14568/14571, state in
# tests/.work/bench-services), so a test run's emulators are never touched: it starts them unless
# they are running and stops them at the end, except with --keep-services, which leaves them (and
# the pre-loaded stream) for the next invocation; stop them with
#   SERVICES_STATE_DIR=tests/.work/bench-services KINESIS_PORT=14568 KINESIS_TLS_PORT=14567 \
#     DYNAMODB_PORT=14571 tests/services/local-services.sh stop
#   bench/e2e-consume.sh [--records 100000] [--shards 16] [--runs 3] [--strategies FLOW_FILE,LINE_DELIMITED] [--keep-services]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bench-env.sh"  # Java, the ports and state directory above
exec python3 "$repo/bench/e2e_consume.py" "$@"
