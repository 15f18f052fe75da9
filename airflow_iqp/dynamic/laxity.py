"""Equation (9): how long a query can still wait before it must run to meet its deadline."""

from __future__ import annotations

from airflow_iqp.dynamic.state import QueryState


def remaining_cost(state: QueryState, now: float, batch: int | None) -> float:
    """Cost of the pending tuples in batches of `batch` (None: one batch) plus the final merge.

    The merge is priced for the total number of partials, those done and those to come.
    """
    if state.all_processed:
        return state.agg(state.batches)
    pending = max(state.expected_total(now), state.arrived(now)) - state.processed
    pending = max(pending, 1)
    size = batch or pending
    full, rest = divmod(pending, size)
    return full * state.cost.cost(size) + state.cost.cost(rest) + state.agg(state.batches + full + (rest > 0))


def laxity(state: QueryState, now: float, batch: int | None) -> float:
    """D - now - remaining: negative means the deadline is already lost."""
    return state.deadline - now - remaining_cost(state, now, batch)
