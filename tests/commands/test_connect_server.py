"""`iqp connect-server start|status|stop` on a real server, and what can be checked without one:
the command it runs, the URL a job connects with, a stale state directory."""

from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING

import pytest

from airflow_iqp.cli import main
from airflow_iqp.spark import connect_server
from airflow_iqp.spark.connect import ConnectJob, ConnectServerDown, session_url
from airflow_iqp.spark.connect_server import (
    DETACHED_TIMEOUT,
    LEASE_DRIVER,
    SERVER_CLASS,
    SERVER_PLUGIN,
    ConnectServer,
    ConnectServerError,
    command,
    environment,
    free_port,
    port_answers,
    status,
)

if TYPE_CHECKING:
    from pathlib import Path


def test_the_server_is_the_wheels_connect_class_on_loopback_with_a_short_detached_timeout() -> None:
    args = command(15002, "local[2]", "127.0.0.1", "2g")
    assert args[0].endswith("spark-submit")
    assert args[args.index("--class") + 1] == SERVER_CLASS
    confs = dict(args[i + 1].split("=", 1) for i, arg in enumerate(args) if arg == "--conf")
    assert confs["spark.connect.grpc.binding.address"] == "127.0.0.1"
    assert confs["spark.connect.grpc.binding.port"] == "15002"
    assert confs["spark.connect.execute.manager.detachedTimeout"] == DETACHED_TIMEOUT == "30s"
    assert confs["spark.sql.session.timeZone"] == "UTC"
    assert "secret" not in " ".join(args), "the token goes in the environment, not on a command line ps shows"
    assert environment("secret", "local[2]")["SPARK_CONNECT_AUTHENTICATE_TOKEN"] == "secret"
    assert "SPARK_CONNECT_AUTHENTICATE_TOKEN" not in environment(None, "local[2]")
    assert "spark.driver.host" not in confs


def test_a_server_on_a_cluster_leaves_its_drivers_address_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a local master's driver is put on loopback; a cluster's executors must reach it."""
    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    monkeypatch.delenv("SPARK_DRIVER_HOST", raising=False)
    assert environment(None, "local[2]")["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert "SPARK_LOCAL_IP" not in environment(None, "spark://spark-master:7077")
    monkeypatch.setenv("SPARK_LOCAL_IP", "10.1.2.3")
    assert environment(None, "spark://spark-master:7077")["SPARK_LOCAL_IP"] == "10.1.2.3"  # passed on, not forced
    monkeypatch.setenv("SPARK_DRIVER_HOST", "spark-connect")
    args = command(15002, "spark://spark-master:7077", "0.0.0.0", "2g")
    confs = dict(args[i + 1].split("=", 1) for i, arg in enumerate(args) if arg == "--conf")
    assert confs["spark.driver.host"] == "spark-connect"
    assert args[args.index("--master") + 1] == "spark://spark-master:7077"


@pytest.mark.parametrize(
    ("base", "expected"),
    [
        ("sc://localhost:15002/", "sc://localhost:15002/;session_id=S"),  # SparkConnectHook, no parameters
        ("sc://localhost:15002/;token=t", "sc://localhost:15002/;token=t;session_id=S"),
        ("sc://localhost:15002", "sc://localhost:15002/;session_id=S"),
    ],
)
def test_each_attempts_url_names_its_own_session(base: str, expected: str) -> None:
    assert session_url(base, "S") == expected


def test_a_url_that_names_a_session_or_is_not_connects_is_refused() -> None:
    with pytest.raises(ValueError, match="names a session_id"):
        session_url("sc://localhost:15002/;session_id=x", "S")
    with pytest.raises(ValueError, match="starts with sc://"):
        session_url("spark://master:7077", "S")
    job = ConnectJob("sc://localhost:1/", "iqp-r1-f1")
    assert job.url.endswith(f";session_id={job.session_id}")
    with pytest.raises(RuntimeError, match="only inside"):
        job.spark


def test_a_server_that_does_not_answer_fails_the_job_at_once() -> None:
    """Not after the client's ten minutes of retries, holding the lease."""
    port = free_port()
    began = time.monotonic()
    with pytest.raises(ConnectServerDown, match=f"localhost:{port} does not answer.*iqp connect-server start"):
        ConnectJob(f"sc://localhost:{port}/;token=t", "iqp-r1-f1").__enter__()
    assert time.monotonic() - began < 10


def test_a_state_directory_whose_process_is_gone_shows_no_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "server.json").write_text(json.dumps({"pid": os.getpid(), "port": 1, "master": "local[2]"}))
    assert status(tmp_path) is None  # this pid is alive, but it is not a Connect server
    assert main(["connect-server", "status", "--state-dir", str(tmp_path)]) == 1
    assert "no Spark Connect server running" in capsys.readouterr().out
    assert ConnectServer(1, 15002, "local[2]", tmp_path, "t").connection() == {
        "conn_type": "spark_connect",
        "host": "localhost",
        "port": 15002,
        "password": "t",
    }


