#!/usr/bin/env bash
# Make sure Debian's PostgreSQL server binaries exist: the ledger tests start a throwaway cluster
# with /usr/lib/postgresql/*/bin/initdb and pg_ctl. Safe to run again.
set -euo pipefail

found() { compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; }

if found; then
    echo "ensure_postgres: found $(compgen -G '/usr/lib/postgresql/*/bin/initdb' | head -n1), nothing to do"
    exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
    echo "ensure_postgres: no initdb under /usr/lib/postgresql and not root;" \
         "run as root: apt-get install -y postgresql" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null; then
    echo "ensure_postgres: no initdb under /usr/lib/postgresql and no apt-get to install it" >&2
    exit 1
fi
echo "ensure_postgres: installing Debian's postgresql package"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq postgresql
if ! found; then
    echo "ensure_postgres: installed postgresql but still no /usr/lib/postgresql/*/bin/initdb" >&2
    exit 1
fi
echo "ensure_postgres: installed $(compgen -G '/usr/lib/postgresql/*/bin/initdb' | head -n1)"
