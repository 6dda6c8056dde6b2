# Sourced by the stand-in's scripts: sets CARGO_TARGET_DIR (the repository's target/, shared with the engine;
# STANDIN_TARGET_DIR overrides it), STANDIN_CARGO_FLAGS and STANDIN_BIN.
# The stand-in builds in the `suite` profile (the root Cargo.toml: release optimisations, no LTO), like the tests.
# DuckDB is linked from the official prebuilt libduckdb (seconds; build.rs adds its directory as an rpath) unless
# KINESNOW_DUCKDB_BUNDLED=1 asks to compile it from source (over an hour on two cores).
standin_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export CARGO_TARGET_DIR="${STANDIN_TARGET_DIR:-$(cd "$standin_dir/../.." && pwd)/target}"
STANDIN_CARGO_FLAGS=(--profile suite -p snowflake-standin)
if [[ "${KINESNOW_DUCKDB_BUNDLED:-0}" != "1" ]]; then
  duckdb_dir="$("$standin_dir/prebuilt-duckdb.sh")"
  export DUCKDB_LIB_DIR="$duckdb_dir" DUCKDB_DOWNLOAD_LIB=0
  STANDIN_CARGO_FLAGS+=(--no-default-features)
else
  unset DUCKDB_LIB_DIR
fi
STANDIN_BIN="$CARGO_TARGET_DIR/suite/snowflake-standin"
export STANDIN_BIN
