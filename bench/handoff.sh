#!/usr/bin/env bash
# JNI batch hand-off benchmark (see HandoffBenchmark.java). Needs ./mvnw package first.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$repo/build/java-home.sh"
out="$repo/target/bench-classes"
mkdir -p "$out"
# NativeTestSupport (the synthetic batches) is a test class: ./mvnw package compiles it into test-classes.
cp="$repo/java-shim/target/classes:$repo/java-shim/target/test-classes"
javac -d "$out" -cp "$cp" "$repo/bench/HandoffBenchmark.java"
java -Djava.library.path="$repo/target/release" --enable-native-access=ALL-UNNAMED -cp "$out:$cp" HandoffBenchmark "$@"
