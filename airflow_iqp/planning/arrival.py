"""Arrival curves: how many tuples of a window have arrived by a time, and when the n-th does.

Tuples are numbered 1..total in arrival order. The planner asks time_of(n) for the release of
a batch whose newest tuple is n, so both curves answer it in O(1) or O(log points).
"""

from __future__ import annotations

import bisect
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_iqp.planning.cost import largest_fitting
from airflow_iqp.validation import number, whole_number

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence


class ArrivalCurve(ABC):
    """Cumulative arrivals of one window's input, a non-decreasing step function of time."""

    total: int

    @abstractmethod
    def count_at(self, t: float) -> int:
        """Tuples arrived by time t (inclusive)."""

    @abstractmethod
    def time_of(self, n: int) -> float:
        """Earliest time at which n tuples have arrived (the paper's InputTime)."""

    @property
    def first_arrival(self) -> float:
        """When the first tuple arrives; infinity for an empty window."""
        return self.time_of(1) if self.total else math.inf

    def _check_index(self, n: int) -> None:
        if n > self.total:
            raise ValueError(f"n = {n} exceeds the {self.total} tuples of this arrival curve")

    @staticmethod
    def from_points(points: Iterable[Sequence[float]]) -> StepArrival:
        """(time, cumulative tuples) pairs, times non-decreasing; count_at(t) is the count of the
        last point at or before t.
        """
        return StepArrival.build(points)

    @staticmethod
    def fixed_rate(start: float, end: float, total: int) -> FixedRateArrival:
        """`total` tuples evenly spaced, the first at `start` and the last at `end`."""
        return FixedRateArrival.build(start, end, total)


@dataclass(frozen=True)
class StepArrival(ArrivalCurve):
    """Arrivals as measured or replayed: a step at each (time, cumulative tuples) point."""

    times: tuple[float, ...]
    counts: tuple[int, ...]
    total: int

    @classmethod
    def build(cls, points: Iterable[Sequence[float]]) -> StepArrival:
        """Check and normalise the points; a ValueError names the first bad one."""
        times: list[float] = []
        counts: list[int] = []
        for i, point in enumerate(points):
            if len(point) != 2:
                raise ValueError(f"points[{i}] must be a (time, cumulative tuples) pair, got {point!r}")
            t = number(point[0], f"points[{i}] time")
            c = whole_number(point[1], f"points[{i}] cumulative tuples", minimum=0)
            if times and t < times[-1]:
                raise ValueError(f"points[{i}] time {t:g} is before the previous point's {times[-1]:g}")
            if counts and c < counts[-1]:
                raise ValueError(f"points[{i}] cumulative tuples {c} decrease from the previous point's {counts[-1]}")
            if counts and c == counts[-1]:
                continue  # nothing new arrived: the step function is unchanged
            if times and t == times[-1]:
                counts[-1] = c  # a burst: several points at one instant are one step
                continue
            times.append(t)
            counts.append(c)
        if not times:
            raise ValueError("points must hold at least one (time, cumulative tuples) pair")
        return cls(tuple(times), tuple(counts), counts[-1])

    def count_at(self, t: float) -> int:
        """Tuples arrived by time t (inclusive)."""
        i = bisect.bisect_right(self.times, t) - 1
        return self.counts[i] if i >= 0 else 0

    def time_of(self, n: int) -> float:
        """Earliest time at which n tuples have arrived."""
        if n <= 0:
            return -math.inf
        self._check_index(n)
        return self.times[bisect.bisect_left(self.counts, n)]


@dataclass(frozen=True)
class FixedRateArrival(ArrivalCurve):
    """`total` tuples evenly spaced from `start` to `end`: the declared rate, in O(1)."""

    start: float
    end: float
    total: int

    @classmethod
    def build(cls, start: float, end: float, total: int) -> FixedRateArrival:
        """Check the arguments; a ValueError names the bad one."""
        start, end = number(start, "start"), number(end, "end")
        total = whole_number(total, "total", minimum=0)
        if end < start:
            raise ValueError(f"end ({end:g}) must not be before start ({start:g})")
        return cls(start, end, total)

    @property
    def gap(self) -> float:
        """Seconds between consecutive tuples."""
        return (self.end - self.start) / (self.total - 1) if self.total > 1 else 0.0

    def time_of(self, n: int) -> float:
        """Earliest time at which n tuples have arrived."""
        if n <= 0:
            return -math.inf
        self._check_index(n)
        return self.end if n == self.total > 1 else self.start + (n - 1) * self.gap

    def count_at(self, t: float) -> int:
        """Tuples arrived by time t (inclusive)."""
        if self.total == 0 or t < self.start:
            return 0
        if t >= self.end:
            return self.total
        estimate = int((t - self.start) / self.gap) + 1 if self.gap > 0 else self.total
        return min(largest_fitting(estimate, lambda n: n <= self.total and self.time_of(n) <= t), self.total)
