#!/usr/bin/env bash
# Makes sure Debian's chromium is installed (for tests/e2e/test_canvas_screenshot.py): does nothing
# when /usr/bin/chromium exists, else installs the distribution's package with apt-get (needs root,
# or sudo without a password). Prints the browser's path.
set -euo pipefail
bin=/usr/bin/chromium
if [ ! -x "$bin" ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo -n"
    echo "ensure-chromium.sh: installing Debian's chromium package" >&2
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq >&2 || true
    $sudo apt-get install -y -qq --no-install-recommends chromium >&2
fi
[ -x "$bin" ] || { echo "ensure-chromium.sh: $bin is still missing" >&2; exit 1; }
echo "$bin"