def test_start_status_stop(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A real server: warmed up by a job of its own, it answers with its token, refuses a second
    start, and stop ends it.
    """
    state, port = str(tmp_path / "state"), free_port()
    assert main(["connect-server", "start", "--port", str(port), "--state-dir", state, "--driver-memory", "1g"]) == 0
    try:
        out = capsys.readouterr().out
        connection = json.loads(out.split("AIRFLOW_CONN_IQP_SPARK='", 1)[1].split("'", 1)[0])
        assert (connection["host"], connection["port"]) == ("localhost", port)
        assert oct((tmp_path / "state" / "token").stat().st_mode & 0o777) == "0o600"
        assert any((tmp_path / "state" / "warm-up").glob("*.parquet")), "the warm-up job wrote its table"
        assert main(["connect-server", "status", "--state-dir", state]) == 0
        assert f"sc://localhost:{port}, master local[2]: answering" in capsys.readouterr().out
        server = status(tmp_path / "state")
        assert server is not None
        with ConnectJob(server.url_with_token, "iqp-cli") as job:
            assert job.spark.range(5).count() == 5
        assert main(["connect-server", "start", "--port", str(port + 1), "--state-dir", state]) == 2
        assert "already running" in capsys.readouterr().err
    finally:
        assert main(["connect-server", "stop", "--state-dir", state]) == 0
    assert status(tmp_path / "state") is None
    assert main(["connect-server", "status", "--state-dir", state]) == 1


def test_a_server_whose_warm_up_fails_is_not_left_running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real server, its warm-up made to fail (a client that cannot reach it, a full disk):
    `start` raises and the JVM it started is gone, not left running unrecorded."""

    def failing(server: ConnectServer) -> float:
        raise ConnectServerError(f"warm-up failed on port {server.port}")

    monkeypatch.setattr(connect_server, "warm_up", failing)
    state, port = tmp_path / "state", free_port()
    with pytest.raises(ConnectServerError, match="warm-up failed"):
        connect_server.start(state, port=port, driver_memory="1g")
    assert status(state) is None
    assert not port_answers(port)


def test_a_server_on_a_cluster_scales_its_one_core_executors_between_the_plans_bounds() -> None:
    args = command(15002, "spark://master:7077", "127.0.0.1", "2g", cores=(1, 4), billing_unit=3600)
    confs = dict(args[i + 1].split("=", 1) for i, arg in enumerate(args) if arg == "--conf")
    assert {k: v for k, v in confs.items() if "dynamicAllocation" in k or k == "spark.executor.cores"} == {
        "spark.dynamicAllocation.enabled": "true",
        "spark.dynamicAllocation.shuffleTracking.enabled": "true",
        "spark.dynamicAllocation.minExecutors": "1",
        "spark.dynamicAllocation.maxExecutors": "4",
        "spark.executor.cores": "1",
        "spark.dynamicAllocation.executorIdleTimeout": "3600s",
        "spark.dynamicAllocation.shuffleTracking.timeout": "3600s",
    }, "an executor idle for a billing unit goes, its shuffle files too"
    assert not any("dynamicAllocation" in arg for arg in command(15002, "spark://master:7077", "127.0.0.1", "2g"))
    with pytest.raises(ValueError, match="runs in one JVM"):
        command(15002, "local[2]", "127.0.0.1", "2g", cores=(1, 2))
    with pytest.raises(ValueError, match="0 <= MIN <= MAX"):
        command(15002, "spark://master:7077", "127.0.0.1", "2g", cores=(3, 2))


def test_a_server_whose_executors_follow_the_plan_runs_in_the_lease_driver_with_spark_allocation_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AIRFLOW__IQP__MAX_CORES", "3")
    args = command(15002, "spark://master:7077", "127.0.0.1", "2g", cores="plan")
    confs = dict(args[i + 1].split("=", 1) for i, arg in enumerate(args) if arg == "--conf")
    assert args[-1] == str(LEASE_DRIVER), "the Python application whose context starts the server"
    assert SERVER_CLASS not in args
    assert confs["spark.plugins"] == SERVER_PLUGIN
    assert confs["spark.dynamicAllocation.enabled"] == "false", "the controller, not Spark, leases executors"
    assert confs["spark.cores.max"] == "3", "[iqp] max_cores"
    assert environment(None, "spark://master:7077", "sqlite:////ledger.db")["AIRFLOW_CONN_IQP_DEFAULT"] == (
        "sqlite:////ledger.db"
    ), "the controller reads the plan from the ledger it is given"
    with pytest.raises(ValueError, match="runs in one JVM"):
        command(15002, "local[2]", "127.0.0.1", "2g", cores="plan")


def test_cores_plan_on_a_local_master_is_refused_with_what_to_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = str(tmp_path / "state")
    assert main(["connect-server", "start", "--cores", "plan", "--port", str(free_port()), "--state-dir", state]) == 2
    assert "--cores plan leases a cluster's executors; master 'local[2]' runs in one JVM" in capsys.readouterr().err
    assert status(tmp_path / "state") is None, "nothing started"
