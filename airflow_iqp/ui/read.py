"""What the monitor reads from the ledger: plain rows, detached from the session.

This is the module of the UI that knows the ledger's tables (with `ui.capacity`, which reads
what the capacity view draws), so a schema change is met here (and, for windows and batches,
in `ledger.rows`, whose rows the store and the demo read too). Since migration 0004 the DAG is
the ledger's unit: a query is found by its `dag_id`, and a window knows the run that planned it
(`run_id`), its published result, whether it is incomplete and its late files. A run that has
not planned yet (its tab opened before `plan` ran) finds its window by the start the window
timetable wrote into its run id. Dispatcher requests are tied to their DAG through their window.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import selectinload

from airflow_iqp.constants import (
    OPEN_REQUEST_STATES,
    OPEN_WINDOW_STATES,
    JobKind,
    Mode,
    RequestState,
)
from airflow_iqp.dynamic.dispatch import RankedEntry
from airflow_iqp.learning.cost import LearnedCost
from airflow_iqp.ledger import rows
from airflow_iqp.ledger.models import CostModel, CostObservation, DispatchRequest, Query, Resource, Window

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable

    from sqlalchemy.orm import Session

# The window start in a run id of the window timetable: `..._window_<start>_<end>[_at_<trigger>]`.
_RUN_WINDOW = re.compile(r"window_(?P<start>[^_]+)_")


@dataclass(frozen=True)
class QueryRow:
    """A registered query and the DAG that runs it."""

    id: int
    dag_id: str
    name: str
    mode: Mode
    params: dict[str, Any]


BatchRow = rows.BatchRow  # the ledger's batch row is the monitor's too


@dataclass(frozen=True)
class RequestRow:
    """A batch or merge asking the dispatcher for a resource, with what the dispatcher ranks it
    by (`dynamic.dispatch.Candidate.of_request`): `query` (round robin's memory is kept per
    `query`), and for a backfill's request the start of the window it backfills.
    """

    id: int
    window_id: int
    dag_id: str
    query: str
    kind: JobKind
    slot: int
    reason: str
    state: RequestState
    deadline: datetime
    remaining_cost: float
    registered_at: datetime
    granted_at: datetime | None
    released_at: datetime | None
    resource_id: int | None
    ranking: tuple[RankedEntry, ...]
    backfill_window: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class WindowRow(rows.WindowRow):
    """A window with its batches and its dispatcher requests, oldest request first, and the
    seconds its merge job took as the ledger observed it (`merge_seconds`; None before it merged).
    """

    requests: tuple[RequestRow, ...]
    merge_seconds: float | None = None


@dataclass(frozen=True)
class ResourceRow:
    """One unit of Spark capacity and the request holding its lease, if any."""

    id: int
    holder: int | None
    lease_expires: datetime | None
    fence: int


@dataclass(frozen=True)
class DispatcherRows:
    """The dispatcher's state: resources, open requests, grants since a time (newest first),
    the DAG of every request those grants ranked and which of them are a backfill's (ranked by
    their window's start, after every live one), and when each query was last served.
    """

    resources: tuple[ResourceRow, ...]
    open: tuple[RequestRow, ...]
    grants: tuple[RequestRow, ...]
    ranked_dags: dict[int, str]
    last_served: dict[str, datetime]
    ranked_backfills: frozenset[int] = frozenset()


def queries(session: Session) -> list[QueryRow]:
    """Every registered query, by DAG id."""
    return sorted((_query_row(q) for q in session.scalars(select(Query))), key=lambda q: q.dag_id)


def query_of_dag(session: Session, dag_id: str) -> QueryRow | None:
    """The query the DAG runs, if the ledger knows the DAG."""
    found = session.scalar(select(Query).where(Query.dag_id == dag_id))
    return None if found is None else _query_row(found)


def windows(session: Session, query: QueryRow, limit: int, before: datetime | None = None) -> list[WindowRow]:
    """The query's newest `limit` windows (starting before `before`, if given), newest first."""
    statement = select(Window).where(Window.query_id == query.id)
    if before is not None:
        statement = statement.where(Window.window_start < before)
    found = session.scalars(
        statement.options(selectinload(Window.batches)).order_by(Window.window_start.desc()).limit(limit)
    )
    return _window_rows(session, found, {query.id: query.dag_id})


def window(session: Session, query: QueryRow, window_id: int) -> WindowRow | None:
    """The query's window `window_id`, if it is one of the query's."""
    found = session.get(Window, window_id)
    if found is None or found.query_id != query.id:
        return None
    return _window_rows(session, [found], {query.id: query.dag_id})[0]


