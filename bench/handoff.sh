#!/usr/bin/env bash
# JNI batch hand-off benchmark (see HandoffBenchmark.java). Needs ./mvnw package first.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$repo/build/java-home.sh"
out="$repo/target/bench-classes"
mkdir -p "$out"
cp="$repo/java-shim/target/classes"
javac -d "$out" -cp "$cp" "$repo/bench/HandoffBenchmark.java"
java -Djava.library.path="$repo/target/release" --enable-native-access=ALL-UNNAMED -cp "$out:$cp" HandoffBenchmark "$@"
