"""The simulator's queue of ready jobs, in the live dispatcher's terms.

Each query with a job ready is a waiting request: registered when that job became ready, last
served when the query last got the resource, its position in the workload as the stable id.
`dynamic.dispatch.best_first` orders them, the same code that orders the ledger's requests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_iqp.constants import Policy
from airflow_iqp.dynamic import (
    Candidate,
    QueryState,
    Upcoming,
    best_first,
    next_ready_time,
    ready_since,
    remaining_cost,
)

if TYPE_CHECKING:
    from collections.abc import Sequence


@dataclass
class Waiter:
    """One query as the dispatcher sees it: its state and the history the ranking needs."""

    state: QueryState
    request: int  # stable id: the query's position in the workload
    since: float  # from when on its current job may have become ready (submission at first)
    last_served: float = -math.inf  # when it last got the resource
    registered: float | None = None  # when its current job became ready, once seen

    def candidate(self, now: float, min_batch: bool, priced: bool = True) -> Candidate:
        """This query's request at `now`: its remaining work priced in MinBatch batches
        (one batch for the traditional baselines), its merge included; NaN unless `priced`.
        """
        if self.registered is None:
            self.registered = ready_since(self.state, self.since, now, min_batch)
        remaining = math.nan
        if priced:
            batch = self.state.min_batch(now) if min_batch and not self.state.all_processed else None
            remaining = remaining_cost(self.state, now, batch)
        return Candidate(
            request=self.request,
            query=self.state.name,
            deadline=self.state.deadline,
            remaining=remaining,
            registered=self.registered,
            last_served=self.last_served,
        )

    def idle(self, now: float) -> None:
        """Nothing of it is ready at `now`: its next job becomes ready later, if ever."""
        self.since = now
        self.registered = None

    def served(self, start: float, end: float) -> None:
        """It got the resource at `start` for a job that ends at `end`."""
        self.last_served = start
        self.since = end
        self.registered = None


def pick(policy: Policy, ready: Sequence[Waiter], now: float, min_batch: bool) -> list[Waiter]:
    """The ready queries in the order `policy` serves them at `now` (the first gets the resource).

    Only LLF and SJF rank by the remaining work, so only they price it: pricing every waiting
    query at every pick is most of a simulation's time.
    """
    if len(ready) == 1:  # nothing to rank
        return list(ready)
    by_request = {w.request: w for w in ready}
    priced = policy in (Policy.LLF, Policy.SJF)
    ranked = best_first(policy, [w.candidate(now, min_batch, priced) for w in ready], now)
    return [by_request[c.request] for c in ranked]


def upcoming(waiter: Waiter, now: float, min_batch: bool) -> Upcoming | None:
    """The job a query with nothing ready at `now` will ask for next: when, for which deadline
    and how much work its window then needs; None if it never will.
    """
    state = waiter.state
    release = next_ready_time(state, now, min_batch)
    if not now < release < math.inf:
        return None
    batch = state.min_batch(release) if min_batch and not state.all_processed else None
    return Upcoming(state.name, release, state.deadline, remaining_cost(state, release, batch))
