#!/usr/bin/env bash
# Builds the legacy KCL consumer (tests/kcl-legacy) if anything changed and prints, on its LAST line, the
# command prefix that runs it (java @argfile MainClass; append the program's flags).
#   tests/kcl-legacy/build.sh          KCL 2.x (default)
#   tests/kcl-legacy/build.sh kcl3     KCL 3.x (Maven profile kcl3)
# Runs need no network: the argfile's classpath points at the jars in ~/.m2.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
flavor="${1:-kcl2}"
case "$flavor" in
  kcl2) profile=() ;;
  kcl3) profile=(-Pkcl3) ;;
  *) echo "usage: $0 [kcl2|kcl3]" >&2; exit 2 ;;
esac
# shellcheck source=../../build/java-home.sh
source "$repo/build/java-home.sh"
out="$here/target/$flavor"
argfile="$out/java.args"
stale=0
if [ ! -f "$argfile" ] || [ ! -f "$out/kcl-legacy.jar" ] || [ ! -f "$out/classpath.txt" ]; then
  stale=1
elif [ -n "$(find "$here/pom.xml" "$here/build.sh" "$here/src" -newer "$argfile" -print -quit)" ]; then
  stale=1
else
  # every dependency jar still in ~/.m2?
  IFS=: read -r -a jars < "$out/classpath.txt" || true
  for j in "${jars[@]}"; do [ -f "$j" ] || { stale=1; break; }; done
fi
if [ "$stale" = 1 ]; then
  echo "building the legacy KCL consumer ($flavor)..." >&2
  "$repo/mvnw" -f "$here/pom.xml" -q -B "${profile[@]}" package >&2
  # kinesis-local answers CBOR with Data as base64 text: the Java SDK v2 must use JSON (aws.cborEnabled=false)
  printf -- '-Daws.cborEnabled=false\n-cp\n%s:%s\n' "$out/kcl-legacy.jar" "$(cat "$out/classpath.txt")" > "$argfile.tmp"
  mv "$argfile.tmp" "$argfile"
fi
echo "$JAVA_HOME/bin/java @$argfile io.kinesnow.tests.kcl.LegacyConsumer"
