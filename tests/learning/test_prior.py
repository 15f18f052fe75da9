"""Fitting on a prior's curve: a narrow range learns a scale, a wide one an intercept, a scale and a
shape shrunk toward the prior as far as the prior explains the data, and past the data the prior's slope."""

from __future__ import annotations

import numpy as np
import pytest

from airflow_iqp.learning.fit import along
from airflow_iqp.learning.prior import SPREAD_RATIO, fit_on_prior, scale_on, shape
from airflow_iqp.planning.cost import PiecewiseLinearCost

PRIOR = PiecewiseLinearCost([[1000, 2.0], [10_000, 2.9], [100_000, 11.9]])  # start-up 1.9 s, then 1e-4 s/row


def fitted(sizes: list[int], seconds: list[float], knots: int = 2) -> PiecewiseLinearCost:
    x, y = np.array(sizes, dtype=float), np.array(seconds, dtype=float)
    return PiecewiseLinearCost(fit_on_prior(PRIOR, x, y, np.ones_like(x), knots).points)


def test_a_narrow_range_learns_only_a_scale() -> None:
    """Sizes within SPREAD_RATIO of each other: the prior's curve times one factor, everywhere."""
    sizes = [40_000, 41_000, 42_000, 45_000, 50_000]
    assert max(sizes) < SPREAD_RATIO * min(sizes)
    model = fitted(sizes, [0.8 * PRIOR.cost(n) for n in sizes])
    for n in (1, 1000, 40_000, 250_000, 10**7):
        assert model.cost(n) == pytest.approx(0.8 * PRIOR.cost(n), rel=1e-9), n


def test_the_scale_is_a_geometric_mean() -> None:
    """One job three times slower moves the scale by its fifth of the log, not by its full excess."""
    sizes = np.full(5, 50_000.0)
    seconds = 0.8 * along(PRIOR.points, sizes) * np.array([1, 1, 1, 1, 3])
    assert scale_on(PRIOR.points, sizes, seconds, np.ones(5)) == pytest.approx(0.8 * 3 ** (1 / 5))


def test_a_wide_range_learns_the_intercept_and_the_scale() -> None:
    """The calibration: a one-file batch gives the start-up, the big batch the rate; the shape in
    between and beyond is the prior's, its variable part scaled."""
    model = fitted([1000, 100_000], [5.0, 25.0])
    assert model.cost(1000) == pytest.approx(5.0)
    assert model.cost(100_000) == pytest.approx(25.0)
    # The prior's variable part rises 9.9 s from 1000 to 100k rows, here 20 s: b = 20 / 9.9, beyond too.
    rise = PRIOR.cost(200_000) - PRIOR.cost(100_000)
    assert model.cost(200_000) - model.cost(100_000) == pytest.approx(20 / 9.9 * rise)


def test_the_data_bend_the_shape_only_where_they_clearly_disagree() -> None:
    """Noisy timings on the prior's own shape give the prior's shape; a clearly different shape wins."""
    rng = np.random.default_rng(7)
    sizes = np.exp(rng.uniform(np.log(1000), np.log(100_000), 60))
    on_prior = (1.0 + 2 * (along(PRIOR.points, sizes) - 1.9)) * (1 + rng.normal(0, 0.02, 60))
    model = fit_on_prior(PRIOR, sizes, on_prior, np.ones(60), 4)
    probe = np.geomspace(1000, 100_000, 12)
    truth = 1.0 + 2 * (along(PRIOR.points, probe) - 1.9)
    assert np.abs(along(PiecewiseLinearCost(model.points).points, probe) / truth - 1).max() < 0.02
    linear = 10 + 2e-5 * sizes  # flat where the prior is steep, and the other way round
    model = fit_on_prior(PRIOR, sizes, linear * (1 + rng.normal(0, 0.02, 60)), np.ones(60), 4)
    assert np.abs(along(PiecewiseLinearCost(model.points).points, probe) / (10 + 2e-5 * probe) - 1).max() < 0.05


def test_past_its_last_point_a_prior_grows_at_no_less_than_its_average_rate() -> None:
    """A fitted file's flat last segment (pooled noise) would say millions of rows cost what 60k do."""
    flat_tail = PiecewiseLinearCost([[1870, 15.0], [15_045, 15.9], [60_175, 15.9]])
    curve = shape(flat_tail)
    chord = (15.9 - 15.0) / (60_175 - 1870)
    assert curve[:3] == flat_tail.points
    assert along(curve, np.array([10**6]))[0] == pytest.approx(15.9 + chord * (10**6 - 60_175))
    steep_tail = shape(PRIOR)  # a last segment steeper than the chord is kept
    assert along(steep_tail, np.array([10**6]))[0] == pytest.approx(PRIOR.cost(10**6))
    assert shape(PiecewiseLinearCost([[1, 4.0]])) == ((1.0, 4.0),)


def test_timings_that_fall_as_the_prior_grows_give_a_constant() -> None:
    model = fitted([1000, 100_000], [9.0, 3.0])
    assert model.cost(1000) == model.cost(10**6) == pytest.approx(6.0)
