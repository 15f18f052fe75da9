"""docker/ cannot run here (no Docker engine), so check what can be checked without one."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    import pytest

DOCKER = Path(__file__).resolve().parents[1] / "docker"


def compose() -> dict[str, Any]:
    document = yaml.safe_load((DOCKER / "docker-compose.yml").read_text())
    assert isinstance(document, dict)
    return document


def test_dockerfile_copies_what_exists() -> None:
    root = DOCKER.parent
    for line in (DOCKER / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY "):
            for source in line.split()[1:-1]:
                assert (root / source).exists(), f"Dockerfile copies missing {source}"


def test_every_airflow_service_shares_connections_and_the_data_volume() -> None:
    services = compose()["services"]
    airflow = [name for name in services if name.startswith("airflow-")]
    assert {"airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer"} <= set(airflow)
    for name in airflow:
        env = services[name]["environment"]
        spark = json.loads(env["AIRFLOW_CONN_IQP_SPARK"])
        assert (spark["conn_type"], spark["host"], spark["port"]) == ("spark_connect", "spark-connect", 15002)
        assert "iqp-data:/data" in services[name]["volumes"]
    for name in ("spark-master", "spark-worker-1", "spark-worker-2", "spark-connect"):
        assert "iqp-data:/data" in services[name]["volumes"]


def test_the_spark_connect_service_serves_the_standalone_master_on_the_connections_port() -> None:
    """The service runs our own `iqp connect-server start` in the foreground, parsed as the CLI
    would parse it: the cluster's master, the port Airflow's connection names, every interface
    of its container (the compose network reaches it by name), and no token (see the compose file).
    """
    from airflow_iqp.cli import build_parser

    services = compose()["services"]
    service = services["spark-connect"]
    argv = service["command"].split()
    assert argv[:3] == ["iqp", "connect-server", "start"]
    args = build_parser().parse_args(argv[1:])
    assert args.foreground
    assert args.no_token
    assert args.bind == "0.0.0.0"  # the container's interfaces, inside the compose network
    assert args.master == "spark://spark-master:7077"
    airflow = json.loads(services["airflow-scheduler"]["environment"]["AIRFLOW_CONN_IQP_SPARK"])
    assert (service["hostname"], args.port) == (airflow["host"], airflow["port"])
    assert "spark-master" in service["depends_on"]


def test_ledger_database_is_created_and_separate_from_airflows() -> None:
    env = compose()["services"]["airflow-scheduler"]["environment"]
    ledger = json.loads(env["AIRFLOW_CONN_IQP_DEFAULT"])["host"]
    ledger_db = ledger.rsplit("/", 1)[1]
    assert ledger_db != env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].rsplit("/", 1)[1]
    created = re.findall(r"CREATE DATABASE (\w+)", (DOCKER / "initdb" / "10-iqp-ledger.sql").read_text())
    assert created == [ledger_db]


def test_the_image_installs_spark_with_the_locked_set() -> None:
    """pyspark is an extra: an image without it has no spark-submit for the workers and Airflow."""
    syncs = [line for line in (DOCKER / "Dockerfile").read_text().splitlines() if "uv sync" in line]
    assert syncs
    assert all("--locked" in line and "--extra spark" in line for line in syncs)


MASTER = "spark://spark-master:7077"


def test_every_spark_service_and_connection_names_the_same_master() -> None:
    services = compose()["services"]
    assert "--host spark-master" in services["spark-master"]["command"]
    for worker in ("spark-worker-1", "spark-worker-2"):
        assert services[worker]["command"].split()[-1] == MASTER
    assert f"--master {MASTER}" in services["spark-connect"]["command"]
    submit = json.loads(services["airflow-scheduler"]["environment"]["AIRFLOW_CONN_IQP_SPARK_SUBMIT"])
    assert (submit["conn_type"], submit["host"]) == ("spark", MASTER)


def test_no_driver_is_put_on_loopback_and_each_is_called_back_by_its_services_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Executors run on the worker containers: a spark-submit driver (in the container that runs
    tasks) and the Connect server's driver must each be reached by a name the compose network resolves.
    """
    from airflow_iqp.settings import driver_address
    from airflow_iqp.spark.connect_server import command

    services = compose()["services"]
    assert "SPARK_LOCAL_IP" not in (DOCKER / "Dockerfile").read_text()
    for name, service in services.items():
        assert "SPARK_LOCAL_IP" not in (service.get("environment") or {}), f"{name} forces the driver's address"
    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    monkeypatch.delenv("SPARK_DRIVER_HOST", raising=False)

    env = services["airflow-scheduler"]["environment"]
    assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"  # tasks, so spark-submit drivers, run in the scheduler
    submit = json.loads(env["AIRFLOW_CONN_IQP_SPARK_SUBMIT"])
    driver = driver_address(submit["host"], submit["extra"])
    assert driver.env == {}
    assert driver.conf == {"spark.driver.host": "airflow-scheduler"}

    connect = services["spark-connect"]
    monkeypatch.setenv("SPARK_DRIVER_HOST", connect["environment"]["SPARK_DRIVER_HOST"])
    args = command(15002, MASTER, "0.0.0.0", "2g")
    confs = dict(args[i + 1].split("=", 1) for i, arg in enumerate(args) if arg == "--conf")
    assert confs["spark.driver.host"] == connect["hostname"] == "spark-connect"
