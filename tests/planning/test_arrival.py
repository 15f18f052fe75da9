"""Arrival curves: count_at and time_of are inverse step functions of each other."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_iqp.planning import ArrivalCurve


def test_fixed_rate_spacing() -> None:
    curve = ArrivalCurve.fixed_rate(1, 10, 10)
    assert curve.total == 10
    assert [curve.time_of(n) for n in (1, 5, 10)] == [1.0, 5.0, 10.0]
    assert [curve.count_at(t) for t in (0.9, 1.0, 4.99, 5.0, 10.0, 99)] == [0, 1, 4, 5, 10, 10]


def test_a_burst_of_points_at_one_time_is_one_step() -> None:
    curve = ArrivalCurve.from_points([(0, 1), (2, 3), (2, 7), (4, 9)])
    assert curve.count_at(2) == 7
    assert curve.time_of(4) == 2.0
    assert curve.time_of(8) == 4.0


def test_from_points_is_a_step_function() -> None:
    curve = ArrivalCurve.from_points([(0, 3), (5, 3), (7, 10)])
    assert curve.total == 10
    assert [curve.count_at(t) for t in (-1, 0, 6.9, 7)] == [0, 3, 3, 10]
    assert curve.time_of(3) == 0.0
    assert curve.time_of(4) == 7.0
    with pytest.raises(ValueError, match="exceeds"):
        curve.time_of(11)


@pytest.mark.parametrize(
    ("points", "message"),
    [
        ([(1, 3), (0, 5)], r"points\[1\] time"),
        ([(0, 3), (1, 2)], r"points\[1\].*decrease"),
        ([(0, -1)], r"points\[0\]"),
        ([(math.nan, 1)], r"points\[0\] time"),
        ([(0, 1.5)], r"points\[0\]"),
        ([], "at least one"),
    ],
)
def test_non_monotone_points_are_refused(points: list[tuple[float, float]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ArrivalCurve.from_points(points)


def test_fixed_rate_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="end"):
        ArrivalCurve.fixed_rate(10, 1, 5)
    with pytest.raises(ValueError, match="total"):
        ArrivalCurve.fixed_rate(0, 1, -5)
    with pytest.raises(ValueError, match="start"):
        ArrivalCurve.fixed_rate(math.nan, 1, 5)


@given(
    start=st.floats(-1e6, 1e6),
    length=st.floats(0, 1e6),
    total=st.integers(1, 10**9),
    n=st.integers(1, 10**9),
)
def test_fixed_rate_time_of_and_count_at_agree(start: float, length: float, total: int, n: int) -> None:
    curve = ArrivalCurve.fixed_rate(start, start + length, total)
    n = min(n, total)
    t = curve.time_of(n)
    assert curve.count_at(t) >= n
    if n > 1 and curve.time_of(n - 1) < t:
        assert curve.count_at(math.nextafter(t, -math.inf)) < n
