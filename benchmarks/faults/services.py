"""The services a fault trial kills, each its own process group, restarted when it dies.

`Services` runs Airflow as several hosts would, on this machine: the Celery topology of
tests/topology.py (Redis, two Celery workers, two schedulers, DAG processor, triggerer and API
server; task processes are a worker's children, as on its host), its metadata on one PostgreSQL
cluster and our ledger on another (so restarting the ledger's server leaves Airflow's alone), and a
Spark Connect server. A supervisor thread starts a component again a second after it exits, as
systemd's `Restart=always` or a Kubernetes pod would.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from airflow_iqp.spark import connect_server
from airflow_iqp.spark.connect_server import free_port
from tests.postgres import PostgresCluster
from tests.topology import WORKERS, Topology

if TYPE_CHECKING:
    from collections.abc import Callable

RESTART_DELAY_S = 1.0
SUBMIT_CONN_ID = "iqp_submit"  # the spark-submit path's connection; iqp_spark is the Connect server's
# A deployment that wants a lost component's work back within a deadline: the supervisor of a task
# heartbeats every 5 s ([workers] min_heartbeat_interval), the schedulers fail a running task
# without one for 10 s and look every 2 s; a scheduler or triggerer silent for 15 s (three of its
# 5 s heartbeats) is dead: the other scheduler adopts its tasks at its next orphan check (every
# 5 s), the restarted triggerer takes over its triggers (Airflow's defaults: 300 s and 30 s).
RECOVERY_ENV = {
    "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "10",
    "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "2",
    "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_THRESHOLD": "15",
    "AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL": "5",
    "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "15",
}


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


def start_databases(
    metadata_pg: PostgresCluster, ledger_pg: PostgresCluster, log: Callable[[str], None]
) -> tuple[str, str]:
    """Both PostgreSQL servers up with Airflow's metadata database and our ledger (migrated) on
    them, apart so that restarting the ledger's leaves Airflow's alone; their URLs.
    """
    metadata_pg.start()
    ledger_pg.start()
    metadata, ledger = metadata_pg.create_database("airflow"), ledger_pg.create_database("ledger")
    log(f"PostgreSQL: metadata on :{metadata_pg.port}, ledger on :{ledger_pg.port}")
    from airflow_iqp.ledger import migrate

    migrate(ledger)
    return metadata, ledger


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
        self._stopping = threading.Event()
        self._supervisor = threading.Thread(target=self._supervise, daemon=True, name="supervisor")
        self.topology: Topology | None = None
        self.ledger = ""

    @property
    def airflow(self) -> Topology:
        if self.topology is None:
            raise RuntimeError("the services are not started")
        return self.topology

    # -- start and stop -------------------------------------------------------------------------

    def start(self, log: Callable[[str], None]) -> None:
        metadata, self.ledger = start_databases(self.metadata_pg, self.ledger_pg, log)
        server = connect_server.ConnectServer(0, self.connect_port, "local[2]", self.connect_state, self.connect_token)
        extra_env = {
            **RECOVERY_ENV,
            f"AIRFLOW_CONN_{SUBMIT_CONN_ID.upper()}": json.dumps({"conn_type": "spark", "host": "local[2]"}),
            "AIRFLOW__IQP__RESOURCES": "1",
        }
        if self.lease_seconds is not None:
            extra_env["AIRFLOW__IQP__LEASE_SECONDS"] = str(self.lease_seconds)
        self.topology = topology = Topology(
            self.root / "airflow", metadata, self.ledger, server.connection(), extra_env
        )
        self.components["connect-server"] = Component("connect-server", self._start_connect, _reaped_alive)
        self.components["connect-server"].start()
        up = topology.start(timeout=600)
        for name, process in topology.running.items():
            self.components[name] = Component(name, partial(topology.launch, name), self._running(name), process.pid)
        log(f"Spark Connect server on :{self.connect_port}; Airflow API on :{topology.api_port}; up in {up:.0f} s")
        self._supervisor.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._supervisor.is_alive():
            self._supervisor.join(timeout=10)
        if self.topology is not None:
            self.topology.stop()
        connect = self.components.get("connect-server")
        if connect is not None:
            kill_group(connect.pid)
            _reaped_alive(connect.pid)
        self.ledger_pg.stop()
        self.metadata_pg.stop()

    # -- the components ----------------------------------------------------------------------

    def _running(self, name: str) -> Callable[[int], bool]:
        return lambda _pid: self.airflow.running[name].poll() is None

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

    def _metadata(self, sql: str, *params: object) -> list[tuple[str, ...]]:
        """Rows from Airflow's metadata database (the benchmark's look, never a task's)."""
        import psycopg

        with psycopg.connect(self.airflow.metadata.replace("+psycopg", "")) as conn:
            return [tuple(str(v) for v in row) for row in conn.execute(sql, params).fetchall()]

    def running_task_ids(self, dag_id: str, task_ids: tuple[str, ...]) -> list[str]:
        """The ids of the running task instances of `task_ids` (a task process is titled with its id)."""
        query = "SELECT id FROM task_instance WHERE dag_id = %s AND task_id = ANY(%s) AND state = 'running'"
        return [row[0] for row in self._metadata(query, dag_id, list(task_ids))]

    def run_active(self, dag_id: str) -> bool:
        """Whether a run of `dag_id` is queued or running."""
        query = "SELECT count(*) FROM dag_run WHERE dag_id = %s AND state IN ('queued', 'running')"
        return self._metadata(query, dag_id)[0][0] != "0"

    def kill_worker(self, name: str) -> bool:
        """SIGKILL Celery worker `name` whole, as its host would go: its process group, and the task
        processes under it, which Airflow puts in groups of their own. Whether the worker ran and is gone.
        """
        below = self.descendants(name)
        killed = kill_running(self.components[name].pid, group=True)
        for pid in below:
            try:
                os.killpg(pid, signal.SIGKILL) if os.getpgid(pid) == pid else os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
        return killed

    def under_workers(self) -> dict[int, tuple[str, str]]:
        """Pid -> (Celery worker, command line) of every process under either worker."""
        return {pid: (name, line) for name in WORKERS for pid, line in self.descendants(name).items()}

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
