"""Replanning a static window's remaining batches after one ended off its plan.

The same single-query planner, from now: the units no batch has frozen yet, none of them
available before now, against the deadline the window was planned to (the caller has taken the
blocking room off it), with the merge of every partial, the done ones and the new ones, charged
as `declaration.plan_files` charges it: merge(done + 1) always, merge(done + k) - merge(done + 1)
for k new batches.

A window's batch tasks are made when it is planned, so a replan cannot add any: it returns at
most `tasks` batches. A plan that needs more has its earliest batches joined into one (which
may then miss; `feasible` says so); tasks beyond the plan's batches get none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_iqp.planning.arrival import ArrivalCurve
from airflow_iqp.planning.cost import largest_fitting
from airflow_iqp.planning.plan import Batch
from airflow_iqp.planning.single_query import plan_single_query
from airflow_iqp.planning.window import Window
from airflow_iqp.validation import number, whole_number

if TYPE_CHECKING:
    from airflow_iqp.planning.cost import CostModel


@dataclass(frozen=True)
class Remaining:
    """Where a static window stands when one of its batches ends."""

    done: int  # the window's first `done` units are frozen
    partials: int  # batches that froze them: partials the merge has already
    total: int  # units the window is expected to hold
    tasks: int  # batch tasks left for the rest; the last of them takes whatever is left once final

    def __post_init__(self) -> None:
        for name in ("done", "partials", "total"):
            whole_number(getattr(self, name), name, minimum=0)
        whole_number(self.tasks, "tasks", minimum=1)


@dataclass(frozen=True)
class Replan:
    """The remaining batches (units numbered as in the window) and when the merge ends."""

    batches: list[Batch]
    finish: float
    feasible: bool
    reason: str | None = None


@dataclass(frozen=True)
class _MergeBeyond:
    """What k new partials add to the merge of `done` partials and one more."""

    merge: CostModel
    done: int

    def cost(self, n: int) -> float:
        if n <= 1:
            return 0.0
        return max(0.0, self.merge.cost(self.done + n) - self.merge.cost(self.done + 1))

    def max_tuples(self, seconds: float) -> int:
        return largest_fitting(1, lambda n: self.cost(n) <= seconds)


def replan(
    remaining: Remaining,
    *,
    arrival: ArrivalCurve,
    window_end: float,
    deadline: float,
    now: float,
    cost: CostModel,
    merge: CostModel,
) -> Replan:
    """Least-cost batches for the units after `remaining.done`, starting no earlier than `now`,
    so that the merge of all partials ends by `deadline`; at most `remaining.tasks` of them.
    Times are seconds from the window start; `merge` prices a merge job by its partials.
    """
    now, deadline = number(now, "now"), number(deadline, "deadline")
    done, left = remaining.done, max(0, remaining.total - remaining.done)
    always = merge.cost(remaining.partials + 1)
    if left == 0:
        end = max(now, window_end) + merge.cost(remaining.partials)
        return Replan([], end, end <= deadline)
    shifted = ArrivalCurve.from_points((max(now, arrival.time_of(done + j)), j) for j in range(1, left + 1))
    window = Window(left, shifted, window_end, cost, _MergeBeyond(merge, remaining.partials))
    bound = deadline - always
    plan = plan_single_query(
        total=left,
        arrival=shifted,
        window_end=window_end,
        deadline=max(bound, shifted.first_arrival),
        cost=cost,
        agg_cost=window.agg_cost,
    )
    batches, feasible, reason = plan.batches, plan.feasible and bound >= shifted.first_arrival, plan.reason
    if not feasible and reason is None:
        reason = f"now ({now:g}) is past the deadline less the merge ({bound:g})"
    if len(batches) > remaining.tasks:
        sizes = [b.size for b in batches]
        joined = len(sizes) - remaining.tasks + 1
        sizes = [sum(sizes[:joined]), *sizes[joined:]]
        fitted = window.schedule(sizes, bound)
        reason = f"the plan needs {len(batches)} batches, {remaining.tasks} remain: the first {joined} joined"
        feasible = fitted is not None
        batches = fitted if fitted is not None else _asap(window, sizes)
    finish = window.plan(batches, bound, "greedy").finish + always
    renumbered = [Batch(b.first + done, b.size, arrival.time_of(b.last + done), b.start, b.cost) for b in batches]
    return Replan(renumbered, finish, feasible, None if feasible else reason)


def _asap(window: Window, sizes: list[int]) -> list[Batch]:
    """Batches of these sizes, each as early as its units and the batch before it allow."""
    batches: list[Batch] = []
    first, end = 1, -float("inf")
    for size in sizes:
        last = first + size - 1
        start = max(end, window.ready(last))
        batches.append(Batch(first, size, window.arrival.time_of(last), start, window.cost.cost(size)))
        first, end = last + 1, start + window.cost.cost(size)
    return batches
