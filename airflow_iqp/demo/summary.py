"""The demo's tables, read from the ledger: one line per window, one per batch."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from sqlalchemy import select

from airflow_iqp.dynamic.dispatch import RankedEntry
from airflow_iqp.ledger.models import CostObservation, DispatchRequest, Query, Window
from airflow_iqp.planning.record import PlanRecord
from airflow_iqp.tables import format_table

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sqlalchemy.orm import Session


@dataclass(frozen=True)
class BatchRow:
    """One batch of a demo window, as the ledger recorded it."""

    query: str
    index: int
    status: str
    attempts: int
    files: int
    tuples: int | None
    release: datetime
    planned_start: datetime
    actual_start: datetime | None
    actual_end: datetime | None
    predicted_cost: float
    actual_cost: float | None

    @property
    def wait_s(self) -> float | None:
        """Release (its last file due) to the job starting: trigger, scheduler, dispatcher."""
        return None if self.actual_start is None else (self.actual_start - self.release).total_seconds()


@dataclass(frozen=True)
class WindowRow:
    """One demo window: plan against outcome, and its batches."""

    query: str
    window_start: datetime
    window_end: datetime
    deadline: datetime
    status: str
    batches_done: int
    batches_planned: int
    expected_tuples: int
    tuples: int | None
    predicted_cost: float  # partial jobs plus the merge, as planned
    actual_cost: float | None  # partial jobs plus the merge, as measured
    predicted_finish: datetime | None
    actual_finish: datetime | None
    deadline_met: bool | None
    result_location: str | None
    batches: tuple[BatchRow, ...]
    result_rows: int | None = None
    verified: bool | None = None  # equal to single-pass Spark SQL; None: not checked

    @property
    def finished(self) -> bool:
        """Merged or failed: nothing more will happen to the window."""
        return self.status in ("merged", "failed")


def _after(end: datetime, at: datetime | None) -> str:
    return "-" if at is None else f"{(at - end).total_seconds():+.0f}s"


def _merge_seconds(session: Session, query_id: int, window: Window) -> float | None:
    """The merge job's measured seconds: the query's merge observation closest to the finish."""
    if window.actual_finish is None:
        return None
    found = session.scalars(
        select(CostObservation).where(
            CostObservation.query_id == query_id,
            CostObservation.kind == "merge",
            CostObservation.observed_at >= window.window_start,
            CostObservation.observed_at <= window.actual_finish + timedelta(minutes=1),
        )
    ).all()
    if not found:
        return None
    finish = window.actual_finish
    return min(found, key=lambda o: abs((o.observed_at - finish).total_seconds())).seconds


def window_row(session: Session, dag_id: str, window_start: datetime) -> WindowRow | None:
    """The ledger's window of the DAG `dag_id` starting at `window_start`, or None before it is planned."""
    found = session.execute(
        select(Window, Query.id).join(Query).where(Query.dag_id == dag_id, Window.window_start == window_start)
    ).first()
    if found is None:
        return None
    w, query_id = found
    batches = tuple(
        BatchRow(
            query=dag_id,
            index=b.batch_index,
            status=b.status,
            attempts=b.attempts,
            files=max((len(f) for f in (b.files or {}).values()), default=0),
            tuples=b.actual_tuples,
            release=b.release,
            planned_start=b.planned_start,
            actual_start=b.actual_start,
            actual_end=b.actual_end,
            predicted_cost=b.predicted_cost,
            actual_cost=b.actual_cost,
        )
        for b in w.batches
    )
    done = [b for b in batches if b.status == "done"]
    merge = _merge_seconds(session, query_id, w)
    planned_merge = PlanRecord.read(w.plan).merge_cost
    actual = None if merge is None else sum(b.actual_cost or 0.0 for b in done) + merge
    return WindowRow(
        query=dag_id,
        window_start=w.window_start,
        window_end=w.window_end,
        deadline=w.deadline,
        status=w.status,
        batches_done=len(done),
        batches_planned=len(batches),
        expected_tuples=w.expected_tuples,
        tuples=w.actual_tuples,
        predicted_cost=sum(b.predicted_cost for b in batches if b.status != "skipped") + planned_merge,
        actual_cost=actual,
        predicted_finish=w.predicted_finish,
        actual_finish=w.actual_finish,
        deadline_met=w.deadline_met,
        result_location=w.result_uri,
        batches=batches,
    )


