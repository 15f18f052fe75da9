"""Tier M's services: Airflow on the LocalExecutor (its task processes are the scheduler's
children, so their CPU is counted apart from the scheduler's own), its metadata and our ledger
each on a PostgreSQL server, and one Spark Connect server, each its own process group.

The fault trials run the Celery topology with a supervisor that restarts what they kill
(`benchmarks.faults.services`); nothing is killed here, and issue 21 asks for the LocalExecutor,
so Tier M starts its own, with the same pieces (`Component`, `kill_group`).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from airflow_iqp.demo.standalone import BIN, DemoAirflow, health
from airflow_iqp.spark import connect_server
from airflow_iqp.spark.connect_server import free_port
from benchmarks.faults.services import Component, kill_group, start_databases
from tests.postgres import PostgresCluster

if TYPE_CHECKING:
    from collections.abc import Callable

AIRFLOW_COMPONENTS = ("scheduler", "triggerer", "dag-processor", "api-server")


class Services:
    """Everything one Airflow-side system of Tier M runs on, started once per system."""

    def __init__(self, root: Path, airflow: Callable[[Path], DemoAirflow]) -> None:
        self.root = root
        # Not under `root`: PostgreSQL runs as its own user, which a root-owned 0700 parent keeps out.
        self.metadata_pg = PostgresCluster(Path(tempfile.mkdtemp(prefix="iqp-tierm-pg-")))
        self.ledger_pg = PostgresCluster(Path(tempfile.mkdtemp(prefix="iqp-tierm-pg-")))
        self.connect_state = root / "connect-server"
        self.connect_port = free_port()
        self.connect_token = "tier-m-" + os.urandom(8).hex()
        self.components: dict[str, Component] = {}
        self._popen: dict[str, subprocess.Popen[bytes]] = {}
        self.airflow = airflow(root / "airflow")
        self.ledger = ""

    def start(self, log: Callable[[str], None]) -> None:
        metadata, self.ledger = start_databases(self.metadata_pg, self.ledger_pg, log)
        self.airflow.dags.mkdir(parents=True, exist_ok=True)
        server = connect_server.ConnectServer(0, self.connect_port, "local[2]", self.connect_state, self.connect_token)
        self.airflow.port = free_port()
        self.airflow.extra_env = {
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": metadata,
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC": metadata,
            "AIRFLOW_CONN_IQP_DEFAULT": json.dumps({"conn_type": "iqp", "host": self.ledger}),
            "AIRFLOW_CONN_IQP_SPARK": json.dumps(server.connection()),
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__IQP__RESOURCES": "1",
        }
        migrated = self.airflow.airflow("db", "migrate", timeout=600)
        if migrated.returncode != 0:
            raise RuntimeError(f"airflow db migrate failed:\n{migrated.stderr[-3000:]}")
        self.components["connect-server"] = Component("connect-server", self._start_connect, lambda _pid: True)
        for name in AIRFLOW_COMPONENTS:
            self.components[name] = Component(name, self._launcher(name), lambda _pid: True)
        for component in self.components.values():
            component.start()
        log(f"Spark Connect server on :{self.connect_port}; Airflow API on :{self.airflow.port}")
        self._wait_healthy(300)

    def stop(self) -> None:
        for component in self.components.values():
            if component.pid:
                kill_group(component.pid)
        for process in self._popen.values():
            process.wait(timeout=30)
        self.ledger_pg.stop()
        self.metadata_pg.stop()

    def _wait_healthy(self, timeout: float) -> None:
        give_up = time.monotonic() + timeout
        while time.monotonic() < give_up:
            status = health(self.airflow.api)
            if status and all(s == "healthy" for s in status.values()):
                return
            time.sleep(1)
        raise TimeoutError(f"Airflow not healthy after {timeout:g} s: {health(self.airflow.api)}; see {self.root}")

    def _launcher(self, name: str) -> Callable[[], int]:
        def launch() -> int:
            (self.root / "logs").mkdir(parents=True, exist_ok=True)
            with (self.root / "logs" / f"{name}.log").open("ab") as log:
                process = subprocess.Popen(
                    [str(BIN / "airflow"), *name.split()],
                    env=self.airflow.environ(),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            self._popen[name] = process
            return process.pid

        return launch

    def _start_connect(self) -> int:
        server = connect_server.start(
            self.connect_state, port=self.connect_port, token=self.connect_token, driver_memory="1g"
        )
        return server.pid

    def _metadata(self, sql: str, *params: str) -> list[tuple[str, ...]]:
        """Rows from Airflow's metadata database (the benchmark's look, never a task's)."""
        import psycopg

        url = self.airflow.extra_env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].replace("+psycopg", "")
        with psycopg.connect(url) as conn:
            return [tuple(str(v) for v in row) for row in conn.execute(sql, params).fetchall()]
