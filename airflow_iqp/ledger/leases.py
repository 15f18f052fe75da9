"""The executors the lease controller held: recorded as it sees them come and go, read back as
cores over time (the capacity view's "leased", the live benchmark's bill).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import or_, select

from airflow_iqp.ledger.models import ExecutorLease

if TYPE_CHECKING:
    from collections.abc import Mapping
    from datetime import datetime

    from sqlalchemy.orm import Session


@dataclass(frozen=True)
class Held:
    """One executor's cores from `start` to `end` (None: still held)."""

    cores: int
    start: datetime
    end: datetime | None


def record(session: Session, application: str, started: Mapping[str, datetime], now: datetime) -> None:
    """The application's running one-core executors as of `now` (each with its registration
    time): new ones recorded, those no longer running released at `now`.
    """
    unreleased = {
        lease.executor: lease
        for lease in session.scalars(
            select(ExecutorLease).where(ExecutorLease.application == application, ExecutorLease.released_at.is_(None))
        )
    }
    known = set(
        session.scalars(
            select(ExecutorLease.executor).where(
                ExecutorLease.application == application, ExecutorLease.executor.in_(list(started))
            )
        )
    )
    for executor, at in started.items():
        if executor not in known:
            session.add(ExecutorLease(application=application, executor=executor, cores=1, started_at=at))
    for executor, lease in unreleased.items():
        if executor not in started:
            lease.released_at = now


def held(session: Session, since: datetime, now: datetime) -> list[Held]:
    """Every executor lease started before `now` and not released before `since`, in start order."""
    rows = session.scalars(
        select(ExecutorLease)
        .where(
            ExecutorLease.started_at < now,
            or_(ExecutorLease.released_at.is_(None), ExecutorLease.released_at > since),
        )
        .order_by(ExecutorLease.started_at, ExecutorLease.id)
    )
    return [Held(lease.cores, lease.started_at, lease.released_at) for lease in rows]
