"""Ledger rows made by hand, for the view models' tests (no database)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow_iqp.constants import BatchStatus, JobKind, Mode, RequestState, WindowStatus
from airflow_iqp.planning.record import PlanRecord
from airflow_iqp.ui.read import BatchRow, QueryRow, RequestRow, WindowRow

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
DAG = "iqp_q"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def query(**changes: Any) -> QueryRow:
    row = QueryRow(id=1, dag_id=DAG, name="q", mode=Mode.STATIC, params={"window_s": 600.0, "deadline_s": 300.0})
    return replace(row, **changes)


def batch(index: int = 0, **changes: Any) -> BatchRow:
    row = BatchRow(
        index=index,
        status=BatchStatus.PLANNED,
        first_tuple=10 * index,
        last_tuple=10 * index + 9,
        release=at(100 * index + 50),
        latest_start=at(100 * index + 60),
        planned_start=at(100 * index + 60),
        predicted_cost=20.0,
        actual_start=None,
        actual_end=None,
        actual_tuples=None,
        actual_cost=None,
        attempts=0,
        slot=None,
        reason=None,
        files=None,
        output_location=None,
    )
    return replace(row, **changes)


def done(index: int, start: float, cost: float, rows: int = 1000, **changes: Any) -> BatchRow:
    return batch(
        index,
        status=BatchStatus.DONE,
        actual_start=at(start),
        actual_end=at(start + cost),
        actual_tuples=rows,
        actual_cost=cost,
        attempts=1,
        **changes,
    )


def request(
    id: int = 1,
    kind: JobKind = JobKind.PARTIAL,
    slot: int = 0,
    state: RequestState = RequestState.WAITING,
    **changes: Any,
) -> RequestRow:
    row = RequestRow(
        id=id,
        window_id=1,
        dag_id=DAG,
        query="q",
        kind=kind,
        slot=slot,
        reason="planned",
        state=state,
        deadline=at(900),
        remaining_cost=50.0,
        registered_at=at(100),
        granted_at=None,
        released_at=None,
        resource_id=None,
        ranking=(),
    )
    return replace(row, **changes)


def window(**changes: Any) -> WindowRow:
    row = WindowRow(
        id=1,
        dag_id=DAG,
        query="q",
        run_id=None,
        window_start=T0,
        window_end=at(600),
        deadline=at(900),
        expected_tuples=2000,
        actual_tuples=None,
        plan=PlanRecord(merge_start=620.0, merge_cost=30.0),
        predicted_finish=None,
        actual_finish=None,
        status=WindowStatus.RUNNING,
        deadline_met=None,
        result_location=None,
        result_uri=None,
        incomplete=False,
        late_files=0,
        batches=(batch(0), batch(1)),
        requests=(),
        backfill=False,
    )
    return replace(row, **changes)


def merged(finish: float, **changes: Any) -> WindowRow:
    """A window whose two batches ran, merged (granted at 640 s) and finished at `finish` s."""
    merge = request(
        9,
        JobKind.MERGE,
        -1,
        RequestState.RELEASED,
        registered_at=at(639),
        granted_at=at(640),
        released_at=at(finish),
        resource_id=0,
    )
    closed: dict[str, Any] = {
        "status": WindowStatus.MERGED,
        "actual_finish": at(finish),
        "deadline_met": at(finish) <= changes.get("deadline", at(900)),
        "actual_tuples": 2000,
        "batches": (done(0, 60, 25.0), done(1, 600, 20.0)),
        "requests": (merge,),
    }
    return window(**(closed | changes))
