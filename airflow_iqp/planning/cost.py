"""Cost models: seconds to process n tuples in one batch (or to merge k partials).

Both models are non-decreasing in n and have cost(0) = 0, which the planner relies on:
an empty batch is never run, so it costs nothing, not even the per-batch overhead.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from airflow_iqp.validation import number

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

# max_tuples() answer when no finite n makes the cost exceed the budget (a flat cost).
UNBOUNDED = 2**62


class CostModel(Protocol):
    """Seconds for a batch of n tuples (or a merge of n partials), non-decreasing, cost(0) = 0."""

    def cost(self, n: int) -> float:
        """Seconds to process n tuples in one batch; 0 for n <= 0."""
        ...

    def max_tuples(self, seconds: float) -> int:
        """The largest n with cost(n) <= seconds (UNBOUNDED if the cost never exceeds it)."""
        ...


def largest_fitting(estimate: int, fits: Callable[[int], bool]) -> int:
    """Largest n >= 0 with fits(n), for a predicate true up to some n and false after.

    The estimate comes from a closed form that floating point may leave a few units off;
    galloping from it costs O(log error) exact checks instead of trusting the rounding.
    """
    n = max(0, min(estimate, UNBOUNDED))
    if fits(n):
        step = 1
        while n < UNBOUNDED and fits(min(n + step, UNBOUNDED)):
            n = min(n + step, UNBOUNDED)
            step *= 2
        hi = min(n + step, UNBOUNDED + 1)  # fits(n) and not fits(hi), or hi is past the end
    else:
        hi, step = n, 1
        while True:
            n = max(hi - step, 0)
            if n == 0 or fits(n):
                break
            hi, step = n, step * 2
        if not fits(n):
            return 0
    while hi - n > 1:
        mid = (n + hi) // 2
        if fits(mid):
            n = mid
        else:
            hi = mid
    return n


@dataclass(frozen=True)
class LinearCost:
    """cost(n) = overhead + per_tuple * n for n >= 1: a fixed start-up plus a rate."""

    per_tuple: float
    overhead: float = 0.0

    def __post_init__(self) -> None:
        for name in ("per_tuple", "overhead"):
            object.__setattr__(self, name, number(getattr(self, name), name, minimum=0))

    def cost(self, n: int) -> float:
        """The overhead plus per_tuple * n; 0 for n <= 0."""
        return 0.0 if n <= 0 else self.overhead + self.per_tuple * n

    def max_tuples(self, seconds: float) -> int:
        """The largest n with cost(n) <= seconds."""
        if seconds < self.cost(1):
            return 0
        if self.per_tuple == 0:
            return UNBOUNDED
        estimate = (seconds - self.overhead) / self.per_tuple
        return largest_fitting(int(min(estimate, UNBOUNDED)), lambda n: self.cost(n) <= seconds)

    def segments(self, limit: int) -> list[tuple[int, int, float, float]]:
        """[(1, limit, overhead, per_tuple)]: one linear range, as PiecewiseLinearCost.segments."""
        return [(1, limit, self.overhead, self.per_tuple)]

    def scaled(self, factor: float) -> LinearCost:
        """The same model with every prediction `factor` times as long (a margin)."""
        return self if factor == 1 else LinearCost(self.per_tuple * factor, self.overhead * factor)


@dataclass(frozen=True)
class PiecewiseLinearCost:
    """Linear interpolation between measured (tuples, seconds) points.

    Below the first point the first segment is extended (never below 0 seconds), above the
    last point the last one; a single point is a constant per-batch cost.
    """

    points: tuple[tuple[float, float], ...]

    def __init__(self, points: Iterable[Sequence[float]]) -> None:
        checked: list[tuple[float, float]] = []
        for i, point in enumerate(points):
            if len(point) != 2:
                raise ValueError(f"points[{i}] must be a (tuples, seconds) pair, got {point!r}")
            tuples = number(point[0], f"points[{i}] tuples")
            seconds = number(point[1], f"points[{i}] seconds")
            if tuples < 0 or seconds < 0:
                raise ValueError(f"points[{i}] = {tuple(point)} has a negative value")
            if checked and tuples <= checked[-1][0]:
                raise ValueError(
                    f"points[{i}] = {tuple(point)}: tuples must be strictly increasing "
                    f"(previous point has {checked[-1][0]:g})"
                )
            if checked and seconds < checked[-1][1]:
                raise ValueError(
                    f"points[{i}] = {tuple(point)}: seconds must be non-decreasing "
                    f"(previous point has {checked[-1][1]:g})"
                )
            checked.append((tuples, seconds))
        if not checked:
            raise ValueError("points must hold at least one (tuples, seconds) pair")
        object.__setattr__(self, "points", tuple(checked))

    def _slope(self, i: int) -> float:
        (x0, y0), (x1, y1) = self.points[i], self.points[i + 1]
        return (y1 - y0) / (x1 - x0)

    def _segment(self, n: float) -> int:
        """Index of the segment [points[i], points[i+1]] whose line gives cost(n)."""
        last = len(self.points) - 2
        return min(max(bisect.bisect_right(self.points, (n, math.inf)) - 1, 0), last)

    def cost(self, n: int) -> float:
        """The interpolated seconds for n tuples; 0 for n <= 0."""
        if n <= 0:
            return 0.0
        if len(self.points) == 1:
            return self.points[0][1]
        i = self._segment(n)
        x0, y0 = self.points[i]
        return max(0.0, y0 + self._slope(i) * (n - x0))

    def max_tuples(self, seconds: float) -> int:
        """The largest n with cost(n) <= seconds (UNBOUNDED where the cost stays flat)."""
        if seconds < self.cost(1):
            return 0
        if len(self.points) == 1 or self.points[-1][1] <= seconds and self._slope(-2) == 0:
            return UNBOUNDED
        # The last point whose cost fits starts the segment that holds the answer.
        i = bisect.bisect_right([y for _, y in self.points], seconds) - 1
        i = min(max(i, 0), len(self.points) - 2)
        slope = self._slope(i)
        x0, y0 = self.points[i]
        estimate = x0 + (seconds - y0) / slope if slope > 0 else self.points[i + 1][0]
        return largest_fitting(int(min(max(estimate, 0), UNBOUNDED)), lambda n: self.cost(n) <= seconds)

    def scaled(self, factor: float) -> PiecewiseLinearCost:
        """The same model with every prediction `factor` times as long (a margin)."""
        return self if factor == 1 else PiecewiseLinearCost([(x, y * factor) for x, y in self.points])

    def segments(self, limit: int) -> list[tuple[int, int, float, float]]:
        """Integer ranges [lo, hi] within [1, limit] with cost(n) = a + b * n on each.

        The optimizer models cost exactly with one binary per range.
        """
        if len(self.points) == 1:
            return [(1, limit, self.points[0][1], 0.0)]
        cuts = sorted({1, limit + 1} | {math.ceil(x) for x, _ in self.points[1:-1] if 1 < x <= limit})
        ranges = []
        for lo, nxt in zip(cuts, cuts[1:]):
            hi = nxt - 1
            i = self._segment(lo)
            b = self._slope(i)
            a = self.points[i][1] - b * self.points[i][0]
            if a + b * lo < 0:  # the extension below the first point is clamped at 0
                zero_until = min(hi, largest_fitting(lo, lambda n: n <= hi and a + b * n <= 0))
                ranges.append((lo, zero_until, 0.0, 0.0))
                lo = zero_until + 1
            if lo <= hi:
                ranges.append((lo, hi, a, b))
        return ranges
