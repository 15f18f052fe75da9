"""The demo's tables, read from the ledger: one line per window, one per batch (with its
prediction's error), and one per window of how good its predictions were.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import select

from airflow_iqp.constants import BatchStatus
from airflow_iqp.dynamic.dispatch import RankedEntry
from airflow_iqp.ledger.models import DispatchRequest, Query, Window
from airflow_iqp.ledger.rows import WindowRow as LedgerRow
from airflow_iqp.ledger.rows import window_row as ledger_row
from airflow_iqp.planning.record import PlanRecord
from airflow_iqp.tables import format_table
from airflow_iqp.ui.read import merge_seconds

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime

    from sqlalchemy.orm import Session

    from airflow_iqp.ledger.rows import BatchRow


@dataclass(frozen=True, kw_only=True)
class WindowRow(LedgerRow):
    """One demo window: the ledger's row, its plan's cost against the measured one, and the
    demo's own check of its published result.
    """

    predicted_cost: float  # partial jobs plus the merge, as planned
    actual_cost: float | None  # partial jobs plus the merge, as measured
    result_rows: int | None = None
    verified: bool | None = None  # equal to single-pass Spark SQL; None: not checked


def wait_s(b: BatchRow) -> float | None:
    """Release (its last file due) to the job starting: trigger, scheduler, dispatcher."""
    return None if b.actual_start is None else (b.actual_start - b.release).total_seconds()


def file_count(b: BatchRow) -> int:
    """The files a batch froze (of a join, per stream: the streams' files pair up by path)."""
    return max((len(names) for names in (b.files or {}).values()), default=0)


def _since(origin: datetime, at: datetime | None) -> str | None:
    """Seconds from `origin`, as the batch and grant tables show times."""
    return None if at is None else f"{(at - origin).total_seconds():.1f}s"


def _after(end: datetime, at: datetime | None) -> str:
    return "-" if at is None else f"{(at - end).total_seconds():+.0f}s"


def window_row(session: Session, dag_id: str, window_start: datetime) -> WindowRow | None:
    """The ledger's window of the DAG `dag_id` starting at `window_start`, or None before it is planned."""
    w = session.scalar(select(Window).join(Query).where(Query.dag_id == dag_id, Window.window_start == window_start))
    if w is None:
        return None
    window = ledger_row(w)
    done = [b for b in window.batches if b.status == BatchStatus.DONE]
    merge = merge_seconds(session, [w]).get(w.id)
    planned_merge = PlanRecord.read(w.plan).merge_cost
    actual = None if merge is None else sum(b.actual_cost or 0.0 for b in done) + merge
    planned = sum(b.predicted_cost for b in window.batches if b.status != BatchStatus.SKIPPED) + planned_merge
    return WindowRow(**vars(window), predicted_cost=planned, actual_cost=actual)


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
            r.dag_id,
            f"{r.window_start:%H:%M:%S}-{r.window_end:%H:%M:%S}",
            r.status,
            f"{sum(b.status == BatchStatus.DONE for b in r.batches)}/{len(r.batches)}",
            f"{r.actual_tuples:,}" if r.actual_tuples is not None else None,
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
        "error",
    )

    body = [
        (
            w.dag_id,
            b.index,
            b.status,
            b.attempts,
            file_count(b),
            f"{b.actual_tuples:,}" if b.actual_tuples is not None else None,
            _since(w.window_start, b.release),
            _since(w.window_start, b.planned_start),
            _since(w.window_start, b.actual_start),
            _since(w.window_start, b.actual_end),
            f"{waited:.1f}s" if (waited := wait_s(b)) is not None else None,
            f"{expected_cost(w, b):.1f}s",
            f"{b.actual_cost:.1f}s" if b.actual_cost is not None else None,
            _percent(prediction_error(w, b)),
        )
        for w in rows
        for b in w.batches
    ]
    return format_table(headers, body)


def expected_cost(w: LedgerRow, b: BatchRow) -> float:
    """The batch's predicted cost without the safety margin its window's plan added (a refit
    model plans every job that much longer, `runtime.costs.MARGIN_K`): what the model expected.
    """
    return b.predicted_cost / (1 + (w.plan.margin or {}).get("partial", 0.0))


def prediction_error(w: LedgerRow, b: BatchRow) -> float | None:
    """How far a batch that ran was from what the model expected, expected / actual - 1; None
    for one that predicted nothing (a calibration's, a past window's) or has not run.
    """
    if b.status != BatchStatus.DONE or not b.actual_cost or b.predicted_cost <= 0:
        return None
    return expected_cost(w, b) / b.actual_cost - 1


def _percent(value: float | None) -> str | None:
    return None if value is None else f"{value:+.0%}"


def errors_table(rows: Sequence[WindowRow]) -> str:
    """Per window (in the order given) and query, how far the batches' predicted costs were from
    the actual ones: the median of |error| and the worst error, and the merge's error.
    """
    headers = ("window (UTC)", "query", "plan", "batches predicted", "median |error|", "worst error", "merge error")
    body = []
    for w in rows:
        errors = [e for b in w.batches if (e := prediction_error(w, b)) is not None]
        merge = w.actual_cost - sum(b.actual_cost or 0.0 for b in w.batches) if w.actual_cost is not None else None
        planned = w.plan.merge_cost / (1 + (w.plan.margin or {}).get("merge", 0.0))
        body.append(
            (
                f"{w.window_start:%H:%M:%S}-{w.window_end:%H:%M:%S}",
                w.dag_id,
                w.plan.how.split(":")[0].split(" at ")[0],
                f"{len(errors)}/{len(w.batches)}",
                f"{statistics.median(abs(e) for e in errors):.0%}" if errors else None,
                _percent(max(errors, key=abs)) if errors else None,
                _percent(planned / merge - 1) if merge and planned > 0 else None,
            )
        )
    return format_table(headers, body)


def window_errors(rows: Sequence[WindowRow]) -> str:
    """Per window (in the order given), every query's batches together: how many predicted, the
    median of |error| and the worst error (issue 22 asks the third window for 10% and 25%).
    """
    by_window: dict[tuple[datetime, datetime], list[float]] = {}
    for w in rows:
        errors = by_window.setdefault((w.window_start, w.window_end), [])
        errors += [e for b in w.batches if (e := prediction_error(w, b)) is not None]
    lines = []
    for (start, end), errors in by_window.items():
        window = f"window {start:%H:%M:%S}-{end:%H:%M:%S}"
        if not errors:
            lines.append(f"{window}: no batch predicted")
            continue
        median = statistics.median(abs(e) for e in errors)
        lines.append(
            f"{window}: {len(errors)} batch(es) predicted, median |error| {median:.0%}, "
            f"worst {_percent(max(errors, key=abs))}"
        )
    return "\n".join(lines)


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

    body = [
        (
            r.fence,
            r.query,
            r.kind,
            r.reason,
            _since(origin, r.registered),
            _since(origin, r.granted),
            f"{(r.granted - r.registered).total_seconds():.1f}s",
            f"{(r.released - r.granted).total_seconds():.1f}s" if r.released else None,
            ", ".join(r.rivals) or None,
        )
        for r in rows
    ]
    return format_table(headers, body)
