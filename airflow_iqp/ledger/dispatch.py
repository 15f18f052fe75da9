"""The dispatcher: batches and merges of every IQP DAG queue here for the shared Spark resource.

A grant is one transaction: it reclaims expired leases, ranks the waiting requests with the
configured policy (dynamic/dispatch.py) and hands each free resource to the best one. Two
compare-and-set updates make it safe under concurrency on PostgreSQL (READ COMMITTED) and
SQLite alike: the resource row moves only from the fence it was read at, and the request only
from `waiting`; a lost race rolls back to a savepoint and grants nothing twice.

Leases expire unless their holder heartbeats, so a dead worker's resource comes back. A grant's
first term also waits `resume_seconds` for its task to take it: a task deferred in the
triggerer comes back through the scheduler and a new process, which can take longer than a
lease; once taken, the lease runs `lease_seconds` from its last heartbeat. The
grant can run in any task (after it registers, after it releases); triggers call only the
read-only `would_grant` to learn whether their task should come back and dispatch.

Under EDF and LLF on one resource a grant may insert idle time (`dynamic.dispatch.inserted_idle`):
a request whose job would make a static batch of an earlier deadline, about to be released,
miss that deadline is passed over while it has the laxity to go after it; the grant records why
on the request (`held`) and in the log, and `would_grant` answers the same.

A grant gives its job cores, not just a slot: `grant(cores=...)` (the capacity plan's count
when one is given) is kept on the request and carried by the lease, and the job runs on that
many (`spark.submit`); with none, the Spark connection's default applies.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import Enum
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from sqlalchemy import CursorResult, case, func, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError

from airflow_iqp.constants import OPEN_REQUEST_STATES, BatchReason, JobKind, Policy, RequestState
from airflow_iqp.dynamic.dispatch import Candidate, IdleTime, RankedEntry, best_first, inserted_idle
from airflow_iqp.dynamic.policies import check_policy
from airflow_iqp.exceptions import LedgerLookupError
from airflow_iqp.ledger import idle
from airflow_iqp.ledger.models import DispatchRequest, Resource, Window
from airflow_iqp.validation import number, whole_number

if TYPE_CHECKING:
    from sqlalchemy import ColumnElement, Executable
    from sqlalchemy.orm import Session

log = logging.getLogger(__name__)
IDLING_POLICIES = (Policy.EDF, Policy.LLF)  # the deadline policies; one resource, as the paper's


class Lost(Enum):
    """Which row moved under a grant that lost a race."""

    RESOURCE = "resource taken"
    REQUEST = "request taken"


class _Free(NamedTuple):
    """A resource that may be granted: free, or its lease expired."""

    id: int
    holder: int | None
    fence: int


@dataclass(frozen=True)
class Lease:
    """The right to run one job on `resource`, as long as `fence` is still the resource's, on
    `cores` cores (None: as many as the Spark connection gives by default).
    """

    request: int
    resource: int
    fence: int
    expires: datetime
    cores: int | None = None


@dataclass(frozen=True)
class RequestStatus:
    """A request's state, and its lease while it is granted."""

    id: int
    state: RequestState
    lease: Lease | None


def _changed(session: Session, statement: Executable) -> int:
    """Rows an UPDATE changed: the compare-and-set's answer."""
    return cast("CursorResult[Any]", session.execute(statement)).rowcount


