#!/usr/bin/env bash
# Builds the stand-in, runs its Rust tests, then the conformance suite with
# Snowflake's official Python SDK (installed once into a cached venv).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../.."
source "$here/env.sh"

# One cargo invocation builds the binary too (integration tests need it); a separate
# `cargo build` would resolve features without dev-dependencies and rebuild.
echo "== cargo test -p snowflake-standin (suite profile, target dir $CARGO_TARGET_DIR)"
cargo test "${STANDIN_CARGO_FLAGS[@]}"
echo "== conformance: official snowpipe-streaming SDK"
venv="$("$here/conformance/setup-venv.sh" | tail -n 1)"
"$venv/bin/python" -m pytest -q -p no:cacheprovider "$here/conformance"
