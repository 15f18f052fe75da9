"""Nonsense input raises ValueError naming the argument; infeasible deadlines do not."""

from __future__ import annotations

import math
from typing import Any

import pytest

from airflow_iqp.planning import ArrivalCurve, LinearCost, Plan, plan_single_query

ARRIVAL = ArrivalCurve.fixed_rate(1, 10, 10)


def plan(**overrides: Any) -> Plan:
    args: dict[str, Any] = {"total": 10, "arrival": ARRIVAL, "window_end": 10, "deadline": 12, "cost": LinearCost(0.5)}
    return plan_single_query(**(args | overrides))


@pytest.mark.parametrize(
    ("overrides", "name"),
    [
        ({"total": -1}, "total"),
        ({"total": 2.5}, "total"),
        ({"total": 11}, "total"),
        ({"deadline": math.nan}, "deadline"),
        ({"deadline": 0.5}, "deadline"),
        ({"window_end": math.inf}, "window_end"),
        ({"method": "fastest"}, "method"),
        ({"arrival": [(1, 10)]}, "arrival"),
    ],
)
def test_nonsense_input_names_the_argument(overrides: dict[str, Any], name: str) -> None:
    with pytest.raises(ValueError, match=name):
        plan(**overrides)


@pytest.mark.parametrize("method", ["greedy", "mip"])
def test_infeasible_deadline_returns_the_earliest_plan(method: str) -> None:
    result = plan(deadline=10.2, method=method)
    assert not result.feasible
    assert result.earliest_deadline == 10.5
    assert result.finish == 10.5
    assert result.reason is not None
    assert "10.5" in result.reason
    assert "0.3" in result.reason
    assert plan(deadline=result.earliest_deadline, method=method).feasible


def test_merge_cost_is_charged_and_planned_for() -> None:
    result = plan(deadline=13, agg_cost=LinearCost(per_tuple=0.25, overhead=0.5))
    assert result.feasible
    assert result.merge is not None
    k = len(result.batches)
    assert result.merge.cost == 0.5 + 0.25 * k
    assert result.merge.start >= result.batches[-1].end
    assert result.total_cost == 5.0 + result.merge.cost
    assert result.finish <= 13


def test_empty_window_needs_no_batch() -> None:
    result = plan(total=0)
    assert result.feasible
    assert result.batches == []
    assert result.merge is None
    assert result.total_cost == 0


def test_huge_window_at_fixed_rate() -> None:
    """10^9 tuples over an hour: a few geometric batches, planned without touching each tuple."""
    arrival = ArrivalCurve.fixed_rate(0, 3600, 10**9)
    cost = LinearCost(per_tuple=2e-6, overhead=12.0)
    result = plan_single_query(total=10**9, arrival=arrival, window_end=3600, deadline=3600 + 600, cost=cost)
    assert result.feasible
    assert 2 <= len(result.batches) < 50
    assert sum(b.size for b in result.batches) == 10**9
