"""The services a fault trial kills, each its own process group, restarted when it dies.

`Services` runs what a deployment would run as separate units: two PostgreSQL clusters (Airflow's
metadata, and our ledger, so restarting the ledger's server leaves Airflow's alone), a Spark
Connect server, and Airflow's scheduler (LocalExecutor: task processes are its children, as in
one container), triggerer, DAG processor and API server. A supervisor thread starts a component
again a second after it exits, as systemd's `Restart=always` or a Kubernetes pod would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from airflow_iqp.demo.standalone import BIN, DemoAirflow, health
from airflow_iqp.spark import connect_server
from airflow_iqp.spark.connect_server import free_port
from tests.postgres import PostgresCluster

if TYPE_CHECKING:
    from collections.abc import Callable

AIRFLOW_COMPONENTS = ("scheduler", "triggerer", "dag-processor", "api-server")
RESTART_DELAY_S = 1.0
SUBMIT_CONN_ID = "iqp_submit"  # the spark-submit path's connection; iqp_spark is the Connect server's


def kill_group(pid: int) -> None:
    """SIGKILL the process group `pid` leads."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def running(pid: int) -> bool:
    """Whether process `pid` exists and has not exited (an exited one waiting to be reaped is a
    zombie: a signal to it succeeds and kills nothing).
    """
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def kill_running(pid: int, *, group: bool = False, timeout: float = 10.0) -> bool:
    """SIGKILL `pid` (with `group`, the process group it leads) if it runs; whether the signal
    reached a running process and the process is gone after it. A trial counts only if it did.
    """
    if not running(pid):
        return False
    try:
        (os.killpg if group else os.kill)(pid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    give_up = time.monotonic() + timeout
    while running(pid):
        if time.monotonic() > give_up:
            return False
        time.sleep(0.05)
    return True


@dataclass
class Component:
    """One supervised process (group): how to start it, and its restarts."""

    name: str
    launch: Callable[[], int]  # starts it; returns the pid of its process group's leader
    alive: Callable[[int], bool]
    pid: int = 0
    restarts: list[datetime] = field(default_factory=list)

    def start(self) -> None:
        self.pid = self.launch()


class Services:
    """Everything a trial runs on, started once and shared by the trials."""

    def __init__(self, root: Path, lease_seconds: float | None = None) -> None:
        self.root = root
        self.lease_seconds = lease_seconds  # [iqp] lease_seconds, when not Airflow's default
        # Not under `root`: PostgreSQL runs as its own user, which a root-owned 0700 parent (pytest's
        # tmp dirs, tempfile's) would keep out.
        self.metadata_pg = PostgresCluster(Path(tempfile.mkdtemp(prefix="iqp-faults-pg-")))
        self.ledger_pg = PostgresCluster(Path(tempfile.mkdtemp(prefix="iqp-faults-pg-")))
        self.connect_state = root / "connect-server"
        self.connect_port = free_port()
        self.connect_token = "fault-trials-" + os.urandom(8).hex()
        self.components: dict[str, Component] = {}
        self._popen: dict[str, subprocess.Popen[bytes]] = {}
        self._stopping = threading.Event()
        self._supervisor = threading.Thread(target=self._supervise, daemon=True, name="supervisor")
        home = root / "airflow"
        self.airflow = DemoAirflow(home=home, dags=home / "dags", ledger=home / "unused.db", extra_env={})
        self.ledger = ""

    # -- start and stop -------------------------------------------------------------------------

    def start(self, log: Callable[[str], None]) -> None:
        self.metadata_pg.start()
        self.ledger_pg.start()
        metadata = self.metadata_pg.create_database("airflow")
        self.ledger = self.ledger_pg.create_database("ledger")
        log(f"PostgreSQL: metadata on :{self.metadata_pg.port}, ledger on :{self.ledger_pg.port}")
        from airflow_iqp.ledger import migrate

        migrate(self.ledger)
        self.airflow.dags.mkdir(parents=True, exist_ok=True)
        server = connect_server.ConnectServer(0, self.connect_port, "local[2]", self.connect_state, self.connect_token)
        self.airflow.port = free_port()
        self.airflow.extra_env = {
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": metadata,
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC": metadata,
            "AIRFLOW_CONN_IQP_DEFAULT": json.dumps({"conn_type": "iqp", "host": self.ledger}),
            "AIRFLOW_CONN_IQP_SPARK": json.dumps(server.connection()),
            f"AIRFLOW_CONN_{SUBMIT_CONN_ID.upper()}": json.dumps({"conn_type": "spark", "host": "local[2]"}),
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__IQP__RESOURCES": "1",
            # A deployment that wants a dead worker's task retried soon: the scheduler fails a
            # running task without heartbeats after this, and looks for orphans this often.
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "60",
            "AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL": "30",
        }
        if self.lease_seconds is not None:
            self.airflow.extra_env["AIRFLOW__IQP__LEASE_SECONDS"] = str(self.lease_seconds)
        migrated = self.airflow.airflow("db", "migrate", timeout=600)
        if migrated.returncode != 0:
            raise RuntimeError(f"airflow db migrate failed:\n{migrated.stderr[-3000:]}")
        self.components["connect-server"] = Component("connect-server", self._start_connect, _reaped_alive)
        for name in AIRFLOW_COMPONENTS:
            self.components[name] = Component(name, self._airflow_launcher(name), self._popen_alive(name))
        for component in self.components.values():
            component.start()
        log(f"Spark Connect server on :{self.connect_port}; Airflow API on :{self.airflow.port}")
        self._supervisor.start()
        self.wait_healthy(300)

    def stop(self) -> None:
        self._stopping.set()
        if self._supervisor.is_alive():
            self._supervisor.join(timeout=10)
        for component in self.components.values():
            kill_group(component.pid)
        for process in self._popen.values():
            process.wait(timeout=30)
        self.ledger_pg.stop()
        self.metadata_pg.stop()

    def wait_healthy(self, timeout: float) -> float:
        """Seconds until the API server reports every Airflow component healthy."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            status = health(self.airflow.api)
            if status and all(s == "healthy" for s in status.values()):
                return time.monotonic() - started
            time.sleep(1)
        raise TimeoutError(f"Airflow not healthy after {timeout:g} s: {health(self.airflow.api)}; see {self.root}")

    # -- the components ----------------------------------------------------------------------

    def _airflow_launcher(self, name: str) -> Callable[[], int]:
        def launch() -> int:
            log = (self.root / "logs" / f"{name}.log").open("ab")
            process = subprocess.Popen(
                [str(BIN / "airflow"), *name.split()],
                env=self.airflow.environ(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            log.close()
            self._popen[name] = process
            return process.pid

        (self.root / "logs").mkdir(parents=True, exist_ok=True)
        return launch

    def _popen_alive(self, name: str) -> Callable[[int], bool]:
        return lambda _pid: self._popen[name].poll() is None

    def _start_connect(self) -> int:
        server = connect_server.start(
            self.connect_state, port=self.connect_port, token=self.connect_token, driver_memory="1g"
        )
        return server.pid

    def _supervise(self) -> None:
        while not self._stopping.wait(0.5):
            for component in self.components.values():
                if component.alive(component.pid) or self._stopping.is_set():
                    continue
                kill_group(component.pid)  # whatever of its group is left
                time.sleep(RESTART_DELAY_S)
                try:
                    component.start()
                except Exception as err:  # a supervisor tries again
                    print(f"  supervisor: {component.name} did not start: {err}", flush=True)
                    continue
                component.restarts.append(datetime.now(UTC))

    # -- what a trial kills -------------------------------------------------------------------

    def _metadata(self, sql: str, *params: str) -> list[tuple[str, ...]]:
        """Rows from Airflow's metadata database (the benchmark's look, never a task's)."""
        import psycopg

        url = self.airflow.extra_env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].replace("+psycopg", "")
        with psycopg.connect(url) as conn:
            return [tuple(str(v) for v in row) for row in conn.execute(sql, params).fetchall()]

    def running_task_ids(self, dag_id: str, task_id: str) -> list[str]:
        """The ids of the running task instances of `task_id` (a task process is titled with its id)."""
        query = "SELECT id FROM task_instance WHERE dag_id = %s AND task_id = %s AND state = 'running'"
        return [row[0] for row in self._metadata(query, dag_id, task_id)]

    def run_active(self, dag_id: str) -> bool:
        """Whether a run of `dag_id` is queued or running."""
        query = "SELECT count(*) FROM dag_run WHERE dag_id = %s AND state IN ('queued', 'running')"
        return self._metadata(query, dag_id)[0][0] != "0"

    def descendants(self, name: str) -> dict[int, str]:
        """Pid -> command line of every process under component `name` (only ours: other Airflows
        on the machine are never touched).
        """
        parents: dict[int, int] = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                # pid (comm) state ppid ...: comm may hold spaces, so split after its closing paren
                parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
        found, frontier = {}, [self.components[name].pid]
        while frontier:
            parent = frontier.pop()
            for pid in (p for p, pp in parents.items() if pp == parent):
                try:
                    found[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
                except OSError:
                    continue
                frontier.append(pid)
        return found


def _reaped_alive(pid: int) -> bool:
    """Whether our child `pid` still runs (reaping it if it exited, so a dead one is no zombie)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return Path(f"/proc/{pid}").exists()
    return done == 0
