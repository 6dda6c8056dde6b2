#!/usr/bin/env bash
# PutSnowflake's engine against Snowflake's official Python SDK (snowpipe-streaming), side by side
# (issue 8): the same rows, the same channel count, the same stand-in, alternating run by run.
#
#   bench/sink.sh [--rows 100000] [--runs 3] [--records-per-flow-file 500] [--commit-lag-ms 200]
#                 [--tables full,narrow] [--no-write] [--standin-bench-mode]
#                 [--baseline-driver PATH [--baseline-label TEXT]] [--record-summary PREFIX]
#
# Builds the stand-in (tests/snowflake-standin/build.sh) and the engine's driver
# (rust-core/examples/sink_bench.rs), installs the SDK's cached venv
# (tests/snowflake-standin/conformance/setup-venv.sh), generates the rows once
# (bench/sink_bench.py gen), starts ONE stand-in over TLS (its CA trusted by both clients; commit
# lag 200 ms, Snowflake's per-channel limits on: 429 past 10 requests or 20 MB a second), and for every run, table kind and channel count (1 and 8) runs both
# drivers, the order swapped every run. Each run loads a fresh table, checks every row landed once
# and drops it. Tables: "full" maps every key of the ~1 KiB rows to a column (11 columns, VARIANTs
# included: the stand-in's DuckDB work dominates), "narrow" keeps only EVENTID (the stand-in still
# parses every row, but inserts one column), which shows more of the clients themselves.
# --standin-bench-mode starts the stand-in with --bench-mode: it checks the protocol, decompresses and
# counts rows, and commits without parsing or storing them (no DuckDB), so the clients' own costs show;
# each run then checks the stand-in's count of committed rows instead of the table (no distinct check),
# and the report adds each client's appends (requests) and the time from the first to the last one the
# stand-in accepted, which the 250 ms status polls (ours) and the SDK's status cache do not round.
# --baseline-driver adds a third client, the engine's driver built from another commit (copy
# target/release/examples/sink_bench aside after building it there: the target directory is shared),
# run in the same rotation, so a change is measured before and after in one session
# (--baseline-label names it in the table, e.g. "main b4847fa").
# Medians and ratios go into BENCHMARKS.md (section "PutSnowflake vs the official SDK", between
# its markers) unless --no-write; every run's figures stay in the work directory it prints.
# --record-summary PREFIX also writes the medians and ratios into bench/results/summary.json under PREFIX.
# (sink.standard and sink.bench_mode are what the user pages quote; bench/summary.py).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
export PYTHONDONTWRITEBYTECODE=1

command_line="bench/sink.sh${*:+ $*}"  # before the arguments are shifted away
rows=100000 runs=3 per_ff=500 lag=200 tables="full,narrow" write=1 bench_mode=() baseline="" baseline_label="baseline" summary_prefix=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rows) rows="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --records-per-flow-file) per_ff="$2"; shift 2 ;;
    --commit-lag-ms) lag="$2"; shift 2 ;;
    --tables) tables="$2"; shift 2 ;;
    --no-write) write=0; shift ;;
    --standin-bench-mode) bench_mode=(--bench-mode); shift ;;
    --baseline-driver) baseline="$(realpath "$2")"; shift 2 ;;
    --baseline-label) baseline_label="$2"; shift 2 ;;
    --record-summary) summary_prefix="$2"; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
work="$(mktemp -d "${TMPDIR:-/tmp}/kinesnow-sink-bench.XXXXXX")"
echo "work directory: $work" >&2
started=$(date +%s)

echo "== building" >&2
standin_bin="$(tests/snowflake-standin/build.sh | tail -n 1)"
cargo build --release -q -p kinesnow-core --example sink_bench
driver="$repo/target/release/examples/sink_bench"
venv="$(tests/snowflake-standin/conformance/setup-venv.sh | tail -n 1)"
python="$venv/bin/python"

echo "== generating $rows rows for 1 and 8 channels" >&2
for c in 1 8; do
  "$python" bench/sink_bench.py gen --out "$work/data/c$c" --rows "$rows" --channels "$c" >/dev/null
done

echo "== starting the stand-in" >&2
mkdir -p "$work/state"
"$standin_bin" --tls --port 0 --state-dir "$work/state" --commit-lag-ms "$lag" "${bench_mode[@]}" >"$work/ready" 2>"$work/standin.log" &
standin_pid=$!
stop_standin() { kill "$standin_pid" 2>/dev/null || true; wait "$standin_pid" 2>/dev/null || true; }
trap stop_standin EXIT
for _ in $(seq 100); do grep -q "ready" "$work/ready" 2>/dev/null && break; sleep 0.1; done
read -r url ca < <(sed -n 's/.* url=\([^ ]*\) port=[0-9]* ca=\([^ ]*\).*/\1 \2/p' "$work/ready")
[[ -n "$url" ]] || { echo "the stand-in did not start:"; cat "$work/ready" "$work/standin.log"; exit 1; } >&2
admin() { curl -sf --cacert "$ca" -X "$1" "$url$2" -H 'Content-Type: application/json' -d "$3" >/dev/null; }
key="$repo/rust-core/tests/fixtures/user.p8"
admin POST /admin/users "$("$python" -c 'import json,sys; print(json.dumps({"account":"TESTACCT","user":"LOADER","public_key_pem":open(sys.argv[1]).read()}))' "$repo/rust-core/tests/fixtures/user.pub.pem")"

