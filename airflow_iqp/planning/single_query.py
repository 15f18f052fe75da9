"""plan_single_query: check the input, plan, and explain a deadline that cannot be met."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from airflow_iqp.planning.arrival import ArrivalCurve
from airflow_iqp.planning.greedy import EXACT_SEARCH_LIMIT, earliest_finishes, plan_greedy
from airflow_iqp.planning.optimizer import BatchOptimizer
from airflow_iqp.planning.plan import Batch, Plan
from airflow_iqp.planning.window import Window
from airflow_iqp.validation import number, whole_number

if TYPE_CHECKING:
    from airflow_iqp.planning.cost import CostModel

METHODS = ("greedy", "mip")


def _check(total: int, arrival: ArrivalCurve, window_end: float, deadline: float, method: str) -> int:
    total = whole_number(total, "total", minimum=0)
    if not isinstance(arrival, ArrivalCurve):
        raise ValueError(f"arrival must be an ArrivalCurve, got {type(arrival).__name__}")
    if total > arrival.total:
        raise ValueError(f"total ({total}) is more than the arrival curve delivers ({arrival.total})")
    number(window_end, "window_end")
    deadline = number(deadline, "deadline")
    if total and deadline < arrival.first_arrival:
        raise ValueError(f"deadline ({deadline:g}) is before the first arrival ({arrival.first_arrival:g})")
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    return total


def _plan_batches(window: Window, deadline: float, method: str) -> list[Batch] | None:
    greedy = plan_greedy(window, deadline)
    if method == "mip" and greedy is not None:
        # The solver can only fail here through its tolerances; the greedy plan still holds.
        return BatchOptimizer(window).optimize(deadline) or greedy
    return greedy


def earliest_deadline(window: Window, deadline: float) -> float:
    """The earliest feasible deadline, by bisection: feasibility only grows with the deadline."""
    low, high = deadline, window.single_batch_finish()
    if window.total <= EXACT_SEARCH_LIMIT:
        high = min([high] + [finish for finish, _ in earliest_finishes(window)])
    while plan_greedy(window, high) is None:  # rounding: one batch fits at or just after this
        high = math.nextafter(high, math.inf)
    while True:
        mid = low + (high - low) / 2
        if mid <= low or mid >= high:
            return high
        if plan_greedy(window, mid) is None:
            low = mid
        else:
            high = mid


def plan_single_query(
    *,
    total: int,
    arrival: ArrivalCurve,
    window_end: float,
    deadline: float,
    cost: CostModel,
    agg_cost: CostModel | None = None,
    method: str = "greedy",
) -> Plan:
    """Least-cost batches for one window so that the final result is ready by `deadline`.

    An unmeetable deadline is an answer, not an error: the plan returned is the one for the
    earliest deadline that can be met, with `feasible=False` and a reason that names it.
    """
    total = _check(total, arrival, window_end, deadline, method)
    window = Window(total, arrival, float(window_end), cost, agg_cost)
    if total == 0:
        return Plan([], None, deadline, method=method)
    batches = _plan_batches(window, deadline, method)
    if batches is not None:
        return window.plan(batches, deadline, method)
    earliest = earliest_deadline(window, deadline)
    batches = _plan_batches(window, earliest, method) or plan_greedy(window, earliest)
    if batches is None:  # earliest_deadline returns a deadline plan_greedy meets
        raise RuntimeError(f"no plan meets the earliest feasible deadline {earliest!r}: a bug in earliest_deadline")
    reason = (
        f"deadline {deadline:g} is {earliest - deadline:.6g} s too early: the {total} tuples "
        f"cannot all be processed and merged by then; the earliest feasible deadline is {earliest:.6g}"
    )
    return window.plan(batches, deadline, method, feasible=False, reason=reason, earliest_deadline=earliest)
