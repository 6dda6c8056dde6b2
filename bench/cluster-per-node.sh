#!/usr/bin/env bash
# The 3-node cluster scenario of tests/e2e/test_cluster_exactly_once.py (kill -9, offload, split, a stopped
# PutSnowflake) with ConsumeKinesis' Failover Position NIFI_COMMIT: per-node channels, as before issue 17.
# Prints the duplicates after each step (losses must still be 0). A measurement, not a test of the suite.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
source build/java-home.sh
export PYTHONDONTWRITEBYTECODE=1 KINESNOW_FAILOVER_POSITION=NIFI_COMMIT
exec python3 -m pytest -q -s tests/e2e/test_cluster_exactly_once.py "$@"
