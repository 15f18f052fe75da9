"""Fitting timings on a prior's curve: keep the declared or packaged model's shape, learn its scale.

A DAG's jobs often all have about the same size (dynamic mode cuts MinBatch batches; a steady
rate gives steady batches), and a slope fitted through such points is noise: five batches of
50k rows that took 10 +- 0.5 s say nothing about 250k rows. A prior (`iqp fit-cost-model`'s
file, or the packaged model of a packaged query) knows the shape: how the cost grows with the
size. So, with prior P and its intercept P0 (its first segment extended to size 0):

- **Narrow sizes** (largest / smallest observed < `SPREAD_RATIO`): only a scale is fitted,
  cost = c * P, c the weighted geometric mean of seconds / P(size).
- **Wide sizes**: the intercept and the scale of the prior's variable part,
  cost = a + b * (P - P0) with a, b >= 0 by weighted least squares (the calibration's one-unit
  batch pins the intercept, its big batch the scale); then the free piecewise-linear shape on
  the observed sizes, shrunk toward that curve as far as the curve explains the data
  (empirical Bayes: a ridge whose strength is the noise over the curve's misfit), so the data
  bend the shape only where they clearly disagree with it.

Beyond the largest observed size the model follows the prior's own slope, scaled by b (and past
the prior's own largest size, its average rate: `shape`): nothing measured says otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from airflow_iqp.learning.fit import MIN_SECONDS, along, choose_knots, hat_matrix, pool_adjacent_violators

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from airflow_iqp.planning.cost import PiecewiseLinearCost

SPREAD_RATIO = 2.0  # largest / smallest observed size below which only a scale is fitted


@dataclass(frozen=True)
class PriorFit:
    """Knots fitted on a prior, and how many parameters the fit spent on its data."""

    points: list[list[float]]
    parameters: int


def scale_on(
    curve: tuple[tuple[float, float], ...],
    sizes: NDArray[np.float64],
    seconds: NDArray[np.float64],
    weights: NDArray[np.float64],
) -> float:
    """The weighted geometric mean of seconds / curve: the one scale a narrow range supports.

    Geometric, not arithmetic: a job five times slower than the rest moves it by a fifth of the
    log, not by its full excess, and relative errors weigh the same at every size.
    """
    ratios = np.maximum(seconds, MIN_SECONDS) / np.maximum(along(curve, sizes), MIN_SECONDS)
    return float(np.exp(np.average(np.log(ratios), weights=weights)))


def _intercept_and_scale(
    variable: NDArray[np.float64], seconds: NDArray[np.float64], weights: NDArray[np.float64]
) -> tuple[float, float] | None:
    """a, b >= 0 of seconds ~ a + b * variable by weighted least squares; None if b is not determined."""
    if np.ptp(variable) <= 0:  # the prior is flat over these sizes: it has no scale to fit
        return None
    root = np.sqrt(weights)
    design = np.column_stack([np.ones_like(variable), variable])
    (a, b), *_ = np.linalg.lstsq(design * root[:, None], seconds * root, rcond=None)
    if b < 0:  # timings fall as the prior grows: no scale to learn, the mean is the best constant
        return float(np.average(seconds, weights=weights)), 0.0
    if a < 0:  # no negative start-up: through the origin
        return 0.0, float(weights @ (seconds * variable) / (weights @ variable**2))
    return float(a), float(b)


def shape(prior: PiecewiseLinearCost) -> tuple[tuple[float, float], ...]:
    """The prior's points, continued past its largest size at no less than its average rate.

    A fitted file is measured on small inputs, and its last segment is often flat where pooling
    evened out noisy timings (q1's spark_submit model costs nothing per row beyond 15k rows);
    extended as it is, it would say a batch of millions of rows costs what one of 60k does.
    Past its last point the prior grows at the steeper of its last segment and its chord from
    first to last point (the rate it measured over its whole range): one more point, at twice
    the last size.
    """
    points = prior.points
    if len(points) < 2:
        return points
    (x0, y0), (xl, yl), (xn, yn) = points[0], points[-2], points[-1]
    rate = max((yn - yl) / (xn - xl), (yn - y0) / (xn - x0))
    return (*points, (2 * xn, yn + rate * xn))


def _shrunk(
    design: NDArray[np.float64], seconds: NDArray[np.float64], weights: NDArray[np.float64], target: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Knot values between the free least-squares fit and the prior's `target`, as the data say.

    Empirical Bayes: with s2 the free fit's residual variance and d2 how far its knots stray
    from the target beyond what that noise explains, the ridge penalty s2 / d2 pulls the knots
    toward the target: fully where the prior's shape explains the data (d2 = 0), hardly where
    the data clearly bend away from it. A fit with no timing to spare (s2 = 0) is the free one.
    """
    root = np.sqrt(weights)
    free = np.linalg.lstsq(design * root[:, None], seconds * root, rcond=None)[0].astype(np.float64)
    effective = weights.sum() ** 2 / (weights**2).sum()
    spare = effective - design.shape[1]
    if spare <= 0:
        return free
    noise = float(np.average((seconds - design @ free) ** 2, weights=weights)) * effective / spare
    near = np.maximum(weights @ design, MIN_SECONDS)  # the weight that rests on each knot
    stray = max(0.0, float(np.average((free - target) ** 2 - noise / near, weights=near)))
    if stray == 0:
        return target
    normal = design.T @ (design * weights[:, None]) + (noise / stray) * np.eye(design.shape[1])
    return np.linalg.solve(normal, design.T @ (weights * seconds) + (noise / stray) * target).astype(np.float64)


def fit_on_prior(
    prior: PiecewiseLinearCost,
    sizes: NDArray[np.float64],
    seconds: NDArray[np.float64],
    weights: NDArray[np.float64],
    knots: int,
) -> PriorFit:
    """The model's knots: the prior scaled (narrow sizes) or the shrunk free fit with the prior's tail."""
    curve = shape(prior)
    low, high = float(sizes.min()), float(sizes.max())
    intercept = float(along(curve, np.zeros(1))[0])
    variable = along(curve, sizes) - intercept
    fitted = None if high < SPREAD_RATIO * max(low, 1.0) else _intercept_and_scale(variable, seconds, weights)
    if fitted is None:
        scale = scale_on(curve, sizes, seconds, weights)
        return PriorFit([[x, scale * y] for x, y in curve], parameters=1)
    a, b = fitted
    at = choose_knots(sizes, knots)
    design = hat_matrix(sizes, at)
    values = _shrunk(design, seconds, weights, a + b * (along(curve, at) - intercept))
    values = np.maximum(pool_adjacent_violators(values, weights @ design + MIN_SECONDS), 0.0)
    points = [[float(x), float(v)] for x, v in zip(at, values)]
    # Beyond the data: the prior's points above it (or one continuing its last rate), scaled
    # by b, from the fit's last knot.
    beyond = np.array([x for x, _ in curve if x > high] or [2 * high])
    rise = along(curve, beyond) - along(curve, np.array([high]))
    points += [[float(x), points[-1][1] + b * float(r)] for x, r in zip(beyond, rise)]
    return PriorFit(points, parameters=len(at))
