"""The chart over a plan the real `plan` task wrote (not seeded): the merge's planned start
reaches it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from airflow_iqp.constants import ExecutionPath, JobKind
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.runtime.descriptors import StaticBatch, descriptor
from airflow_iqp.runtime.sizing import plan_files
from airflow_iqp.ui import read, views
from tests.operators.test_plan import RATE, declaration, future_window, plan

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The task's ledger connection, as a worker gets it, and a spark-submit Spark connection."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    monkeypatch.setenv("AIRFLOW_CONN_IQP_DEFAULT", url)
    monkeypatch.setenv("AIRFLOW_CONN_IQP_SPARK", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    return url


def test_the_chart_shows_the_merge_where_the_plan_task_planned_it(tmp_path: Path, url: str) -> None:
    decl = declaration(tmp_path)
    start = future_window()
    batches = [b for b in map(descriptor, plan(decl, start)) if isinstance(b, StaticBatch)]
    expected = plan_files(decl, RATE, decl.fitted_model(ExecutionPath.SPARK_SUBMIT)).plan.batches
    assert len(batches) == len(expected) >= 2
    last = batches[-1]
    last_end = (last.planned_start - start).total_seconds() + last.predicted_cost  # the plan's last batch ends
    with session_scope(url) as s:
        query = read.query_of_dag(s, decl.dag_id)
        assert query is not None
        window = read.window(s, query, last.window_id)
    assert window is not None
    detail = views.detail(window, datetime.now(UTC) - timedelta(days=1), None)
    merge = next(bar for bar in detail.bars if bar.kind is JobKind.MERGE)
    assert merge.planned_start_s is not None
    assert merge.planned_start_s == pytest.approx(last_end)
    assert merge.planned_start_s == pytest.approx(expected[-1].start + expected[-1].cost)
    assert merge.planned_end_s == pytest.approx(last_end + window.plan.merge_cost)
    assert window.plan.merge_cost > 0
    with session_scope(url) as s:
        assert store.window_summary(s, last.window_id).plan.merge_start == pytest.approx(last_end)
