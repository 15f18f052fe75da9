"""Retention (`ledger.prune`): old merged windows lose their file rows and keep everything else;
open, recent and failed windows keep theirs; a cutoff inside a DAG's horizon drops nothing."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

import pytest
from sqlalchemy import func, select

from airflow_iqp.constants import FileStatus, WindowStatus
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.ledger.models import Batch, Result, StreamFile, Window
from airflow_iqp.ledger.prune import PruneRefused, Retention, prune
from tests.ledger.helpers import DAG, T0, data_file, planned_window

if TYPE_CHECKING:
    from datetime import datetime

DAY = timedelta(days=1)
NOW = T0 + 30 * DAY
WEEK = Retention(DAG, timedelta(days=7), "stream 'sales' history=7 days")


def merged(url: str, start: datetime, *names: str) -> int:
    """A window whose one batch froze `names` (and a second nothing), merged and published."""
    window_id = planned_window(url, start=start, ranges=((1, 1),))
    with session_scope(url) as s:
        store.freeze_files(s, window_id, 0, {"sales": [data_file(n, modified=start) for n in names]})
        store.start_batch(s, window_id, 0)
        store.finish_batch(s, window_id, 0, start, start, 10, 1.5, "/results/sales/batch-0000")
        store.record_merge(s, window_id, start + timedelta(seconds=11), 10, "/results/sales/result")
        store.record_result(s, window_id, f"/results/{start:%Y%m%d}", 10, start + timedelta(seconds=11))
    return window_id


def file_rows(url: str) -> dict[int | None, list[str]]:
    with session_scope(url) as s:
        found: dict[int | None, list[str]] = {}
        for window_id, uri, status in s.execute(
            select(StreamFile.window_id, StreamFile.uri, StreamFile.status).order_by(StreamFile.id)
        ):
            found.setdefault(window_id, []).append(f"{uri.rsplit('/', 1)[-1]}:{status}")
        return found


@pytest.fixture
def sqlite_url(tmp_path: object) -> str:
    return f"sqlite:///{tmp_path}/ledger.db"


def test_old_merged_windows_lose_their_file_rows_and_keep_the_rest(sqlite_url: str) -> None:
    url = sqlite_url
    old = merged(url, T0, "a.parquet", "b.parquet")
    recent = merged(url, NOW - 3 * DAY, "c.parquet")
    failed = planned_window(url, start=T0 + DAY, ranges=((1, 1),))
    running = planned_window(url, start=T0 + 2 * DAY, ranges=((1, 1),))
    with session_scope(url) as s:
        store.freeze_files(s, failed, 0, {"sales": [data_file("f.parquet")]})
        store.record_merge(s, failed, T0 + DAY, None, None, status=WindowStatus.FAILED)
        store.freeze_files(s, running, 0, {"sales": [data_file("r.parquet")]})
        store.record_file_event(s, DAG, old, data_file("late.parquet"), FileStatus.LATE, note="late")
        store.record_file_event(s, DAG, None, data_file("orphan.parquet"), FileStatus.LATE, note="never ran")

    with session_scope(url) as s:
        report = prune(s, [WEEK], timedelta(days=8), NOW)

    [pruned] = report.pruned
    assert (pruned.dag_id, pruned.rows, pruned.windows) == (DAG, {"frozen": 2, "late": 1}, 1)
    assert pruned.cutoff == NOW - 8 * DAY
    rows = file_rows(url)
    assert old not in rows, "the old merged window's frozen and late rows are gone"
    assert rows[recent] == ["c.parquet:frozen"], "a window that ended inside the cutoff keeps its files"
    assert rows[failed] == ["f.parquet:frozen"], "a failed window may run again: its claims stay"
    assert rows[running] == ["r.parquet:frozen"], "an open window keeps its files"
    assert rows[None] == ["orphan.parquet:late"], "recorded today (the test's clock): kept"
    with session_scope(url) as s:
        window = s.get(Window, old)
        assert window is not None
        assert (window.status, window.late_files, window.result_uri) == (WindowStatus.MERGED, 1, "/results/20260101")
        batch = s.scalars(select(Batch).where(Batch.window_id == old)).one()
        assert batch.files == {"sales": ["s3://bucket/sales/a.parquet", "s3://bucket/sales/b.parquet"]}
        assert batch.actual_cost == 1.5, "the monitor and the learned models read batches: kept whole"
        assert s.scalar(select(func.count()).select_from(Result)) == 2


def test_events_on_no_window_go_once_recorded_before_the_cutoff(sqlite_url: str) -> None:
    url = sqlite_url
    merged(url, T0, "a.parquet")
    with session_scope(url) as s:
        store.record_file_event(s, DAG, None, data_file("orphan.parquet"), FileStatus.LATE, note="never ran")
    with session_scope(url) as s:
        report = prune(s, [WEEK], timedelta(days=7), NOW + 400 * DAY)
    assert report.pruned[0].rows == {"frozen": 1, "late": 1}
    assert file_rows(url) == {}


def test_a_cutoff_inside_a_horizon_is_refused_saying_what_to_set(sqlite_url: str) -> None:
    url = sqlite_url
    merged(url, T0, "a.parquet")
    unbounded = Retention("iqp_clicks", None, "stream(s) 'clicks' declare no history=")
    with session_scope(url) as s, pytest.raises(PruneRefused) as refused:
        prune(s, [WEEK, unbounded], timedelta(days=2), NOW)
    message = str(refused.value)
    assert "iqp_sales: files may land up to 7d after a window's end" in message
    assert "pass --older-than 7d or more, or declare a shorter history=" in message
    assert message.startswith("--older-than 2d would drop files that late_files still looks at")
    assert "iqp_clicks: stream(s) 'clicks' declare no history=" in message
    assert "declare FileStream(history=...)" in message
    assert message.endswith("Nothing was dropped.")
    assert file_rows(url) != {}, "refused: nothing dropped"


def test_a_dag_without_a_retention_is_left_alone(sqlite_url: str) -> None:
    url = sqlite_url
    merged(url, T0, "a.parquet")
    with session_scope(url) as s:
        report = prune(s, [], timedelta(days=8), NOW)
    assert (report.pruned, report.left) == ([], [DAG])
    assert len(file_rows(url)) == 1


def test_prune_on_each_backend(ledger_db: str) -> None:
    old = merged(ledger_db, T0, "a.parquet", "b.parquet")
    recent = merged(ledger_db, NOW - DAY, "c.parquet")
    with session_scope(ledger_db) as s:
        report = prune(s, [WEEK], timedelta(days=7), NOW)
    assert report.pruned[0].rows == {"frozen": 2}
    rows = file_rows(ledger_db)
    assert old not in rows
    assert rows[recent] == ["c.parquet:frozen"]
