#!/usr/bin/env bash
# Self-measurement of the benchmark Kinesis source: starts it, drains every shard once with examples/drain.rs
# (mode sdk = the AWS SDK for Rust over JSON; fanout = the same SDK with SubscribeToShard; json / cbor = bare
# HTTP requests in that protocol), and prints
# records/s and the CPU-seconds per million Kinesis records spent by the server (from /proc/PID/stat, the
# drain only) and by the draining client.
#   bench/kinesis-source/measure.sh [sdk|fanout|json|cbor]
# Environment: SHARDS (16), RECORDS_PER_SHARD (62500), RECORD_SIZE (1024), AGGREGATE_SHARE (0),
#              THREADS (server worker threads, 1), LIMIT (GetRecords Limit, 10000), PAYLOAD (ascii; json, avro)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mode="${1:-sdk}"
shards="${SHARDS:-16}" per_shard="${RECORDS_PER_SHARD:-62500}" size="${RECORD_SIZE:-1024}"
share="${AGGREGATE_SHARE:-0}" threads="${THREADS:-1}" limit="${LIMIT:-10000}" payload="${PAYLOAD:-ascii}"
bin="$("$here/build.sh" | tail -n 1)"
drain="$(dirname "$bin")/examples/drain"
tick="$(getconf CLK_TCK)"
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }   # utime + stime of one process

out="$(mktemp)"
"$bin" --port 0 --stream measure --shards "$shards" --records-per-shard "$per_shard" --record-size "$size" \
  --aggregate-share "$share" --payload "$payload" --threads "$threads" >"$out" 2>/dev/null &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; rm -f "$out"' EXIT
for _ in $(seq 100); do [ -s "$out" ] && break; sleep 0.05; done
port="$(sed -n 's/^listening on 127.0.0.1://p' "$out")"
before="$(cpu_ticks "$pid")"
client="$( { /usr/bin/time -f '%U %S' "$drain" "http://127.0.0.1:$port" measure "$shards" "$mode" "$limit" >"$out.drain"; } 2>&1 | tail -n 1)"
after="$(cpu_ticks "$pid")"
python3 - "$out.drain" "$before" "$after" "$tick" "$client" "$mode" "$shards" "$size" "$threads" "$payload" <<'PY'
import json, sys
drain = json.load(open(sys.argv[1]))
before, after, tick = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
client = sum(float(x) for x in sys.argv[5].split())
n = drain["records"]
server = (after - before) / tick
print(json.dumps({
    "mode": sys.argv[6], "shards": int(sys.argv[7]), "record_size": int(sys.argv[8]), "server_threads": int(sys.argv[9]), "payload": sys.argv[10],
    "records": n, "seconds": drain["seconds"], "records_per_second": round(n / drain["seconds"]),
    "MiB_per_second": round(drain["data_bytes"] / drain["seconds"] / 2**20, 1),
    "server_cpu_seconds": round(server, 2), "server_cpu_s_per_million": round(server / n * 1e6, 2),
    "client_cpu_seconds": round(client, 2), "client_cpu_s_per_million": round(client / n * 1e6, 2),
}))
PY
rm -f "$out.drain"
