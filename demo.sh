#!/usr/bin/env bash
# The local demo: builds what is missing, starts kinesis-local, dynalite and a real NiFi with the NAR on
# http://127.0.0.1:8080/nifi, applies the parameter contexts and the flow, produces sample JSON messages and
# starts ConsumeKinesis. Prints how many records have reached NiFi, until Ctrl-C, which stops everything
# this script started.
#
# Not yet in this build: PutSnowflake's Snowpipe Streaming client, so records wait in the queue in front of
# PutSnowflake instead of landing in a table.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$repo"
source build/java-home.sh
[ -f "$HOME/.cargo/env" ] && source "$HOME/.cargo/env"
PORT="${NIFI_PORT:-8080}"
work="$repo/demo/.work"
mkdir -p "$work/snowflake"

nar=$(ls nar-packaging/target/kinesnow-nar-*.nar 2>/dev/null | head -1 || true)
if [ -z "$nar" ]; then
  echo "Building the NAR (first run: several minutes)..."
  ./mvnw -B -q package -DskipTests
  nar=$(ls nar-packaging/target/kinesnow-nar-*.nar | head -1)
fi
[ -f "$work/snowflake/rsa_key.p8" ] || openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$work/snowflake/rsa_key.p8" 2>/dev/null

producer_pid=""
cleanup() {
  echo; echo "Stopping what the demo started..."
  [ -n "$producer_pid" ] && kill "$producer_pid" 2>/dev/null || true
  tests/nifi/nifi.sh stop --port "$PORT" || true
  SERVICES_STATE_DIR="$work/services" tests/services/local-services.sh stop || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

SERVICES_STATE_DIR="$work/services" tests/services/local-services.sh start
python3 - <<'PY'
import sys; sys.path.insert(0, "tests/lib")
from services import kinesis_call, AwsJsonError
try:
    kinesis_call("CreateStream", {"StreamName": "kinesnow-demo", "ShardCount": 2}, endpoint="http://127.0.0.1:4568")
except AwsJsonError as e:
    if e.error_type != "ResourceInUseException":
        raise
PY
tests/nifi/nifi.sh start --port "$PORT" --extensions "$nar"
ids=$(python3 parameter-contexts/apply.py --nifi "http://127.0.0.1:$PORT/nifi-api" --variant local \
      --set "KINESNOW_WORK=$work" --set "SNOWFLAKE_URL=https://127.0.0.1:8443")
echo "$ids"
python3 demo/producer.py --rate 20 & producer_pid=$!
consumer=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["consumer"])' <<<"$ids")
queue=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["records_queue"])' <<<"$ids")
python3 - "$PORT" "$consumer" <<'PY'
import sys; sys.path.insert(0, "tests/lib")
from nifi_client import NiFiClient
NiFiClient(f"http://127.0.0.1:{sys.argv[1]}/nifi-api").start_processor(sys.argv[2])
PY
echo
echo "NiFi: http://127.0.0.1:$PORT/nifi  (Ctrl-C stops the demo)"
while true; do
  python3 - "$PORT" "$queue" <<'PY'
import sys, time; sys.path.insert(0, "tests/lib")
from nifi_client import NiFiClient
c = NiFiClient(f"http://127.0.0.1:{sys.argv[1]}/nifi-api")
print(time.strftime("%H:%M:%S"), "records from Kinesis waiting for PutSnowflake:", c.connection_queue_count(sys.argv[2]), flush=True)
PY
  sleep 5
done
