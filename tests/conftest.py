"""Shared fixtures: one local Spark session and one Spark Connect server for the whole test session."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.postgres import postgres_server as postgres_server  # the session's cluster, for every test

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import SparkSession

    from airflow_iqp.spark.connect_server import ConnectServer

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# py4j logs at INFO while the session stops, after pytest has closed its capture streams.
logging.getLogger("py4j").setLevel(logging.WARNING)


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


TESTS = Path(__file__).parent
# Spark, Airflow, PostgreSQL or CPU measurements: `make test` runs these after the rest, which it
# runs on both cores (pytest -n 2).
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
# Heavy modules that measure no time (no live window, no deadline, no CPU figure): `make test`
# runs them two at a time. Every other heavy test, and any module that marks itself heavy, runs
# alone afterwards, so the deadlines it measures are met on a machine it owns.
SHARED_PATHS = (
    "integration/test_real_inputs.py",
    "integration/test_paths.py",
    "spark/test_jobs.py",
    "spark/test_spark_layer.py",
    "spark/test_spec.py",
    "spark/test_tpch_exactness.py",
    "sql/test_decompose.py",
    "packaging/test_provider.py",
    "packaging/test_wheel.py",
    "ui/test_browser.py",
    "commands/test_connect_server.py",
    "ledger/test_dispatch.py",
    "ledger/test_files.py",
    "ledger/test_history.py",
    "ledger/test_idle.py",
    "ledger/test_migrations.py",
    "ledger/test_store.py",
    "demo/test_summary.py",
    "operators/test_window.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the heavy tests `heavy` (see HEAVY_PATHS): by place, by fixture, or by a PostgreSQL
    parameter; and those of SHARED_PATHS `shared` too, unless their module marked them heavy itself.
    """
    for item in items:
        where = Path(item.path).relative_to(TESTS).as_posix()
        on_postgres = "postgresql" in getattr(getattr(item, "callspec", None), "id", "")
        marked_heavy = item.get_closest_marker("heavy") is not None
        by_place = where.startswith(HEAVY_PATHS) or HEAVY_FIXTURES & set(getattr(item, "fixturenames", ()))
        if marked_heavy or by_place or on_postgres:
            item.add_marker(pytest.mark.heavy)
            if not marked_heavy and where.startswith(SHARED_PATHS):
                item.add_marker(pytest.mark.shared)
