"""When a window will finish: what it has left, run behind what the dispatcher serves first.

A window runs one job at a time (the dispatcher holds one open request per window), each no
earlier than its release. A job needs a resource: every resource is busy until its holder's
job ends, and then with the jobs ranked ahead of the window's next one, each on the resource
that frees first. Jobs that register later are not foreseen, so this is the finish if nothing
else arrives; the caller makes the costs as pessimistic as it wants them (a cost model's
residual spread), so that a window predicted to finish after its deadline is at risk before
the deadline comes.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_iqp.validation import number

if TYPE_CHECKING:
    from collections.abc import Sequence


@dataclass(frozen=True)
class Pending:
    """A job still to run: its predicted seconds, and the earliest it may start (its release)."""

    seconds: float
    release: float = -math.inf

    def __post_init__(self) -> None:
        number(self.seconds, "a pending job's seconds", minimum=0)
        if math.isnan(self.release) or self.release == math.inf:
            raise ValueError(f"a pending job's release must be a time or -inf, got {self.release!r}")


@dataclass(frozen=True)
class Backlog:
    """What a window has left: when the job it runs now ends (None while it runs none), then
    its jobs still to run, in order, the merge last.
    """

    running_until: float | None
    jobs: tuple[Pending, ...]

    @property
    def seconds(self) -> float:
        """The work still to run, the job running now aside."""
        return sum(job.seconds for job in self.jobs)


def finish(now: float, backlog: Backlog, busy_until: Sequence[float], ahead: Sequence[float]) -> float:
    """When the window's last job ends.

    `busy_until` has one entry per resource: when its holder's job ends (at or before `now`:
    free). `ahead` are the seconds of the jobs the dispatcher serves before the window's next
    job, best first; they take resources in that order, each the one that frees first.
    """
    if not busy_until:
        raise ValueError("a forecast needs at least one resource")
    free = [max(now, number(t, "a resource's busy_until")) for t in busy_until]
    heapq.heapify(free)
    for seconds in ahead:
        heapq.heappush(free, heapq.heappop(free) + number(seconds, "a job ahead's seconds", minimum=0))
    end = now if backlog.running_until is None else max(now, backlog.running_until)
    for job in backlog.jobs:
        start = max(heapq.heappop(free), job.release, end)
        end = start + job.seconds
        heapq.heappush(free, end)
    return end
