"""What a batch's and a merge's dispatcher request report as their window's remaining work, on a
real SQLite ledger: the predicted seconds of its batches not done nor skipped, plus its merge
(`dynamic.laxity.window_remaining`, the one meaning the dispatcher and the monitor rank by).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from airflow_iqp.constants import JobKind, Mode
from airflow_iqp.declaration import declare
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.operators.merge import merge_request
from airflow_iqp.operators.partial import PartialAggregateOperator
from airflow_iqp.planning.record import PlanRecord
from airflow_iqp.runtime.inputs import InputSpec
from airflow_iqp.streams.spec import FileStream

if TYPE_CHECKING:
    from pathlib import Path

    import pytest
    from airflow.sdk import Context

T0 = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
WINDOW = timedelta(minutes=2)
STREAMS = {"lineitem": FileStream("/data/lineitem")}
DECLARATION = declare(
    dag_id="iqp_q6",
    query="q6",
    window=WINDOW,
    deadline=WINDOW,
    streams=STREAMS,
    output="/results/{dag_id}/{window_start}",
)
MERGE = 30.0
COSTS = (2.0, 4.0, 8.0)  # batch 0 done, batch 1 skipped, batch 2 to run


def _planned(url: str) -> int:
    rows: list[dict[str, Any]] = [
        {
            "index": i,
            "first_tuple": i + 1,
            "last_tuple": i + 1,
            "release": T0,
            "latest_start": T0,
            "planned_start": T0,
            "predicted_cost": cost,
        }
        for i, cost in enumerate(COSTS)
    ]
    with session_scope(url) as s:
        store.register_query(s, dag_id="iqp_q6", name="q6", sql="SELECT 1", mode=Mode.STATIC, params={})
        window = store.record_plan(s, "iqp_q6", T0, T0 + WINDOW, T0 + 2 * WINDOW, 3, PlanRecord(merge_cost=MERGE), rows)
        store.start_batch(s, window, 0)
        store.finish_batch(s, window, 0, T0, T0 + timedelta(seconds=2), 1, COSTS[0], "/jobs/b0")
        store.skip_batch(s, window, 1)
    return window


def test_a_static_batch_reports_the_batches_not_done_nor_skipped_and_the_merge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    monkeypatch.setenv("AIRFLOW_CONN_IQP_DEFAULT", url)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[1]"}))
    window = _planned(url)
    descriptor = {
        "window_id": window,
        "index": 2,
        "upto": None,
        "planned_start": T0.isoformat(),
        "predicted_cost": COSTS[2],
        "input": InputSpec.of(STREAMS, T0, WINDOW).to_dict(),
    }
    task = PartialAggregateOperator(task_id="partial", batch=descriptor, declaration=DECLARATION, work_dir="/tmp/w")
    request = task.resource_request(cast("Context", {}))
    assert (request.kind, request.remaining_cost) == (JobKind.PARTIAL, COSTS[2] + MERGE)


def test_the_merge_reports_its_own_cost(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    window = _planned(url)
    with session_scope(url) as s:
        store.start_batch(s, window, 2)
        store.finish_batch(s, window, 2, T0, T0 + timedelta(seconds=8), 1, COSTS[2], "/jobs/b2")
        summary = store.window_summary(s, window)
    assert merge_request(DECLARATION, summary, None).remaining_cost == MERGE
