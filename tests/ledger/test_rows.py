"""One reader of the ledger's windows and batches: the store, the monitor and the demo see the same row."""

from __future__ import annotations

from dataclasses import fields
from datetime import timedelta
from typing import TYPE_CHECKING

from airflow_iqp.constants import BatchStatus, WindowStatus
from airflow_iqp.demo import summary
from airflow_iqp.ledger import migrate, rows, session_scope, store
from airflow_iqp.ui import read
from tests.ledger.helpers import DAG, T0, data_file, planned_window

if TYPE_CHECKING:
    from pathlib import Path


def test_the_store_the_monitor_and_the_demo_read_one_window_alike(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    migrate(url)
    window_id = planned_window(url, run_id="scheduled__2026-01-01T12:00:00+00:00")
    with session_scope(url) as s:
        store.freeze_files(s, window_id, 0, {"sales": [data_file("0000.parquet")]})
        store.start_batch(s, window_id, 0, T0 + timedelta(seconds=7))
        store.finish_batch(s, window_id, 0, T0 + timedelta(seconds=7), T0 + timedelta(seconds=9), 6, 2.0, "/out/0")
        store.record_merge(s, window_id, T0 + timedelta(seconds=11), 10, "/out/result")
        store.record_result(s, window_id, "/results/0", 10, T0 + timedelta(seconds=11))
    with session_scope(url, read_only=True) as s:
        stored = store.window_summary(s, window_id)
        query = read.query_of_dag(s, DAG)
        assert query is not None
        shown = read.window(s, query, window_id)
        demo = summary.window_row(s, DAG, T0)
    assert shown is not None
    assert demo is not None
    assert {f.name: getattr(shown, f.name) for f in fields(rows.WindowRow)} == {
        f.name: getattr(stored, f.name) for f in fields(rows.WindowRow)
    }
    assert {f.name: getattr(demo, f.name) for f in fields(rows.WindowRow)} == {
        f.name: getattr(stored, f.name) for f in fields(rows.WindowRow)
    }
    assert (stored.dag_id, stored.query, stored.status, stored.result, stored.outcome) == (
        DAG,
        "sales",
        WindowStatus.MERGED,
        "/results/0",
        "met",
    )
    assert stored.finished
    assert [(b.status, b.files, b.output_location) for b in stored.batches] == [
        (BatchStatus.DONE, {"sales": ["s3://bucket/sales/0000.parquet"]}, "/out/0"),
        (BatchStatus.PLANNED, None, None),  # no file frozen yet: None, not an empty dict
    ]
