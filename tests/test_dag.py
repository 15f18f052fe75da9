"""The example DAG files and intermittent_query(): what a user copies, and what it builds."""

from __future__ import annotations

import importlib.util
from datetime import timedelta
from pathlib import Path

import pytest

from airflow_iqp.dag import SPARK_POOL
from airflow_iqp.declaration import InvalidDeclaration
from airflow_iqp.timetables.window import WindowTimetable

DAGS = Path(__file__).resolve().parents[1] / "dags"


def load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["iqp_q1", "iqp_q6", "iqp_q14"])
def test_example_dag_builds_plan_partials_merge(name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("IQP_LANDING", str(tmp_path))
    dag = load(DAGS / f"{name}.py").dag
    assert dag.dag_id == name
    assert isinstance(dag.timetable, WindowTimetable) and dag.timetable.window >= timedelta(minutes=1)
    assert [t.task_id for t in dag.topological_sort()] == ["plan", "partial_aggregate", "final_merge"]
    partial = dag.get_task("partial_aggregate")
    assert partial.map_index_template == "{{ batch_label }}"
    assert partial.partial_kwargs["pool"] == SPARK_POOL and dag.get_task("final_merge").pool == SPARK_POOL
    assert dag.get_task("final_merge").trigger_rule == "none_failed"


def test_bad_dag_file_fails_at_parse_time(tmp_path: Path) -> None:
    bad = tmp_path / "bad_dag.py"
    bad.write_text((DAGS / "iqp_q6.py").read_text().replace("deadline=timedelta(seconds=45)", "deadline=timedelta(seconds=1)"))
    with pytest.raises(InvalidDeclaration, match="earliest feasible deadline"):
        load(bad)
