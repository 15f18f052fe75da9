"""Fitting a monotone piecewise-linear cost model to measured (size, seconds) points.

Least squares over a few knots (the planner pays one binary per segment, so few segments),
then made non-decreasing by pooling adjacent violators: `PiecewiseLinearCost` and the planner
need a cost that never falls as a batch grows, while noisy timings sometimes do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

MAX_KNOTS = 4


@dataclass(frozen=True)
class Fit:
    """A fitted model and how far it is from the measurements it was fitted to."""

    points: list[list[float]]  # [[size, seconds], ...]: sizes strictly increasing, seconds non-decreasing
    rmse: float  # seconds
    max_relative_error: float


def choose_knots(xs: ArrayLike, max_knots: int = MAX_KNOTS) -> np.ndarray:
    """Measured sizes nearest to log-spaced targets: sizes are measured on a doubling grid."""
    distinct = np.unique(np.asarray(xs, dtype=float))
    if len(distinct) <= max_knots:
        return distinct
    targets = np.geomspace(max(distinct[0], 1e-9), distinct[-1], max_knots)
    return np.unique([distinct[np.argmin(np.abs(np.log(distinct / t)))] for t in targets])


def hat_matrix(xs: np.ndarray, knots: np.ndarray) -> np.ndarray:
    """Row i holds the weights linear interpolation at xs[i] gives each knot's value."""
    matrix = np.zeros((len(xs), len(knots)))
    for i, x in enumerate(xs):
        j = int(np.clip(np.searchsorted(knots, x, side="right") - 1, 0, len(knots) - 2))
        t = (x - knots[j]) / (knots[j + 1] - knots[j])
        matrix[i, j], matrix[i, j + 1] = 1 - t, t
    return matrix


def pool_adjacent_violators(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The weighted least-squares non-decreasing sequence closest to `values`."""
    blocks: list[list[float]] = []  # [mean, weight, count]
    for v, w in zip(values, weights):
        blocks.append([float(v), float(w), 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            v2, w2, n2 = blocks.pop()
            v1, w1, n1 = blocks[-1]
            blocks[-1] = [(v1 * w1 + v2 * w2) / (w1 + w2), w1 + w2, n1 + n2]
    return np.array([mean for mean, _, count in blocks for _ in range(int(count))])


def fit_piecewise(xs: ArrayLike, ys: ArrayLike, max_knots: int = MAX_KNOTS) -> Fit:
    """Monotone piecewise-linear fit of seconds `ys` by size `xs`, with its error on the data."""
    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    if len(x) == 0 or len(x) != len(y):
        raise ValueError(f"need equally many sizes and seconds, at least one, got {len(x)} and {len(y)}")
    knots = choose_knots(x, max_knots)
    if len(knots) == 1:
        values = np.array([y.mean()])
        predicted = np.full_like(y, values[0])
    else:
        design = hat_matrix(x, knots)
        values, *_ = np.linalg.lstsq(design, y, rcond=None)
        values = np.maximum(pool_adjacent_violators(values, design.sum(axis=0) + 1e-9), 0.0)
        predicted = design @ values
    relative = np.abs(predicted - y) / np.maximum(y, 1e-9)
    return Fit(
        points=[[float(k), round(float(v), 6)] for k, v in zip(knots, values)],
        rmse=float(np.sqrt(np.mean((predicted - y) ** 2))),
        max_relative_error=float(relative.max()),
    )
