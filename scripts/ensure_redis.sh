#!/usr/bin/env bash
# Make sure Debian's Redis server binary exists: the Celery topology's test (tests/topology.py)
# starts a throwaway redis-server as the CeleryExecutor's broker. Safe to run again.
set -euo pipefail

if command -v redis-server >/dev/null; then
    echo "ensure_redis: found $(command -v redis-server), nothing to do"
    exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
    echo "ensure_redis: no redis-server and not root; run as root: apt-get install -y redis-server" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null; then
    echo "ensure_redis: no redis-server and no apt-get to install it" >&2
    exit 1
fi
echo "ensure_redis: installing Debian's redis-server package"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq redis-server
if ! command -v redis-server >/dev/null; then
    echo "ensure_redis: installed redis-server but still no redis-server on PATH" >&2
    exit 1
fi
echo "ensure_redis: installed $(command -v redis-server)"
