#!/usr/bin/env bash
# Builds the test-only NARs of pom.xml (the stand-in nifi-aws-service-api-nar and the test credentials service)
# and prints their two paths, one a line: the API NAR first. Cached under
# ${KINESNOW_CACHE:-$HOME/.cache/kinesnow}/test-nars; rebuilt only when the poms, the sources or this script change.
# Built with `package` only: nothing is installed into ~/.m2.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
source "$repo/build/java-home.sh"
out_dir="${KINESNOW_CACHE:-$HOME/.cache/kinesnow}/test-nars"
api="$out_dir/nifi-aws-service-api-nar-2.3.0.nar"
service="$out_dir/kinesnow-test-aws-credentials-service-nar-2.3.0.nar"
stamp="$(cd "$here/.." && find aws-nars aws-service-api-nar -type f \( -name pom.xml -o -name '*.java' -o -name build.sh -o -path '*/META-INF/services/*' \) \
    -not -path '*/target/*' | sort | xargs sha256sum | sha256sum | cut -d' ' -f1)"
if [ -f "$api" ] && [ -f "$service" ] && [ "$(cat "$service.sha256-src" 2>/dev/null)" = "$stamp" ]; then
    echo "$api"; echo "$service"; exit 0
fi
mkdir -p "$out_dir"
exec 9>"$out_dir/.aws-nars.lock"
flock 9
"$repo/mvnw" -q -B -f "$here/pom.xml" package -DskipTests >&2
cp "$here/../aws-service-api-nar/target/nifi-aws-service-api-nar-2.3.0.nar" "$api.tmp" && mv "$api.tmp" "$api"
cp "$here/credentials-service-nar/target/kinesnow-test-aws-credentials-service-nar-2.3.0.nar" "$service.tmp" && mv "$service.tmp" "$service"
echo "$stamp" > "$service.sha256-src"
echo "$api"; echo "$service"
