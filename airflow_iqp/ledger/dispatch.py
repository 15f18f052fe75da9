"""The dispatcher: batches and merges of every IQP DAG queue here for the shared Spark resource.

A grant is one transaction: it reclaims expired leases, ranks the waiting requests with the
configured policy (dynamic/dispatch.py) and hands each free resource to the best one. Two
compare-and-set updates make it safe under concurrency on PostgreSQL (READ COMMITTED) and
SQLite alike: the resource row moves only from the fence it was read at, and the request only
from `waiting`; a lost race rolls back to a savepoint and grants nothing twice.

Leases expire unless their holder heartbeats, so a dead worker's resource comes back. The
grant can run in any task (after it registers, after it releases); triggers call only the
read-only `would_grant` to learn whether their task should come back and dispatch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from sqlalchemy import Row, func, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError

from airflow_iqp.dynamic.dispatch import Candidate, best_first
from airflow_iqp.dynamic.policies import check_policy
from airflow_iqp.ledger.models import OPEN_REQUEST_STATES, DispatchRequest, Resource

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

RESOURCE_TAKEN, REQUEST_TAKEN = "resource taken", "request taken"


@dataclass(frozen=True)
class Lease:
    """The right to run one job on `resource`, as long as `fence` is still the resource's."""

    request: int
    resource: int
    fence: int
    expires: datetime


@dataclass(frozen=True)
class RequestStatus:
    id: int
    state: str
    lease: Lease | None


def register(
    session: Session,
    *,
    window_id: int,
    query: str,
    kind: str,
    slot: int,
    reason: str,
    deadline: datetime,
    remaining_cost: float,
    lease_seconds: float,
    now: datetime,
) -> int | None:
    """Queue a request and return its id. A window has one open request at a time: if this
    slot already has it (a resumed or retried task), its id comes back; if another slot has
    it, None (wait until it is released).
    """
    if not lease_seconds > 0:
        raise ValueError(f"lease_seconds must be > 0, got {lease_seconds!r}")
    if (found := _open_request(session, window_id)) is not None:
        return found.id if (found.slot, found.kind) == (slot, kind) else None
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
                state="waiting",
                registered_at=now,
            )
            session.add(request)
        return request.id
    except IntegrityError:  # another slot registered first
        found = _open_request(session, window_id)
        return found.id if found is not None and (found.slot, found.kind) == (slot, kind) else None


def grant(session: Session, *, policy: str, resources: int, now: datetime) -> list[Lease]:
    """Hand every free (or expired) resource to the best waiting request; returns the grants."""
    check_policy(policy)
    _ensure_resources(session, resources)
    free, ranked = _choices(session, policy, resources, now)
    leases: list[Lease] = []
    for resource in free:
        while ranked:
            candidate = ranked.pop(0)
            taken = _take(session, policy, resource, candidate, ranked, now)
            if isinstance(taken, Lease):
                leases.append(taken)
                break
            if taken == RESOURCE_TAKEN:  # someone else granted this resource meanwhile
                ranked.insert(0, candidate)
                break
    return leases


def would_grant(session: Session, *, policy: str, resources: int, now: datetime) -> list[int]:
    """Read-only: the requests `grant` would serve now, best first."""
    check_policy(policy)
    _check_resources(resources)
    free, ranked = _choices(session, policy, resources, now, missing_are_free=True)
    return [c.request for c in ranked[: len(free)]]


def heartbeat(session: Session, lease: Lease, now: datetime) -> Lease | None:
    """Extend the lease; None if it was lost (expired and granted to someone else)."""
    seconds = session.scalar(select(DispatchRequest.lease_seconds).where(DispatchRequest.id == lease.request))
    if seconds is None:
        return None
    expires = now + timedelta(seconds=seconds)
    moved = session.execute(
        update(Resource)
        .where(Resource.id == lease.resource, Resource.fence == lease.fence, Resource.holder_id == lease.request)
        .values(lease_expires=expires)
    ).rowcount
    return Lease(lease.request, lease.resource, lease.fence, expires) if moved else None


def release(session: Session, lease: Lease, now: datetime) -> bool:
    """Give the resource back; False if the lease had already been lost."""
    freed = session.execute(
        update(Resource)
        .where(Resource.id == lease.resource, Resource.fence == lease.fence, Resource.holder_id == lease.request)
        .values(holder_id=None, lease_expires=None)
    ).rowcount
    session.execute(
        update(DispatchRequest)
        .where(DispatchRequest.id == lease.request, DispatchRequest.state == "granted")
        .values(state="released", released_at=now)
    )
    return bool(freed)


def status(session: Session, request_id: int) -> RequestStatus:
    row = session.execute(
        select(DispatchRequest.state, DispatchRequest.resource_id, DispatchRequest.fence, Resource.lease_expires)
        .outerjoin(Resource, Resource.id == DispatchRequest.resource_id)
        .where(DispatchRequest.id == request_id)
    ).one_or_none()
    if row is None:
        raise ValueError(f"no dispatch request {request_id} in the ledger")
    state, resource, fence, expires = row
    lease = Lease(request_id, resource, fence, expires) if state == "granted" else None
    return RequestStatus(request_id, state, lease)


