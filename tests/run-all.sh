#!/usr/bin/env bash
# The project's tests, on a fresh machine too: builds what is missing (Rust, the NAR, a NiFi assembled from Maven
# artifacts, the npm emulators) and starts and stops what it needs.
#
#   tests/run-all.sh                 every test, every real part (the README's test command; .ci/run runs exactly this)
#   tests/run-all.sh fast            the inner loop: the gates, the Rust unit and model tests, the Java tests and the NAR
#   tests/run-all.sh e2e [PATTERN]   the end-to-end tests alone (pytest -k PATTERN), against the NAR already built
#
# The gates come first (cargo fmt --check, clippy with -D warnings, javac with -Xlint -Werror, the docs' links and
# commands): if one fails, the run stops there. Each step prints its time; a summary lists them all. Exits non-zero if any step failed.
#
# Rust tests build in the `suite` profile (Cargo.toml: release optimisations without LTO, so no test binary pays
# for a thin-LTO link of the AWS SDK); the NAR, and the Java tests that load its library, keep the release profile.
# The workspace, the stand-in and the benchmark source share the root's target/ directory.
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
# shellcheck source=../build/java-home.sh
source build/java-home.sh
[ -f "$HOME/.cargo/env" ] && source "$HOME/.cargo/env"
export PYTHONDONTWRITEBYTECODE=1
export KINESIS_SOURCE_TARGET_DIR="$repo/target"
export KINESIS_SOURCE_PROFILE=suite
export KINESIS_SOURCE_JOBS=2   # its build.sh defaults to -j 1 (a benchmark's build yields to the machine's other work)

mode="${1:-all}"
case "$mode" in
  all | fast) [ $# -le 1 ] || { echo "usage: $0 [fast | e2e [PATTERN]]" >&2; exit 2; } ;;
  e2e) ;;
  *) echo "usage: $0 [fast | e2e [PATTERN]]" >&2; exit 2 ;;
esac

# The NiFi instance directories an earlier run left (logs and repositories, about 220 MB each, one per NiFi
# start) are removed unless their NiFi still runs, so repeated runs do not fill the disk; this run's stay for reading.
for instance in tests/nifi/.work/instances/* tests/nifi/.work/clusters/*/node-*; do
  [ -d "$instance" ] || continue
  tests/nifi/nifi.sh status --instance-dir "$instance" >/dev/null 2>&1 || rm -rf "$instance"
done

