"""A Spark Connect server from the pyspark wheel: start it, find it, stop it.

The wheel ships the server (`jars/spark-connect_*.jar`) but not Spark's
`sbin/start-connect-server.sh`, which only runs spark-submit with the server's class; so does
`start`. The server listens on loopback only unless told otherwise, and asks for a token
(`SPARK_CONNECT_AUTHENTICATE_TOKEN`; clients send it as `;token=` in the URL, in the clear only
to the host `localhost`, otherwise they insist on TLS). A client that dies mid-job leaves its
execution running until the server's detached-execution timeout: 30 s plus a 5 s sweep here,
longer than the dispatcher's lease (`[iqp] lease_seconds`, 10 s by default), so a dead task's
Spark work may run on beside the next holder's job for a while; it commits nothing, since its
commit checks the lease. The state directory holds the pid, the port, the
token (mode 0600) and the server's log; the server leads its own process group, which `stop`
ends.

Nothing here imports pyspark: the server is a JVM, and the Airflow side needs no Spark to run it.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from airflow_iqp.exceptions import IqpError
from airflow_iqp.ledger.engine import ledger_url
from airflow_iqp.processes import stop_group
from airflow_iqp.settings import LEDGER_CONN_ENV, LOCAL_MASTER, PLAN, DispatchSettings, airflow_home, driver_address

if TYPE_CHECKING:
    from collections.abc import Iterator

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
SERVER_PLUGIN = "org.apache.spark.sql.connect.SparkConnectPlugin"
LEASE_DRIVER = Path(__file__).with_name("lease_driver.py")  # the server with the plan's lease controller
DEFAULT_PORT = 15002
DEFAULT_MASTER = "local[2]"
LOOPBACK = "127.0.0.1"
CLIENT_HOST = "localhost"  # the one host a client sends a token to without TLS
DETACHED_TIMEOUT = "30s"
MAINTENANCE_INTERVAL = "5s"
STATE_FILE, TOKEN_FILE, LOG_FILE = "server.json", "token", "server.log"
WARM_UP_ROWS = 10_000

Cores = tuple[int, int] | Literal["plan"] | None  # scaled between bounds, leased as planned, or all the master gives


class ConnectServerError(IqpError):
    """The server did not start, or is not where its state directory says; the message says why."""


def default_state_dir() -> Path:
    """Where `iqp connect-server` keeps its state unless told otherwise."""
    return airflow_home() / "iqp-connect-server"


@dataclass(frozen=True)
class ConnectServer:
    """A started server, as its state directory records it."""

    pid: int
    port: int
    master: str
    state_dir: Path
    token: str | None

    @property
    def url(self) -> str:
        """The client URL without the token (safe to print)."""
        return f"sc://{CLIENT_HOST}:{self.port}"

    @property
    def url_with_token(self) -> str:
        """The client URL a job connects with."""
        return self.url + (f"/;token={self.token}" if self.token else "")

    @property
    def log(self) -> Path:
        """The server's stdout and stderr."""
        return self.state_dir / LOG_FILE

    def connection(self) -> dict[str, object]:
        """The Airflow connection (`spark_connect` type) that points at this server, as JSON fields."""
        fields: dict[str, object] = {"conn_type": "spark_connect", "host": CLIENT_HOST, "port": self.port}
        return fields | ({"password": self.token} if self.token else {})

    def alive(self) -> bool:
        """Whether the recorded process is still this server (not a reused pid)."""
        try:
            cmdline = Path(f"/proc/{self.pid}/cmdline").read_bytes()
        except OSError:
            return False
        return SERVER_CLASS.encode() in cmdline or str(LEASE_DRIVER).encode() in cmdline

    def answers(self) -> bool:
        """Whether the server's port accepts connections."""
        return port_answers(self.port)


def port_answers(port: int, host: str = LOOPBACK) -> bool:
    """Whether something listens on `host:port`."""
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def free_port() -> int:
    """A TCP port nothing listens on now (for a private server: tests, fitting, the demo)."""
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


def elastic_cores(master: str, least: int, most: int, billing_unit: float) -> dict[str, str]:
    """The server's cores scaling with its jobs between `least` and `most` (the capacity plan's
    open-phase cores and its peak, `iqp check --capacity`): Spark's dynamic allocation of
    one-core executors, tracking shuffle files so no external shuffle service is needed. An
    executor goes once idle for `billing_unit` seconds (`[iqp] billing_unit_seconds`), shuffle
    files or not (else one holding a finished job's shuffle stays until the driver's garbage
    collection): one needed again within a unit of its last task is kept, as a BTU-aware
    controller keeps a paid core, but Spark cannot release at the end of a paid unit. A local
    master has no executors to scale, so it is refused.
    """
    if LOCAL_MASTER.fullmatch(master.strip()):
        raise ValueError(f"--cores scales a cluster's executors; master {master!r} runs in one JVM")
    if not 0 <= least <= most or most < 1:
        raise ValueError(f"--cores MIN,MAX needs 0 <= MIN <= MAX and MAX >= 1, got {least},{most}")
    return {
        "spark.dynamicAllocation.enabled": "true",
        "spark.dynamicAllocation.shuffleTracking.enabled": "true",
        "spark.dynamicAllocation.minExecutors": str(least),
        "spark.dynamicAllocation.maxExecutors": str(most),
        "spark.executor.cores": "1",
        "spark.dynamicAllocation.executorIdleTimeout": f"{billing_unit:g}s",
        "spark.dynamicAllocation.shuffleTracking.timeout": f"{billing_unit:g}s",
    }


