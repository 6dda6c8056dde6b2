#!/usr/bin/env bash
# Builds the test-only NAR of kinesnow's own login identity provider (pom.xml says why) and prints its path.
# Cached under ${KINESNOW_CACHE:-$HOME/.cache/kinesnow}/test-nars; rebuilt only when its sources change.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
out_dir="${KINESNOW_CACHE:-$HOME/.cache/kinesnow}/test-nars"
nar="$out_dir/kinesnow-test-login-nar-1.0.0.nar"
stamp="$(cd "$here" && find pom.xml build.sh src -type f | sort | xargs sha256sum | sha256sum | cut -d' ' -f1)"
if [ -f "$nar" ] && [ "$(cat "$nar.sha256-src" 2>/dev/null)" = "$stamp" ]; then echo "$nar"; exit 0; fi
mkdir -p "$out_dir"
exec 9>"$out_dir/.test-login-nar.lock"
flock 9
if [ -f "$nar" ] && [ "$(cat "$nar.sha256-src" 2>/dev/null)" = "$stamp" ]; then echo "$nar"; exit 0; fi
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
cp -r "$here/pom.xml" "$here/src" "$work/"
"$repo/mvnw" -q -B -f "$work/pom.xml" package -DskipTests >&2
cp "$work"/target/kinesnow-test-login-nar-1.0.0.nar "$nar.tmp"
mv "$nar.tmp" "$nar"
echo "$stamp" > "$nar.sha256-src"
echo "$nar"
