"""Fitting a monotone piecewise-linear cost model to measured (size, seconds) points.

Weighted least squares over a few knots (the planner pays one binary per segment, so few
segments), then made non-decreasing by pooling adjacent violators: `PiecewiseLinearCost` and
the planner need a cost that never falls as a batch grows, while noisy timings sometimes do.
Weights let recent timings count more than old ones (`airflow_iqp.learning.cost`); without
weights every point counts the same, which is what `iqp fit-cost-model` wants. The squares are
then of relative errors: timings are noisy in proportion to their length, and in absolute
seconds a few long batches pull the short-batch knots off by more than the noise. Each point is
weighted by its first fit's prediction, not its own time, which would favour the lucky ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Sequence

    from numpy.typing import NDArray

MAX_KNOTS = 4
MIN_SECONDS = 1e-3  # a time under a millisecond counts as one when dividing by it


@dataclass(frozen=True)
class Fit:
    """The fitted knots and how far the fit is from the points it was fitted to."""

    points: list[list[float]]  # [[size, seconds], ...]: sizes strictly increasing, seconds non-decreasing
    rmse: float  # seconds, weighted like the fit
    max_relative_error: float


def along(points: tuple[tuple[float, float], ...], sizes: NDArray[np.float64]) -> NDArray[np.float64]:
    """A piecewise-linear curve at `sizes`, extended along its end segments (never below 0)."""
    xs = np.array([p[0] for p in points])
    ys = np.array([p[1] for p in points])
    if len(xs) == 1:
        return np.full_like(sizes, ys[0], dtype=float)
    first = (ys[1] - ys[0]) / (xs[1] - xs[0])
    last = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
    inside = np.interp(sizes, xs, ys)
    below = ys[0] + first * (sizes - xs[0])
    above = ys[-1] + last * (sizes - xs[-1])
    curve: NDArray[np.float64] = np.where(sizes < xs[0], below, np.where(sizes > xs[-1], above, inside))
    return np.maximum(curve, 0.0)


def choose_knots(xs: Sequence[float] | NDArray[np.float64], max_knots: int = MAX_KNOTS) -> NDArray[np.float64]:
    """Measured sizes nearest to log-spaced targets (sizes are measured on a doubling grid).

    The smallest and largest sizes are always knots, so every point lies within the knots and
    the fit interpolates, never extrapolates, on the data. log1p spacing lets a size be 0 (a
    job over empty input).
    """
    distinct = np.unique(np.asarray(xs, dtype=float))
    if len(distinct) <= max_knots:
        return distinct
    logs = np.log1p(distinct)
    targets = np.linspace(logs[0], logs[-1], max_knots)
    return np.unique(distinct[np.abs(logs[None, :] - targets[:, None]).argmin(axis=1)])


def hat_matrix(xs: NDArray[np.float64], knots: NDArray[np.float64]) -> NDArray[np.float64]:
    """Row i holds the weights linear interpolation at xs[i] gives each knot's value."""
    rows = np.arange(len(xs))
    j = np.clip(np.searchsorted(knots, xs, side="right") - 1, 0, len(knots) - 2)
    t = (xs - knots[j]) / (knots[j + 1] - knots[j])
    matrix = np.zeros((len(xs), len(knots)))
    matrix[rows, j] = 1 - t
    matrix[rows, j + 1] = t
    return matrix


def pool_adjacent_violators(values: NDArray[np.float64], weights: NDArray[np.float64]) -> NDArray[np.float64]:
    """The weighted least-squares non-decreasing sequence closest to `values`."""
    blocks: list[tuple[float, float, int]] = []  # (mean, weight, count)
    for v, w in zip(values, weights):
        blocks.append((float(v), float(w), 1))
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            v2, w2, n2 = blocks.pop()
            v1, w1, n1 = blocks[-1]
            blocks[-1] = ((v1 * w1 + v2 * w2) / (w1 + w2), w1 + w2, n1 + n2)
    return np.array([mean for mean, _, count in blocks for _ in range(count)])


def _monotone_least_squares(
    design: NDArray[np.float64], y: NDArray[np.float64], w: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Knot values minimising the weighted squares, then pooled non-decreasing and >= 0."""
    root = np.sqrt(w)
    values, *_ = np.linalg.lstsq(design * root[:, None], y * root, rcond=None)
    return np.maximum(pool_adjacent_violators(np.asarray(values, dtype=np.float64), w @ design + 1e-9), 0.0)


def fit_piecewise(
    xs: Sequence[float] | NDArray[np.float64],
    ys: Sequence[float] | NDArray[np.float64],
    weights: Sequence[float] | NDArray[np.float64] | None = None,
    max_knots: int = MAX_KNOTS,
) -> Fit:
    """Monotone piecewise-linear fit of seconds `ys` by size `xs`, with its error on the data."""
    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    w = np.ones_like(x) if weights is None else np.asarray(weights, dtype=float)
    if len(x) == 0 or len(x) != len(y) or len(x) != len(w):
        raise ValueError(
            f"need equally many sizes, seconds and weights, at least one, got {len(x)}, {len(y)} and {len(w)}"
        )
    if not (np.isfinite(w).all() and (w > 0).all()):
        raise ValueError("weights must be finite and > 0")
    if max_knots < 2:
        raise ValueError(f"max_knots must be >= 2 (two knots make a line), got {max_knots}")
    knots = choose_knots(x, max_knots)
    if len(knots) == 1:
        values = np.array([np.average(y, weights=w)])
        predicted = np.full_like(y, values[0])
    else:
        design = hat_matrix(x, knots)
        first = design @ _monotone_least_squares(design, y, w)
        values = _monotone_least_squares(design, y, w / np.maximum(first, MIN_SECONDS) ** 2)
        predicted = design @ values
    relative = np.abs(predicted - y) / np.maximum(y, 1e-9)
    return Fit(
        points=[[float(k), float(v)] for k, v in zip(knots, values)],
        rmse=float(np.sqrt(np.average((predicted - y) ** 2, weights=w))),
        max_relative_error=float(relative.max()),
    )


def proportional_tail(points: list[list[float]]) -> list[list[float]]:
    """The knots, extrapolating beyond the last no steeper than proportionally to the size.

    Beyond its largest measured size a fit extends its last segment, whose slope may be noise
    (two batches of nearly the same size). Past the data, the cost is allowed to grow at most
    as the size does (cost(2 n) <= 2 cost(n)): a per-job start-up plus a per-row rate never
    grows faster. A steeper last segment gets one more knot at twice the largest size.
    """
    if len(points) < 2 or points[-1][0] <= 0:
        return points
    (x0, y0), (x1, y1) = points[-2], points[-1]
    if (y1 - y0) / (x1 - x0) <= y1 / x1:
        return points
    return [*points, [2 * x1, 2 * y1]]
