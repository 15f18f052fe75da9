"""A throwaway PostgreSQL cluster for the whole test session (Debian's server binaries), shared
by the ledger tests and by the Airflow that the backfill test runs on it."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator


def _pg_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[4]))
    if not found:
        pytest.fail(
            "PostgreSQL server binaries are missing (no /usr/lib/postgresql/*/bin/initdb): "
            "run `apt-get install -y postgresql` (or scripts/ensure_postgres.sh)",
            pytrace=False,
        )
    return Path(found[-1]).parent


def _as_cluster_owner(*command: str) -> list[str]:
    """PostgreSQL refuses to run as root, so root runs it as the `postgres` user."""
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else list(command)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A cluster in a temp dir, trust auth, on 127.0.0.1; yields the server URL without a database."""
    bin_dir = _pg_bin()
    # Not under pytest's tmp dir: its root-owned 0700 parents would keep the postgres user out.
    root = Path(tempfile.mkdtemp(prefix="iqp-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    data, port = root / "data", _free_port()
    subprocess.run(
        _as_cluster_owner(
            str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8", "-N"
        ),
        check=True,
        capture_output=True,
    )
    options = f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off -c full_page_writes=off"
    subprocess.run(
        _as_cluster_owner(
            str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(root / "log"), "-o", options, "-w", "start"
        ),
        check=True,
        capture_output=True,
    )
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}"
    finally:
        subprocess.run(
            _as_cluster_owner(str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"),
            check=False,
            capture_output=True,
        )
        shutil.rmtree(root, ignore_errors=True)


def create_database(server: str, name: str) -> str:
    """An empty database `name` on `server` (a URL without a database); returns its URL."""
    with psycopg.connect(server.replace("+psycopg", "") + "/postgres", autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return f"{server}/{name}"
