"""Whom the shared Spark resource goes to next, among batches and merges of many queries.

This is the one ordering of waiting jobs: the live dispatcher (ledger/dispatch.py) builds its
candidates from the requests in the ledger, the simulator (simulation/queue.py) from its query
states, and both serve `best_first(...)[0]`, so `iqp simulate --policies rr` predicts what
`[iqp] policy = rr` runs, ties included.

A backfilled window's job never goes ahead of a live one: its deadline is long past, so under
EDF or LLF it would take the resource from every live query. Backfill jobs are served after all
live ones, oldest window first; a live job waits at most for the backfill jobs already running.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_iqp.constants import Policy
from airflow_iqp.dynamic.policies import check_policy, rank

if TYPE_CHECKING:
    from collections.abc import Sequence


@dataclass(frozen=True)
class Candidate:
    """A batch or merge waiting for the resource; times in seconds on one clock.

    `request` is a stable id that breaks the last ties: the ledger's request id, or the
    simulator's position of the query in its workload.
    """

    request: int
    query: str
    deadline: float
    remaining: float  # seconds of work its window still needs, its merge included (NaN if unpriced)
    registered: float  # when the job became ready and asked for the resource
    last_served: float  # when its query last got the resource; -inf if never
    backfill_window: float | None = None  # a backfill job: the start of the window it backfills

    def key(self, policy: Policy, now: float) -> tuple[bool, float, float, int]:
        """Smaller is served first: live before backfill; among live jobs the policy's rank
        (round robin: when the query was last served, so the one that has waited longest goes
        first), among backfill jobs the older window; then the earlier registration, then the
        smaller id.
        """
        if self.backfill_window is not None:
            return (True, self.backfill_window, self.registered, self.request)
        first = self.last_served if policy == Policy.RR else rank(policy, self.deadline, self.remaining, now)
        return (False, first, self.registered, self.request)


def best_first(policy: str, candidates: Sequence[Candidate], now: float) -> list[Candidate]:
    """`candidates` in the order `policy` serves them at `now`; ValueError for an unknown policy."""
    chosen = check_policy(policy)
    return sorted(candidates, key=lambda c: c.key(chosen, now))
