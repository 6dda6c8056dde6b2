#!/usr/bin/env bash
# Local AWS emulators for kinesnow tests: kinesis-local (Kinesis Data Streams, incl. EFO) and
# dynalite (DynamoDB, for lease tables). Versions are pinned in package.json / package-lock.json here.
#
#   local-services.sh start | stop | status | install | lock
#
# install: npm ci of the pinned packages into ${KINESNOW_CACHE:-$HOME/.cache/kinesnow}/node-services-<lock hash>
#          (done once; start runs it when needed). Prints the directory.
# start:   starts both servers in the background (unless already running), writes PID files under the
#          state dir, and waits until each answers a real API call (ListStreams / ListTables).
# stop:    TERM to exactly the recorded PIDs (after checking they are these servers), KILL after 10 s.
# status:  exit 0 = both up, 1 = only partly up, 3 = none running.
# start exits 4 when an emulator could not bind its port (taken after the caller picked it): retry on others.
# lock:    regenerates package-lock.json from package.json without "resolved" URLs (so no registry
#          host is written into the repository); npm reinstalls by name, version and integrity hash.
#
# Environment (defaults):
#   KINESIS_PORT=4568          kinesis-local plain HTTP (HTTP/1.1 and h2c)  -> http://127.0.0.1:4568
#   KINESIS_TLS_PORT=4567      kinesis-local HTTPS, self-signed (tests should use the HTTP port)
#   DYNAMODB_PORT=4571         dynalite                                      -> http://127.0.0.1:4571
#   KINESIS_SHARD_LIMIT=1000   kinesis-local's open shards across all streams (its own default, 50, is less
#                              than the end-to-end suite's streams add up to: they are not deleted between tests)
#   SERVICES_STATE_DIR=tests/services/.work/state   PID files and logs (kinesis.log, dynalite.log)
#   SERVICES_START_TIMEOUT=60
# Note: kinesis-local listens on 0.0.0.0 (hard-coded, no host option); tests only ever connect to
# 127.0.0.1. dynalite is bound to 127.0.0.1.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
KINESIS_PORT="${KINESIS_PORT:-4568}"
KINESIS_TLS_PORT="${KINESIS_TLS_PORT:-4567}"
DYNAMODB_PORT="${DYNAMODB_PORT:-4571}"
state="${SERVICES_STATE_DIR:-$here/.work/state}"
timeout="${SERVICES_START_TIMEOUT:-60}"
cache_root="${KINESNOW_CACHE:-$HOME/.cache/kinesnow}"

say() { echo "local-services.sh: $*" >&2; }
die() { say "$*"; exit 1; }

node_dir() {
    local h; h="$(sha256sum "$here/package-lock.json" | cut -c1-12)"
    echo "$cache_root/node-services-$h"
}

do_install() {
    local dir; dir="$(node_dir)"
    if [ ! -f "$dir/.installed" ]; then
        command -v npm >/dev/null || die "npm not found"
        say "installing pinned kinesis-local and dynalite into $dir"
        mkdir -p "$cache_root"
        local tmp="$dir.tmp.$$"
        rm -rf "$tmp"; mkdir -p "$tmp"
        cp "$here/package.json" "$here/package-lock.json" "$tmp/"
        # --ignore-scripts: nothing needs building for in-memory use (leveldown ships prebuilds).
        (cd "$tmp" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >&2)
        [ -f "$tmp/node_modules/kinesis-local/main.js" ] && [ -f "$tmp/node_modules/dynalite/cli.js" ] \
            || die "npm ci finished but the packages are missing"
        touch "$tmp/.installed"
        rm -rf "$dir"; mv "$tmp" "$dir"
    fi
    echo "$dir"
}

