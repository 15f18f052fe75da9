"""The capacity plan at run time: the cores each grant gives its job, and the record of them.

With `[iqp] cores = plan` the dispatcher's grants carry the plan's cores for the phase the
windows are in when it grants (`planning.capacity`, the same model `iqp check --capacity`
prints): `closed` while some window has closed and its work is not done (its final work is
due), `open` otherwise, and at least one core, since a grant is for a ready job. The plan is
made from every registered query's demand as its newest plan recorded it (`store.demands`),
timed on this machine's CPUs (as `costfit` records a model's machine), with the speedup
`[iqp] speedup` as measured (benchmarks/per_core.py), else the capacity model's labelled
default, and at most `[iqp] max_cores` per grant (the cluster's size); demands
carry no spread here, so the plan is the means' (`iqp check --capacity` draws the model files'
residuals). A number instead of `plan` gives every job that many, the fixed provisioning
the plan is compared with; unset, the Spark connection's default applies.

`needed` is the same plan for a controller that leases the cores (`spark.lease_driver`, the
Connect server's executors): none while no window is open or due.

What each grant gave is on its request (`dispatch_requests.cores`); `granted` reads it back as
the cores held over time, for the UI and the live benchmark.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from functools import lru_cache
from typing import TYPE_CHECKING

from sqlalchemy import or_, select

from airflow_iqp.constants import RequestState, WindowStatus
from airflow_iqp.ledger import store
from airflow_iqp.ledger.models import DispatchRequest, Window
from airflow_iqp.planning.capacity import Capacity, QueryDemand, Speedup, capacity
from airflow_iqp.settings import PLAN

if TYPE_CHECKING:
    from datetime import datetime

    from sqlalchemy.orm import Session

    from airflow_iqp.planning.admission import RecurringQuery
    from airflow_iqp.settings import DispatchSettings

SERIAL = 0.1  # the capacity model's default speedup (Amdahl's law, 10% of every job serial)


def plan(session: Session, settings: DispatchSettings) -> Capacity | None:
    """The capacity plan of every registered query (None: none has recorded its demand yet)."""
    demands = store.demands(session)
    if not demands:
        return None
    measured = os.cpu_count() or 1
    if settings.speedup is not None:
        speedup = Speedup(settings.speedup, "measured ([iqp] speedup)")
    else:  # the default reaches the cores the models were timed on: fewer are known to be slower
        speedup = Speedup.amdahl(SERIAL, range(1, max(settings.max_cores, measured) + 1))
    return _plan(tuple(demands), measured, speedup)


@lru_cache(maxsize=32)
def _plan(tasks: tuple[RecurringQuery, ...], measured_cores: int, speedup: Speedup) -> Capacity:
    """Cached: every grant asks, and the demands change only when a plan records new ones."""
    return capacity([QueryDemand(t, measured_cores=measured_cores) for t in tasks], speedup=speedup)


def closed(session: Session, now: datetime) -> bool:
    """Some window has closed and is not yet merged (or failed): its final work is due."""
    unfinished = (WindowStatus.PLANNED.value, WindowStatus.RUNNING.value)
    found = session.scalars(
        select(Window.id).where(Window.window_end <= now, Window.status.in_(unfinished)).limit(1)
    ).first()
    return found is not None


def opened(session: Session, at: datetime) -> bool:
    """Some window is open at `at` and not yet merged (or failed): its early work may run."""
    unfinished = (WindowStatus.PLANNED.value, WindowStatus.RUNNING.value)
    found = session.scalars(
        select(Window.id)
        .where(Window.window_start <= at, Window.window_end > at, Window.status.in_(unfinished))
        .limit(1)
    ).first()
    return found is not None


def needed(session: Session, settings: DispatchSettings, now: datetime, lead: float) -> int:
    """The cores the plan needs from `now` to `lead` seconds on, for a controller that leases
    them (an executor takes seconds to start, so a phase is met `lead` early): the closed
    phase's while a window's final work is due, the open phase's while a window is open, none
    while no window is either; never fewer than the granted jobs hold, at most `max_cores`
    (all of them where no count meets every deadline).
    """
    cores = sum(g.cores or settings.max_cores for g in granted(session, now, now) if g.end is None)
    current = plan(session, settings)
    if current is None:
        return min(cores, settings.max_cores)
    for at in (now, now + timedelta(seconds=lead)):
        if closed(session, at):
            phase = current.closed
        elif opened(session, at):
            phase = current.open
        else:
            continue
        cores = max(cores, settings.max_cores if phase.cores is None else phase.cores)
    return min(cores, settings.max_cores)


def grant_cores(session: Session, settings: DispatchSettings, now: datetime) -> int | None:
    """The cores a grant at `now` gives its job: `[iqp] cores` as set, or the plan's for the
    current phase, at most `max_cores` (all of them when no count meets every deadline; None
    before any query recorded a demand: the connection's default).
    """
    if settings.cores != PLAN:
        return settings.cores
    current = plan(session, settings)
    if current is None:
        return None
    phase = current.closed if closed(session, now) else current.open
    return max(1, settings.max_cores if phase.cores is None else min(phase.cores, settings.max_cores))


@dataclass(frozen=True)
class Granted:
    """One grant: the job it was for, when it held its cores, and how many (None: the connection's default)."""

    query: str
    kind: str
    cores: int | None
    start: datetime
    end: datetime | None  # None: still held


def granted(session: Session, since: datetime, now: datetime) -> list[Granted]:
    """Every grant made before `now` and not released before `since`, in grant order: the cores
    held over [since, now].
    """
    held = (RequestState.GRANTED, RequestState.RELEASED, RequestState.EXPIRED)
    rows = session.execute(
        select(
            DispatchRequest.query,
            DispatchRequest.kind,
            DispatchRequest.cores,
            DispatchRequest.granted_at,
            DispatchRequest.released_at,
        )
        .where(
            DispatchRequest.state.in_(held),
            DispatchRequest.granted_at < now,
            or_(DispatchRequest.released_at.is_(None), DispatchRequest.released_at > since),
        )
        .order_by(DispatchRequest.granted_at, DispatchRequest.id)
    )
    return [Granted(query, kind, cores, start, end) for query, kind, cores, start, end in rows if start is not None]
