"""Sizing one window: its plan in files at the declared or learned rate (the paper's planner,
the merge job always charged), the partial cost by files, and dynamic mode's MinBatch. Used at
parse time (is the deadline feasible?) and at run time (the plan task, replans, admission's demand).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_iqp.exceptions import InvalidDeclaration
from airflow_iqp.planning import ArrivalCurve, MinBatch, PiecewiseLinearCost, Plan, min_batch_size, plan_single_query
from airflow_iqp.settings import batch_task_seconds

if TYPE_CHECKING:
    from airflow_iqp.declaration import ArrivalRate, CostModel, Declaration


def file_costs(model: CostModel, rows_per_file: float) -> PiecewiseLinearCost:
    """Partial cost by files instead of rows: batches are cut at file boundaries."""
    return PiecewiseLinearCost([(rows / rows_per_file, seconds) for rows, seconds in model.partial.points])


@dataclass(frozen=True)
class WindowPlan:
    """A plan in seconds from the window start, plus the merge job every window runs."""

    plan: Plan
    merge_seconds: float  # the merge job's cost beyond what the plan already counts

    @property
    def finish(self) -> float:
        """Seconds from the window start until the merge ends."""
        return self.plan.finish + self.merge_seconds

    @property
    def merge_job(self) -> float:
        """Seconds of the merge job: merge(1) plus what the plan's partials add."""
        return self.merge_seconds + (self.plan.merge.cost if self.plan.merge else 0.0)

    @property
    def longest_job(self) -> float:
        """The longest the window holds the shared resource at once: a batch or the merge."""
        return max([*(b.cost for b in self.plan.batches), self.merge_job])


def merge_costs(model: CostModel) -> tuple[float, PiecewiseLinearCost]:
    """The merge job that always runs (merge(1)), and what k partials add to it."""
    always = model.merge.cost(1)
    return always, PiecewiseLinearCost([(k, max(0.0, s - always)) for k, s in model.merge.points])


@dataclass(frozen=True)
class DynamicBatching:
    """Dynamic mode in files: at least `min_batch` per batch, at most `max_batch` (tau_max)."""

    min_batch: MinBatch
    max_batch: int
    expected_files: int

    @property
    def slots(self) -> int:
        """Mapped batch slots per window: the MinBatch batches, as many again for batches fired
        early by slow input or a closed window, and one for the rest. Unused slots are skipped.
        """
        return 2 * self.min_batch.batches(self.expected_files) + 1


def dynamic_batching(
    declaration: Declaration, rate: ArrivalRate, model: CostModel, task_seconds: float | None = None
) -> DynamicBatching:
    """MinBatch and the tau_max bound of a dynamic declaration, in files at `rate`. Each batch is
    also charged `task_seconds` for the Airflow task that runs it (None: `[iqp] batch_task_seconds`;
    0 where batches run without Airflow): fewer, larger batches where tasks are dear.
    """
    alpha, tau_max = declaration.dynamic_limits()
    files = rate.files_in(declaration.window)
    cost = file_costs(model, rate.rows_per_file)
    _, extra_merge = merge_costs(model)
    one_file = cost.cost(1)
    if one_file > tau_max:
        raise InvalidDeclaration(
            f"tau_max ({tau_max:g} s) is below the cost of one file of {declaration.dag_id} "
            f"(~{rate.rows_per_file:g} rows: {one_file:.1f} s by the cost model): no batch fits; raise tau_max"
        )
    task = batch_task_seconds() if task_seconds is None else task_seconds
    found = min_batch_size(total=files, cost=cost, agg_cost=extra_merge, alpha=alpha, tau_max=tau_max, per_batch=task)
    return DynamicBatching(found, max(found.size, min(files, cost.max_tuples(tau_max))), files)


def plan_files(
    declaration: Declaration, rate: ArrivalRate, model: CostModel, method: str = "greedy", blocking: float = 0.0
) -> WindowPlan:
    """Plan one window, files evenly spaced at the rate.

    The planner assumes one batch needs no merge, but our partial output is never the final
    answer (AVG travels as sum and count), so a merge job always runs: plan against the
    deadline less merge(1), with merge(k) - merge(1) for k batches. `blocking` is the longest
    job another query may hold the shared resource for (`planning.admission.blocking`): the
    plan leaves room for it too.
    """
    files = rate.files_in(declaration.window)
    window_s = declaration.window.total_seconds()
    always, extra_merge = merge_costs(model)
    plan = plan_single_query(
        total=files,
        arrival=ArrivalCurve.fixed_rate(0.0, (files - 1) / rate.files_per_second, files),
        window_end=window_s,
        deadline=max(0.0, window_s + declaration.deadline.total_seconds() - always - blocking),
        cost=file_costs(model, rate.rows_per_file),
        agg_cost=extra_merge,
        method=method,
    )
    return WindowPlan(plan, always)
