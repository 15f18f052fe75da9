"""What the dynamic scheduler knows about one query while its window fills."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from airflow_iqp.dynamic.estimate import estimate_total
from airflow_iqp.planning.min_batch import MinBatch, min_batch_size

if TYPE_CHECKING:
    from airflow_iqp.planning.arrival import ArrivalCurve
    from airflow_iqp.planning.cost import LinearCost, PiecewiseLinearCost


@lru_cache(maxsize=4096)
def cached_min_batch(
    total: int,
    cost: LinearCost | PiecewiseLinearCost,
    agg_cost: LinearCost | PiecewiseLinearCost | None,
    alpha: float,
    tau_max: float,
) -> MinBatch:
    """An unknown total is re-estimated at every decision; most estimates repeat."""
    return min_batch_size(total=total, cost=cost, agg_cost=agg_cost, alpha=alpha, tau_max=tau_max)


@dataclass
class QueryState:
    """Progress of one query: `declared_total` is None when the window's size is unknown."""

    name: str
    declared_total: int | None
    arrival: ArrivalCurve
    window_end: float
    deadline: float
    cost: LinearCost | PiecewiseLinearCost
    agg_cost: LinearCost | PiecewiseLinearCost | None
    alpha: float
    tau_max: float
    submit_at: float
    processed: int = 0
    batches: int = 0
    spent: float = 0.0
    finish: float | None = None

    @property
    def true_total(self) -> int:
        """Tuples the query will really process: the declared ones, or all the stream delivers."""
        return self.arrival.total if self.declared_total is None else self.declared_total

    @property
    def all_processed(self) -> bool:
        """Every tuple is in a partial: only the merge is left."""
        return self.processed >= self.true_total

    @property
    def done(self) -> bool:
        """The window's result is complete (merged, or its single batch ran)."""
        return self.finish is not None

    def arrived(self, now: float) -> int:
        """Tuples available at `now`: those that came before submission wait for it."""
        return 0 if now < self.submit_at else min(self.arrival.count_at(now), self.true_total)

    def rate_known(self, now: float) -> bool:
        """An unknown total needs some elapsed time to extrapolate from (or a closed window)."""
        return self.declared_total is not None or now > self.arrival.first_arrival or now >= self.window_end

    def expected_total(self, now: float) -> int:
        """The declared total, or the estimate from the rate observed so far (Section 4.4)."""
        if self.declared_total is not None:
            return self.declared_total
        estimate = estimate_total(self.arrived(now), self.arrival.first_arrival, now, self.window_end)
        return max(estimate, self.processed, 1)

    def min_batch(self, now: float) -> int:
        """MinBatch for the total expected at `now`, in tuples."""
        return cached_min_batch(self.expected_total(now), self.cost, self.agg_cost, self.alpha, self.tau_max).size

    def agg(self, partials: int) -> float:
        """Merge cost of `partials` results; a single batch needs no merge."""
        return 0.0 if partials <= 1 or self.agg_cost is None else self.agg_cost.cost(partials)
