"""When a query's next job may run (Section 4): enough input, slow input, a closed window, or
the last tuple in (the remainder is smaller than MinBatch).

`ready_job` says what may run now; `next_ready_time` says when that can next change, so the
simulator jumps over idle time instead of stepping through it; `ready_since` says when the job
that is ready now became ready, which is when a live slot would have asked for the resource.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_iqp.constants import BatchReason, JobKind
from airflow_iqp.dynamic.estimate import expected_time_of

if TYPE_CHECKING:
    from airflow_iqp.dynamic.state import QueryState


@dataclass(frozen=True)
class Job:
    """What a query would run if it got the resource now."""

    query: str
    kind: JobKind
    size: int  # tuples of a partial, partial results of a merge
    cost: float


def _slow_input_time(state: QueryState, now: float, batch: int) -> float:
    """When `batch` more tuples should have arrived at the nominal rate."""
    total = state.expected_total(now)
    return expected_time_of(state.processed + batch, total, state.arrival.first_arrival, state.window_end)


def ready_job(state: QueryState, now: float, min_batch: bool) -> Job | None:
    """The job the query would run if picked at `now`, or None if it must wait.

    Without MinBatch (the traditional baselines) any arrived tuple makes a batch. With an
    unknown total, MinBatch waits until a rate can be observed.
    """
    if state.done or now < state.submit_at:
        return None
    if state.all_processed:
        return Job(state.name, JobKind.MERGE, state.batches, state.agg(state.batches))
    waiting = state.arrived(now) - state.processed
    if waiting <= 0:
        return None
    if not min_batch:
        return Job(state.name, JobKind.PARTIAL, waiting, state.cost.cost(waiting))
    if not state.rate_known(now):
        return None
    batch = state.min_batch(now)
    reason = batch_reason(
        waiting=waiting,
        min_batch=batch,
        all_in=state.processed + waiting >= state.true_total,
        window_closed=now >= state.window_end,
        input_late=now >= _slow_input_time(state, now, batch),
    )
    if reason is None:
        return None
    size = min(batch, waiting)
    return Job(state.name, JobKind.PARTIAL, size, state.cost.cost(size))


def batch_reason(
    *, waiting: int, min_batch: int, all_in: bool, window_closed: bool, input_late: bool
) -> BatchReason | None:
    """Why `waiting` unprocessed tuples may run as a batch now, or None: MinBatch arrived, the
    last tuple is in, the window closed, or the input is late (Section 4.4: the time at which
    MinBatch should have arrived at the expected rate has passed, so waiting only burns slack).
    """
    if waiting <= 0:
        return None
    if waiting >= min_batch:
        return BatchReason.MIN_BATCH
    if all_in:
        return BatchReason.ALL_IN
    if window_closed:
        return BatchReason.WINDOW_CLOSED
    if input_late:
        return BatchReason.SLOW_INPUT
    return None


def next_ready_time(state: QueryState, now: float, min_batch: bool) -> float:
    """Earliest time at or after `now` at which `ready_job` may return a job (inf: never)."""
    if state.done:
        return math.inf
    if state.all_processed:
        return max(now, state.submit_at)
    any_tuple = max(state.arrival.time_of(state.processed + 1), state.submit_at, now)
    if not min_batch:
        return any_tuple
    if not state.rate_known(now):
        arrived = state.arrived(now)
        next_arrival = state.arrival.time_of(arrived + 1) if arrived < state.true_total else math.inf
        return max(min(next_arrival, state.window_end), any_tuple)
    batch = state.min_batch(now)
    full_batch = state.arrival.time_of(min(state.processed + batch, state.true_total))
    return min(
        max(full_batch, any_tuple),
        max(state.window_end, any_tuple),
        max(_slow_input_time(state, now, batch), any_tuple),
    )


def ready_since(state: QueryState, since: float, now: float, min_batch: bool) -> float:
    """When the job `ready_job` offers at `now` became ready: the first time from `since` on
    at which one was ready. `since` is when the query's progress last changed (its submission
    or the end of its last job), so nothing but the clock moves in between.
    """
    t = since
    while t < now and ready_job(state, t, min_batch) is None:
        t = min(next_ready_time(state, t, min_batch), now)  # strictly later while nothing is ready
    return t
