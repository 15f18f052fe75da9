"""Airflow split into its services on this machine, as several hosts would run it: the
CeleryExecutor with Debian's Redis as its broker, two Celery workers, two schedulers (Airflow's
HA), one DAG processor, one triggerer and one API server; metadata and ledger on PostgreSQL.

Each service runs in a process group of its own, so one can be stopped (or killed) whole without
the others. They share one network namespace (the machine's loopback): each worker tells itself
apart by name only, `--celery-hostname` for Celery and [core] hostname_callable (worker_hostname
below) for Airflow's task instances, so the records say which worker ran a task.
docker/docker-compose.yml runs the same services; tests/test_docker.py keeps the two in step.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_iqp import processes
from airflow_iqp.demo.standalone import health
from airflow_iqp.spark.connect_server import free_port

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[1]
EXECUTOR = "CeleryExecutor"
WORKERS = ("worker-1", "worker-2")
SCHEDULERS = 2
WORKER_CONCURRENCY = 2  # task processes per worker: two cores for the whole machine
PARALLELISM = 4  # each scheduler's running tasks
JWT_SECRET = "iqp-topology"  # shared: the API server checks the tokens the schedulers sign for the workers


def worker_hostname() -> str:
    """[core] hostname_callable on the workers: the worker's own name (IQP_WORKER_NAME), which
    one host's FQDN would not give."""
    return os.environ["IQP_WORKER_NAME"]


def services() -> dict[str, list[str]]:
    """Each Airflow service's command line (after `airflow`), by the name its log and process group
    go by (docker/docker-compose.yml's service `airflow-<name>` runs the same)."""
    out: dict[str, list[str]] = {"apiserver": ["api-server"], "dag-processor": ["dag-processor"]}
    out["triggerer"] = ["triggerer"]
    for i in range(1, SCHEDULERS + 1):
        out[f"scheduler-{i}"] = ["scheduler"]
    for name in WORKERS:
        out[name] = ["celery", "worker", "--celery-hostname", f"{name}@%h", "--concurrency", str(WORKER_CONCURRENCY)]
    return out


@dataclass
class Topology:
    """The services' home, databases and Spark connection, and the processes once started."""

    home: Path
    metadata: str  # Airflow's metadata database URL
    ledger: str  # the iqp_default connection's database URL
    spark: dict[str, Any]  # the iqp_spark connection
    extra_env: dict[str, str] = field(default_factory=dict)
    api_port: int = field(default_factory=free_port)
    broker_port: int = field(default_factory=free_port)
    running: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def dags(self) -> Path:
        return self.home / "dags"

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    def log(self, name: str) -> Path:
        return self.home / "logs" / f"{name}.log"

    def environ(self) -> dict[str, str]:
        """What every service shares (a deployment's airflow.cfg)."""
        return {
            **os.environ,
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONPATH": str(REPO),  # the workers' hostname_callable
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "AIRFLOW__CORE__EXECUTOR": EXECUTOR,
            "AIRFLOW__CORE__PARALLELISM": str(PARALLELISM),
            "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": str(PARALLELISM),
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.api}/execution/",
            "AIRFLOW__API__PORT": str(self.api_port),
            "AIRFLOW__API_AUTH__JWT_SECRET": JWT_SECRET,
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.metadata,
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC": self.metadata,  # psycopg 3 is async too
            "AIRFLOW__CELERY__BROKER_URL": f"redis://127.0.0.1:{self.broker_port}/0",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "10",
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW_CONN_IQP_SPARK": json.dumps(self.spark),
            "AIRFLOW_CONN_IQP_DEFAULT": json.dumps({"conn_type": "iqp", "host": self.ledger}),
            "SPARK_LOCAL_IP": "127.0.0.1",
            **self.extra_env,
        }

    def airflow(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """One `airflow` CLI command with the services' settings."""
        return subprocess.run(
            [str(BIN / "airflow"), *args], env=self.environ(), capture_output=True, text=True, timeout=timeout
        )

    def launch(self, name: str) -> int:
        """Service `name` (or "redis") as the leader of a new process group (stop() ends the group),
        output appended to its log; its pid. The fault trials' supervisor starts a killed one again."""
        env = self.environ()
        if name == "redis":
            argv = ["redis-server", "--port", str(self.broker_port), "--bind", "127.0.0.1", "--save", ""]
            argv, env = [*argv, "--appendonly", "no"], dict(os.environ)
        else:
            argv = [str(BIN / "airflow"), *services()[name]]
        if name in WORKERS:
            env |= {
                "IQP_WORKER_NAME": name,
                "AIRFLOW__CORE__HOSTNAME_CALLABLE": f"{__name__}.worker_hostname",
                "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
            }
        with self.log(name).open("ab") as out:
            self.running[name] = subprocess.Popen(
                argv, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
            )
        return self.running[name].pid

    def start(self, timeout: float = 240) -> float:
        """Redis, the metadata migrated, then every service; seconds until all are up."""
        started = time.monotonic()
        self.dags.mkdir(parents=True, exist_ok=True)
        self.log("-").parent.mkdir(exist_ok=True)
        self.launch("redis")
        migrated = self.airflow("db", "migrate")
        if migrated.returncode != 0:
            raise RuntimeError(f"airflow db migrate: {migrated.stderr[-3000:]}")
        for name in services():
            self.launch(name)
        self._wait_up(started + timeout)
        return time.monotonic() - started

    def _wait_up(self, give_up: float) -> None:
        """The API server reports every component healthy and each worker's Celery says it is ready."""
        while time.monotonic() < give_up:
            dead = {name: p.returncode for name, p in self.running.items() if p.poll() is not None}
            if dead:
                raise RuntimeError(f"services exited: {dead}; see {self.home / 'logs'}")
            status = health(self.api)
            ready = all(b" ready." in self.log(name).read_bytes() for name in WORKERS)
            if ready and status and all(s == "healthy" for s in status.values()):
                return
            time.sleep(1)
        raise TimeoutError(f"topology not up (last health: {health(self.api)}); see {self.home / 'logs'}")

    def stop(self, grace: float = 15) -> None:
        """SIGTERM the workers' groups, then every other group at once, and wait for each (SIGKILL
        what outlives `grace`). The workers go first: a task they run reports its end to the API
        server, which, gone first, would leave it retrying until the SIGKILL."""
        for first in (True, False):
            group = [p for name, p in self.running.items() if (name in WORKERS) == first]
            for process in group:
                try:
                    os.killpg(process.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
            for process in group:
                processes.stop_group(process.pid, grace)
                process.poll()
