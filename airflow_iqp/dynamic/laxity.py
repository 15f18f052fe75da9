"""Equation (9): how long a query can still wait before it must run to meet its deadline."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow_iqp.dynamic.state import QueryState
    from airflow_iqp.planning.cost import CostModel


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
    """Cost of the pending tuples in batches of `batch` (None: one batch) plus the final merge."""
    if state.all_processed:
        return state.agg(state.batches)
    pending = max(state.expected_total(now), state.arrived(now)) - state.processed
    return work_left(pending, batch, state.batches, state.cost, state.agg_cost)


def laxity(state: QueryState, now: float, batch: int | None) -> float:
    """D - now - remaining: negative means the deadline is already lost."""
    return state.deadline - now - remaining_cost(state, now, batch)