do_lock() {
    local tmp; tmp="$(mktemp -d)"
    cp "$here/package.json" "$tmp/"
    (cd "$tmp" && npm install --package-lock-only --no-audit --no-fund --ignore-scripts --loglevel=error >&2)
    python3 - "$tmp/package-lock.json" "$here/package-lock.json" <<'PY'
import json, sys
src, dst = sys.argv[1], sys.argv[2]
lock = json.load(open(src))
for pkg in lock.get("packages", {}).values():
    pkg.pop("resolved", None)
with open(dst, "w") as f:
    json.dump(lock, f, indent=2)
    f.write("\n")
PY
    rm -rf "$tmp"
    say "wrote $here/package-lock.json (no resolved URLs)"
}

# PID from a pid file if that process is still the expected server (guards against PID reuse).
live_pid() {
    local file="$state/$1.pid" pattern="$2" pid
    [ -f "$file" ] || return 1
    pid="$(cat "$file")"
    [[ "$pid" =~ ^[0-9]+$ ]] && [ -r "/proc/$pid/cmdline" ] || return 1
    tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$pattern" || return 1
    echo "$pid"
}

aws_call() {  # aws_call PORT TARGET BODY -> exit 0 if HTTP 200
    curl -sf -o /dev/null --max-time 3 -X POST "http://127.0.0.1:$1/" \
        -H "Content-Type: application/x-amz-json-1.${4:-1}" -H "X-Amz-Target: $2" \
        -H "Authorization: AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/x/aws4_request, SignedHeaders=host, Signature=0" \
        -H "X-Amz-Date: 20260101T000000Z" --data "$3"
}
kinesis_up() { aws_call "$KINESIS_PORT" Kinesis_20131202.ListStreams '{}' 1; }
dynamodb_up() { aws_call "$DYNAMODB_PORT" DynamoDB_20120810.ListTables '{}' 0; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start_kinesis() {
    local dir="$1"
    if live_pid kinesis kinesis-local/main.js >/dev/null; then say "kinesis-local already running"; return; fi
    port_open "$KINESIS_PORT" && die "port $KINESIS_PORT is in use by something else"
    port_open "$KINESIS_TLS_PORT" && die "port $KINESIS_TLS_PORT is in use by something else"
    (cd "$dir" && exec env \
        KINESIS_MOCK_CERT_PATH="$dir/node_modules/kinesis-local/server.json" \
        KINESIS_MOCK_PLAIN_PORT="$KINESIS_PORT" KINESIS_MOCK_TLS_PORT="$KINESIS_TLS_PORT" \
        LOG_LEVEL="${KINESIS_LOG_LEVEL:-WARN}" \
        CREATE_STREAM_DURATION=0ms DELETE_STREAM_DURATION=0ms \
        REGISTER_STREAM_CONSUMER_DURATION=0ms DEREGISTER_STREAM_CONSUMER_DURATION=0ms \
        SPLIT_SHARD_DURATION=0ms MERGE_SHARDS_DURATION=0ms UPDATE_SHARD_COUNT_DURATION=0ms \
        SHARD_LIMIT="${KINESIS_SHARD_LIMIT:-1000}" \
        node node_modules/kinesis-local/main.js </dev/null >"$state/kinesis.log" 2>&1) &
    echo $! > "$state/kinesis.pid"
}

start_dynalite() {
    local dir="$1"
    if live_pid dynalite dynalite/cli.js >/dev/null; then say "dynalite already running"; return; fi
    port_open "$DYNAMODB_PORT" && die "port $DYNAMODB_PORT is in use by something else"
    (cd "$dir" && exec node node_modules/dynalite/cli.js --host 127.0.0.1 --port "$DYNAMODB_PORT" \
        --createTableMs 0 --deleteTableMs 0 --updateTableMs 0 </dev/null >"$state/dynalite.log" 2>&1) &
    echo $! > "$state/dynalite.pid"
}

do_start() {
    local dir; dir="$(do_install)"
    mkdir -p "$state"
    {
        echo "KINESIS_ENDPOINT=http://127.0.0.1:$KINESIS_PORT"
        echo "KINESIS_TLS_ENDPOINT=https://127.0.0.1:$KINESIS_TLS_PORT"
        echo "DYNAMODB_ENDPOINT=http://127.0.0.1:$DYNAMODB_PORT"
    } > "$state/endpoints.env"
    local t0; t0="$(date +%s.%N)"
    start_kinesis "$dir"
    start_dynalite "$dir"
    local deadline=$(( $(date +%s) + timeout )) k=0 d=0
    while :; do
        [ "$k" = 1 ] || { kinesis_up && k=1; } || true
        [ "$d" = 1 ] || { dynamodb_up && d=1; } || true
        [ "$k$d" = 11 ] && break
        # Whether each is still running is read before its log: a server that exited has written its last
        # words, so a port in use is told apart from any other exit (read the other way round, an exit
        # between the two reads was taken for another failure).
        local k_gone=0 d_gone=0
        [ "$k" = 1 ] || live_pid kinesis kinesis-local/main.js >/dev/null || k_gone=1
        [ "$d" = 1 ] || live_pid dynalite dynalite/cli.js >/dev/null || d_gone=1
        # A port taken between the caller's choice and the bind (another process's ephemeral port, say):
        # kinesis-local may log it and hang, so look for it rather than wait for the timeout. Exit 4 lets a
        # caller that picked the ports retry on others.
        if grep -qs -e EADDRINUSE -e 'Address already in use' "$state/kinesis.log" "$state/dynalite.log"; then
            grep -hs -m 3 -e EADDRINUSE -e 'Address already in use' "$state/kinesis.log" "$state/dynalite.log" >&2
            do_stop
            say "a port is in use (kinesis $KINESIS_PORT, TLS $KINESIS_TLS_PORT, dynamodb $DYNAMODB_PORT): pick others"
            exit 4
        fi
        if [ "$k_gone" = 1 ]; then
            tail -n 20 "$state/kinesis.log" >&2; die "kinesis-local exited during startup"
        fi
        if [ "$d_gone" = 1 ]; then
            tail -n 20 "$state/dynalite.log" >&2; die "dynalite exited during startup"
        fi
        if [ "$(date +%s)" -ge "$deadline" ]; then do_stop; die "services not answering after ${timeout}s"; fi
        sleep 0.1
    done
    echo "services up after $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b-a}') s:" \
         "kinesis http://127.0.0.1:$KINESIS_PORT (pid $(cat "$state/kinesis.pid")), dynamodb http://127.0.0.1:$DYNAMODB_PORT (pid $(cat "$state/dynalite.pid"))"
}

stop_one() {
    local name="$1" pattern="$2" pid
    if ! pid="$(live_pid "$name" "$pattern")"; then rm -f "$state/$name.pid"; return; fi
    kill -TERM "$pid" 2>/dev/null || true
    local i
    for i in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then say "$name (PID $pid) ignored TERM, sending KILL"; kill -KILL "$pid" 2>/dev/null || true; fi
    while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
    rm -f "$state/$name.pid"
    say "stopped $name (PID $pid)"
}

do_stop() {
    stop_one kinesis kinesis-local/main.js
    stop_one dynalite dynalite/cli.js
}

do_status() {
    local k=0 d=0 kp dp
    kp="$(live_pid kinesis kinesis-local/main.js)" && kinesis_up && k=1 || true
    dp="$(live_pid dynalite dynalite/cli.js)" && dynamodb_up && d=1 || true
    echo "kinesis-local: $([ $k = 1 ] && echo "up pid=$kp http://127.0.0.1:$KINESIS_PORT" || echo down)"
    echo "dynalite:      $([ $d = 1 ] && echo "up pid=$dp http://127.0.0.1:$DYNAMODB_PORT" || echo down)"
    case "$k$d" in 11) return 0 ;; 00) return 3 ;; *) return 1 ;; esac
}

case "${1:-}" in
    start) do_start ;;
    stop) do_stop ;;
    status) do_status ;;
    install) do_install ;;
    lock) do_lock ;;
    *) die "usage: local-services.sh start|stop|status|install|lock" ;;
esac
