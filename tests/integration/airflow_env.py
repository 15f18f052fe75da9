"""A throwaway Airflow home for `airflow dags test`: SQLite metadata, our ledger, and Spark: the
test session's Spark Connect server, or spark-submit on local[2] (`SPARK_SUBMIT`).

Everything runs in subprocesses of the real `airflow` CLI, as a user would run it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent
SPARK_SUBMIT: dict[str, Any] = {"conn_type": "spark", "host": "local[2]"}  # the iqp_spark connection of that path


@dataclass
class AirflowEnv:
    home: Path
    spark: dict[str, Any]  # the iqp_spark connection: ConnectServer.connection(), or SPARK_SUBMIT
    shared_ledger: str | None = None  # several Airflow homes, one dispatcher

    @property
    def dags(self) -> Path:
        return self.home / "dags"

    @property
    def ledger(self) -> str:
        return self.shared_ledger or f"sqlite:///{self.home / 'iqp_ledger.db'}"

    def environ(self) -> dict[str, str]:
        return {
            **os.environ,
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "AIRFLOW_CONN_IQP_SPARK": json.dumps(self.spark),
            "AIRFLOW_CONN_IQP_DEFAULT": json.dumps({"conn_type": "iqp", "host": self.ledger}),
            "SPARK_LOCAL_IP": "127.0.0.1",
        }

    def airflow(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(BIN / "airflow"), *args], env=self.environ(), capture_output=True, text=True, timeout=timeout
        )

    def start_airflow(self, *args: str, log: Path, **env: str) -> subprocess.Popen[str]:
        """In the background, output to `log`: for several `airflow dags test` at once."""
        with log.open("w") as out:
            return subprocess.Popen(
                [str(BIN / "airflow"), *args], env=self.environ() | env, stdout=out, stderr=subprocess.STDOUT, text=True
            )

    def migrate(self) -> None:
        self.dags.mkdir(parents=True, exist_ok=True)
        result = self.airflow("db", "migrate")
        assert result.returncode == 0, result.stderr[-3000:]

    def copy_metadata(self, migrated: Path) -> None:
        """Start from a copy of a metadata database `airflow db migrate` made (the session's
        `airflow_metadata`): a migration costs 10 s and more a home, three at once half a minute."""
        self.dags.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(migrated, self.home / "airflow.db")


def next_window_start(
    window: timedelta, after: datetime, origin: datetime = datetime(2000, 1, 1, tzinfo=UTC)
) -> datetime:
    steps = -(-(after - origin) // window)
    return origin + steps * window
