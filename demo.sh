#!/usr/bin/env bash
# The local demo: builds what is missing, starts kinesis-local, dynalite, the Snowflake stand-in and a real
# NiFi with the NAR on http://127.0.0.1:8080/nifi, applies the parameter contexts and the flow
# (ConsumeKinesis -> PutSnowflake), produces sample JSON messages, starts the flow and prints the rows
# arriving in the destination table KINESNOW.PUBLIC.EVENTS, until Ctrl-C, which stops everything this
# script started.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$repo"
source build/java-home.sh
[ -f "$HOME/.cargo/env" ] && source "$HOME/.cargo/env"
PORT="${NIFI_PORT:-8080}"
SNOWFLAKE_PORT="${SNOWFLAKE_PORT:-8765}"
export KINESIS_PORT="${KINESIS_PORT:-4568}" DYNAMODB_PORT="${DYNAMODB_PORT:-4571}" KINESIS_TLS_PORT="${KINESIS_TLS_PORT:-4567}"
kinesis_url="http://127.0.0.1:$KINESIS_PORT"
dynamodb_url="http://127.0.0.1:$DYNAMODB_PORT"
work="$repo/demo/.work"
mkdir -p "$work/snowflake"

nar=$(ls nar-packaging/target/kinesnow-nar-*.nar 2>/dev/null | head -1 || true)
if [ -z "$nar" ]; then
  echo "Building the NAR (first run: several minutes)..."
  ./mvnw -B -q package -DskipTests
  nar=$(ls nar-packaging/target/kinesnow-nar-*.nar | head -1)
fi
[ -f "$work/snowflake/rsa_key.p8" ] || openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$work/snowflake/rsa_key.p8" 2>/dev/null

echo "Building the Snowflake stand-in if needed (first run: a few minutes)..."
standin_bin=$(tests/snowflake-standin/build.sh 2>/dev/null | tail -n 1)

producer_pid=""
standin_pid=""
cleanup() {
  echo; echo "Stopping what the demo started..."
  [ -n "$producer_pid" ] && kill "$producer_pid" 2>/dev/null || true
  [ -n "$standin_pid" ] && kill "$standin_pid" 2>/dev/null || true
  tests/nifi/nifi.sh stop --port "$PORT" || true
  SERVICES_STATE_DIR="$work/services" tests/services/local-services.sh stop || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

SERVICES_STATE_DIR="$work/services" tests/services/local-services.sh start
python3 - "$kinesis_url" <<'PY'
import sys; sys.path.insert(0, "tests/lib")
from services import kinesis_call, AwsJsonError
try:
    kinesis_call("CreateStream", {"StreamName": "kinesnow-demo", "ShardCount": 2}, endpoint=sys.argv[1])
except AwsJsonError as e:
    if e.error_type != "ResourceInUseException":
        raise
PY
snowflake_url="http://127.0.0.1:$SNOWFLAKE_PORT"
mkdir -p "$work/standin"
"$standin_bin" --plain --port "$SNOWFLAKE_PORT" --state-dir "$work/standin" --commit-lag-ms 1000 \
  >"$work/standin/stdout.log" 2>"$work/standin/standin.log" & standin_pid=$!
for _ in $(seq 50); do grep -q "ready" "$work/standin/stdout.log" 2>/dev/null && break; sleep 0.2; done
python3 demo/snowflake.py setup --url "$snowflake_url" --key-file "$work/snowflake/rsa_key.p8"
tests/nifi/nifi.sh start --port "$PORT" --extensions "$nar"
ids=$(python3 parameter-contexts/apply.py --nifi "http://127.0.0.1:$PORT/nifi-api" --variant local \
      --set "KINESNOW_WORK=$work" --set "SNOWFLAKE_URL=$snowflake_url")
echo "$ids"
python3 demo/producer.py --rate 20 --endpoint "$kinesis_url" & producer_pid=$!
python3 - "$PORT" "$ids" "$kinesis_url" "$dynamodb_url" <<'PY'
import json, sys; sys.path.insert(0, "tests/lib")
from nifi_client import NiFiClient
c, ids = NiFiClient(f"http://127.0.0.1:{sys.argv[1]}/nifi-api"), json.loads(sys.argv[2])
if sys.argv[3:] != ["http://127.0.0.1:4568", "http://127.0.0.1:4571"]:  # emulators on other ports than the context's
    c.update_parameters(ids["source_context"], {"AWS Kinesis Endpoint Override URL": sys.argv[3],
                                                "AWS DynamoDB Endpoint Override URL": sys.argv[4]})
c.start_processor(ids["consumer"])
c.start_processor(ids["sink"])
PY
echo
echo "NiFi: http://127.0.0.1:$PORT/nifi   Snowflake stand-in: $snowflake_url (Ctrl-C stops the demo)"
python3 demo/snowflake.py watch --url "$snowflake_url"
