"""One window of one query as the planners see it, and the timing rules every plan obeys.

A batch of tuples first..last may start once tuple `last` has arrived and the previous batch
has ended; the batch holding the window's newest tuple also waits for the window to close,
since only then is it known that no more tuples belong to it. Times are floats, so starts are
computed with `latest_start`, which guarantees start + cost <= bound exactly, not just nearly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_iqp.planning.plan import Batch, Merge, Plan

if TYPE_CHECKING:
    from airflow_iqp.planning.arrival import ArrivalCurve
    from airflow_iqp.planning.cost import CostModel


def latest_start(bound: float, seconds: float) -> float:
    """The largest float s with s + seconds <= bound."""
    s = bound - seconds
    while s + seconds > bound:
        s = math.nextafter(s, -math.inf)
    return s


@dataclass(frozen=True)
class Window:
    """The planners' view of one window: its tuples, their arrival, and what batches and merge cost."""

    total: int
    arrival: ArrivalCurve
    window_end: float
    cost: CostModel
    agg_cost: CostModel | None = None

    def ready(self, last: int) -> float:
        """Earliest start of a batch whose newest tuple is `last`."""
        release = self.arrival.time_of(last)
        return max(release, self.window_end) if last == self.total else release

    def agg(self, batches: int) -> float:
        """Seconds of the final merge of `batches` partials; one batch needs none."""
        if batches <= 1 or self.agg_cost is None:
            return 0.0
        return self.agg_cost.cost(batches)

    def batches_bound(self, deadline: float, batches: int) -> float:
        """When the last of `batches` batches must end so that the merge ends by the deadline."""
        return latest_start(deadline, self.agg(batches))

    def schedule(self, sizes: list[int], deadline: float) -> list[Batch] | None:
        """Every batch of the given sizes as late as possible; None if some would start too early."""
        bound = self.batches_bound(deadline, len(sizes))
        batches: list[Batch] = []
        last = self.total
        for size in reversed(sizes):
            seconds = self.cost.cost(size)
            start = latest_start(bound, seconds)
            if start < self.ready(last):
                return None
            batches.append(Batch(last - size + 1, size, self.arrival.time_of(last), start, seconds))
            last -= size
            bound = start
        return batches[::-1]

    def plan(
        self,
        batches: list[Batch],
        deadline: float,
        method: str,
        *,
        feasible: bool = True,
        reason: str | None = None,
        earliest_deadline: float | None = None,
    ) -> Plan:
        """A Plan of these batches, the merge running as soon as the last batch ends."""
        merge = None
        if len(batches) > 1:
            merge = Merge(len(batches), batches[-1].end, self.agg(len(batches)))
        return Plan(
            batches,
            merge,
            deadline,
            feasible=feasible,
            reason=reason,
            earliest_deadline=earliest_deadline,
            method=method,
        )

    def single_batch_finish(self) -> float:
        """Finish of one batch of everything, started when the window closes: always possible."""
        return self.ready(self.total) + self.cost.cost(self.total)
