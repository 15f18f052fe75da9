"""Shared fixtures: one local Spark session, one Spark Connect server and one migrated Airflow
metadata database for the whole test session."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

from tests.integration.airflow_env import SPARK_SUBMIT, AirflowEnv
from tests.postgres import postgres_server as postgres_server  # the session's cluster, for every test

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import SparkSession

    from airflow_iqp.spark.connect_server import ConnectServer

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# py4j logs at INFO while the session stops, after pytest has closed its capture streams.
logging.getLogger("py4j").setLevel(logging.WARNING)
# No per-example time limit: tests assert results, not timings, and on two shared cores (xdist,
# a benchmark beside) an example past hypothesis's 200 ms default failed a correct property.
settings.register_profile("iqp", deadline=None)
settings.load_profile("iqp")


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """Starting Spark costs seconds, so every test that needs it shares this one."""
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("airflow-iqp-tests")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    """A Spark Connect server (local[2]) on a free port, started once: the Connect path's tests
    and the Airflow integration tests run their jobs on it, each job in a session of its own.
    """
    from airflow_iqp.spark.connect_server import running

    with running(tmp_path_factory.mktemp("connect-server"), driver_memory="1g") as server:
        yield server


@pytest.fixture(scope="session")
def airflow_metadata(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Airflow's SQLite metadata database, migrated once: each Airflow home of the tests starts
    from a copy (AirflowEnv.copy_metadata); a migration costs 10 s and more."""
    env = AirflowEnv(tmp_path_factory.mktemp("airflow-metadata"), SPARK_SUBMIT)
    env.migrate()
    migrated = env.home / "airflow.db"
    assert migrated.is_file()
    assert not migrated.with_name("airflow.db-wal").exists(), "the migration left its log beside the database"
    return migrated


TESTS = Path(__file__).parent
# Spark, Airflow, PostgreSQL or CPU measurements: `make test` runs these one at a time after
# the rest, which it runs on both cores (pytest -n 2).
HEAVY_PATHS = (
    "integration",
    "spark",
    "packaging",
    "costfit",
    "ui/test_browser.py",
    "commands/test_connect_server.py",
    "benchmarks/test_measure.py",
)
HEAVY_FIXTURES = {"spark", "connect_server", "postgres_server"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the heavy tests `heavy` (see HEAVY_PATHS): by place, by fixture, or by a PostgreSQL parameter."""
    for item in items:
        where = Path(item.path).relative_to(TESTS).as_posix()
        on_postgres = "postgresql" in getattr(getattr(item, "callspec", None), "id", "")
        if where.startswith(HEAVY_PATHS) or HEAVY_FIXTURES & set(getattr(item, "fixturenames", ())) or on_postgres:
            item.add_marker(pytest.mark.heavy)
