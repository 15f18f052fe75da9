"""`make demo`: plan the paper's worked cases and one realistic window, print the plans.

The Airflow slice will turn this into a live run; until then it shows what the planner decides.
"""

from __future__ import annotations

from airflow_iqp.planning import ArrivalCurve, LinearCost, min_batch_size, plan_single_query
from airflow_iqp.planning.table import format_plan


def worked_cases() -> None:
    arrival = ArrivalCurve.fixed_rate(1, 10, 10)
    for deadline in (16, 15, 12, 11):
        plan = plan_single_query(total=10, arrival=arrival, window_end=10, deadline=deadline, cost=LinearCost(0.5))
        print(format_plan(plan, f"\nPaper Fig. 2, case deadline {deadline}: tuple i arrives at i, 0.5 s per tuple"))


def realistic_window() -> None:
    """An hour of 36 M tuples; each spark-submit pays ~12 s before it reads a row."""
    total, window_end = 36_000_000, 3600.0
    arrival = ArrivalCurve.fixed_rate(0.0, window_end, total)
    cost = LinearCost(per_tuple=2.5e-5, overhead=12.0)
    merge = LinearCost(per_tuple=0.5, overhead=10.0)
    for after in (1200.0, 600.0, 240.0):
        for method in ("greedy", "mip"):
            plan = plan_single_query(
                total=total, arrival=arrival, window_end=window_end, deadline=window_end + after,
                cost=cost, agg_cost=merge, method=method,
            )
            print(format_plan(plan, f"\nOne hour, 36 M tuples, result due {after:g} s after the window ({method})"))
    mb = min_batch_size(total=total, cost=cost, agg_cost=merge, alpha=0.5, tau_max=300.0)
    print(f"\nMinBatchSize at alpha=0.5, tau_max=300 s: {mb.size:,} tuples "
          f"({mb.batches(total)} batches, {mb.cost_ratio:.2f}x one batch)")


def main() -> None:
    worked_cases()
    realistic_window()


if __name__ == "__main__":
    main()
