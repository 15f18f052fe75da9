"""What the capacity view reads from the ledger: the cores the dispatcher's grants held over a
period, the registered queries' demand priced as `iqp check --capacity` prices it, and those
queries' windows, whose phases the plan follows. Plain rows, detached from the session; the
pure `ui.cores` turns them into the view.

A query's demand is what its newest plan recorded (`ledger.store.demands`: the window's work,
its final work and its longest job, as `runtime.demand` prices the declaration); its spread is
the relative std of the partial residuals of the DAG's stored cost model (`read.cost_model`,
the model its plans use), as `iqp check` takes a fitted file's. The ledger keeps no spread of
the rate, nor the cores a model was timed on: a query is taken as timed on one core, as `iqp
check` takes a file that does not say.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import false, select

from airflow_iqp.ledger import leases, store
from airflow_iqp.ledger.models import Query, Window
from airflow_iqp.planning.capacity import QueryDemand
from airflow_iqp.runtime.capacity import Granted, granted
from airflow_iqp.ui import read

if TYPE_CHECKING:
    from collections.abc import Collection
    from datetime import datetime

    from sqlalchemy.orm import Session

    from airflow_iqp.ledger.leases import Held


@dataclass(frozen=True)
class WindowSpan:
    """A planned query's window: open from `start` to `close`, its final work due by `deadline`."""

    dag_id: str
    start: datetime
    close: datetime
    deadline: datetime


@dataclass(frozen=True)
class CapacityRows:
    """Everything the capacity view draws from, over one period."""

    grants: tuple[Granted, ...]
    demands: tuple[QueryDemand, ...]
    windows: tuple[WindowSpan, ...]
    leases: tuple[Held, ...]  # the executors a lease controller held (none without one)


def capacity_rows(session: Session, since: datetime, now: datetime) -> CapacityRows:
    """The grants holding cores at some time in [since, now], every recorded demand, the
    live windows of those queries open or due in [since, now], and the executors leased then.
    """
    demands = query_demands(session)
    return CapacityRows(
        grants=tuple(granted(session, since, now)),
        demands=tuple(demands),
        windows=tuple(windows(session, {d.task.name for d in demands}, since, now)),
        leases=tuple(leases.held(session, since, now)),
    )


def query_demands(session: Session) -> list[QueryDemand]:
    """Each registered query's recorded demand with its stored cost model's partial spread (none
    before its first job).
    """
    out = []
    for task in store.demands(session):
        model = read.cost_model(session, task.name)
        out.append(QueryDemand(task, cost_spread=0.0 if model is None else model.partial_spread.std))
    return out


def windows(session: Session, dag_ids: Collection[str], since: datetime, now: datetime) -> list[WindowSpan]:
    """The live (not backfilled) windows of these DAGs that opened before `now` and are due after `since`."""
    if not dag_ids:
        return []
    found = session.execute(
        select(Query.dag_id, Window.window_start, Window.window_end, Window.deadline)
        .join(Query, Query.id == Window.query_id)
        .where(
            Query.dag_id.in_(dag_ids),
            Window.backfill == false(),
            Window.window_start < now,
            Window.deadline > since,
        )
        .order_by(Window.window_start, Window.id)
    )
    return [WindowSpan(dag_id, start, close, deadline) for dag_id, start, close, deadline in found]