def window_of_run(session: Session, query: QueryRow, run_id: str) -> WindowRow | None:
    """The window a DAG run processes: the one recorded with its run id, else the one whose
    start the window timetable wrote into the run id.
    """
    statement = select(Window).where(Window.query_id == query.id)
    found = session.scalar(statement.where(Window.run_id == run_id).order_by(Window.id.desc()).limit(1))
    if found is None and (start := run_window_start(run_id)) is not None:
        found = session.scalar(statement.where(Window.window_start == start))
    return None if found is None else _window_rows(session, [found], {query.id: query.dag_id})[0]


def run_window_start(run_id: str) -> datetime | None:
    """The window start in a run id of the window timetable; None for any other run id."""
    match = _RUN_WINDOW.search(run_id)
    if match is None:
        return None
    try:
        start = datetime.fromisoformat(match["start"])
    except ValueError:
        return None
    return start if start.tzinfo is not None else None


def watched_windows(session: Session, query_rows: Iterable[QueryRow], since: datetime) -> list[WindowRow]:
    """Windows whose deadline is at or after `since`, and every window still open, of these queries."""
    dags = {q.id: q.dag_id for q in query_rows}
    found = session.scalars(
        select(Window)
        .where(
            Window.query_id.in_(dags),
            or_(Window.deadline >= since, Window.status.in_(OPEN_WINDOW_STATES)),
        )
        .options(selectinload(Window.batches))
        .order_by(Window.deadline.desc())
    )
    return _window_rows(session, found, dags)


def cost_model(session: Session, dag_id: str) -> LearnedCost | None:
    """The DAG's newest stored cost model, on the path its last job ran on: the one the plan
    uses (`runtime.costs.observe` saves a learning DAG's refit, or a declared file's model,
    after every job), with its residual spread. None before its first job or for a DAG the
    ledger does not know.
    """
    document = session.scalar(
        select(CostModel.document)
        .join(Query, Query.id == CostModel.query_id)
        .where(Query.dag_id == dag_id)
        .order_by(CostModel.fitted_at.desc(), CostModel.id.desc())
        .limit(1)
    )
    return None if document is None else LearnedCost.from_dict(document)


def dispatcher(session: Session, since: datetime) -> DispatcherRows:
    """Resources, open requests and the grants made since `since`."""
    resources = _resources(session)
    open_requests = _request_rows(session, DispatchRequest.state.in_(OPEN_REQUEST_STATES))
    grants = _request_rows(session, DispatchRequest.granted_at >= since)
    grants.sort(key=lambda r: (r.granted_at, r.id), reverse=True)
    named = {entry.request for grant in grants for entry in grant.ranking}
    ranked_dags, ranked_backfills = _dags_of_requests(session, named)
    queries_waiting = {r.query for r in open_requests if r.state == RequestState.WAITING}
    served = session.execute(
        select(DispatchRequest.query, func.max(DispatchRequest.granted_at))
        .where(DispatchRequest.query.in_(queries_waiting))
        .group_by(DispatchRequest.query)
    )
    last_served = {query: at for query, at in served if at is not None}
    return DispatcherRows(resources, tuple(open_requests), tuple(grants), ranked_dags, last_served, ranked_backfills)


@dataclass(frozen=True)
class OpenWork:
    """What forecasting needs, across every DAG: the open windows (earliest deadline first),
    the resources, when each DAG last got one, and each DAG's stored cost model (`cost_model`).
    """

    windows: tuple[WindowRow, ...]
    resources: tuple[ResourceRow, ...]
    last_served: dict[str, datetime]
    models: dict[str, LearnedCost | None]


def open_work(session: Session) -> OpenWork:
    """Every open window with its batches and requests, and what the dispatcher holds."""
    dags = _dags(session)
    found = list(
        session.scalars(
            select(Window)
            .where(Window.status.in_(OPEN_WINDOW_STATES))
            .options(selectinload(Window.batches))
            .order_by(Window.deadline, Window.id)
        )
    )
    served = session.execute(
        select(Window.query_id, func.max(DispatchRequest.granted_at))
        .join(Window, Window.id == DispatchRequest.window_id)
        .group_by(Window.query_id)
    )
    return OpenWork(
        windows=tuple(_window_rows(session, found, dags)),
        resources=_resources(session),
        last_served={dags[query_id]: at for query_id, at in served if at is not None},
        models={dags[query_id]: cost_model(session, dags[query_id]) for query_id in {w.query_id for w in found}},
    )