def _open_request(session: Session, window_id: int) -> DispatchRequest | None:
    return session.scalar(
        select(DispatchRequest).where(
            DispatchRequest.window_id == window_id, DispatchRequest.state.in_(OPEN_REQUEST_STATES)
        )
    )


def _ensure_resources(session: Session, resources: int) -> None:
    """Rows for resources 0..n-1; concurrent callers may race to insert them, which is harmless."""
    _check_resources(resources)
    dialect = session.get_bind().dialect.name
    insert = {"postgresql": postgresql.insert, "sqlite": sqlite.insert}[dialect]
    session.execute(insert(Resource).values([{"id": i, "fence": 0} for i in range(resources)]).on_conflict_do_nothing())


def _check_resources(resources: int) -> None:
    if resources < 1:
        raise ValueError(f"resources must be >= 1, got {resources!r}")


def _choices(
    session: Session, policy: str, resources: int, now: datetime, missing_are_free: bool = False
) -> tuple[list[Row], list[Candidate]]:
    rows = session.execute(
        select(Resource.id, Resource.holder_id, Resource.fence)
        .where(Resource.id < resources, or_(Resource.holder_id.is_(None), Resource.lease_expires < now))
        .order_by(Resource.id)
    ).all()
    if missing_are_free:
        known = set(session.scalars(select(Resource.id).where(Resource.id < resources)))
        rows += [(i, None, 0) for i in range(resources) if i not in known]
    if not rows:
        return [], []
    waiting = session.execute(
        select(
            DispatchRequest.id,
            DispatchRequest.query,
            DispatchRequest.deadline,
            DispatchRequest.remaining_cost,
            DispatchRequest.registered_at,
        ).where(DispatchRequest.state == "waiting")
    ).all()
    last_served = _last_served(session, {r.query for r in waiting}) if policy == "rr" and waiting else {}
    candidates = [
        Candidate(
            request=r.id,
            query=r.query,
            deadline=r.deadline.timestamp(),
            remaining=r.remaining_cost,
            registered=r.registered_at.timestamp(),
            last_served=served.timestamp() if (served := last_served.get(r.query)) else -math.inf,
        )
        for r in waiting
    ]
    return list(rows), best_first(policy, candidates, now.timestamp())


def _take(
    session: Session, policy: str, resource: Row, chosen: Candidate, others: list[Candidate], now: datetime
) -> Lease | str:
    """Move `resource` to `chosen` in a savepoint; on a lost race nothing changes and the
    answer says which row moved under us.
    """
    resource_id, old_holder, old_fence = resource
    seconds = session.scalar(select(DispatchRequest.lease_seconds).where(DispatchRequest.id == chosen.request))
    if seconds is None:
        return REQUEST_TAKEN
    fence, expires = old_fence + 1, now + timedelta(seconds=seconds)
    savepoint = session.begin_nested()
    # Still free or expired, too: a heartbeat changes no fence, and one that committed after our
    # read must keep its lease (on PostgreSQL the update re-checks this on the newest row).
    still_free = or_(Resource.holder_id.is_(None), Resource.lease_expires < now)
    taken = session.execute(
        update(Resource)
        .where(Resource.id == resource_id, Resource.fence == old_fence, still_free)
        .values(holder_id=chosen.request, lease_expires=expires, fence=fence)
    ).rowcount
    if not taken:
        savepoint.rollback()
        return RESOURCE_TAKEN
    ranking = [[c.request, c.query, _finite(c.key(policy, now.timestamp())[0])] for c in [chosen, *others]]
    granted = session.execute(
        update(DispatchRequest)
        .where(DispatchRequest.id == chosen.request, DispatchRequest.state == "waiting")
        .values(state="granted", granted_at=now, resource_id=resource_id, fence=fence, ranking=ranking)
    ).rowcount
    if not granted:
        savepoint.rollback()
        return REQUEST_TAKEN
    if old_holder is not None:  # an expired lease: its holder lost it
        session.execute(
            update(DispatchRequest)
            .where(
                DispatchRequest.id == old_holder, DispatchRequest.state == "granted", DispatchRequest.fence == old_fence
            )
            .values(state="expired", released_at=now)
        )
    savepoint.commit()
    return Lease(chosen.request, resource_id, fence, expires)


def _last_served(session: Session, queries: set[str]) -> dict[str, datetime]:
    """Round robin's memory: when each waiting query last got a resource."""
    return dict(
        session.execute(
            select(DispatchRequest.query, func.max(DispatchRequest.granted_at))
            .where(DispatchRequest.query.in_(queries))
            .group_by(DispatchRequest.query)
        ).all()
    )


def _finite(value: float) -> float | None:
    """JSON has no infinity (round robin's never-served query)."""
    return value if math.isfinite(value) else None
