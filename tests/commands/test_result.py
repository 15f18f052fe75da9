"""`iqp result DAG_ID --window START`: one window's published result, found through the ledger."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_iqp.cli import main
from airflow_iqp.commands.result import window_start
from airflow_iqp.constants import FileStatus, Mode
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.planning.record import PlanRecord
from airflow_iqp.results.publish import publish
from airflow_iqp.streams.files import DataFile

if TYPE_CHECKING:
    from pathlib import Path

DAG_ID = "iqp_sales"
START = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
WINDOW = timedelta(minutes=10)
ROWS = [{"category": "books", "total": 12}, {"category": "games", "total": 30}]


def listed(name: str) -> DataFile:
    return DataFile("sales", f"file:///data/sales/{name}", name, 10, START + timedelta(minutes=1))


def plan(url: str, start: datetime) -> int:
    batch = {
        "index": 0,
        "first_tuple": 1,
        "last_tuple": 2,
        "release": start,
        "latest_start": start,
        "planned_start": start,
        "predicted_cost": 1.0,
    }
    with session_scope(url) as s:
        return store.record_plan(s, DAG_ID, start, start + WINDOW, start + 2 * WINDOW, 2, PlanRecord(), [batch])


@pytest.fixture
def ledger(tmp_path: Path) -> tuple[str, str]:
    """A merged window with a published result; returns the ledger's URL and the result's location."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with session_scope(url) as s:
        store.register_query(s, dag_id=DAG_ID, name="sales", sql="SELECT 1", mode=Mode.STATIC, params={})
    window_id = plan(url, START)
    committed = tmp_path / "work" / "result"
    committed.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(ROWS), committed / "part-00000-abc.parquet")
    location = publish(committed, str(tmp_path / "results" / "20260101T100000"), {"committed_at": "at ten past"})
    with session_scope(url) as s:
        store.freeze_files(s, window_id, 0, {"sales": [listed("a.parquet"), listed("b.parquet")]})
        store.start_batch(s, window_id, 0)
        store.finish_batch(s, window_id, 0, START, START, 42, 1.0, str(committed.parent / "batch-0000"))
        store.record_merge(s, window_id, START + WINDOW, 42, str(committed))
        store.record_result(s, window_id, location, 42, START + WINDOW)
    return url, location


@pytest.mark.parametrize(
    "window", ["2026-01-01T10:00:00Z", "2026-01-01T10:00:00", "20260101T100000", "2026-01-01T11:00:00+01:00"]
)
def test_the_window_is_found_by_its_start_in_any_spelling(
    ledger: tuple[str, str], window: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url, location = ledger
    assert main(["result", DAG_ID, "--window", window, "--ledger", url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        f"{DAG_ID} window 2026-01-01T10:00:00+00:00 .. 2026-01-01T10:10:00+00:00: "
        f"2 row(s); from {location}; committed at ten past"
    )
    assert lines[1].split() == ["category", "total"]
    assert lines[3].split() == ["books", "12"]
    assert lines[4].split() == ["games", "30"]


def test_json_prints_one_object_per_row(ledger: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    url, _ = ledger
    assert main(["result", DAG_ID, "--window", "20260101T100000", "--ledger", url, "--json"]) == 0
    assert [json.loads(line) for line in capsys.readouterr().out.splitlines()] == ROWS


def test_an_incomplete_result_and_late_files_are_reported(
    ledger: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    url, _ = ledger
    with session_scope(url) as s:
        window_id = store.window_id(s, DAG_ID, START)
        assert window_id is not None
        store.quarantine_file(s, window_id, 0, "sales", listed("b.parquet").uri, note="unreadable")
        store.record_file_event(s, DAG_ID, window_id, listed("late.parquet"), FileStatus.LATE)
    assert main(["result", DAG_ID, "--window", "20260101T100000", "--ledger", url]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert "INCOMPLETE: quarantined input left out" in header
    assert "1 late file(s) recorded" in header


def test_a_window_the_ledger_does_not_know_is_named(
    ledger: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    url, _ = ledger
    assert main(["result", DAG_ID, "--window", "2026-01-01T10:10:00Z", "--ledger", url]) == 2
    assert "the ledger has no window of 'iqp_sales' starting 2026-01-01T10:10:00+00:00" in capsys.readouterr().err
    assert main(["result", "iqp_other", "--window", "2026-01-01T10:00:00Z", "--ledger", url]) == 2
    assert "no window of 'iqp_other'" in capsys.readouterr().err


def test_a_window_without_a_result_yet_says_its_status(
    ledger: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    url, _ = ledger
    plan(url, START + WINDOW)
    assert main(["result", DAG_ID, "--window", "2026-01-01T10:10:00Z", "--ledger", url]) == 2
    assert "window 2026-01-01T10:10:00+00:00 of 'iqp_sales' has no result yet (status planned)" in (
        capsys.readouterr().err
    )


def test_a_window_that_is_no_time_is_refused() -> None:
    with pytest.raises(ValueError, match="--window 'yesterday' is no time: give the window start as"):
        window_start("yesterday")
    assert window_start("2026-01-01T10:00:00") == START