columns_full="EVENTID VARCHAR, EVENTTYPE VARCHAR, EVENTTIME VARCHAR, CUSTOMERID NUMBER, AMOUNT FLOAT, CURRENCY VARCHAR, ITEMS VARIANT, SHIPPING VARIANT, USERAGENT VARCHAR, NOTE VARCHAR, KINESISMETADATA VARIANT"
columns_narrow="EVENTID VARCHAR"
# Keeps the SDK on the REST append path the stand-in implements; see BENCHMARKS.md.
sdk_properties=(--sdk-property max_buffered_kb_for_rowset_mode=1048576 --sdk-property max_rowset_payload_size_mb=16)

run_one() { # client kind channels run
  local client="$1" kind="$2" c="$3" run="$4"
  local table="B_${client^^}_${kind^^}_C${c}_R${run}" columns_var="columns_$2"
  admin POST /admin/sql "{\"sql\":\"CREATE OR REPLACE TABLE DB.PUBLIC.$table (${!columns_var})\"}"
  admin DELETE /admin/requests ''
  local log="$work/$table.log" line
  if [[ "$client" == kinesnow || "$client" == baseline ]]; then
    local bin="$driver"
    [[ "$client" == baseline ]] && bin="$baseline"
    "$bin" --url "$url" --ca "$ca" --data "$work/data/c$c" --table "$table" --records-per-flow-file "$per_ff" \
      --standin-pid "$standin_pid" >"$log" 2>&1 || { cat "$log" >&2; return 1; }
    line="$(grep '^{' "$log" | tail -n 1)"
  else
    SSL_CERT_FILE="$ca" "$python" bench/sink_bench.py sdk --url "$url" --data "$work/data/c$c" --table "$table" --key "$key" \
      --records-per-flow-file "$per_ff" --standin-pid "$standin_pid" "${sdk_properties[@]}" >"$log" 2>&1 || { tail -n 30 "$log" >&2; return 1; }
    line="$(sed -n 's/^RESULT //p' "$log" | tail -n 1)"
  fi
  local commits=()
  if (( ${#bench_mode[@]} )); then
    # The run's appends as the stand-in accepted them (each run waits for its last commit first).
    curl -sf --cacert "$ca" "$url/admin/bench-commits" >"$work/$table.commits.json"
    commits=(--commits "$work/$table.commits.json" --table "$table")
  fi
  # Appends the stand-in refused with 429 (Snowflake's per-channel limits); each was sent again.
  local refused
  refused="$(curl -sf --cacert "$ca" "$url/admin/requests?path_contains=$table" |
    "$python" -c 'import json,sys; print(sum(r["status"] == 429 for r in json.load(sys.stdin)["requests"]))')"
  "$python" bench/sink_bench.py record --result "$line" --client "$client" --table-kind "$kind" --run "$run" \
    --refused "$refused" "${commits[@]}" --append "$work/results.jsonl"
}

IFS=, read -ra kinds <<<"$tables"
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
echo "== warm-up (not reported)" >&2
run_one kinesnow "${kinds[0]}" 8 0 2>/dev/null || true
if [[ -n "$baseline" ]]; then run_one baseline "${kinds[0]}" 8 0 2>/dev/null || true; fi
run_one sdk "${kinds[0]}" 8 0 2>/dev/null || true
: > "$work/results.jsonl"
echo "== measuring: $runs runs x tables {$tables} x channels {1,8} x every client" >&2
for run in $(seq "$runs"); do
  for kind in "${kinds[@]}"; do
    for c in 1 8; do
      if [[ -n "$baseline" ]]; then
        if (( run % 2 )); then order=(kinesnow baseline sdk); else order=(sdk baseline kinesnow); fi
      elif (( run % 2 )); then order=(kinesnow sdk); else order=(sdk kinesnow); fi
      for client in "${order[@]}"; do run_one "$client" "$kind" "$c" "$run"; done
    done
  done
done
load_after="$(cut -d' ' -f1-3 /proc/loadavg)"
elapsed=$(( $(date +%s) - started ))

report=(bench/sink_bench.py report --results "$work/results.jsonl" --command "$command_line" --rows "$rows"
  --records-per-flow-file "$per_ff" --commit-lag-ms "$lag" --load-before "$load_before" --load-after "$load_after"
  --elapsed "$elapsed")
if (( ${#bench_mode[@]} )); then report+=(--standin-bench-mode); fi
if [[ -n "$baseline" ]]; then report+=(--baseline-label "$baseline_label"); fi
if (( write )); then report+=(--write "$repo/BENCHMARKS.md"); fi
if [[ -n "$summary_prefix" ]]; then report+=(--record-summary "$summary_prefix"); fi
"$python" "${report[@]}"
echo "all runs: $work/results.jsonl (${elapsed} s)" >&2
