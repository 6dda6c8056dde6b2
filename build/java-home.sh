# Sourced by the build and test scripts: points JAVA_HOME at a JDK 21 or newer.
# Respects a JAVA_HOME that is already 21+; otherwise picks the newest JDK under /usr/lib/jvm.
_kinesnow_java_major() { "$1/bin/java" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1; }
if [ -z "${JAVA_HOME:-}" ] || [ "$(_kinesnow_java_major "$JAVA_HOME" 2>/dev/null || echo 0)" -lt 21 ] 2>/dev/null; then
  JAVA_HOME=""
  for jdk in /usr/lib/jvm/*; do
    [ -x "$jdk/bin/javac" ] || continue
    major=$(_kinesnow_java_major "$jdk")
    if [ "${major:-0}" -ge 21 ] && [ "${major:-0}" -gt "${best:-0}" ]; then best=$major; JAVA_HOME=$jdk; fi
  done
  [ -n "$JAVA_HOME" ] || { echo "No JDK 21+ found under /usr/lib/jvm" >&2; return 1 2>/dev/null || exit 1; }
  unset best major jdk
fi
export JAVA_HOME
export PATH="$JAVA_HOME/bin:$PATH"
