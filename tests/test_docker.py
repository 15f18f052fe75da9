"""docker/ cannot run here (no Docker engine), so check what can be checked without one."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

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
