"""Equation (9): how long a query can still wait before it must run to meet its deadline, and
the remaining work it subtracts.

Remaining work has one meaning everywhere (the dispatcher's requests, the monitor's laxity,
the simulator's states): the predicted seconds of a window's work not done yet, its batches
not done plus its merge. `window_remaining` reads it from the ledger's batches;
`remaining_cost` prices it from a `QueryState`, where the batches to come are not cut yet.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from airflow_iqp.constants import CLOSED_WINDOW_STATES, BatchStatus, WindowStatus

if TYPE_CHECKING:
    from collections.abc import Iterable

    from airflow_iqp.dynamic.state import QueryState
    from airflow_iqp.planning.cost import CostModel

# A batch with no work left: done, or skipped (nothing of the window was left for it).
_NO_WORK_LEFT = (BatchStatus.DONE, BatchStatus.SKIPPED)
# A window whose merge ran (or that failed): nothing more is run for it.


class PlannedBatch(Protocol):
    """A batch as the ledger records it: where it stands and its predicted seconds."""

    @property
    def status(self) -> BatchStatus:
        """Where the batch stands."""

    @property
    def predicted_cost(self) -> float:
        """Seconds its job is predicted to take."""


def unfinished(batch: PlannedBatch) -> bool:
    """Whether the batch still has work: not done nor skipped. A running or failed batch still
    needs all its predicted seconds (a retry runs it again from the start).
    """
    return batch.status not in _NO_WORK_LEFT


def window_remaining(status: WindowStatus, batches: Iterable[PlannedBatch], merge: float) -> float:
    """Remaining work of a window: the predicted seconds of its unfinished batches plus its
    `merge`; none once the window is closed.
    """
    if status in CLOSED_WINDOW_STATES:
        return 0.0
    return sum(b.predicted_cost for b in batches if unfinished(b)) + merge


def work_left(pending: int, batch: int | None, batches_done: int, cost: CostModel, agg: CostModel | None) -> float:
    """Seconds to process `pending` tuples in batches of `batch` (None: one batch) and merge
    every partial, those done and those to come; a single partial needs no merge.
    """
    pending = max(pending, 1)
    size = batch or pending
    full, rest = divmod(pending, size)
    partials = batches_done + full + (rest > 0)
    merge = 0.0 if partials <= 1 or agg is None else agg.cost(partials)
    return full * cost.cost(size) + cost.cost(rest) + merge


def remaining_cost(state: QueryState, now: float, batch: int | None) -> float:
    """Remaining work of the query's window (as `window_remaining`): its pending tuples, priced
    in batches of `batch` (None: one batch), plus the final merge; the merge alone once every
    tuple is processed.
    """
    if state.all_processed:
        return state.agg(state.batches)
    pending = max(state.expected_total(now), state.arrived(now)) - state.processed
    return work_left(pending, batch, state.batches, state.cost, state.agg_cost)


def laxity(state: QueryState, now: float, batch: int | None) -> float:
    """D - now - remaining: negative means the deadline is already lost."""
    return state.deadline - now - remaining_cost(state, now, batch)
