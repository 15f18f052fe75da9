"""MinBatchSize against a scan over every batch size."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_iqp.planning import LinearCost, PiecewiseLinearCost, min_batch_size
from tests.planning.strategies import concave_costs, linear_costs, merge_costs

if TYPE_CHECKING:
    from airflow_iqp.planning.cost import CostModel


def batched(total: int, b: int, cost: CostModel, agg: CostModel | None, per_batch: float = 0.0) -> float:
    full, rest = divmod(total, b)
    k = full + (rest > 0)
    merge = 0.0 if k <= 1 or agg is None else agg.cost(k)
    return full * cost.cost(b) + cost.cost(rest) + merge + k * per_batch


@settings(max_examples=400, deadline=None)
@given(
    total=st.integers(1, 400),
    cost=st.one_of(linear_costs, concave_costs()),
    agg=merge_costs(),
    alpha=st.sampled_from([0.0, 0.1, 0.25, 0.5, 1.0, 3.0]),
    tau=st.integers(1, 200).map(lambda q: q / 4),
    task=st.sampled_from([0.0, 0.0, 0.5, 2.0, 7.25]),
)
def test_min_batch_size_matches_a_scan(
    total: int, cost: LinearCost | PiecewiseLinearCost, agg: LinearCost | None, alpha: float, tau: float, task: float
) -> None:
    if cost.cost(1) > tau:
        with pytest.raises(ValueError, match="tau_max"):
            min_batch_size(total=total, cost=cost, agg_cost=agg, alpha=alpha, tau_max=tau, per_batch=task)
        return
    result = min_batch_size(total=total, cost=cost, agg_cost=agg, alpha=alpha, tau_max=tau, per_batch=task)
    single = cost.cost(total) + task
    limit = (1 + alpha) * single
    fitting = [b for b in range(1, total + 1) if cost.cost(b) <= tau]  # the task does not hold the resource
    good = [b for b in fitting if batched(total, b, cost, agg, task) <= limit]
    if good:
        assert result.alpha_met
        assert result.size == good[0]
    else:
        assert not result.alpha_met
        assert result.size == fitting[-1]
    assert math.isclose(result.cost_ratio, batched(total, result.size, cost, agg, task) / single, rel_tol=1e-12)


def test_paper_like_numbers() -> None:
    """12 s per batch on a 100 s window: alpha = 0.5 allows a handful of batches."""
    cost = LinearCost(per_tuple=1e-7, overhead=12.0)
    result = min_batch_size(total=10**9, cost=cost, alpha=0.5, tau_max=300)
    assert result.alpha_met
    # one batch costs 112 s; 12 k + 100 <= 168 allows k <= 5, so b = 10^9 / 5 is the smallest
    assert result.batches(10**9) == 5
    assert result.size == 2 * 10**8


def test_a_task_per_batch_makes_batches_fewer_but_no_larger_than_tau_max() -> None:
    """12 s a batch and 6 s of task each: 18 k + 100 <= 1.5 * 118 allows k <= 4 instead of 5."""
    cost = LinearCost(per_tuple=1e-7, overhead=12.0)
    assert min_batch_size(total=10**9, cost=cost, alpha=0.5, tau_max=300, per_batch=6.0).batches(10**9) == 4
    capped = min_batch_size(total=10**9, cost=cost, alpha=0.5, tau_max=35, per_batch=6.0)
    assert not capped.alpha_met
    assert capped.size == cost.max_tuples(35) == 23 * 10**7  # not max_tuples(35 - 6)


def test_tau_max_below_one_tuple() -> None:
    with pytest.raises(ValueError, match="tau_max"):
        min_batch_size(total=10, cost=LinearCost(1.0, overhead=5), alpha=0.5, tau_max=4)


def test_tau_max_caps_the_batch_and_reports_alpha_missed() -> None:
    cost = PiecewiseLinearCost([(1, 10.0), (100, 20.0)])
    result = min_batch_size(total=100, cost=cost, alpha=0.1, tau_max=11)
    assert not result.alpha_met
    assert result.size == cost.max_tuples(11)


@pytest.mark.parametrize(
    "kwargs", [{"alpha": -0.1}, {"alpha": math.nan}, {"total": 0}, {"tau_max": math.nan}, {"per_batch": -1}]
)
def test_bad_arguments_are_named(kwargs: dict[str, Any]) -> None:
    args: dict[str, Any] = {"total": 10, "cost": LinearCost(1.0), "alpha": 0.5, "tau_max": 10}
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        min_batch_size(**(args | kwargs))
