"""Which ready query runs next: EDF, LLF, SJF or round robin; ties go to the smaller name.

Deterministic ties make runs reproducible and tests exact.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from airflow_iqp.dynamic.laxity import laxity, remaining_cost
from airflow_iqp.dynamic.state import QueryState

POLICIES = ("edf", "llf", "sjf", "rr")

Policy = Callable[[Sequence[QueryState], float], QueryState]


def _batch(state: QueryState, now: float, min_batch: bool) -> int | None:
    return state.min_batch(now) if min_batch and not state.all_processed else None


def make_policy(name: str, order: Sequence[str], min_batch: bool) -> Policy:
    """A chooser among ready queries; `order` is the rotation of round robin."""
    if name == "edf":
        return lambda ready, now: min(ready, key=lambda s: (s.deadline, s.name))
    if name == "llf":
        return lambda ready, now: min(ready, key=lambda s: (laxity(s, now, _batch(s, now, min_batch)), s.name))
    if name == "sjf":
        return lambda ready, now: min(
            ready, key=lambda s: (remaining_cost(s, now, _batch(s, now, min_batch)), s.name)
        )
    if name == "rr":
        return RoundRobin(order)
    raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {name!r}")


class RoundRobin:
    """Serve the next ready query after the one served last, in submission order."""

    def __init__(self, order: Sequence[str]) -> None:
        self.position = {name: i for i, name in enumerate(order)}
        self.last = -1

    def __call__(self, ready: Sequence[QueryState], now: float) -> QueryState:
        size = len(self.position)
        chosen = min(ready, key=lambda s: (self.position[s.name] - self.last - 1) % size)
        self.last = self.position[chosen.name]
        return chosen
