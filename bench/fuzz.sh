#!/usr/bin/env bash
# Fuzzes the core's parsers and decoders with libFuzzer (cargo-fuzz, the crate in fuzz/; issue 15).
#
#   bench/fuzz.sh [seconds-per-target] [targets...]
#
# Defaults: 600 s per target, every target (kpl_deaggregate snowflake_rows sink_io_decode kcl_convert).
# Installs cargo-fuzz into ~/.cargo/bin when it is missing, builds every target once with the
# installed nightly toolchain (no sanitizer: the code is safe Rust, so a sanitizer would only halve
# the executions and inflate the RSS; FUZZ_SANITIZER=address to use one), then runs the targets one
# at a time for the given time, each with -rss_limit_mb and -malloc_limit_mb (FUZZ_RSS_LIMIT_MB,
# default 2048) and a 60 s limit per input, on its corpus fuzz/corpus/<target> (kept between runs,
# git-ignored), its committed seeds fuzz/seeds/<target> (fuzz/seed.py writes them) and the crashes
# found before, minimised, in fuzz/regressions/<target> (they run first: a target whose defect is
# not fixed stops at once). libFuzzer enforces -malloc_limit_mb (one allocation) only with a
# sanitizer's malloc hooks; without a sanitizer the address space is capped instead (3 x the RSS
# limit: a larger allocation fails and aborts, which is a crash), so that no input can take the
# machine's memory before libFuzzer's once-a-second RSS check sees it.
# A target stops at its first crash (panic, failed invariant, out of memory, timeout): the input is
# saved under fuzz/artifacts/<target>/ (git-ignored) and its path printed; reproduce it with
# `cargo +nightly fuzz run -s none <target> <path>`. Logs go to fuzz/logs/<target>.log.
# KINESNOW_FUZZ_SKIP (comma-separated) is passed on: it waives checks of known defects (fuzz/README.md).
#
# Prints a table: target, executions, crashes (artifacts found), peak RSS (the largest `rss:` of
# libFuzzer's status lines, or its final peak_rss_mb), and the time it ran.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
# shellcheck disable=SC1090
[[ -f ~/.cargo/env ]] && source ~/.cargo/env

all_targets=(kpl_deaggregate snowflake_rows sink_io_decode kcl_convert)
seconds="${1:-600}"
[[ $# -gt 0 ]] && shift
targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=("${all_targets[@]}")
[[ "$seconds" =~ ^[0-9]+$ ]] || { echo "usage: bench/fuzz.sh [seconds-per-target] [targets...]" >&2; exit 2; }
for t in "${targets[@]}"; do
  [[ -f "fuzz/fuzz_targets/$t.rs" ]] || { echo "no fuzz target '$t' (have: ${all_targets[*]})" >&2; exit 2; }
done
rss_limit="${FUZZ_RSS_LIMIT_MB:-2048}"
sanitizer="${FUZZ_SANITIZER:-none}"

rustup toolchain list | grep -q '^nightly' || { echo "bench/fuzz.sh needs the nightly toolchain (rustup toolchain install nightly)" >&2; exit 1; }
if ! command -v cargo-fuzz >/dev/null; then
  echo "== installing cargo-fuzz (once, into ~/.cargo/bin)"
  cargo install cargo-fuzz --locked
fi

echo "== building the fuzz targets (nightly, sanitizer: $sanitizer)"
# All targets at once (one cargo invocation; they share every dependency), debug assertions on.
cargo +nightly fuzz build -s "$sanitizer" -a
triple="$(rustc +nightly -vV | sed -n 's/^host: //p')"
bin_dir="fuzz/target/$triple/release"

mkdir -p fuzz/logs
rows=()
found=()
for t in "${targets[@]}"; do
  mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t"
  log="fuzz/logs/$t.log"
  before="$(ls "fuzz/artifacts/$t" | sort)"
  regressions=()
  [[ -d "fuzz/regressions/$t" ]] && regressions=("fuzz/regressions/$t")
  dict=()
  [[ -f "fuzz/dicts/$t.dict" ]] && dict=(-dict="fuzz/dicts/$t.dict")
  echo "== $t: ${seconds} s"
  start=$(date +%s)
  set +e
  (
    [[ "$sanitizer" == none ]] && ulimit -v $((rss_limit * 3 * 1024))
    exec "$bin_dir/$t" "fuzz/corpus/$t" "fuzz/seeds/$t" "${regressions[@]}" \
      -max_total_time="$seconds" -rss_limit_mb="$rss_limit" -malloc_limit_mb="$rss_limit" -timeout=60 \
      -print_final_stats=1 -artifact_prefix="fuzz/artifacts/$t/" "${dict[@]}"
  ) >"$log" 2>&1
  rc=$?
  set -e
  took=$(( $(date +%s) - start ))
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
  [[ -z "$execs" ]] && execs="$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#')"
  peak="$( { grep -oE 'rss: [0-9]+Mb' "$log" | grep -oE '[0-9]+'; sed -n 's/^stat::peak_rss_mb: *//p' "$log"; } | sort -n | tail -1)"
  new="$(comm -13 <(echo "$before") <(ls "fuzz/artifacts/$t" | sort) | grep -vE '^(slow-unit-|$)' || true)"
  crashes=0
  if [[ -n "$new" ]]; then
    crashes="$(echo "$new" | wc -l)"
    while read -r f; do found+=("fuzz/artifacts/$t/$f"); done <<<"$new"
  elif [[ $rc -ne 0 ]]; then
    echo "   $t exited $rc without an artifact: see $log" >&2
  fi
  rows+=("$(printf '%-16s %14s %8s %10s %8s' "$t" "${execs:-?}" "$crashes" "${peak:-?} MB" "${took} s")")
  echo "   ${rows[-1]}"
done

echo
printf '%-16s %14s %8s %10s %8s\n' target executions crashes "peak RSS" time
printf '%s\n' "${rows[@]}"
if [[ ${#found[@]} -gt 0 ]]; then
  echo
  echo "artifacts (reproduce: cargo +nightly fuzz run -s $sanitizer <target> <artifact>; minimise: cargo +nightly fuzz tmin -s $sanitizer <target> <artifact>):"
  printf '  %s\n' "${found[@]}"
fi
