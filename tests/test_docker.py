"""docker/ cannot run here (no Docker engine), so check what can be checked without one."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from benchmarks.faults.services import RECOVERY_ENV
from tests import topology

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
    assert {f"airflow-{name}" for name in topology.services()} <= set(airflow)
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
    airflow = json.loads(services["airflow-worker-1"]["environment"]["AIRFLOW_CONN_IQP_SPARK"])
    assert (service["hostname"], args.port) == (airflow["host"], airflow["port"])
    assert "spark-master" in service["depends_on"]


def test_ledger_database_is_created_and_separate_from_airflows() -> None:
    env = compose()["services"]["airflow-scheduler-1"]["environment"]
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
    for worker in topology.WORKERS:
        submit = json.loads(services[f"airflow-{worker}"]["environment"]["AIRFLOW_CONN_IQP_SPARK_SUBMIT"])
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

    for worker in topology.WORKERS:  # tasks, so spark-submit drivers, run on the Celery workers
        service = services[f"airflow-{worker}"]
        assert service["environment"]["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
        submit = json.loads(service["environment"]["AIRFLOW_CONN_IQP_SPARK_SUBMIT"])
        driver = driver_address(submit["host"], submit["extra"])
        assert driver.env == {}
        assert driver.conf == {"spark.driver.host": service["hostname"]}

    connect = services["spark-connect"]
    monkeypatch.setenv("SPARK_DRIVER_HOST", connect["environment"]["SPARK_DRIVER_HOST"])
    args = command(15002, MASTER, "0.0.0.0", "2g")
    confs = dict(args[i + 1].split("=", 1) for i, arg in enumerate(args) if arg == "--conf")
    assert confs["spark.driver.host"] == connect["hostname"] == "spark-connect"


def test_the_compose_file_runs_the_native_topologys_airflow_services() -> None:
    """tests/topology.py (the Celery test's Airflow) and docker/ run the same services, each with
    the same command: two schedulers, two Celery workers by the same names, one of each other."""
    services = compose()["services"]
    native = topology.services()
    running = {name for name, s in services.items() if name.startswith("airflow-") and "profiles" not in s}
    assert running - {"airflow-init"} == {f"airflow-{name}" for name in native}
    for name, args in native.items():
        assert services[f"airflow-{name}"]["command"].split() == ["airflow", *args], name
    schedulers = [name for name in native if native[name] == ["scheduler"]]
    assert len(schedulers) == topology.SCHEDULERS == 2
    for worker in topology.WORKERS:  # Celery's name for the worker, and Airflow's (its container's)
        assert f"{worker}@%h" in native[worker]
        assert services[f"airflow-{worker}"]["hostname"] == f"airflow-{worker}"


def test_the_executor_and_its_broker_are_the_native_ones() -> None:
    """The CeleryExecutor on both, its broker Debian's redis-server (ensure_redis.sh here, the
    image's apt-get there), which every Airflow service waits for."""
    services = compose()["services"]
    for name, service in services.items():
        if name.startswith("airflow-"):
            env = service["environment"]
            assert env["AIRFLOW__CORE__EXECUTOR"] == topology.EXECUTOR, name
            assert env["AIRFLOW__CELERY__BROKER_URL"] == "redis://redis:6379/0", name
    assert services["airflow-init"]["depends_on"]["redis"] == {"condition": "service_healthy"}
    assert services["redis"]["command"].split()[0] == "redis-server"
    apt = next(line for line in (DOCKER / "Dockerfile").read_text().splitlines() if "apt-get install" in line)
    assert "redis-server" in apt.split()
    assert "apt-get install -y -qq redis-server" in (DOCKER.parent / "scripts" / "ensure_redis.sh").read_text()


def test_the_example_dags_parse_with_the_compose_environment_and_work_on_the_shared_volume() -> None:
    """The compose file's Spark is on other machines: a DAG without a shared work_dir would be
    refused at parse time (declaration.check_work_dir), so the compose file names one on `/data`."""
    from airflow_iqp.demo.examples import Example, load_examples

    env = {  # what the DAG files and the check read: no database of the compose network is reachable here
        k: str(v)
        for k, v in compose()["services"]["airflow-scheduler-1"]["environment"].items()
        if k.startswith(("IQP_", "AIRFLOW_CONN_"))
    }
    examples = load_examples(DOCKER.parent / "dags", env)
    assert env["IQP_WORK_DIR"].startswith("/data/")
    assert examples
    for path, found in examples.items():
        assert isinstance(found, Example), f"{path.name}: {found}"
    without = {k: v for k, v in env.items() if k != "IQP_WORK_DIR"}
    refused = load_examples(DOCKER.parent / "dags", without)
    assert all("declare work_dir" in str(found) for found in refused.values()), refused


def test_the_compose_file_notices_a_lost_component_as_the_fault_trials_do() -> None:
    """The recovery settings the 30 Celery fault trials met every deadline with, on every Airflow service."""
    for name, service in compose()["services"].items():
        if name.startswith("airflow-"):
            assert RECOVERY_ENV.items() <= service["environment"].items(), name