def register(
    session: Session,
    *,
    window_id: int,
    query: str,
    kind: JobKind,
    slot: int,
    reason: BatchReason,
    deadline: datetime,
    remaining_cost: float,
    lease_seconds: float,
    now: datetime,
    resume_seconds: float = 0.0,
) -> int | None:
    """Queue a request and return its id. A window has one open request at a time: if this
    slot already has it (a resumed or retried task), its id comes back; if another slot has
    it, None (wait until it is released). Its grant waits `resume_seconds` more than a lease
    for its task to take it: none for a request queued before its task runs (a follow-up: the
    task may wait long for a slot, and a grant would hold the resource idle all that time),
    which its task's own registration then sets.
    """
    number(lease_seconds, "lease_seconds", above=0)
    number(resume_seconds, "resume_seconds", minimum=0)
    if (found := _open_request(session, window_id)) is not None:
        if (found.slot, found.kind) != (slot, kind):
            return None
        found.resume_seconds = resume_seconds  # queued for it before it ran: its task is here now
        return found.id
    try:
        with session.begin_nested():
            request = DispatchRequest(
                window_id=window_id,
                query=query,
                kind=kind,
                slot=slot,
                reason=reason,
                deadline=deadline,
                remaining_cost=remaining_cost,
                lease_seconds=lease_seconds,
                resume_seconds=resume_seconds,
                state=RequestState.WAITING,
                registered_at=now,
            )
            session.add(request)
        return request.id
    except IntegrityError:  # another slot registered first
        found = _open_request(session, window_id)
        return found.id if found is not None and (found.slot, found.kind) == (slot, kind) else None


def grant(session: Session, *, policy: str, resources: int, now: datetime, cores: int | None = None) -> list[Lease]:
    """Hand every free (or expired) resource to the best waiting request, each with `cores`
    cores (None: the connection's default); returns the grants.
    """
    chosen = check_policy(policy)
    if cores is not None:
        whole_number(cores, "cores", minimum=1)
    _ensure_resources(session, resources)
    free, ranked, held = _choices(session, chosen, resources, now)
    for hold in held:
        log.info("request %d held back: %s", hold.passed_over.request, hold.reason)
        session.execute(
            update(DispatchRequest)
            .where(DispatchRequest.id == hold.passed_over.request, DispatchRequest.state == RequestState.WAITING)
            .values(held=hold.reason)
        )
    leases: list[Lease] = []
    for resource in free:
        while ranked:
            candidate = ranked.pop(0)
            taken = _take(session, chosen, resource, candidate, ranked, now, cores)
            if isinstance(taken, Lease):
                leases.append(taken)
                break
            if taken is Lost.RESOURCE:  # someone else granted this resource meanwhile
                ranked.insert(0, candidate)
                break
    return leases


def would_grant(session: Session, *, policy: str, resources: int, now: datetime) -> list[int]:
    """Read-only: the requests `grant` would serve now, best first."""
    chosen = check_policy(policy)
    _check_resources(resources)
    free, ranked, _ = _choices(session, chosen, resources, now, missing_are_free=True)
    return [c.request for c in ranked[: len(free)]]


def heartbeat(session: Session, lease: Lease, now: datetime) -> Lease | None:
    """Extend the lease; None if it was lost (expired and granted to someone else)."""
    return _extend(session, lease, now)


def take(session: Session, lease: Lease, attempt: str, now: datetime) -> Lease | None:
    """Mark the request as run by `attempt` (a task try) and start its lease's term from now
    (the grant's first term also waited for the task's resume); None if another attempt runs it
    under a live lease. A retry comes back to the request of the attempt before it, which Airflow
    may have failed while it still ran (apache/airflow#71580): it must not run the job a second
    time under the same lease. Once that lease has expired, the retry takes it over; a request
    no longer granted is the lease keeper's to report lost (the lease comes back unchanged).
    """
    expired = (
        select(Resource.id)
        .where(Resource.id == lease.resource, Resource.fence == lease.fence, Resource.lease_expires < now)
        .exists()
    )
    taken = _changed(
        session,
        update(DispatchRequest)
        .where(
            DispatchRequest.id == lease.request,
            or_(
                DispatchRequest.state != RequestState.GRANTED,
                DispatchRequest.taken_by.is_(None),
                DispatchRequest.taken_by == attempt,
                expired,
            ),
        )
        .values(taken_by=attempt),
    )
    if not taken:
        return None
    return _extend(session, lease, now) or lease


def confirm(session: Session, lease: Lease, now: datetime) -> Lease | None:
    """Extend the lease only while it is live (same holder and fence, not expired): the check a
    job makes right before committing its output. Unlike `heartbeat`, an expired lease nobody
    has reclaimed yet is not revived, so no output is committed after the lease ran out; and
    since a grant reclaims only expired leases, a confirmed one cannot move for `lease_seconds`.
    """
    return _extend(session, lease, now, Resource.lease_expires >= now)


