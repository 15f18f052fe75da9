"""The installed package, as the real `airflow` CLI sees it in a throwaway AIRFLOW_HOME.

Each CLI call costs seconds, so one fixture makes the few calls (independent ones side by side)
and the tests only read their output.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import airflow_iqp

AIRFLOW = str(Path(sys.executable).with_name("airflow"))
DAG_ID = "iqp_window_smoke"
DAG_FILE = f'''
from datetime import datetime, timedelta, timezone

from airflow.sdk import DAG
from airflow.providers.standard.operators.empty import EmptyOperator

from airflow_iqp.timetables import WindowTimetable

with DAG(
    "{DAG_ID}",
    schedule=WindowTimetable(timedelta(minutes=5)),
    start_date=datetime(2026, 1, 1, tzinfo=timezone.utc),
):
    EmptyOperator(task_id="plan")
'''


@pytest.fixture(scope="module")
def cli(
    tmp_path_factory: pytest.TempPathFactory, airflow_metadata: Path
) -> dict[str, subprocess.CompletedProcess[str]]:
    home = tmp_path_factory.mktemp("airflow_home")
    (home / "dags").mkdir()
    shutil.copyfile(airflow_metadata, home / "airflow.db")
    (home / "dags" / "window_dag.py").write_text(DAG_FILE)
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__PARALLELISM": "4",
    }
    env.pop("AIRFLOW_CONN_IQP_DEFAULT", None)

    def start(*shell: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            ["sh", "-ec", " && ".join(shell)], env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )

    running = {
        "plugins": start(f"{AIRFLOW} plugins -o json"),
        "providers": start(f"{AIRFLOW} providers list -o json"),
        "config": start(f"{AIRFLOW} config get-value iqp policy", f"{AIRFLOW} config get-value iqp resources"),
        # Serializing into the metadata DB and reading back exercises the plugin's registration.
        "dags": start(
            f"{AIRFLOW} dags reserialize >/dev/null",
            f"{AIRFLOW} dags list -o json --columns dag_id,timetable_summary,timetable_description",
        ),
    }
    done = {}
    for name, process in running.items():
        stdout, stderr = process.communicate(timeout=600)
        done[name] = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
        assert process.returncode == 0, f"{name}: {stderr[-3000:]}"
    return done


def _json(output: str) -> list[dict[str, Any]]:
    """The JSON list in stdout, which is one line among Airflow's log lines."""
    found: list[dict[str, Any]] = json.loads(
        next(line for line in output.splitlines() if line.startswith(("[{", "[]")))
    )
    return found


def test_plugin_registers_the_window_timetable(cli: dict[str, subprocess.CompletedProcess[str]]) -> None:
    plugins = {plugin["name"]: plugin for plugin in _json(cli["plugins"].stdout)}
    assert "airflow_iqp.timetables.window.WindowTimetable" in str(plugins["airflow_iqp"]["timetables"])


def test_provider_is_listed(cli: dict[str, subprocess.CompletedProcess[str]]) -> None:
    providers = {provider["package_name"]: provider for provider in _json(cli["providers"].stdout)}
    assert providers["airflow-iqp"]["version"] == airflow_iqp.__version__


def test_window_dag_parses_and_serializes(cli: dict[str, subprocess.CompletedProcess[str]]) -> None:
    assert "Failed to load all files" not in cli["dags"].stderr
    dags = {dag["dag_id"]: dag for dag in _json(cli["dags"].stdout)}
    assert dags[DAG_ID]["timetable_summary"] == "windows of 0:05:00"


def test_provider_declares_the_dispatcher_config(cli: dict[str, subprocess.CompletedProcess[str]]) -> None:
    assert cli["config"].stdout.split()[-2:] == ["edf", "1"]
