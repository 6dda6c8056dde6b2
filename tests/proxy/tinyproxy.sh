#!/usr/bin/env bash
# Prints the path of a tinyproxy binary (Debian's package tinyproxy-bin, which needs only libc),
# unpacked into the cache on first use: ${KINESNOW_CACHE:-$HOME/.cache/kinesnow}/tinyproxy-<version>/.
# Nothing is installed system-wide. Used by tests/lib/proxy.py.
set -euo pipefail
cache_root="${KINESNOW_CACHE:-$HOME/.cache/kinesnow}"
mkdir -p "$cache_root"
exec 9>"$cache_root/.tinyproxy.lock"
flock 9
found="$(ls -d "$cache_root"/tinyproxy-*/usr/bin/tinyproxy 2>/dev/null | head -n 1 || true)"
if [ -n "$found" ] && [ -x "$found" ]; then
    echo "$found"
    exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
# apt-get download needs the package lists; a fresh machine may not have them yet.
if ! apt-get download tinyproxy-bin >&2 2>"$work/err"; then
    echo "tinyproxy.sh: package lists missing or stale; running apt-get update" >&2
    apt-get update >&2
    apt-get download tinyproxy-bin >&2
fi
deb="$(ls tinyproxy-bin_*.deb)"
version="$(dpkg-deb -f "$deb" Version)"
dest="$cache_root/tinyproxy-$version"
rm -rf "$dest.tmp"
dpkg -x "$deb" "$dest.tmp"
mv "$dest.tmp" "$dest"
echo "$dest/usr/bin/tinyproxy"
