"""The monotone piecewise-linear fitter: known shapes, monotone output, weights, empty-input sizes, the tail."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_iqp.learning.fit import (
    along,
    choose_knots,
    fit_piecewise,
    hat_matrix,
    pool_adjacent_violators,
    proportional_tail,
)


def knee(x: np.ndarray) -> np.ndarray:
    """Flat-ish start-up, then a steeper rate past 8000 tuples: the shape Spark jobs show."""
    return np.where(x < 8000, 2.0 + x * 1e-4, 2.8 + (x - 8000) * 5e-4)


def test_fit_recovers_a_known_piecewise_linear_shape() -> None:
    x = np.repeat([1000.0, 2000, 4000, 8000, 16000, 32000], 3)
    y = knee(x) + np.random.default_rng(0).normal(0, 0.01, len(x))
    fit = fit_piecewise(x, y)
    knots = np.array([p[0] for p in fit.points])
    assert len(fit.points) <= 4
    assert 8000 in knots
    assert np.allclose([p[1] for p in fit.points], knee(knots), rtol=0.02)
    assert fit.rmse < 0.02
    assert fit.max_relative_error < 0.02


def test_fit_is_monotone_even_when_timings_fall() -> None:
    fit = fit_piecewise([1, 2, 4, 8, 8], [3.0, 2.0, 2.5, 1.0, 1.2])
    seconds = [s for _, s in fit.points]
    assert seconds == sorted(seconds)
    assert min(seconds) >= 0
    assert [x for x, _ in fit.points] == sorted({x for x, _ in fit.points})


@given(
    st.lists(
        st.tuples(st.integers(0, 10**7), st.floats(0, 1e4, allow_nan=False, allow_infinity=False)),
        min_size=1,
        max_size=60,
    ),
    st.integers(2, 6),
)
def test_any_points_give_knots_within_the_data_and_non_decreasing_seconds(points: list, max_knots: int) -> None:
    xs, ys = zip(*points)
    fit = fit_piecewise(xs, ys, max_knots=max_knots)
    knots = [x for x, _ in fit.points]
    seconds = [s for _, s in fit.points]
    assert knots == sorted(set(knots))
    assert knots[0] == min(xs)
    assert knots[-1] == max(xs)
    assert len(knots) <= max_knots
    assert all(a <= b for a, b in zip(seconds, seconds[1:]))
    assert min(seconds) >= 0


def test_pool_adjacent_violators_averages_a_decreasing_run() -> None:
    pooled = pool_adjacent_violators(np.array([1.0, 3.0, 2.0, 4.0]), np.ones(4))
    assert pooled.tolist() == [1.0, 2.5, 2.5, 4.0]


def test_pool_adjacent_violators_weighs_the_pooled_values() -> None:
    pooled = pool_adjacent_violators(np.array([3.0, 1.0]), np.array([1.0, 3.0]))
    assert pooled.tolist() == [1.5, 1.5]


def test_a_single_size_gives_a_constant_cost() -> None:
    fit = fit_piecewise([16, 16], [4.0, 6.0])
    assert fit.points == [[16.0, 5.0]]
    assert fit.rmse == pytest.approx(1.0)


def test_weights_pull_the_fit_towards_the_heavy_points() -> None:
    xs, ys = [10, 10, 20], [1.0, 3.0, 5.0]
    even = fit_piecewise(xs, ys)
    heavy_first = fit_piecewise(xs, ys, weights=[9.0, 1.0, 1.0])
    assert even.points[0][1] == pytest.approx(2.0)
    assert heavy_first.points[0][1] == pytest.approx(1.2)
    assert heavy_first.points[1][1] == pytest.approx(5.0)


def test_a_job_over_no_rows_is_a_knot() -> None:
    """An empty batch still runs a job (an empty window); its start-up anchors the small end."""
    fit = fit_piecewise([0, 1000, 2000, 4000, 8000, 16000], [10.0, 10.1, 10.2, 10.4, 10.8, 11.6], max_knots=3)
    assert fit.points[0] == [0.0, pytest.approx(10.0, abs=0.05)]


def test_knots_are_log_spaced_measured_sizes() -> None:
    sizes = [2.0**i for i in range(11)]
    assert choose_knots(sizes, 3).tolist() == [1.0, 32.0, 1024.0]
    assert choose_knots([5, 5, 7], 3).tolist() == [5.0, 7.0]


def test_hat_matrix_interpolates_between_knots() -> None:
    knots = np.array([0.0, 10.0, 30.0])
    matrix = hat_matrix(np.array([0.0, 5.0, 10.0, 20.0, 30.0]), knots)
    assert np.allclose(matrix.sum(axis=1), 1.0)
    assert np.allclose(matrix @ np.array([1.0, 3.0, 7.0]), [1.0, 2.0, 3.0, 5.0, 7.0])


@pytest.mark.parametrize(
    ("xs", "ys", "weights", "message"),
    [
        ([], [], None, "at least one"),
        ([1, 2], [1.0], None, "equally many"),
        ([1, 2], [1.0, 2.0], [1.0], "equally many"),
        ([1, 2], [1.0, 2.0], [1.0, 0.0], "weights must be finite and > 0"),
        ([1, 2], [1.0, 2.0], [1.0, float("nan")], "weights must be finite and > 0"),
    ],
)
def test_bad_input_is_refused(xs: list, ys: list, weights: list | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        fit_piecewise(xs, ys, weights)


def test_one_knot_is_refused() -> None:
    with pytest.raises(ValueError, match="max_knots must be >= 2"):
        fit_piecewise([1, 2], [1.0, 2.0], max_knots=1)


def test_along_extends_the_end_segments_and_never_goes_below_zero() -> None:
    points = ((10.0, 2.0), (20.0, 4.0), (30.0, 5.0))
    assert along(points, np.array([15.0, 25.0, 40.0, 0.0])).tolist() == pytest.approx([3.0, 4.5, 6.0, 0.0])
    assert along(((1.0, 3.0),), np.array([0.0, 100.0])).tolist() == [3.0, 3.0]


def test_a_last_segment_steeper_than_proportional_is_capped_past_the_data() -> None:
    """Two batches of nearly one size: 10 s and 11 s at 1000 and 1010 rows say 0.1 s a row;
    past 1010 rows the cost grows at most as the size does."""
    capped = proportional_tail([[1000.0, 10.0], [1010.0, 11.0]])
    assert capped == [[1000.0, 10.0], [1010.0, 11.0], [2020.0, 22.0]]
    gentle = [[1000.0, 10.0], [100_000.0, 20.0]]
    assert proportional_tail(gentle) == gentle
    assert proportional_tail([[5.0, 1.0]]) == [[5.0, 1.0]]