def _extend(session: Session, lease: Lease, now: datetime, *also: ColumnElement[bool]) -> Lease | None:
    """The lease `lease_seconds` from now, if its resource still has this holder and fence (and
    whatever `also` asks); None if it was lost.
    """
    seconds = session.scalar(select(DispatchRequest.lease_seconds).where(DispatchRequest.id == lease.request))
    if seconds is None:
        return None
    expires = now + timedelta(seconds=seconds)
    held = (Resource.id == lease.resource, Resource.fence == lease.fence, Resource.holder_id == lease.request)
    moved = _changed(session, update(Resource).where(*held, *also).values(lease_expires=expires))
    return replace(lease, expires=expires) if moved else None


def release(session: Session, lease: Lease, now: datetime) -> bool:
    """Give the resource back; False if the lease had already been lost."""
    freed = _changed(
        session,
        update(Resource)
        .where(Resource.id == lease.resource, Resource.fence == lease.fence, Resource.holder_id == lease.request)
        .values(holder_id=None, lease_expires=None),
    )
    session.execute(
        update(DispatchRequest)
        .where(DispatchRequest.id == lease.request, DispatchRequest.state == RequestState.GRANTED)
        .values(state=RequestState.RELEASED, released_at=now)
    )
    return bool(freed)


def status(session: Session, request_id: int) -> RequestStatus:
    """Where a request stands; LedgerLookupError if the ledger has no such request."""
    row = session.execute(
        select(
            DispatchRequest.state,
            DispatchRequest.resource_id,
            DispatchRequest.fence,
            Resource.lease_expires,
            DispatchRequest.cores,
        )
        .outerjoin(Resource, Resource.id == DispatchRequest.resource_id)
        .where(DispatchRequest.id == request_id)
    ).one_or_none()
    if row is None:
        raise LedgerLookupError("dispatch request", request_id)
    state, resource, fence, expires, cores = row
    lease = None
    if state == RequestState.GRANTED and resource is not None and fence is not None and expires is not None:
        lease = Lease(request_id, resource, fence, expires, cores)
    return RequestStatus(request_id, RequestState(state), lease)


def _open_request(session: Session, window_id: int) -> DispatchRequest | None:
    return session.scalar(
        select(DispatchRequest).where(
            DispatchRequest.window_id == window_id, DispatchRequest.state.in_(OPEN_REQUEST_STATES)
        )
    )


def _ensure_resources(session: Session, resources: int) -> None:
    """Rows for resources 0..n-1; concurrent callers may race to insert them, which is harmless."""
    _check_resources(resources)
    rows = [{"id": i, "fence": 0} for i in range(resources)]
    if session.get_bind().dialect.name == "postgresql":
        session.execute(postgresql.insert(Resource).values(rows).on_conflict_do_nothing())
    else:  # the ledger runs on PostgreSQL or SQLite
        session.execute(sqlite.insert(Resource).values(rows).on_conflict_do_nothing())


def _check_resources(resources: int) -> None:
    whole_number(resources, "resources", minimum=1)


def _choices(
    session: Session, policy: Policy, resources: int, now: datetime, missing_are_free: bool = False
) -> tuple[list[_Free], list[Candidate], list[IdleTime]]:
    """The resources that may be granted, the waiting requests best first that may have one,
    and why the others are held back (inserted idle time).
    """
    rows = [
        _Free(*row)
        for row in session.execute(
            select(Resource.id, Resource.holder_id, Resource.fence)
            .where(Resource.id < resources, or_(Resource.holder_id.is_(None), Resource.lease_expires < now))
            .order_by(Resource.id)
        )
    ]
    if missing_are_free:
        known = set(session.scalars(select(Resource.id).where(Resource.id < resources)))
        rows += [_Free(i, None, 0) for i in range(resources) if i not in known]
    if not rows:
        return [], [], []
    waiting = session.execute(
        select(
            DispatchRequest.id,
            DispatchRequest.query,
            DispatchRequest.deadline,
            DispatchRequest.remaining_cost,
            DispatchRequest.registered_at,
            case((Window.backfill, Window.window_start), else_=None).label("backfill_window"),
        )
        .join(Window, Window.id == DispatchRequest.window_id)
        .where(DispatchRequest.state == RequestState.WAITING)
    ).all()
    last_served = _last_served(session, {r.query for r in waiting}) if policy == Policy.RR and waiting else {}
    candidates = [Candidate.of_waiting(r, last_served.get(r.query)) for r in waiting]
    ranked = best_first(policy, candidates, now.timestamp())
    if policy not in IDLING_POLICIES or resources != 1 or not ranked:
        return rows, ranked, []
    held = _held(session, ranked, now)
    return rows, [c for c in ranked if c.request not in {h.passed_over.request for h in held}], held


