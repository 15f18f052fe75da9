"""When a static batch ends off its plan, replan the window's remaining batches: the ledger side
of `planning.replan` (dynamic windows need none, their slots recompute laxity every time).

A finished batch is off its plan when it ended more than REPLAN_TOLERANCE of its predicted cost
after its planned end, or its cost differs from the prediction by more than that: the rest of
the plan rests on a time or a cost that did not hold. The same planner then plans, from now,
the units no batch has frozen, with the cost model as it is now (a learned one was just refit
on this batch), against the deadline less the blocking room the window has left. The window
was planned with room for one job of another query to hold the resource (the non-preemptive
blocking term); a batch that ends late has used that much of it, so the room left is the room
less the lateness (never below zero): a window late by no more than its room still has a plan
that meets the deadline, and the replan finds it.

The window's batch tasks were mapped when it was planned, so a replan moves the boundaries
(`last_tuple`, read by the tasks and by `WindowInputTrigger` from the ledger) and the times of
the tasks left, and cannot add any: a plan of k batches goes to the last k of them (the last
one still takes everything left once the input is final), the ones before get no units and skip
when they run; a plan that needs more batches than remain has its earliest ones joined (see
`planning.replan`). Only a window planned for its deadline is replanned (its plan records
`blocking`): a calibration, one batch once final, or a past window has no deadline plan to keep.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final

from airflow_iqp.constants import BatchStatus
from airflow_iqp.ledger import store
from airflow_iqp.planning.arrival import ArrivalCurve
from airflow_iqp.planning.record import ReplanNote
from airflow_iqp.planning.replan import Remaining, Replan, replan
from airflow_iqp.runtime.sizing import file_costs

if TYPE_CHECKING:
    from datetime import datetime

    from sqlalchemy.orm import Session

    from airflow_iqp.declaration import CostModel
    from airflow_iqp.ledger.rows import BatchRow

REPLAN_TOLERANCE: Final = 0.1  # of a batch's predicted cost: how far its end or its cost may stray

_ROW = ("first_tuple", "last_tuple", "planned_start", "predicted_cost")


def lateness(batch: BatchRow) -> float:
    """Seconds a finished batch ended after its planned end (negative: before it)."""
    if batch.actual_end is None:
        return 0.0
    return (batch.actual_end - batch.planned_start).total_seconds() - batch.predicted_cost


def off_plan(batch: BatchRow) -> str | None:
    """Why a finished batch is off its plan, or None when it kept to it."""
    if batch.actual_end is None or batch.actual_cost is None or batch.predicted_cost <= 0:
        return None
    slack = REPLAN_TOLERANCE * batch.predicted_cost
    if (late := lateness(batch)) > slack:
        return f"batch {batch.index} ended {late:.1f} s after its planned end"
    if abs(batch.actual_cost - batch.predicted_cost) > slack:
        return f"batch {batch.index} took {batch.actual_cost:.1f} s, {batch.predicted_cost:.1f} s planned"
    return None


def replan_window(session: Session, window_id: int, index: int, model: CostModel, now: datetime) -> ReplanNote | None:
    """Replan the window's batches after batch `index` if it ended off its plan; returns the
    note recorded in the plan's `replans`, or None when the plan stands (kept to, nothing left
    to replan, not a deadline plan, or the replan changes neither the batches nor the room).
    """
    window = store.window_summary(session, window_id)
    plan = window.plan
    ended = next(b for b in window.batches if b.index == index)
    previous = plan.blocking_left
    if previous is None or plan.files_per_second is None or plan.rows_per_file is None:
        return None
    if (why := off_plan(ended)) is None:
        return None
    frozen = [b for b in window.batches if b.files is not None]
    tasks = [b for b in window.batches if b.files is None and b.status != BatchStatus.SKIPPED]
    if not tasks or min(b.index for b in tasks) < max(b.index for b in frozen):
        return None  # the last batch has taken the rest, or batches froze out of order (all ready at once)
    room = max(0.0, previous - max(0.0, lateness(ended)))
    files, rate = plan.expected_files, plan.files_per_second
    start = window.window_start
    done = max(b.last_tuple for b in frozen)
    since = (now - start).total_seconds()
    window_end = (window.window_end - start).total_seconds()
    result = replan(
        Remaining(done, len(frozen), files, tasks=len(tasks)),
        arrival=ArrivalCurve.fixed_rate(0.0, max(0, files - 1) / rate, files),
        window_end=window_end,
        deadline=(window.deadline - start).total_seconds() - room,
        now=since,
        cost=file_costs(model, plan.rows_per_file),
        merge=model.merge,
    )
    rows = _rows(tasks, result, done, files, start, max(now, window.window_end))
    unchanged = all(
        tuple(row[k] for k in _ROW) == tuple(getattr(old, k) for k in _ROW)
        for row, old in zip(rows, tasks, strict=True)
    )
    if unchanged and room == previous:
        return None
    note = ReplanNote(
        at=now,
        after_batch=index,
        why=why,
        batches=len(result.batches),
        feasible=result.feasible,
        reason=result.reason,
        blocking_left=room,
        merge_start=max((b.start + b.cost for b in result.batches), default=max(since, window_end)),
    )
    store.record_replan(session, window_id, rows, start + timedelta(seconds=result.finish), note)
    return note


def _rows(
    tasks: list[BatchRow], result: Replan, done: int, files: int, start: datetime, closed: datetime
) -> list[dict[str, Any]]:
    """The tasks' new batch rows: the plan's batches on the last tasks, no units on the ones
    before (due when the window's next job is, which is what inserted idle time reads), and with
    no batch at all, the last task takes whatever is left once the input is final (`closed`).
    """
    if result.batches:
        due = start + timedelta(seconds=result.batches[0].release)
        begin = start + timedelta(seconds=result.batches[0].start)
    else:
        due = begin = closed
    empty = {"first_tuple": done + 1, "last_tuple": done, "release": due, "latest_start": begin}
    rows = [{"index": b.index, **empty, "planned_start": begin, "predicted_cost": 0.0} for b in tasks]
    if not result.batches:
        rows[-1]["last_tuple"] = max(files, done)
    for row, new in zip(rows[len(rows) - len(result.batches) :], result.batches, strict=True):
        at = start + timedelta(seconds=new.start)
        row |= {
            "first_tuple": new.first,
            "last_tuple": new.last,
            "release": start + timedelta(seconds=new.release),
            "latest_start": at,
            "planned_start": at,
            "predicted_cost": new.cost,
        }
    return rows
