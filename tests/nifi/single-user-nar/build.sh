#!/usr/bin/env bash
# Builds the test-only NAR of NiFi's single-user login identity provider and authorizer (pom.xml says why and from
# what) and prints its path. Cached under ${KINESNOW_CACHE:-$HOME/.cache/kinesnow}/test-nars; rebuilt only when its
# sources change. Beside the NAR, <nar>.cli/ holds its jars unpacked: the class path of NiFi's
# SetSingleUserCredentials command (what `nifi.sh set-single-user-credentials` runs), which tests/nifi/nifi.sh uses.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
out_dir="${KINESNOW_CACHE:-$HOME/.cache/kinesnow}/test-nars"
nar="$out_dir/kinesnow-test-single-user-iaa-providers-nar-2.3.0.nar"
stamp="$(cd "$here" && find pom.xml build.sh src -type f | sort | xargs sha256sum | sha256sum | cut -d' ' -f1)"
if [ -f "$nar" ] && [ -d "$nar.cli" ] && [ "$(cat "$nar.sha256-src" 2>/dev/null)" = "$stamp" ]; then echo "$nar"; exit 0; fi
mkdir -p "$out_dir"
exec 9>"$out_dir/.single-user-nar.lock"
flock 9
if [ -f "$nar" ] && [ -d "$nar.cli" ] && [ "$(cat "$nar.sha256-src" 2>/dev/null)" = "$stamp" ]; then echo "$nar"; exit 0; fi
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
cp -r "$here/pom.xml" "$here/src" "$work/"
"$repo/mvnw" -q -B -f "$work/pom.xml" package -DskipTests >&2
cp "$work"/target/kinesnow-test-single-user-iaa-providers-nar-2.3.0.nar "$nar.tmp"
rm -rf "$nar.cli" "$nar.cli.tmp"
mkdir -p "$nar.cli.tmp"
(cd "$nar.cli.tmp" && unzip -q -j "$nar.tmp" 'META-INF/bundled-dependencies/*.jar')
mv "$nar.cli.tmp" "$nar.cli"
mv "$nar.tmp" "$nar"
echo "$stamp" > "$nar.sha256-src"
echo "$nar"
