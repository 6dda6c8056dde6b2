#!/usr/bin/env bash
# Builds the test-only NAR of NiFi's standard processors (SplitJson, GenerateFlowFile, ...) from the published
# nifi-standard-processors jar (pom.xml says why) and prints its path. Cached under
# ${KINESNOW_CACHE:-$HOME/.cache/kinesnow}/test-nars; rebuilt only when pom.xml changes.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
out_dir="${KINESNOW_CACHE:-$HOME/.cache/kinesnow}/test-nars"
nar="$out_dir/kinesnow-test-standard-processors-nar-2.3.0.nar"
stamp="$(sha256sum "$here/pom.xml" "$here/build.sh" | sha256sum | cut -d' ' -f1)"
if [ -f "$nar" ] && [ "$(cat "$nar.sha256-src" 2>/dev/null)" = "$stamp" ]; then echo "$nar"; exit 0; fi
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
cp "$here/pom.xml" "$work/"
"$repo/mvnw" -q -B -f "$work/pom.xml" package -DskipTests >&2
mkdir -p "$out_dir"
cp "$work"/target/kinesnow-test-standard-processors-nar-2.3.0.nar "$nar.tmp"
mv "$nar.tmp" "$nar"
echo "$stamp" > "$nar.sha256-src"
echo "$nar"
