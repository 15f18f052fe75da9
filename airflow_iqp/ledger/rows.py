"""The ledger's windows and batches as typed rows, detached from the session.

Read once here from the ORM rows, so the store, the monitor (`ui.read`) and the demo's tables
name a column in one place and see the same types: statuses as enums, a batch's `files` None
until it froze any.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, TypeVar

from airflow_iqp.constants import CLOSED_WINDOW_STATES, BatchStatus, WindowStatus
from airflow_iqp.planning.record import PlanRecord

if TYPE_CHECKING:
    from datetime import datetime

    from airflow_iqp.ledger.models import Batch, Window


@dataclass(frozen=True, kw_only=True)
class BatchRow:
    """One partial job of a window, planned and as it ran; `files` are the ones it froze, by
    stream (None before it froze any).
    """

    index: int
    status: BatchStatus
    first_tuple: int
    last_tuple: int
    release: datetime  # when its newest unit is planned to land
    latest_start: datetime
    planned_start: datetime
    predicted_cost: float
    actual_start: datetime | None
    actual_end: datetime | None
    actual_tuples: int | None
    actual_cost: float | None
    attempts: int
    slot: int | None
    reason: str | None  # a BatchReason; the column has no CHECK, so older rows may hold others
    files: dict[str, list[str]] | None
    output_location: str | None


@dataclass(frozen=True, kw_only=True)
class WindowRow:
    """A window and its batches (in index order)."""

    id: int
    dag_id: str
    query: str  # the query's name
    run_id: str | None
    window_start: datetime
    window_end: datetime
    deadline: datetime
    expected_tuples: int
    actual_tuples: int | None
    plan: PlanRecord
    predicted_finish: datetime | None
    actual_finish: datetime | None
    status: WindowStatus
    deadline_met: bool | None
    result_location: str | None  # the merge's committed output
    result_uri: str | None  # the published result
    incomplete: bool
    late_files: int
    backfill: bool
    batches: tuple[BatchRow, ...]

    @property
    def result(self) -> str | None:
        """Where the window's result is: the published one, else the merge's output."""
        return self.result_uri or self.result_location

    @property
    def finished(self) -> bool:
        """Merged or failed: nothing more will happen to the window."""
        return self.status in CLOSED_WINDOW_STATES

    @property
    def outcome(self) -> str | None:
        """How the window ended: "backfilled", "met" or "missed"; None while it is open or failed."""
        if self.status != WindowStatus.MERGED:
            return None
        if self.backfill:
            return "backfilled"
        return "met" if self.deadline_met else "missed"


Row = TypeVar("Row", BatchRow, WindowRow)


def batch_row(b: Batch) -> BatchRow:
    """The ORM batch as a detached row."""
    return _read(
        BatchRow,
        b,
        index=b.batch_index,
        status=BatchStatus(b.status),
        files=None if b.files is None else {stream: list(uris) for stream, uris in b.files.items()},
    )


def window_row(w: Window) -> WindowRow:
    """The ORM window and its batches as a detached row; a reader with more to tell subclasses
    `WindowRow` and builds its row from `vars()` of this one.
    """
    return _read(
        WindowRow,
        w,
        dag_id=w.query.dag_id,
        query=w.query.name,
        plan=PlanRecord.read(w.plan),
        status=WindowStatus(w.status),
        batches=tuple(batch_row(b) for b in w.batches),
    )


def _read(row: type[Row], orm: Batch | Window, **apart: Any) -> Row:
    """The row: `apart` as given, every other field the ORM row's column of the same name."""
    return row(**{f.name: getattr(orm, f.name) for f in fields(row) if f.name not in apart}, **apart)
