"""A throwaway PostgreSQL cluster (Debian's server binaries): one for the whole test session,
shared by the ledger tests and by the Airflow that the backfill test runs on it; the fault trials
(benchmarks/faults) run and restart their own."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
import pytest

from airflow_iqp.spark.connect_server import free_port

if TYPE_CHECKING:
    from collections.abc import Iterator


def _pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(Path(p).parts[4]))
    if not found:
        raise RuntimeError(
            f"PostgreSQL server binaries are missing (no /usr/lib/postgresql/*/bin/{name}): "
            "run `apt-get install -y postgresql` (or scripts/ensure_postgres.sh)"
        )
    return found[-1]


def _as_cluster_owner(*command: str) -> list[str]:
    """PostgreSQL refuses to run as root, so root runs it as the `postgres` user."""
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else list(command)


@dataclass
class PostgresCluster:
    """A cluster in `root`: trust auth, on 127.0.0.1, durability off (throwaway data).

    `root` must not be under pytest's tmp dir: its root-owned 0700 parents would keep the
    postgres user out.
    """

    root: Path
    port: int = field(default_factory=free_port)

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def url(self) -> str:
        """The server's URL without a database."""
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}"

    def _pg_ctl(self, *args: str) -> None:
        subprocess.run(
            _as_cluster_owner(_pg_bin("pg_ctl"), "-D", str(self.data), *args), check=True, capture_output=True
        )

    def _options(self) -> str:
        return (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} "
            "-c fsync=off -c full_page_writes=off -c max_connections=200"
        )

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        subprocess.run(
            _as_cluster_owner(
                _pg_bin("initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8", "-N"
            ),
            check=True,
            capture_output=True,
        )
        self._pg_ctl("-l", str(self.root / "log"), "-o", self._options(), "-w", "start")

    def restart(self) -> None:
        """Stop at once (`-m immediate`: every connection cut, as a crash would) and start again."""
        self._pg_ctl("-l", str(self.root / "log"), "-o", self._options(), "-m", "immediate", "-w", "restart")

    def stop(self) -> None:
        try:
            self._pg_ctl("-m", "immediate", "stop")
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(self.root, ignore_errors=True)

    def create_database(self, name: str) -> str:
        """An empty database `name`; returns its URL."""
        return create_database(self.url, name)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The session's cluster; yields the server URL without a database."""
    cluster = PostgresCluster(Path(tempfile.mkdtemp(prefix="iqp-pg-")))
    cluster.start()
    try:
        yield cluster.url
    finally:
        cluster.stop()


def create_database(server: str, name: str) -> str:
    """An empty database `name` on `server` (a URL without a database); returns its URL."""
    with psycopg.connect(server.replace("+psycopg", "") + "/postgres", autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return f"{server}/{name}"