def _resources(session: Session) -> tuple[ResourceRow, ...]:
    return tuple(
        ResourceRow(r.id, r.holder_id, r.lease_expires, r.fence)
        for r in session.scalars(select(Resource).order_by(Resource.id))
    )


def _query_row(query: Query) -> QueryRow:
    return QueryRow(
        id=query.id,
        dag_id=query.dag_id,
        name=query.name,
        mode=Mode(query.mode),
        params=dict(query.params),
    )


def _dags(session: Session) -> dict[int, str]:
    return {q.id: q.dag_id for q in queries(session)}


def _window_rows(session: Session, found: Iterable[Window], dags: dict[int, str]) -> list[WindowRow]:
    listed = list(found)
    requests: dict[int, list[RequestRow]] = {w.id: [] for w in listed}
    if listed:
        for request in _request_rows(session, DispatchRequest.window_id.in_(requests), dags):
            requests[request.window_id].append(request)
    merges = merge_seconds(session, listed)
    return [
        WindowRow(**vars(rows.window_row(w)), requests=tuple(requests[w.id]), merge_seconds=merges.get(w.id))
        for w in listed
    ]


MERGE_RECORDED_WITHIN = timedelta(minutes=1)  # of the finish: the merge task records both at once


def merge_seconds(session: Session, windows: Collection[Window]) -> dict[int, float]:
    """Each merged window's merge job seconds, by window id: its DAG's merge observation, which the
    merge task records right after the window's finish (`operators.merge`), so the first one at
    or after the finish. It is the job alone, what a cost model's merge is fitted to and predicts;
    the time from the merge's grant to the finish also counts the merge task's start (a grant made
    as the last batch ends comes before the task runs: 3.3 s against a 1.8 s job in a demo) and
    the publish.
    """
    ends = {w.id: (w.query_id, w.actual_finish) for w in windows if w.actual_finish is not None}
    if not ends:
        return {}
    found = session.execute(
        select(CostObservation.query_id, CostObservation.observed_at, CostObservation.seconds)
        .where(
            CostObservation.query_id.in_({query_id for query_id, _ in ends.values()}),
            CostObservation.kind == JobKind.MERGE,
            CostObservation.observed_at >= min(end for _, end in ends.values()),
            CostObservation.observed_at < max(end for _, end in ends.values()) + MERGE_RECORDED_WITHIN,
        )
        .order_by(CostObservation.observed_at, CostObservation.id)
    ).all()
    seconds = {}
    for window_id, (query_id, end) in ends.items():
        until = end + MERGE_RECORDED_WITHIN
        within = (o.seconds for o in found if o.query_id == query_id and end <= o.observed_at < until)
        if (first := next(within, None)) is not None:
            seconds[window_id] = first
    return seconds


def _request_rows(session: Session, where: Any, dags: dict[int, str] | None = None) -> list[RequestRow]:
    rows = session.execute(
        select(DispatchRequest, Window.query_id, Window.backfill, Window.window_start)
        .join(Window, Window.id == DispatchRequest.window_id)
        .where(where)
        .order_by(DispatchRequest.registered_at, DispatchRequest.id)
    ).all()
    if dags is None or any(query_id not in dags for _, query_id, _, _ in rows):
        dags = _dags(session)
    return [
        RequestRow(
            id=r.id,
            window_id=r.window_id,
            dag_id=dags[query_id],
            query=r.query,
            kind=JobKind(r.kind),
            slot=r.slot,
            reason=r.reason,
            state=RequestState(r.state),
            deadline=r.deadline,
            remaining_cost=r.remaining_cost,
            registered_at=r.registered_at,
            granted_at=r.granted_at,
            released_at=r.released_at,
            resource_id=r.resource_id,
            ranking=tuple(RankedEntry.read(entry) for entry in r.ranking or ()),
            backfill_window=window_start if backfill else None,
        )
        for r, query_id, backfill, window_start in rows
    ]


def _dags_of_requests(session: Session, ids: Collection[int]) -> tuple[dict[int, str], frozenset[int]]:
    """The DAG of each request, and the requests that are a backfill's."""
    if not ids:
        return {}, frozenset()
    dags = _dags(session)
    rows = session.execute(
        select(DispatchRequest.id, Window.query_id, Window.backfill)
        .join(Window, Window.id == DispatchRequest.window_id)
        .where(DispatchRequest.id.in_(ids))
    ).all()
    return {request: dags[query_id] for request, query_id, _ in rows}, frozenset(r for r, _, b in rows if b)