def _held(session: Session, ranked: list[Candidate], now: datetime) -> list[IdleTime]:
    """The requests, best first, that would make an earlier deadline about to be released miss:
    each is held until one is not (which gets the resource) or all are (it stays idle).
    """
    seconds = idle.job_seconds(session, [c.request for c in ranked])
    soon = idle.upcoming(session, now, max(seconds.values(), default=0.0))
    held = []
    for candidate in ranked:
        hold = inserted_idle(candidate, seconds.get(candidate.request, 0.0), soon, now.timestamp())
        if hold is None:
            break
        held.append(hold)
    return held


def _take(
    session: Session,
    policy: Policy,
    resource: _Free,
    chosen: Candidate,
    others: list[Candidate],
    now: datetime,
    cores: int | None,
) -> Lease | Lost:
    """Move `resource` to `chosen` in a savepoint; on a lost race nothing changes and the
    answer says which row moved under us.
    """
    resource_id, old_holder, old_fence = resource
    terms = session.execute(
        select(DispatchRequest.lease_seconds, DispatchRequest.resume_seconds).where(
            DispatchRequest.id == chosen.request
        )
    ).one_or_none()
    if terms is None:
        return Lost.REQUEST
    seconds, resume = terms
    fence, expires = old_fence + 1, now + timedelta(seconds=seconds + (resume or 0.0))
    savepoint = session.begin_nested()
    # Still free or expired, too: a heartbeat changes no fence, and one that committed after our
    # read must keep its lease (on PostgreSQL the update re-checks this on the newest row).
    still_free = or_(Resource.holder_id.is_(None), Resource.lease_expires < now)
    taken = _changed(
        session,
        update(Resource)
        .where(Resource.id == resource_id, Resource.fence == old_fence, still_free)
        .values(holder_id=chosen.request, lease_expires=expires, fence=fence),
    )
    if not taken:
        savepoint.rollback()
        return Lost.RESOURCE
    ranking = [
        RankedEntry(c.request, c.query, _finite(c.key(policy, now.timestamp())[1])).stored() for c in [chosen, *others]
    ]
    granted = _changed(
        session,
        update(DispatchRequest)
        .where(DispatchRequest.id == chosen.request, DispatchRequest.state == RequestState.WAITING)
        .values(
            state=RequestState.GRANTED,
            granted_at=now,
            resource_id=resource_id,
            fence=fence,
            ranking=ranking,
            cores=cores,
        ),
    )
    if not granted:
        savepoint.rollback()
        return Lost.REQUEST
    if old_holder is not None:  # an expired lease: its holder lost it
        session.execute(
            update(DispatchRequest)
            .where(
                DispatchRequest.id == old_holder,
                DispatchRequest.state == RequestState.GRANTED,
                DispatchRequest.fence == old_fence,
            )
            .values(state=RequestState.EXPIRED, released_at=now)
        )
    savepoint.commit()
    return Lease(chosen.request, resource_id, fence, expires, cores)


def _last_served(session: Session, queries: set[str]) -> dict[str, datetime]:
    """Round robin's memory: when each waiting query last got a resource."""
    rows = session.execute(
        select(DispatchRequest.query, func.max(DispatchRequest.granted_at))
        .where(DispatchRequest.query.in_(queries))
        .group_by(DispatchRequest.query)
    )
    return {query: served for query, served in rows if served is not None}


def _finite(value: float) -> float | None:
    """JSON has no infinity (round robin's never-served query)."""
    return value if math.isfinite(value) else None
