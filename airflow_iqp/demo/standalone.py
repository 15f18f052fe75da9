"""`airflow standalone` in its own process group: start it, wait for its API, stop it whole."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from airflow_iqp import processes

BIN = Path(sys.executable).parent
POLICY = "edf"
PORT = 8080
API = f"http://localhost:{PORT}"
COMPONENTS = ("metadatabase", "scheduler", "triggerer", "dag_processor")


@dataclass
class DemoAirflow:
    """The demo's Airflow home, its settings, and the processes it starts."""

    home: Path
    dags: Path
    ledger: Path
    extra_env: dict[str, str]
    port: int = PORT  # the API server's; tests start their own Airflow beside a running demo

    @property
    def api(self) -> str:
        """The API server's base URL."""
        return f"http://localhost:{self.port}"

    def environ(self) -> dict[str, str]:
        """The environment of every Airflow process the demo starts."""
        return {
            **os.environ,
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",  # spark-submit, airflow, iqp
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__IQP__POLICY": POLICY,  # the dispatcher's; one Spark job at a time (resources = 1)
            # Tasks waiting for a grant hold a slot; 8 leaves slots for the jobs whose turn it is
            "AIRFLOW__CORE__PARALLELISM": "8",
            "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": "4",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "10",
            "AIRFLOW__SCHEDULER__MIN_FILE_PROCESS_INTERVAL": "10",
            "AIRFLOW_CONN_IQP_SPARK": json.dumps({"conn_type": "spark", "host": "local[2]"}),
            "AIRFLOW_CONN_IQP_DEFAULT": json.dumps({"conn_type": "iqp", "host": f"sqlite:///{self.ledger}"}),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.api}/execution/",
            **self.extra_env,
        }

    def airflow(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        """One `airflow` CLI command against the demo's metadata database."""
        return subprocess.run(
            [str(BIN / "airflow"), *args], env=self.environ(), capture_output=True, text=True, timeout=timeout
        )

    def start(self, log: Path) -> subprocess.Popen[bytes]:
        """`airflow standalone` as the leader of a new process group (stop() ends the group)."""
        with log.open("wb") as out:
            return subprocess.Popen(
                [str(BIN / "airflow"), "standalone"],
                env=self.environ(),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def password(self) -> tuple[str, str] | None:
        """(user, password) the simple auth manager generated on first start, if it did."""
        path = self.home / "simple_auth_manager_passwords.json.generated"
        try:
            users = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return next(iter(users.items()), None)


def health(api: str = API) -> dict[str, str] | None:
    """Component -> status from the API server at `api`, or None while it does not answer."""
    try:
        with urllib.request.urlopen(f"{api}/api/v2/monitor/health", timeout=3) as response:
            body = json.load(response)
    except (OSError, ValueError, urllib.error.URLError):
        return None
    return {name: body.get(name, {}).get("status", "unknown") for name in COMPONENTS}


def wait_healthy(process: subprocess.Popen[bytes], timeout: float, log: Path, api: str = API) -> float:
    """Seconds until every component reports healthy; raises if standalone dies or times out."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if process.poll() is not None:
            raise RuntimeError(f"airflow standalone exited with {process.returncode}; see {log}")
        status = health(api)
        if status and all(s == "healthy" for s in status.values()):
            return time.monotonic() - started
        time.sleep(1)
    raise TimeoutError(f"airflow standalone not healthy after {timeout:g} s (last: {health(api)}); see {log}")


def stop_group(process: subprocess.Popen[bytes] | subprocess.Popen[str] | None, grace: float = 30) -> None:
    """SIGTERM the process group `process` leads, then SIGKILL whatever is left after `grace`."""
    if process is None:
        return
    try:
        pgid = os.getpgid(process.pid)
    except ProcessLookupError:
        return
    if pgid != process.pid:  # not a group leader of ours: end only the process itself
        process.terminate()
        return
    processes.stop_group(pgid, grace)
    process.poll()