def planned_cores(master: str) -> dict[str, str]:
    """The server's one-core executors leased by its driver's controller as the capacity plan in
    the ledger says (`spark.lease_driver`), up to `[iqp] max_cores`, each released at the end of
    a paid `[iqp] billing_unit_seconds` unless the plan needs it again. A local master has no
    executors to lease, so it is refused.
    """
    if LOCAL_MASTER.fullmatch(master.strip()):
        raise ValueError(f"--cores plan leases a cluster's executors; master {master!r} runs in one JVM")
    return {
        "spark.plugins": SERVER_PLUGIN,
        "spark.dynamicAllocation.enabled": "false",
        "spark.executor.cores": "1",
        "spark.cores.max": str(DispatchSettings.load().max_cores),
    }


def command(
    port: int,
    master: str,
    bind: str,
    driver_memory: str,
    cores: Cores = None,
    billing_unit: float | None = None,
) -> list[str]:
    """spark-submit of the server class, as `sbin/start-connect-server.sh` would run it; with
    `cores` (least, most), its executors scale between them (`elastic_cores`), released after
    `billing_unit` seconds idle (None: `[iqp] billing_unit_seconds`); with `cores="plan"`, the
    server runs in `lease_driver.py`, whose controller leases them as the plan says (`planned_cores`).
    """
    elastic = {}
    if cores == PLAN:
        elastic = planned_cores(master)
    elif isinstance(cores, tuple):
        unit = billing_unit if billing_unit is not None else DispatchSettings.load().billing_unit_seconds
        elastic = elastic_cores(master, *cores, unit)
    confs = {
        "spark.connect.grpc.binding.address": bind,
        "spark.connect.grpc.binding.port": str(port),
        "spark.connect.execute.manager.detachedTimeout": DETACHED_TIMEOUT,
        "spark.connect.execute.manager.maintenanceInterval": MAINTENANCE_INTERVAL,
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        **driver_address(master).conf,
        **elastic,
    }
    spark_submit = str(Path(sys.executable).with_name("spark-submit"))
    args = [spark_submit, *([] if cores == PLAN else ["--class", SERVER_CLASS])]
    args += ["--name", "iqp-connect-server", "--master", master, "--driver-memory", driver_memory]
    for key, value in confs.items():
        args += ["--conf", f"{key}={value}"]
    return args + ([str(LEASE_DRIVER)] if cores == PLAN else [])


def environment(token: str | None, master: str, ledger: str | None = None) -> dict[str, str]:
    """The server's environment: classic spark-submit (not Connect mode), this interpreter (which
    finds the wheel's SPARK_HOME and would run Python workers), the token, and the driver's
    address: loopback for a local master; for a cluster, whatever this environment says
    ($SPARK_DRIVER_HOST, $SPARK_LOCAL_IP) or Spark picks, so the cluster's executors can reach it.
    """
    env = {
        **os.environ,
        "SPARK_CONNECT_MODE": "0",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        **driver_address(master).env,
    }
    env.pop("SPARK_CONNECT_AUTHENTICATE_TOKEN", None)
    if token:
        env["SPARK_CONNECT_AUTHENTICATE_TOKEN"] = token
    if ledger:  # where the lease controller reads the plan (`--cores plan`)
        env[LEDGER_CONN_ENV] = ledger
    return env


