"""Planning speed: greedy plan and MinBatchSize for 10^9 tuples, and MIP time by batch count.

Run: make bench   (or: uv run python benchmarks/planning_speed.py)
Targets (issue 2): greedy plan < 1 ms, min_batch_size < 10 ms; MIP time is reported.
"""

from __future__ import annotations

import statistics
import time
from typing import TYPE_CHECKING, TypeVar

from airflow_iqp.planning import ArrivalCurve, LinearCost, PiecewiseLinearCost, min_batch_size, plan_single_query

if TYPE_CHECKING:
    from collections.abc import Callable

TOTAL = 10**9
ARRIVAL = ArrivalCurve.fixed_rate(0.0, 3600.0, TOTAL)  # one hour window
LINEAR = LinearCost(per_tuple=2e-6, overhead=12.0)  # 2012 s for the whole window in one batch
CONCAVE = PiecewiseLinearCost([(1, 12.0), (10**6, 14.5), (10**8, 230.0), (10**9, 2000.0)])
MERGE = LinearCost(per_tuple=0.05, overhead=10.0)
T = TypeVar("T")


def timed(fn: Callable[[], T], repeat: int) -> tuple[float, T]:
    """Median wall time in ms over `repeat` calls (at least one), and the last result."""
    samples: list[float] = []
    for _ in range(max(repeat, 1)):
        t0 = time.perf_counter()
        result = fn()
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples), result


def main() -> None:
    print(f"{'what':<52} {'ms':>9}  result")
    for name, cost in (("linear", LINEAR), ("piecewise", CONCAVE)):
        for slack in (3000.0, 900.0, 300.0):
            ms, plan = timed(
                lambda: plan_single_query(
                    total=TOTAL, arrival=ARRIVAL, window_end=3600.0, deadline=3600.0 + slack, cost=cost, agg_cost=MERGE
                ),
                repeat=200,
            )
            print(
                f"{f'greedy plan, 10^9 tuples, {name}, D = we + {slack:g}':<52} {ms:9.3f}  "
                f"{len(plan.batches)} batches, feasible={plan.feasible}"
            )
        for alpha in (0.1, 0.5, 1.0):
            ms, mb = timed(
                lambda: min_batch_size(total=TOTAL, cost=cost, agg_cost=MERGE, alpha=alpha, tau_max=600.0), repeat=50
            )
            print(
                f"{f'min_batch_size, 10^9 tuples, {name}, alpha={alpha:g}':<52} {ms:9.3f}  "
                f"b={mb.size} ({mb.batches(TOTAL)} batches, ratio {mb.cost_ratio:.3f})"
            )
    # MIP: a 10^6-tuple window, deadlines tightened until the plan needs up to 10 batches.
    total = 10**6
    arrival = ArrivalCurve.fixed_rate(0.0, 1000.0, total)
    for name, cost in (
        ("linear", LinearCost(5e-4, 2.0)),
        ("piecewise", PiecewiseLinearCost([(1, 2.0), (10**4, 6.0), (10**6, 480.0)])),
    ):
        seen = set()
        for slack in (600, 400, 250, 150, 100, 70, 50, 35, 25, 18, 14, 11, 9, 8, 7, 6.5, 6, 5.5, 5):
            greedy = plan_single_query(
                total=total, arrival=arrival, window_end=1000.0, deadline=1000.0 + slack, cost=cost
            )
            if not greedy.feasible or len(greedy.batches) in seen or len(greedy.batches) > 10:
                continue
            seen.add(len(greedy.batches))
            ms, mip = timed(
                lambda: plan_single_query(
                    total=total, arrival=arrival, window_end=1000.0, deadline=1000.0 + slack, cost=cost, method="mip"
                ),
                repeat=3,
            )
            print(
                f"{f'mip plan, 10^6 tuples, {name}, {len(mip.batches)} batches':<52} {ms:9.3f}  "
                f"cost {mip.total_cost:.2f} vs greedy {greedy.total_cost:.2f}"
            )


if __name__ == "__main__":
    main()
