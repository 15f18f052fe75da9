"""Retention: drop the per-file rows of old merged windows, keep everything a window's outcome is.

`stream_files` holds a row for every file a batch froze and every event about a file (late,
rewritten, quarantined): a year of files is a year of rows. Once a window is merged and no file
can land for it any more, those rows are only history: `prune` drops them for the merged windows
that ended before a cutoff, and the events recorded before it on windows that never ran. It keeps
the queries, windows (outcome, late-file counts, result), batches (their file lists, counts the
monitor and the learned rate read, and costs), results, cost observations and models, and the
dispatcher's requests.

Safe only where nothing asks the ledger about those files again: `late_files` looks back over
the streams' horizon only (`FileStream.history`, `InputSpec.recent_units`), so a cutoff must lie
beyond every pruned DAG's horizon, or a pruned file would be taken for a new late one. `prune`
refuses a cutoff inside one, saying what to set, and drops nothing then.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from sqlalchemy import delete, func, select

from airflow_iqp.constants import WindowStatus
from airflow_iqp.exceptions import IqpError
from airflow_iqp.ledger.models import Query, StreamFile, Window

if TYPE_CHECKING:
    from collections.abc import Iterable
    from datetime import datetime

    from sqlalchemy.orm import Session


class PruneRefused(IqpError, ValueError):
    """The cutoff lies inside a DAG's horizon: its pruned files could come back as late ones."""


@dataclass(frozen=True)
class Retention:
    """How long after a window's end a DAG's files may still land (None: any time), and which
    declaration says so, for the refusal to name.
    """

    dag_id: str
    horizon: timedelta | None
    declared_by: str


@dataclass(frozen=True)
class Pruned:
    """What `prune` dropped of one DAG: file rows by status, over how many windows, up to when."""

    dag_id: str
    rows: dict[str, int]
    windows: int
    cutoff: datetime

    @property
    def total(self) -> int:
        """Every row dropped."""
        return sum(self.rows.values())


@dataclass(frozen=True)
class PruneReport:
    """What `prune` dropped, per DAG, and the ledger's DAGs it left alone (no retention given)."""

    pruned: list[Pruned]
    left: list[str]


def prune(session: Session, retentions: Iterable[Retention], older_than: timedelta, now: datetime) -> PruneReport:
    """Drop the file rows of each DAG's merged windows that ended `older_than` before `now` or
    earlier, and of its events on no window recorded by then. Refuses (PruneRefused, nothing
    dropped) if `older_than` is shorter than a DAG's horizon, or the DAG has none. Only the DAGs
    given a retention are pruned.
    """
    retentions = sorted(retentions, key=lambda r: r.dag_id)
    if inside := [r for r in retentions if r.horizon is None or older_than < r.horizon]:
        raise PruneRefused(_refusal(inside, older_than))
    cutoff = now - older_than
    given = {r.dag_id for r in retentions}
    ids = dict(session.execute(select(Query.dag_id, Query.id).order_by(Query.dag_id)).all())
    return PruneReport(
        pruned=[_prune_query(session, dag_id, query_id, cutoff) for dag_id, query_id in ids.items() if dag_id in given],
        left=[dag_id for dag_id in ids if dag_id not in given],
    )


def _prune_query(session: Session, dag_id: str, query_id: int, cutoff: datetime) -> Pruned:
    old_windows = select(Window.id).where(
        Window.query_id == query_id, Window.status == WindowStatus.MERGED, Window.window_end <= cutoff
    )
    on_old_window = StreamFile.window_id.in_(old_windows)
    on_no_window = StreamFile.window_id.is_(None) & (StreamFile.recorded_at <= cutoff)
    dropped = (StreamFile.query_id == query_id) & (on_old_window | on_no_window)
    counted = session.execute(select(StreamFile.status, func.count()).where(dropped).group_by(StreamFile.status))
    rows = {str(status): int(n) for status, n in sorted(counted.all())}
    windows = session.scalar(select(func.count(func.distinct(StreamFile.window_id))).where(dropped)) or 0
    session.execute(delete(StreamFile).where(dropped), execution_options={"synchronize_session": False})
    return Pruned(dag_id, rows, windows, cutoff)


def _refusal(inside: list[Retention], older_than: timedelta) -> str:
    reasons = []
    for r in inside:
        if r.horizon is None:
            reasons.append(
                f"{r.dag_id}: {r.declared_by}, so late_files looks for late files in every window; declare "
                "FileStream(history=...) on its streams (how long after a window's end its files may still land)"
            )
        else:
            reasons.append(
                f"{r.dag_id}: files may land up to {_days(r.horizon)} after a window's end ({r.declared_by}); pass "
                f"--older-than {_days(r.horizon)} or more, or declare a shorter history="
            )
    return (
        f"--older-than {_days(older_than)} would drop files that late_files still looks at, which would then count "
        f"as new late files. {'; '.join(reasons)}. Nothing was dropped."
    )


def _days(span: timedelta) -> str:
    """A span as `iqp db prune --older-than` reads it, rounded up to whole hours."""
    hours = math.ceil(span / timedelta(hours=1))
    return f"{hours // 24}d" if hours % 24 == 0 else f"{hours}h"
