#!/usr/bin/env bash
# Make sure Debian's chromium exists: the UI's browser test drives /usr/bin/chromium with
# Playwright (which cannot download a browser of its own here). Safe to run again.
set -euo pipefail

BROWSER=/usr/bin/chromium

if [[ -x $BROWSER ]]; then
    echo "ensure_chromium: found $BROWSER, nothing to do"
    exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
    echo "ensure_chromium: no $BROWSER and not root; run as root: apt-get install -y chromium" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null; then
    echo "ensure_chromium: no $BROWSER and no apt-get to install it" >&2
    exit 1
fi
echo "ensure_chromium: installing Debian's chromium package"
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
if ! { apt-get update -qq && apt-get install -y -qq -o DPkg::Lock::Timeout=600 chromium; } >"$log" 2>&1; then
    cat "$log" >&2
    echo "ensure_chromium: apt-get install chromium failed" >&2
    exit 1
fi
rm -f "$log"
if [[ ! -x $BROWSER ]]; then
    echo "ensure_chromium: installed chromium but still no $BROWSER" >&2
    exit 1
fi
echo "ensure_chromium: installed $($BROWSER --version)"
