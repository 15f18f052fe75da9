"""A Spark standalone cluster on this machine, from the pyspark wheel: one master and two workers
started with `spark-class`, each in its own process group, with their logs under a directory the
test keeps. The master's web UI answers `/json/` with its workers and applications, which is how
a test knows the workers registered and that its jobs ran on the cluster rather than in local mode.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import urllib.request
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyspark

from airflow_iqp import processes
from airflow_iqp.spark.connect_server import LOOPBACK, free_port

if TYPE_CHECKING:
    from collections.abc import Iterator

SPARK_HOME = Path(pyspark.__file__).parent
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
WORKERS = 2
WORKER_MEMORY = "1g"  # what a worker offers its executors: one executor of 512m each here
DAEMON_MEMORY = "256m"  # the master's and workers' own heaps
EXECUTOR_MEMORY = "512m"


@dataclass(frozen=True)
class Cluster:
    """A running standalone cluster: its master URL and its web UI's JSON state."""

    url: str
    ui_port: int
    logs: Path

    def state(self) -> dict[str, Any]:
        """The master's `/json/`: workers, active and completed applications."""
        with urllib.request.urlopen(f"http://{LOOPBACK}:{self.ui_port}/json/", timeout=5) as answer:
            state: dict[str, Any] = json.load(answer)
        return state

    def alive_workers(self) -> int:
        """Workers registered and alive."""
        return sum(1 for worker in self.state()["workers"] if worker["state"] == "ALIVE")

    def completed_apps(self) -> list[dict[str, Any]]:
        """Applications that registered with the master and ended."""
        return list(self.state()["completedapps"])

    def app_ids(self) -> set[str]:
        """Every application the master lists, running or ended, and any a worker ran executors for."""
        state = self.state()
        listed = {app["id"] for key in ("activeapps", "completedapps") for app in state[key]}
        return listed | {run.name for run in self.logs.glob("worker-*/app-*")}

    def executor_cores(self, app: str) -> int:
        """The cores the workers launched `app`'s executors with (each executor command's --cores)."""
        logs = self.logs.glob(f"worker-*/{app}/*/stderr")
        return sum(int(m) for log in logs for m in re.findall(r"--cores\W+(\d+)", log.read_text())[:1])


@dataclass(frozen=True)
class Executor:
    """One executor as its worker recorded it (times to the second, as the log stamps them)."""

    worker: str
    app: str
    executor_id: str
    cores: int
    launched: datetime
    finished: datetime | None


LOG_TIME = "%y/%m/%d %H:%M:%S"  # the daemons' log4j stamp, in this machine's time zone
LAUNCHED = re.compile(r"^(\S+ \S+) INFO Worker: Asked to launch executor (\S+)/(\d+) ")
CORES = re.compile(r'"--executor-id" "(\d+)".*"--cores" "(\d+)" "--app-id" "([^"]+)"')
FINISHED = re.compile(r"^(\S+ \S+) INFO Worker: Executor (\S+)/(\d+) finished with state")


def executors(log: Path) -> list[Executor]:
    """The executors one worker's log (`worker-N.log` of the cluster's logs) records, in launch
    order: when each was launched and finished (None: still running), with its cores.
    """
    launched: dict[tuple[str, str], datetime] = {}
    cores: dict[tuple[str, str], int] = {}
    finished: dict[tuple[str, str], datetime] = {}
    for line in log.read_text(errors="replace").splitlines():
        if m := LAUNCHED.match(line):
            launched[m[2], m[3]] = _stamp(m[1])
        elif m := CORES.search(line):
            cores[m[3], m[1]] = int(m[2])
        elif m := FINISHED.match(line):
            finished.setdefault((m[2], m[3]), _stamp(m[1]))
    return [
        Executor(log.stem, app, executor, cores.get((app, executor), 0), at, finished.get((app, executor)))
        for (app, executor), at in launched.items()
    ]


def _stamp(text: str) -> datetime:
    return datetime.strptime(text, LOG_TIME).astimezone(UTC)  # naive: this machine's local time


def environment() -> dict[str, str]:
    """The daemons' environment: the wheel as SPARK_HOME, small heaps, everything on loopback."""
    return {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
        "SPARK_LOCAL_IP": LOOPBACK,  # the daemons' address; the drivers' is the jobs' own business
        "SPARK_NO_DAEMONIZE": "1",
    }


@contextmanager
def daemon(args: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """One `spark-class` daemon in its own process group, which is ended as the block exits."""
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *args],
            env=environment(),
            stdout=sink,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        yield process
    finally:
        stop_group(process)


def stop_group(process: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """SIGTERM the daemon's process group (launcher and JVM), SIGKILL it if it lingers."""
    processes.stop_group(process.pid, grace)
    process.poll()


@contextmanager
def standalone_cluster(logs: Path, timeout: float = 90.0, worker_cores: int = 1) -> Iterator[Cluster]:
    """A master and WORKERS workers on loopback, each offering `worker_cores` cores (as many as
    it declares, whatever the machine has), returned once every worker is registered.
    """
    logs.mkdir(parents=True, exist_ok=True)
    port, ui_port = free_port(), free_port()
    cluster = Cluster(f"spark://{LOOPBACK}:{port}", ui_port, logs)
    with ExitStack() as stack:
        master = stack.enter_context(
            daemon(
                [MASTER_CLASS, "--host", LOOPBACK, "--port", str(port), "--webui-port", str(ui_port)],
                logs / "master.log",
            )
        )
        give_up = time.monotonic() + timeout
        # A worker whose registration reaches the master before it is leader is ignored and tries
        # again only 5-15 s later (Spark's own interval): 11 s of a cluster's start in our runs.
        while not _alive(cluster):
            if master.poll() is not None or time.monotonic() > give_up:
                raise RuntimeError(f"the standalone master did not come up (logs in {logs}): {_tails(logs)}")
            time.sleep(0.25)
        workers = [
            stack.enter_context(
                daemon(
                    [
                        WORKER_CLASS,
                        cluster.url,
                        "--host",
                        LOOPBACK,
                        "--cores",
                        str(worker_cores),
                        "--memory",
                        WORKER_MEMORY,
                        "--webui-port",
                        str(free_port()),
                        "--work-dir",
                        str(logs / f"worker-{i}"),
                    ],
                    logs / f"worker-{i}.log",
                )
            )
            for i in range(WORKERS)
        ]
        while not _all_registered(cluster):
            exited = [p for p in (master, *workers) if p.poll() is not None]
            if exited or time.monotonic() > give_up:
                raise RuntimeError(f"the standalone cluster did not come up (logs in {logs}): {_tails(logs)}")
            time.sleep(0.5)
        yield cluster


def _alive(cluster: Cluster) -> bool:
    try:
        return cluster.state()["status"] == "ALIVE"
    except (OSError, ValueError):
        return False  # the master's UI is not up yet, or answers an empty page while it starts


def _all_registered(cluster: Cluster) -> bool:
    try:
        return cluster.alive_workers() == WORKERS
    except (OSError, ValueError):
        return False  # the master's UI is not up yet, or answers an empty page while it starts


def _tails(logs: Path, lines: int = 8) -> str:
    return "\n".join(
        f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
        for log in sorted(logs.glob("*.log"))
    )