def status(state_dir: Path) -> ConnectServer | None:
    """The server the state directory records, if its process is still running."""
    try:
        state = json.loads((state_dir / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None
    token_file = state_dir / TOKEN_FILE
    server = ConnectServer(
        pid=int(state["pid"]),
        port=int(state["port"]),
        master=str(state["master"]),
        state_dir=state_dir,
        token=token_file.read_text().strip() if token_file.is_file() else None,
    )
    return server if server.alive() else None


def start(
    state_dir: Path,
    *,
    port: int = DEFAULT_PORT,
    master: str = DEFAULT_MASTER,
    token: str | None = None,
    authenticate: bool = True,
    bind: str = LOOPBACK,
    driver_memory: str = "2g",
    timeout: float = 180.0,
    warm: bool = True,
    cores: Cores = None,
    ledger: str | None = None,
) -> ConnectServer:
    """Start the server in the background and return once its port answers and a warm-up job
    has run on it (`warm_up`), so that the first real job does not pay the JVM's warm-up
    (`warm=False` skips it: benchmarks/connect_warm_up.py measures a cold server).

    Without `token` one is generated (unless `authenticate` is off: a trusted network only).
    With `cores="plan"` the lease controller reads the plan from `ledger` (None: where the
    tasks find it, `ledger_url`).
    """
    running = status(state_dir)
    if running is not None:
        raise ConnectServerError(
            f"a Spark Connect server is already running from {state_dir} (pid {running.pid}, {running.url}); "
            "stop it first (`iqp connect-server stop`)"
        )
    if port_answers(port):
        raise ConnectServerError(f"port {port} is in use: pick another with --port")
    token = (token or secrets.token_urlsafe(24)) if authenticate else None
    state_dir.mkdir(parents=True, exist_ok=True)
    _write_token(state_dir / TOKEN_FILE, token)
    with (state_dir / LOG_FILE).open("wb") as log:
        process = subprocess.Popen(
            command(port, master, bind, driver_memory, cores),
            env=environment(token, master, ledger_url(ledger) if cores == PLAN else None),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: `stop` ends the JVM and the launcher
        )
    (state_dir / STATE_FILE).write_text(json.dumps({"pid": process.pid, "port": port, "master": master}) + "\n")
    server = ConnectServer(process.pid, port, master, state_dir, token)
    give_up = time.monotonic() + timeout
    while not port_answers(port):
        if process.poll() is not None:
            raise ConnectServerError(f"the Spark Connect server exited with {process.returncode}:\n{_tail(server.log)}")
        if time.monotonic() > give_up:
            stop_group(process.pid, grace=10)
            raise ConnectServerError(f"the Spark Connect server did not answer within {timeout:g} s; see {server.log}")
        time.sleep(0.25)
    if warm:
        try:
            warm_up(server)
        except BaseException:  # a server whose warm-up failed is not left running, unrecorded
            stop(state_dir, grace=10)
            raise
    return server


def run_foreground(
    *,
    port: int,
    master: str,
    bind: str,
    driver_memory: str,
    token: str | None,
    cores: Cores = None,
    ledger: str | None = None,
) -> None:
    """Replace this process with the server (a container's main process)."""
    args = command(port, master, bind, driver_memory, cores)
    os.execve(args[0], args, environment(token, master, ledger_url(ledger) if cores == PLAN else None))


def stop(state_dir: Path, grace: float = 30.0) -> ConnectServer | None:
    """Stop the server the state directory records (its whole process group); None if none runs."""
    server = status(state_dir)
    if server is not None:
        stop_group(server.pid, grace)
    (state_dir / STATE_FILE).unlink(missing_ok=True)
    return server


@contextmanager
def running(state_dir: Path, *, master: str = DEFAULT_MASTER, driver_memory: str = "2g") -> Iterator[ConnectServer]:
    """A private server on a free port for the `with` block (fitting, tests, benchmarks)."""
    server = start(state_dir, port=free_port(), master=master, driver_memory=driver_memory)
    try:
        yield server
    finally:
        stop(state_dir)


def _write_token(path: Path, token: str | None) -> None:
    path.unlink(missing_ok=True)
    if token is None:
        return
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.write(token + "\n")


def _tail(log: Path, lines: int = 20) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"(no log at {log})"


def warm_up(server: ConnectServer) -> float:
    """Run a tiny job on the fresh server, as a real one does: its own Connect session, a
    Parquet write, then a read, a join and an aggregate through SQL; returns its seconds.

    A fresh server's first job pays the JVM's warm-up (class loading, code generation, the
    first session), seconds that are not the query's cost: run here, as the server starts, they
    are neither charged to the first window's batch nor taken for its cost by the learned model.
    """
    from airflow_iqp.spark.connect import ConnectJob  # pyspark's client: only when warming up

    table = server.state_dir / "warm-up"
    began = time.monotonic()
    with ConnectJob(server.url_with_token, "iqp-warm-up") as job:
        spark = job.spark
        rows = spark.range(WARM_UP_ROWS).selectExpr("id % 7 AS k", "id AS v", "cast(id AS double) / 3 AS x")
        rows.write.mode("overwrite").parquet(str(table))
        spark.read.parquet(str(table)).createOrReplaceTempView("iqp_warm_up")
        spark.sql(
            "SELECT a.k, count(*) AS n, sum(a.x * (1 - b.x / 1e6)) AS s FROM iqp_warm_up a "
            "JOIN (SELECT k, max(x) AS x FROM iqp_warm_up GROUP BY k) b ON a.k = b.k GROUP BY a.k ORDER BY a.k"
        ).collect()
    return time.monotonic() - began
