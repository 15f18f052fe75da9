"""Which ready query runs next: EDF, LLF, SJF or round robin; ties go to the smaller name.

Deterministic ties make runs reproducible and tests exact. `rank` is the one definition of
EDF/LLF/SJF, shared by the simulator and the live dispatcher.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from airflow_iqp.dynamic.laxity import remaining_cost
from airflow_iqp.dynamic.state import QueryState

POLICIES = ("edf", "llf", "sjf", "rr")

Policy = Callable[[Sequence[QueryState], float], QueryState]


def check_policy(name: str) -> str:
    if name not in POLICIES:
        raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {name!r}")
    return name


def rank(policy: str, deadline: float, remaining: float, now: float) -> float:
    """Smaller runs first: the deadline (EDF), the laxity D - now - remaining (LLF, eq. 9),
    or the remaining work (SJF). Round robin has no rank: it rotates.
    """
    if policy == "edf":
        return deadline
    if policy == "llf":
        return deadline - now - remaining
    if policy == "sjf":
        return remaining
    raise ValueError(f"policy {policy!r} does not rank queries (one of edf, llf, sjf)")


def _batch(state: QueryState, now: float, min_batch: bool) -> int | None:
    return state.min_batch(now) if min_batch and not state.all_processed else None


def make_policy(name: str, order: Sequence[str], min_batch: bool) -> Policy:
    """A chooser among ready queries; `order` is the rotation of round robin."""
    if check_policy(name) == "rr":
        return RoundRobin(order)
    return lambda ready, now: min(
        ready,
        key=lambda s: (rank(name, s.deadline, remaining_cost(s, now, _batch(s, now, min_batch)), now), s.name),
    )


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
