#!/usr/bin/env bash
# Builds the test-harness-only fixture NAR (com.kinesnow.tests:kinesnow-harness-probe-nar) with javac and
# jar against the nifi-api jar of the cached NiFi assembly; no Maven plugin needed. Prints the NAR path.
# Output: ${KINESNOW_CACHE:-$HOME/.cache/kinesnow}/nifi-<version>-fixture/kinesnow-harness-probe-nar-<v>.nar
# (rebuilt only when its sources change).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../../build/java-home.sh"
home="$("$here/../assemble.sh")"
nar_version=1.0.0
out_dir="$home-fixture"
nar="$out_dir/kinesnow-harness-probe-nar-$nar_version.nar"
stamp="$(cd "$here" && find src resources nar build.sh -type f | sort | xargs sha256sum | sha256sum | cut -d' ' -f1)"
if [ -f "$nar" ] && [ "$(cat "$nar.sha256-src" 2>/dev/null)" = "$stamp" ]; then echo "$nar"; exit 0; fi

api_jar="$(ls "$home"/lib/nifi-api-*.jar | head -1)"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/classes" "$tmp/nar/META-INF/bundled-dependencies"
javac --release 21 -nowarn -cp "$api_jar" -d "$tmp/classes" $(find "$here/src" -name '*.java') 2>&1 | grep -v '^Note:' >&2 || true
[ -f "$tmp/classes/com/kinesnow/tests/harness/HarnessProbe.class" ] || { echo "build.sh: javac failed" >&2; exit 1; }
cp -r "$here/resources/." "$tmp/classes/"
jar --create --file "$tmp/nar/META-INF/bundled-dependencies/kinesnow-harness-probe-$nar_version.jar" -C "$tmp/classes" .
cp -r "$here/nar/." "$tmp/nar/"
cat > "$tmp/MANIFEST.MF" <<MF
Nar-Group: com.kinesnow.tests
Nar-Id: kinesnow-harness-probe-nar
Nar-Version: $nar_version
Build-Tag: test-fixture
MF
mkdir -p "$out_dir"
rm -f "$nar"
jar --create --file "$nar.tmp" --manifest "$tmp/MANIFEST.MF" -C "$tmp/nar" .
mv "$nar.tmp" "$nar"
echo "$stamp" > "$nar.sha256-src"
echo "$nar"