def _yes_no(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "NO")


def windows_table(rows: Sequence[WindowRow]) -> str:
    """One line per window: batches, tuples, predicted and actual cost, finish against deadline."""
    headers = (
        "query",
        "window (UTC)",
        "status",
        "batches",
        "tuples",
        "pred cost",
        "actual cost",
        "pred finish",
        "finish",
        "deadline",
        "met",
        "result rows",
        "= 1-pass SQL",
    )
    body = [
        (
            r.query,
            f"{r.window_start:%H:%M:%S}-{r.window_end:%H:%M:%S}",
            r.status,
            f"{r.batches_done}/{r.batches_planned}",
            f"{r.tuples:,}" if r.tuples is not None else None,
            f"{r.predicted_cost:.1f}s",
            f"{r.actual_cost:.1f}s" if r.actual_cost is not None else None,
            _after(r.window_end, r.predicted_finish),
            _after(r.window_end, r.actual_finish),
            _after(r.window_end, r.deadline),
            _yes_no(r.deadline_met),
            r.result_rows,
            _yes_no(r.verified),
        )
        for r in rows
    ]
    return format_table(headers, body)


def batches_table(rows: Sequence[WindowRow]) -> str:
    """Per batch, seconds from the window start, and the wait from release to the job's start."""
    headers = (
        "query",
        "batch",
        "status",
        "tries",
        "files",
        "tuples",
        "release",
        "planned",
        "started",
        "ended",
        "wait",
        "pred cost",
        "actual cost",
    )

    def at(w: WindowRow, t: datetime | None) -> str | None:
        return None if t is None else f"{(t - w.window_start).total_seconds():.1f}s"

    body = [
        (
            w.query,
            b.index,
            b.status,
            b.attempts,
            b.files,
            f"{b.tuples:,}" if b.tuples is not None else None,
            at(w, b.release),
            at(w, b.planned_start),
            at(w, b.actual_start),
            at(w, b.actual_end),
            f"{b.wait_s:.1f}s" if b.wait_s is not None else None,
            f"{b.predicted_cost:.1f}s",
            f"{b.actual_cost:.1f}s" if b.actual_cost is not None else None,
        )
        for w in rows
        for b in w.batches
    ]
    return format_table(headers, body)


@dataclass(frozen=True)
class GrantRow:
    """One grant of the Spark resource by the dispatcher."""

    fence: int
    query: str
    kind: str
    reason: str
    registered: datetime
    granted: datetime
    released: datetime | None
    rivals: tuple[str, ...]  # the other queries waiting at the grant, best ranked first


def grant_rows(session: Session, since: datetime) -> list[GrantRow]:
    """The dispatcher's grants since `since`, in grant order, with whom each one beat."""
    found = session.scalars(
        select(DispatchRequest)
        .where(DispatchRequest.granted_at.is_not(None), DispatchRequest.registered_at >= since)
        .order_by(DispatchRequest.fence, DispatchRequest.granted_at)
    ).all()
    return [
        GrantRow(
            fence=r.fence or 0,
            query=r.query,
            kind=r.kind,
            reason=r.reason,
            registered=r.registered_at,
            granted=r.granted_at,
            released=r.released_at,
            rivals=tuple(RankedEntry.read(entry).query for entry in (r.ranking or [])[1:]),
        )
        for r in found
        if r.granted_at is not None
    ]


def grants_table(rows: Sequence[GrantRow], origin: datetime) -> str:
    """Seconds from `origin` (the window start); wait = registered to granted."""
    headers = ("grant", "query", "job", "why", "queued", "granted", "wait", "held", "also waiting")

    def at(t: datetime | None) -> str | None:
        return None if t is None else f"{(t - origin).total_seconds():.1f}s"

    body = [
        (
            r.fence,
            r.query,
            r.kind,
            r.reason,
            at(r.registered),
            at(r.granted),
            f"{(r.granted - r.registered).total_seconds():.1f}s",
            f"{(r.released - r.granted).total_seconds():.1f}s" if r.released else None,
            ", ".join(r.rivals) or None,
        )
        for r in rows
    ]
    return format_table(headers, body)
