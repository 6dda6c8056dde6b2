#!/usr/bin/env bash
# Assembles a trimmed, runnable Apache NiFi from individual Maven artifacts into a cache directory:
#
#   ${KINESNOW_CACHE:-$HOME/.cache/kinesnow}/nifi-<version>/
#     lib/         system class path jars + framework NARs (resolved by assembly-pom.xml)
#     conf/        nifi.properties (plain HTTP, 127.0.0.1:8080), logback.xml, state-management.xml, ...
#     extensions/  autoload directory (empty here; nifi.sh gives every instance its own)
#
# The version comes only from tests/nifi/nifi-version. Artifacts are resolved once into ~/.m2 by
# /work/main/mvnw (its default repository); a re-run whose inputs are unchanged does not start Maven.
# Prints the assembly directory on stdout; progress goes to stderr.
#
# Not included: nifi-standard-nar (only 1.x is resolvable here), so there are no standard processors;
# nifi-bootstrap (not resolvable), so nifi.sh runs org.apache.nifi.NiFi with java directly.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
version="$(tr -d '[:space:]' < "$here/nifi-version")"
[ -n "$version" ] || { echo "assemble.sh: $here/nifi-version is empty" >&2; exit 1; }
cache_root="${KINESNOW_CACHE:-$HOME/.cache/kinesnow}"
home="$cache_root/nifi-$version"

log() { echo "assemble.sh: $*" >&2; }

# Fingerprint of everything that decides lib/ (the pom and the version).
lib_fingerprint() {
    { echo "$version"; cat "$here/assembly-pom.xml"; } | sha256sum | cut -d' ' -f1
}

mkdir -p "$cache_root"
exec 9>"$cache_root/.nifi-$version.lock"
flock 9   # one assembler at a time; a second caller waits and then finds the work done

want="$(lib_fingerprint)"
if [ -f "$home/.lib-fingerprint" ] && [ "$(cat "$home/.lib-fingerprint")" = "$want" ] \
    && [ -f "$home/lib/nifi-runtime-$version.jar" ]; then
    :   # lib/ is current
else
    log "resolving NiFi $version artifacts into $home/lib (Maven, first run only)"
    start=$(date +%s)
    staging="$home.staging.$$"
    rm -rf "$staging"
    mkdir -p "$staging/lib"
    trap 'rm -rf "$staging"' EXIT
    # -f points at our pom; run from a scratch dir so nothing (e.g. target/) lands in the repository.
    (cd "$staging" && "$repo/mvnw" -B -q -f "$here/assembly-pom.xml" \
        -Dnifi.version="$version" -Dnifi.lib.dir="$staging/lib" package >&2)
    [ -f "$staging/lib/nifi-runtime-$version.jar" ] || { log "Maven finished but lib/ is incomplete"; exit 1; }
    mkdir -p "$home"
    rm -rf "$home/lib"
    mv "$staging/lib" "$home/lib"
    rm -rf "$staging"
    trap - EXIT
    echo "$want" > "$home/.lib-fingerprint"
    log "lib/ assembled in $(( $(date +%s) - start )) s"
fi

# conf/ is cheap: keep it in sync with tests/nifi/conf (copy only what differs).
mkdir -p "$home/conf" "$home/extensions"
for f in "$here"/conf/*; do
    name="$(basename "$f")"
    cmp -s "$f" "$home/conf/$name" || cp "$f" "$home/conf/$name"
done
echo "$version" > "$home/nifi-version"

echo "$home"
