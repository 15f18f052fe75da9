"""Cost models: the shapes the planner relies on, and errors that name the bad point."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_iqp.planning import LinearCost, PiecewiseLinearCost
from airflow_iqp.planning.cost import UNBOUNDED


def test_linear_cost_has_no_overhead_for_an_empty_batch() -> None:
    cost = LinearCost(per_tuple=0.5, overhead=8.0)
    assert cost.cost(0) == 0.0
    assert cost.cost(1) == 8.5
    assert cost.cost(10) == 13.0


def test_piecewise_interpolates_and_extends_both_ends() -> None:
    cost = PiecewiseLinearCost([(10, 5.0), (20, 6.0), (40, 10.0)])
    assert cost.cost(0) == 0.0
    assert cost.cost(15) == pytest.approx(5.5)
    assert cost.cost(5) == pytest.approx(4.5)  # first segment extended
    assert cost.cost(60) == pytest.approx(14.0)  # last segment extended
    assert cost.cost(40) == pytest.approx(10.0)


def test_single_point_is_a_constant_cost() -> None:
    cost = PiecewiseLinearCost([(100, 3.0)])
    assert [cost.cost(n) for n in (0, 1, 100, 10**6)] == [0.0, 3.0, 3.0, 3.0]
    assert cost.max_tuples(3.0) == UNBOUNDED
    assert cost.max_tuples(2.9) == 0


@pytest.mark.parametrize(
    ("points", "message"),
    [
        ([], "at least one"),
        ([(10, 1.0), (10, 2.0)], r"points\[1\].*strictly increasing"),
        ([(10, 1.0), (20, 0.5)], r"points\[1\].*non-decreasing"),
        ([(10, 1.0), (20, float("nan"))], r"points\[1\] seconds"),
        ([(-1, 1.0)], r"points\[0\].*negative"),
        ([(1, 2, 3)], r"points\[0\].*pair"),
    ],
)
def test_bad_points_name_the_point(points: list[tuple[float, ...]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PiecewiseLinearCost(points)


@pytest.mark.parametrize("kwargs", [{"per_tuple": -1}, {"per_tuple": 1, "overhead": math.nan}])
def test_bad_linear_cost(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="per_tuple|overhead"):
        LinearCost(**kwargs)


costs = st.one_of(
    st.builds(LinearCost, st.floats(1e-9, 10), st.floats(0, 100)),
    st.lists(st.tuples(st.integers(1, 10**9), st.floats(0, 1e4)), min_size=1, max_size=6).map(
        lambda pts: PiecewiseLinearCost(zip(sorted({x for x, _ in pts}), sorted(y for _, y in pts)))
    ),
)


@given(cost=costs, seconds=st.floats(0, 1e6))
def test_max_tuples_is_the_largest_n_that_fits(cost, seconds: float) -> None:
    n = cost.max_tuples(seconds)
    if n == UNBOUNDED:
        assert cost.cost(10**15) <= seconds
        return
    assert n == 0 or cost.cost(n) <= seconds
    assert cost.cost(n + 1) > seconds


@given(cost=costs, n=st.integers(1, 10**9))
def test_cost_is_non_decreasing(cost, n: int) -> None:
    assert 0.0 <= cost.cost(n) <= cost.cost(n + 1)


@given(cost=costs, limit=st.integers(1, 10**6))
def test_segments_reproduce_cost_exactly_enough(cost, limit: int) -> None:
    for lo, hi, a, b in cost.segments(limit):
        for n in {lo, hi, (lo + hi) // 2}:
            assert a + b * n == pytest.approx(cost.cost(n), rel=1e-9, abs=1e-9)
