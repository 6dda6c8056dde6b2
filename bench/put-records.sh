#!/usr/bin/env bash
# PutSnowflake in a real NiFi, JSON content against the Record Reader path (JsonTreeReader, AvroReader), the
# same 1 KiB records into the Snowflake stand-in, variants in turn (see bench/put_records.py for what it
# measures). Needs the NAR (./mvnw package); builds bench/kinesis-source, the fixture NAR and the stand-in on
# first use. Work files go to bench/.work/put-records-* (removed at the end unless --keep).
#   bench/put-records.sh [--flow-files 200] [--records-per-flow-file 500] [--runs 3] [--variants JSON,JSON_READER,AVRO_READER]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$repo/build/java-home.sh"
export PYTHONDONTWRITEBYTECODE=1
exec python3 "$repo/bench/put_records.py" "$@"
