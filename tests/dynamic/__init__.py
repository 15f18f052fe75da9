"""Tests of the dynamic mode's pure core; the hand-checkable query they share."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_iqp.dynamic import QueryState
from airflow_iqp.planning import ArrivalCurve, LinearCost

if TYPE_CHECKING:
    from airflow_iqp.planning.arrival import StepArrival

# cost(n) = 1 + n, agg(k) = 1 + k / 2: for 10 tuples with alpha 0.6 MinBatch is 3
# (ratio (14 + agg(4)) / 11 = 1.55; 2 gives (15 + agg(5)) / 11 = 1.68).
COST = LinearCost(per_tuple=1.0, overhead=1.0)
ALPHA, TAU_MAX = 0.6, 10.0


def state(
    arrival: ArrivalCurve | None = None, *, processed: int = 0, batches: int = 0, deadline: float = 30.0
) -> QueryState:
    """Ten tuples, tuple i arriving at time i unless told otherwise; the window ends at 10."""
    return QueryState(
        name="q",
        declared_total=10,
        arrival=arrival or ArrivalCurve.fixed_rate(1, 10, 10),
        window_end=10.0,
        deadline=deadline,
        cost=COST,
        agg_cost=LinearCost(per_tuple=0.5, overhead=1.0),
        alpha=ALPHA,
        tau_max=TAU_MAX,
        submit_at=1.0,
        processed=processed,
        batches=batches,
    )


def slow() -> StepArrival:
    """Two tuples on time, then the other eight late, after the window end."""
    return ArrivalCurve.from_points([(1, 1), (2, 2), (20, 10)])
