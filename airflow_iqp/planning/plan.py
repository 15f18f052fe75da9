"""What a planner returns: batches in arrival order, the final merge, and whether D holds."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Batch:
    """Tuples first .. first+size-1, run from start for cost(size) seconds."""

    first: int
    size: int
    release: float  # when its newest tuple arrives
    start: float
    cost: float

    @property
    def last(self) -> int:
        """Number of the batch's newest tuple."""
        return self.first + self.size - 1

    @property
    def end(self) -> float:
        """When the job ends."""
        return self.start + self.cost


@dataclass(frozen=True)
class Merge:
    """The final aggregation of k partial results; absent when one batch did everything."""

    partials: int
    start: float
    cost: float

    @property
    def end(self) -> float:
        """When the job ends."""
        return self.start + self.cost


@dataclass(frozen=True)
class Plan:
    """A window's batches and merge against a deadline; infeasible plans carry the reason."""

    batches: list[Batch]
    merge: Merge | None
    deadline: float
    feasible: bool = True
    reason: str | None = None
    # Set when the deadline cannot be met: the earliest one that can, which this plan meets.
    earliest_deadline: float | None = None
    method: str = "greedy"

    @property
    def total_cost(self) -> float:
        """Seconds of every job of the plan, merge included."""
        costs = [b.cost for b in self.batches] + ([self.merge.cost] if self.merge else [])
        return math.fsum(costs)

    @property
    def finish(self) -> float:
        """When the last job ends (minus infinity for an empty plan)."""
        if self.merge:
            return self.merge.end
        return self.batches[-1].end if self.batches else -math.inf
