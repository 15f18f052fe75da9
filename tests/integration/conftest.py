"""What the Airflow integration tests share across modules."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.integration.airflow_env import SPARK_SUBMIT, AirflowEnv

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture(scope="session")
def airflow_metadata(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Airflow's SQLite metadata database, migrated once: each `airflow dags test` home starts
    from a copy (AirflowEnv.copy_metadata)."""
    env = AirflowEnv(tmp_path_factory.mktemp("airflow-metadata"), SPARK_SUBMIT)
    env.migrate()
    migrated = env.home / "airflow.db"
    assert migrated.is_file()
    assert not migrated.with_name("airflow.db-wal").exists(), "the migration left its log beside the database"
    return migrated
