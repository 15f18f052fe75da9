"""What the dispatcher reads from the ledger to decide inserted idle time (`dynamic.dispatch.inserted_idle`):
how long each waiting job will hold the resource, and which static batches are about to ask for it.

A waiting job's duration: a static batch's predicted cost; a dynamic batch's, at most its
window's tau_max (it is cut when granted); a merge's, its request's remaining cost, which is
its own. An upcoming job is the next batch of a static window that has no open request, whose
planned release is due within the horizon. A batch whose release has just passed counts too
until its task has had time to register (its trigger polls once a second): it is treated as
released a moment from now.
"""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import timedelta
from typing import TYPE_CHECKING

from sqlalchemy import and_, select

from airflow_iqp.constants import OPEN_REQUEST_STATES, OPEN_WINDOW_STATES, BatchStatus, JobKind, Mode
from airflow_iqp.dynamic.dispatch import Upcoming
from airflow_iqp.ledger.models import Batch, DispatchRequest, Query, Window
from airflow_iqp.planning.record import PlanRecord

if TYPE_CHECKING:
    from collections.abc import Iterable
    from datetime import datetime

    from sqlalchemy.orm import Session

REGISTRATION_GRACE = timedelta(seconds=5)  # a few of the window-input trigger's 1 s polls
NOT_STARTED = (BatchStatus.PLANNED, BatchStatus.WAITING)
FINISHED = (BatchStatus.DONE, BatchStatus.SKIPPED)


def job_seconds(session: Session, requests: Iterable[int]) -> dict[int, float]:
    """How long each request's job is expected to hold the resource."""
    rows = session.execute(
        select(
            DispatchRequest.id,
            DispatchRequest.kind,
            DispatchRequest.remaining_cost,
            Window.plan,
            Batch.predicted_cost,
        )
        .join(Window, Window.id == DispatchRequest.window_id)
        .outerjoin(Batch, and_(Batch.window_id == DispatchRequest.window_id, Batch.batch_index == DispatchRequest.slot))
        .where(DispatchRequest.id.in_(list(requests)))
    )
    seconds: dict[int, float] = {}
    for request, kind, remaining, plan, predicted in rows:
        record = PlanRecord.read(plan)
        if kind == JobKind.PARTIAL and record.mode is Mode.DYNAMIC:
            seconds[request] = min(remaining, record.dynamic.tau_max if record.dynamic is not None else remaining)
        elif kind == JobKind.PARTIAL and predicted is not None:
            seconds[request] = predicted
        else:
            seconds[request] = remaining
    return seconds


def upcoming(session: Session, now: datetime, horizon: float) -> list[Upcoming]:
    """Next batches of static windows without an open request, released within `horizon` s."""
    asking = select(DispatchRequest.window_id).where(DispatchRequest.state.in_(OPEN_REQUEST_STATES))
    rows = session.execute(
        select(Query.dag_id, Window.id, Window.deadline, Window.plan, Batch.batch_index, Batch.release)
        .add_columns(Batch.predicted_cost, Batch.status)
        .join(Window, Window.query_id == Query.id)
        .join(Batch, Batch.window_id == Window.id)
        .where(
            Window.status.in_(OPEN_WINDOW_STATES),
            Window.id.not_in(asking),
            Batch.status.not_in(FINISHED),
        )
        .order_by(Window.id, Batch.batch_index)
    )
    windows = defaultdict(list)
    for row in rows:
        if PlanRecord.read(row.plan).mode is not Mode.DYNAMIC:
            windows[row.id].append(row)
    soon: list[Upcoming] = []
    for batches in windows.values():
        first = batches[0]
        if first.status not in NOT_STARTED or not now - REGISTRATION_GRACE < first.release:
            continue
        if first.release > now + timedelta(seconds=horizon):
            continue
        remaining = sum(b.predicted_cost for b in batches) + PlanRecord.read(first.plan).merge_cost
        release = max(first.release.timestamp(), math.nextafter(now.timestamp(), math.inf))
        soon.append(Upcoming(first.dag_id, release, first.deadline.timestamp(), remaining))
    return soon
