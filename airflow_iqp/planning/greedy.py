"""The paper's backward planner (Section 3.1) with the final-aggregation iteration.

Every batch is placed as late as possible (ALAP), newest tuples first: the last batch takes as
many tuples as fit between the window end and the deadline less the merge, the batch before it
as many as fit before that one starts, and so on. The paper's text pins the last batch at the
window end and moves each next deadline to the release time instead; that reading wastes the
slack left by integer batch sizes (see shared/reference/paper-reference.md).

Filling the newest batch first is exact for linear cost, but a concave cost without a
per-batch overhead can make a large early batch the only way to finish in time (hypothesis
found 6 tuples at t=0, one at t=2.5, cost 1.5 s per tuple up to 5 and 0.75 s after). So when
the backward pass finds nothing, small windows get an exact earliest-finish search before the
deadline is declared unmeetable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_iqp.planning.plan import Batch
from airflow_iqp.planning.window import latest_start

if TYPE_CHECKING:
    from airflow_iqp.planning.window import Window


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


# Windows up to this many tuples are searched exactly when the backward pass fails: O(N^3).
EXACT_SEARCH_LIMIT = 64


def plan_greedy(window: Window, deadline: float) -> list[Batch] | None:
    """Backward planning against D - agg(k), raising k until the merge it assumed is enough."""
    if window.single_batch_finish() <= deadline:
        return backward(window, deadline)
    assumed = 2
    while True:
        batches = backward(window, window.batches_bound(deadline, assumed))
        if batches is None:
            return _exact_fallback(window, deadline)
        if window.agg(len(batches)) <= window.agg(assumed):
            return batches
        assumed = len(batches)


def _exact_fallback(window: Window, deadline: float) -> list[Batch] | None:
    if window.total > EXACT_SEARCH_LIMIT:
        return None
    for finish, sizes in earliest_finishes(window):
        if finish <= deadline:
            return window.schedule(sizes, deadline)
    return None


def earliest_finishes(window: Window) -> list[tuple[float, list[int]]]:
    """For each batch count k, the earliest finish (merge included) and the cut that gets it.

    finish[k][j] is the earliest end of the first j tuples in k batches; ending a prefix
    earlier never hurts what follows, so the recurrence over the last batch is exact.
    """
    n = window.total
    inf = float("inf")
    finish = [[inf] * (n + 1) for _ in range(n + 1)]
    cut = [[0] * (n + 1) for _ in range(n + 1)]
    finish[0][0] = -inf
    for k in range(1, n + 1):
        for j in range(k, n + 1):
            ready = window.ready(j)
            for i in range(k - 1, j):
                if finish[k - 1][i] < inf:
                    end = max(finish[k - 1][i], ready) + window.cost.cost(j - i)
                    if end < finish[k][j]:
                        finish[k][j], cut[k][j] = end, i
    results = []
    for k in range(1, n + 1):
        sizes, j = [], n
        for level in range(k, 0, -1):
            i = cut[level][j]
            sizes.append(j - i)
            j = i
        results.append((finish[k][n] + window.agg(k), sizes[::-1]))
    return results
