"""The `final_merge` task on a real SQLite ledger: a window an earlier attempt merged is not
merged again (Airflow 3.3 may fail an attempt that finished: apache/airflow#71580)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

from airflow_iqp.constants import Mode
from airflow_iqp.dag import result_asset
from airflow_iqp.declaration import declare
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.operators.merge import FinalMergeOperator
from airflow_iqp.planning.record import PlanRecord
from airflow_iqp.streams.spec import FileStream

if TYPE_CHECKING:
    from pathlib import Path

    import pytest
    from airflow.sdk import Context

T0 = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)


def test_a_window_the_ledger_holds_merged_is_not_merged_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    monkeypatch.setenv("AIRFLOW_CONN_IQP_DEFAULT", url)
    declaration = declare(
        dag_id="iqp_q6",
        query="q6",
        window=timedelta(minutes=1),
        deadline=timedelta(minutes=1),
        streams={"lineitem": FileStream(str(tmp_path / "lineitem"))},
        output="/results/{dag_id}/{window_start}",
    )
    with session_scope(url) as s:
        store.register_query(s, dag_id="iqp_q6", name="q6", sql="SELECT 1", mode=Mode.STATIC, params={})
        window_id = store.record_plan(
            s, "iqp_q6", T0, T0 + timedelta(minutes=1), T0 + timedelta(minutes=2), 1, PlanRecord(), []
        )
    task = FinalMergeOperator(
        task_id="final_merge",
        declaration=declaration,
        work_dir=str(tmp_path),
        window_id=window_id,
        result=result_asset(declaration),
    )
    pushed: dict[str, Any] = {}
    context = cast("Context", {"ti": SimpleNamespace(xcom_push=lambda key, value: pushed.update({key: value}))})
    with session_scope(url) as s:
        store.record_merge(s, window_id, T0 + timedelta(seconds=70), 10, "/data/iqp/result-f3")
        store.record_result(s, window_id, "/results/iqp_q6/w0", 10, T0 + timedelta(seconds=70))
    assert task.execute(context) == "/results/iqp_q6/w0"
    assert pushed == {"output_location": "/results/iqp_q6/w0"}
