"""The paper's backward planner (Section 3.1) with the final-aggregation iteration.

Every batch is placed as late as possible (ALAP), newest tuples first: the last batch takes as
many tuples as fit between the window end and the deadline less the merge, the batch before it
as many as fit before that one starts, and so on. The paper's text pins the last batch at the
window end and moves each next deadline to the release time instead; that reading wastes the
slack left by integer batch sizes (see shared/reference/paper-reference.md).
"""

from __future__ import annotations

from airflow_iqp.planning.plan import Batch, Plan
from airflow_iqp.planning.window import Window, latest_start


def backward(window: Window, bound: float) -> list[Batch] | None:
    """Fewest batches that all end by `bound`, each as late as possible; None if none exist."""
    batches: list[Batch] = []
    pending = window.total
    while pending > 0:
        ready = window.ready(pending)
        seconds = window.cost.cost(pending)
        start = latest_start(bound, seconds)
        if start >= ready:
            size = pending
        else:
            size = min(window.cost.max_tuples(bound - ready), pending - 1)
            seconds = window.cost.cost(size)
            start = latest_start(bound, seconds)
            while size > 0 and start < ready:  # rounding of bound - ready can overshoot by one
                size -= 1
                seconds = window.cost.cost(size)
                start = latest_start(bound, seconds)
            if size <= 0:
                return None
        batches.append(Batch(pending - size + 1, size, window.arrival.time_of(pending), start, seconds))
        pending -= size
        bound = start
    return batches[::-1]


def plan_greedy(window: Window, deadline: float) -> list[Batch] | None:
    """Backward planning against D - agg(k), raising k until the merge it assumed is enough."""
    if window.single_batch_finish() <= deadline:
        return backward(window, deadline)
    assumed = 2
    while True:
        batches = backward(window, window.batches_bound(deadline, assumed))
        if batches is None:
            return None
        if window.agg(len(batches)) <= window.agg(assumed):
            return batches
        assumed = len(batches)


def greedy_plan(window: Window, deadline: float) -> Plan | None:
    batches = plan_greedy(window, deadline)
    return None if batches is None else window.plan(batches, deadline, "greedy")


__all__ = ["backward", "plan_greedy", "greedy_plan", "Plan"]
