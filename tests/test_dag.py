"""The example DAG files and intermittent_query(): what a user copies, and what it builds."""

from __future__ import annotations

import importlib.util
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from airflow_iqp.exceptions import InvalidDeclaration
from airflow_iqp.timetables.window import WindowTimetable

if TYPE_CHECKING:
    from types import ModuleType

DAGS = Path(__file__).resolve().parents[1] / "dags"


def load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["iqp_q1", "iqp_q6", "iqp_q14"])
def test_example_dag_builds_plan_partials_merge(name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("IQP_LANDING", str(tmp_path))
    dag = load(DAGS / f"{name}.py").dag
    assert dag.dag_id == name
    assert isinstance(dag.timetable, WindowTimetable)
    assert dag.timetable.window >= timedelta(minutes=1)
    assert [t.task_id for t in dag.topological_sort()] == ["plan", "partial_aggregate", "final_merge"]
    partial = dag.get_task("partial_aggregate")
    assert partial.map_index_template == "{{ batch_label }}"
    # No pool: the dispatcher orders Spark jobs across DAGs, Airflow's default pool only counts tasks.
    assert partial.partial_kwargs.get("pool", "default_pool") == "default_pool"
    assert dag.get_task("final_merge").pool == "default_pool"
    assert dag.get_task("final_merge").trigger_rule == "none_failed"


def test_bad_dag_file_fails_at_parse_time(tmp_path: Path) -> None:
    bad = tmp_path / "bad_dag.py"
    bad.write_text(
        (DAGS / "iqp_q6.py").read_text().replace("deadline=timedelta(seconds=45)", "deadline=timedelta(seconds=1)")
    )
    with pytest.raises(InvalidDeclaration, match="earliest feasible deadline"):
        load(bad)


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("POLICY", "fifo", r"\[iqp\] policy must be one of edf, llf, sjf, rr, got 'fifo' \(AIRFLOW__IQP__POLICY\)"),
        ("RESOURCES", "0", r"\[iqp\] resources must be >= 1, got 0 \(AIRFLOW__IQP__RESOURCES\)"),
        ("RESOURCES", "two", r"\[iqp\] resources = 'two' is not a number \(AIRFLOW__IQP__RESOURCES\)"),
        ("LEASE_SECONDS", "1", r"\[iqp\] lease_seconds must be >= 5, got 1 \(AIRFLOW__IQP__LEASE_SECONDS\)"),
    ],
)
def test_bad_dispatcher_config_fails_at_parse_time(
    setting: str, value: str, message: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("IQP_LANDING", str(tmp_path))
    monkeypatch.setenv(f"AIRFLOW__IQP__{setting}", value)
    with pytest.raises(InvalidDeclaration, match=message):
        load(DAGS / "iqp_q6.py")


def test_dynamic_dag_maps_slots(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("IQP_LANDING", str(tmp_path))
    dag = load(DAGS / "iqp_q14.py").dag
    assert "dynamic" in dag.doc_md
    assert [t.task_id for t in dag.topological_sort()] == ["plan", "partial_aggregate", "final_merge"]
