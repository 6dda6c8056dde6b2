# Sourced by the stand-in's scripts: sets CARGO_TARGET_DIR (its own, so the DuckDB link
# settings never touch the product's build) and STANDIN_CARGO_FLAGS.
# DuckDB is linked from the official prebuilt libduckdb (seconds) unless
# KINESNOW_DUCKDB_BUNDLED=1 asks to compile it from source (over an hour on two cores).
standin_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export CARGO_TARGET_DIR="${STANDIN_TARGET_DIR:-${KINESNOW_CACHE:-$HOME/.cache/kinesnow}/target-standin}"
STANDIN_CARGO_FLAGS=(--release -p snowflake-standin)
if [[ "${KINESNOW_DUCKDB_BUNDLED:-0}" != "1" ]]; then
  duckdb_dir="$("$standin_dir/prebuilt-duckdb.sh")"
  export DUCKDB_LIB_DIR="$duckdb_dir" DUCKDB_DOWNLOAD_LIB=0
  export RUSTFLAGS="-C link-arg=-Wl,-rpath,$duckdb_dir"
  STANDIN_CARGO_FLAGS+=(--no-default-features)
fi
STANDIN_BIN="$CARGO_TARGET_DIR/release/snowflake-standin"
export STANDIN_BIN