failed=()
summary=()
t_start=$SECONDS
# Everything this run prints is also kept in one log, so a failed step's failing tests and its last lines can be
# shown again beside the summary at the end, where a reader of a long (or cut) output looks first.
run_log="$(mktemp)"
exec > >(tee "$run_log") 2>&1
trap 'rm -f "$run_log"' EXIT
failure_digests=()
failing_tests=()
record() { # status seconds name
  summary+=("$(printf '%-5s %5ss  %s' "$1" "$2" "$3")")
  [ "$1" = ok ] || failed+=("$3")
}
digest() { # name file [first-line]: the failing tests' lines and the last lines of a failed step's output
  local name="$1" file="$2" first="${3:-1}" part tests
  part="$(tail -n "+$first" "$file")"
  tests="$(grep -E '^(FAILED|ERROR|XPASS) |^---- .* (stdout|stderr) ----$|^test .* \.\.\. FAILED$|panicked at' <<<"$part" | head -n 40)"
  failure_digests+=("--- $name: failing tests, then its last lines
$tests
[...]
$(tail -n 30 <<<"$part")")
  # The failing tests' names alone, cut to one line each, are printed once more as the run's very last lines:
  # a CI page that shows only a log's head and tail still names them.
  local names
  names="$(grep -E '^(FAILED|ERROR|XPASS) |\.\.\. FAILED$' <<<"$tests" | cut -c1-200 | head -n 10)"
  [ -z "$names" ] || failing_tests+=("$names")
}
step() {
  local name="$1"; shift
  echo
  echo "=== $name: $*"
  local t0=$SECONDS first
  first=$(($(wc -l <"$run_log") + 1))
  if "$@"; then record ok $((SECONDS - t0)) "$name"
  else
    record FAIL $((SECONDS - t0)) "$name"
    sleep 1 # tee catches up
    digest "$name" "$run_log" "$first"
  fi
}
finish() {
  echo
  if [ ${#failure_digests[@]} -gt 0 ]; then
    echo "=== What failed, again (each failed step's failing tests and last lines)"
    printf '%s\n' "${failure_digests[@]}"
    echo
  fi
  echo "=== Summary: tests/run-all.sh $mode ($((SECONDS - t_start)) s)"
  printf '%s\n' "${summary[@]}"
  if [ ${#failed[@]} -gt 0 ]; then
    echo "FAILED: ${failed[*]}"
    [ ${#failing_tests[@]} -eq 0 ] || { echo "Failing tests:"; printf '%s\n' "${failing_tests[@]}"; }
    exit 1
  fi
  echo "All tests passed."
  exit 0
}

# --- Gates: formatting and lints, first, so they fail in a minute or two -----------------------------------------
standin_lint_env() { # the stand-in links the official prebuilt libduckdb instead of compiling DuckDB (env.sh)
  DUCKDB_LIB_DIR="$(tests/snowflake-standin/prebuilt-duckdb.sh)" || return 1
  export DUCKDB_LIB_DIR DUCKDB_DOWNLOAD_LIB=0
}
fmt_gate() {
  cargo fmt --all --check &&
    cargo fmt --all --check --manifest-path bench/kinesis-source/Cargo.toml &&
    cargo fmt --all --check --manifest-path fuzz/Cargo.toml
}
# In the dev profile: tried in the `suite` profile (to share the build scripts' runs and the proc-macros with the
# test build), a fresh machine's gate took 328 s instead of 218-236 s (the C libraries built at -O3) and the test
# build gained nothing measurable (BENCHMARKS, "Test suite").
clippy_gate() {
  standin_lint_env || return 1
  cargo clippy --workspace --exclude snowflake-standin --all-targets -- -D warnings &&
    cargo clippy -p snowflake-standin --no-default-features --all-targets -- -D warnings &&
    CARGO_TARGET_DIR="$repo/target" cargo clippy --all-targets --manifest-path bench/kinesis-source/Cargo.toml -- -D warnings
}
# The docs' checks, and the figure check's own tests (a stale figure must fail it).
docs_gate() { python3 tests/docs/check_docs.py && python3 -m pytest -q -p no:cacheprovider tests/docs/test_check_docs.py; }
javac_gate() { ./mvnw -B -q -DskipCargo=true -pl java-shim test-compile; }
gates() {
  step "Gate: cargo fmt --check (workspace, bench/kinesis-source, fuzz)" fmt_gate
  step "Gate: cargo clippy -D warnings (workspace, stand-in, bench/kinesis-source)" clippy_gate
  step "Gate: javac -Xlint:all -Werror (java-shim, main and tests)" javac_gate
  step "Gate: docs (links, repository paths, script commands and their options, figures against the benchmarks' summary)" docs_gate
  if [ ${#failed[@]} -gt 0 ]; then
    echo "A gate failed: nothing else runs (fix it, then run again)."
    finish
  fi
}

# --- Steps ----------------------------------------------------------------------------------------------------------
# Downloads that only wait on the network (emulators, NiFi's artifacts, the SDK's venv, test tools): started in the
# background while the first compile runs, so a fresh machine does not wait for them one after the other.
prefetch() {
  tests/services/local-services.sh install >/dev/null &&
    tests/nifi/assemble.sh >/dev/null &&
    tests/snowflake-standin/conformance/setup-venv.sh >/dev/null &&
    tests/kcl-legacy/build.sh >/dev/null &&
    tests/kpl/venv.sh >/dev/null && tests/avro/venv.sh >/dev/null && bash tests/sts/venv.sh >/dev/null &&
    # cargo-about only when the licence lists' inputs changed (tests/licenses/check.py compares their digest).
    { ! python3 tests/licenses/check.py --inputs-changed || nice -n 10 tests/licenses/cargo-about.sh >/dev/null; }
}
prefetch_pid=""
start_prefetch() {
  prefetch_log="$(mktemp)"
  prefetch >"$prefetch_log" 2>&1 &
  prefetch_pid=$!
}
join_prefetch() { # the steps after it fetch for themselves what the prefetch did not
  [ -n "$prefetch_pid" ] || return 0
  if ! wait "$prefetch_pid"; then
    echo "(prefetch failed; the steps fetch what they need themselves)"
    tail -n 20 "$prefetch_log"
  fi
  rm -f "$prefetch_log"
  prefetch_pid=""
}

# What the NiFi tests run beside the NAR: the stand-in and the benchmark source (both `suite` profile).
nifi_side_build() {
  STANDIN_BIN="$(tests/snowflake-standin/build.sh | tail -n 1)" && export STANDIN_BIN &&
    KINESIS_SOURCE_BIN="$(bench/kinesis-source/build.sh | tail -n 1)" && export KINESIS_SOURCE_BIN
}
# The engine's tests and the operator's tool (`suite` profile), niced: in `all` they compile beside the end-to-end
# tests, whose NiFi comes first.
engine_build() {
  nice -n 10 cargo test --profile suite -p kinesnow-core --no-run &&
    nice -n 10 cargo build --profile suite -p kinesnow-ctl
}
unit_tests() { cargo test --profile suite -p kinesnow-core --lib; }

# One fan-out test follows a subscription across kinesis-local's 5-minute limit and mostly waits: it runs in the
# background (same build, its own emulators on free ports) beside the steps after it, and is joined before NiFi.
LONG_RUST_TEST=subscriptions_are_renewed_across_the_five_minute_limit_without_gaps_or_repeats
long_test() {
  cargo test --profile suite -p kinesnow-core --test integration -- --exact "consumer_fanout::$LONG_RUST_TEST"
}
# Four test threads on two cores: the integration tests mostly wait on their own emulators (lease timeouts, commit
# lags), 286 s against 448 s with the default two on a busy machine.
rust_tests() { cargo test --profile suite -p kinesnow-core -- --skip "$LONG_RUST_TEST" --test-threads 4; }

release_pid=""
start_release_build() {
  release_log="$(mktemp)"
  nice -n 10 cargo build --release -p kinesnow-core >"$release_log" 2>&1 &
  release_pid=$!
}
join_release_build() { # a failure shows again, with its errors, in Maven's cargo step
  [ -n "$release_pid" ] || return 0
  wait "$release_pid" || tail -n 30 "$release_log"
  rm -f "$release_log"
  release_pid=""
}

# Steps in the background (`all`): `background NAME CMD...` starts CMD with its output kept aside; `join_background
# NAME` waits for it, prints that output and records the step as "NAME (background)".
declare -A bg_pid=() bg_log=() bg_t0=()
background() {
  local name="$1"; shift
  echo
  echo "=== $name (in the background; its output follows when it ends): $*"
  bg_log[$name]="$(mktemp)"
  bg_t0[$name]=$SECONDS
  "$@" >"${bg_log[$name]}" 2>&1 &
  bg_pid[$name]=$!
}
join_background() {
  local name="$1" rc=0
  [ -n "${bg_pid[$name]:-}" ] || return 0
  wait "${bg_pid[$name]}" || rc=1
  echo
  echo "=== $name (ran in the background):"
  cat "${bg_log[$name]}"
  if [ $rc = 0 ]; then record ok $((SECONDS - bg_t0[$name])) "$name (background)"
  else
    record FAIL $((SECONDS - bg_t0[$name])) "$name (background)"
    digest "$name (background)" "${bg_log[$name]}"
  fi
  rm -f "${bg_log[$name]}"
  unset "bg_pid[$name]"
}

e2e_needs_nar() {
  ls nar-packaging/target/kinesnow-nar-*.nar >/dev/null 2>&1 || {
    echo "no NAR in nar-packaging/target: run ./mvnw -B -q package -DskipTests (or tests/run-all.sh) first" >&2
    return 1
  }
}
export_standin_bin() {
  STANDIN_BIN="$(tests/snowflake-standin/build.sh 2>/dev/null | tail -n 1)" && export STANDIN_BIN
}

# The NAR's LICENSE and NOTICE regenerated from Cargo.lock and the Maven tree (cargo-about, license-maven-plugin),
# against the committed ones, the licence allow-lists, and the NAR just built. After Maven: it runs Maven too. Not in
# `fast`: cargo-about's scan takes minutes.
LICENSES="Licenses: the NAR's third-party notices, allow-listed licences"
case "$mode" in
  fast)
    gates
    # The NAR's release library compiles beside the unit tests' build (rustc leaves a core idle for long stretches);
    # Maven's own cargo step then finds it current.
    start_release_build
    step "Rust unit and model tests (suite profile)" unit_tests
    join_release_build
    step "Java tests and the NAR (Maven)" ./mvnw -B -q verify
    ;;
  e2e)
    pattern="${2:-}"
    e2e_needs_nar || { record FAIL 0 "the NAR is built"; finish; }
    step "Stand-in binary (suite profile)" export_standin_bin
    if [ -n "$pattern" ]; then
      step "End-to-end (pytest -k '$pattern')" python3 -m pytest -q --durations=10 tests/e2e -k "$pattern"
    else
      step "End-to-end: the NAR in a real NiFi" python3 -m pytest -q --durations=10 tests/e2e
    fi
    ;;
  all)
    gates
    start_prefetch
    # What the end-to-end tests need is built first (the stand-in, the benchmark source, the NAR); those tests then
    # run in the background, mostly waiting on NiFi, while the engine's tests compile and run beside them (niced
    # compiles; the Rust tests start their own emulators on free ports). The NiFi harness runs after them: never
    # two NiFi suites at once.
    # The NAR's release library compiles (niced) beside them (rustc leaves a core idle for long stretches); Maven's
    # own cargo step then finds it built.
    start_release_build
    step "Rust build for NiFi's tests (suite profile: stand-in, benchmark source)" nifi_side_build
    # The prefetch (the emulators, NiFi's artifacts, the Python venvs the tests use, KCL's legacy jar built with
    # Maven) is joined first: the tests use what it installs, and two Mavens never share ~/.m2 at once.
    join_prefetch
    join_release_build
    step "Java tests and the NAR (Maven; release library)" ./mvnw -B -q verify
    # Minutes of cargo-about's licence scan, mostly one core: beside the steps after it (its Maven goal runs first).
    background "$LICENSES" python3 tests/licenses/check.py
    E2E="End-to-end: the NAR in a real NiFi"
    if e2e_needs_nar; then background "$E2E" python3 -m pytest -q --durations=10 tests/e2e
    else record FAIL 0 "End-to-end: the NAR is built"; fi
    step "Rust build (suite profile: engine tests, operator tool; beside the end-to-end tests)" engine_build
    background "Rust: fan-out renewal test" long_test
    step "Rust tests (suite profile; beside the end-to-end tests)" rust_tests
    # The stand-in's tests and Snowflake's official SDK against it.
    step "Snowflake stand-in (Rust tests, official SDK conformance)" tests/snowflake-standin/run-tests.sh
    # The benchmark Kinesis source (issue 20): a load generator, not an emulator; its conformance tests (the Rust
    # SDK, CBOR, and KCL 2.7.2 polling and fan-out read every record byte-exact).
    step "Benchmark Kinesis source (Rust SDK, CBOR and KCL conformance)" bench/kinesis-source/run-tests.sh
    step "Local emulators (kinesis-local, dynalite)" python3 -m pytest -q tests/services
    step "Policy proxy (Snowflake's IAM policy, tests/iam)" python3 -m pytest -q tests/iam
    step "kinesnow-ctl: Assume Role with External ID and a proxy (STS emulator, tinyproxy)" python3 -m pytest -q tests/ctl
    join_background "Rust: fan-out renewal test"
    join_background "$E2E"
    join_background "$LICENSES"
    # tests/nifi includes test_cluster.py: a real 3-node NiFi cluster with ConsumeKinesis on every node
    step "NiFi harness (real NiFi, standalone and a 3-node cluster)" python3 -m pytest -q --durations=5 tests/nifi
    ;;
esac
finish
