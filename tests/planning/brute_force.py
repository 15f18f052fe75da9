"""Exhaustive search over every way to cut N tuples into consecutive batches.

Independent of the planners: each cut is timed forward, every batch as early as possible,
which finishes no later than any other timing of the same cut.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

    from airflow_iqp.planning import ArrivalCurve
    from airflow_iqp.planning.cost import CostModel


@dataclass(frozen=True)
class Instance:
    total: int
    arrival: ArrivalCurve
    window_end: float
    cost: CostModel
    agg_cost: CostModel | None

    def agg(self, k: int) -> float:
        return 0.0 if k <= 1 or self.agg_cost is None else self.agg_cost.cost(k)


def compositions(n: int) -> Iterator[list[int]]:
    for cuts in itertools.product((False, True), repeat=n - 1):
        sizes: list[int] = []
        run = 1
        for cut in cuts:
            if cut:
                sizes.append(run)
                run = 1
            else:
                run += 1
        sizes.append(run)
        yield sizes


def earliest_finish(inst: Instance, sizes: list[int]) -> float:
    end, last = -math.inf, 0
    for size in sizes:
        last += size
        ready = inst.arrival.time_of(last)
        if last == inst.total:
            ready = max(ready, inst.window_end)
        end = max(ready, end) + inst.cost.cost(size)
    return end + inst.agg(len(sizes))


def cut_cost(inst: Instance, sizes: list[int]) -> float:
    return math.fsum(inst.cost.cost(s) for s in sizes) + inst.agg(len(sizes))


def best(inst: Instance, deadline: float) -> float | None:
    """Least cost of any cut that meets the deadline, or None."""
    costs = [cut_cost(inst, s) for s in compositions(inst.total) if earliest_finish(inst, s) <= deadline]
    return min(costs) if costs else None


def earliest_deadline(inst: Instance) -> float:
    return min(earliest_finish(inst, s) for s in compositions(inst.total))
