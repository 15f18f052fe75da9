"""Whom the shared Spark resource goes to next, among batches and merges of many queries.

This is the one ordering of waiting jobs: the live dispatcher (ledger/dispatch.py) builds its
candidates from the requests in the ledger, and the monitor's queue and forecasts (ui/views.py,
ui/risk.py) from the same requests as the UI reads them, both with `Candidate.of_request`; the
simulator (simulation/queue.py) builds them from its query states. All serve
`best_first(...)[0]`, so the monitor shows the order grants follow, and `iqp simulate
--policies rr` predicts what `[iqp] policy = rr` runs, ties included (and the `edf-idle`,
`llf-idle` columns what EDF and LLF run on one resource).

`inserted_idle` is the one exception to serving the best job at once: a non-idling scheduler
grants a long job of a later deadline moments before a job of an earlier deadline is released,
which then waits behind it (Section 4.3); with idling, the resource stays free for it instead.

A backfilled window's job never goes ahead of a live one: its deadline is long past, so under
EDF or LLF it would take the resource from every live query. Backfill jobs are served after all
live ones, oldest window first; a live job waits at most for the backfill jobs already running.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from airflow_iqp.constants import Policy
from airflow_iqp.dynamic.policies import check_policy, rank

if TYPE_CHECKING:
    from datetime import datetime


@dataclass(frozen=True)
class RankedEntry:
    """One candidate of a grant's stored ranking (best first): the request, its query, and the key
    the policy ranked it by; kept with the grant so the order can be audited.
    """

    request: int
    query: str
    key: float | None

    def stored(self) -> dict[str, int | str | float | None]:
        """The entry as the ledger keeps it (JSON)."""
        return {"request": self.request, "query": self.query, "key": self.key}

    @classmethod
    def read(cls, raw: Mapping[str, Any] | Sequence[Any]) -> RankedEntry:
        """A stored entry; grants made before entries were named kept `[request, query, key]`."""
        if isinstance(raw, Mapping):
            request, query, key = raw["request"], raw["query"], raw["key"]
        else:
            request, query, key = raw
        return cls(int(request), str(query), None if key is None else float(key))


class WaitingRequest(Protocol):
    """What the dispatcher ranks a waiting request by, as the ledger's and the monitor's rows hold it."""

    @property
    def id(self) -> int:
        """The request."""

    @property
    def query(self) -> str:
        """Its query: round robin's memory is kept per query."""

    @property
    def deadline(self) -> datetime:
        """Its window's deadline."""

    @property
    def remaining_cost(self) -> float:
        """Its window's remaining work, seconds."""

    @property
    def registered_at(self) -> datetime:
        """When it became ready."""

    @property
    def backfill_window(self) -> datetime | None:
        """For a backfill's request, the start of the window it backfills."""


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

    @classmethod
    def of_request(
        cls,
        *,
        request: int,
        query: str,
        deadline: datetime,
        remaining: float,
        ready: datetime,
        last_served: datetime | None,
        backfill_window: datetime | None,
    ) -> Candidate:
        """A waiting request of the ledger as every ranking of them sees it: the grant, the
        monitor's queue and its forecasts. `ready` is when it registered (or will), `last_served`
        when its query last got a resource (None: never), `backfill_window` the start of the
        window a backfill request backfills (None: a live request). Built in this one place so
        that no copy can leave out what makes a backfill wait behind every live job.
        """
        return cls(
            request=request,
            query=query,
            deadline=deadline.timestamp(),
            remaining=remaining,
            registered=ready.timestamp(),
            last_served=-math.inf if last_served is None else last_served.timestamp(),
            backfill_window=None if backfill_window is None else backfill_window.timestamp(),
        )

    @classmethod
    def of_waiting(cls, r: WaitingRequest, last_served: datetime | None) -> Candidate:
        """A waiting request as a ledger row or the monitor's row holds it (`of_request`)."""
        return cls.of_request(
            request=r.id,
            query=r.query,
            deadline=r.deadline,
            remaining=r.remaining_cost,
            ready=r.registered_at,
            last_served=last_served,
            backfill_window=r.backfill_window,
        )

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


@dataclass(frozen=True)
class Upcoming:
    """A job that is not ready yet but will ask for the resource at `release`."""

    query: str
    release: float
    deadline: float
    remaining: float  # seconds its window needs from `release` on: this job, the rest, the merge


@dataclass(frozen=True)
class IdleTime:
    """The resource kept free: `passed_over` would have run `duration` seconds, and
    `waits_for`, released before that ends, would then have missed its earlier deadline.
    """

    passed_over: Candidate
    duration: float
    waits_for: Upcoming

    @property
    def reason(self) -> str:
        """Why the resource was left idle, in words for the log and the ledger."""
        c, u = self.passed_over, self.waits_for
        return (
            f"idle until {u.query} is released at {u.release:.3f}: behind {c.query}'s {self.duration:.1f} s job it "
            f"would miss its deadline {u.deadline:.3f}, and {c.query} (deadline {c.deadline:.3f}) can go after it"
        )


def inserted_idle(candidate: Candidate, duration: float, upcoming: Sequence[Upcoming], now: float) -> IdleTime | None:
    """Whether to keep the resource free instead of granting `candidate`'s job of `duration`
    seconds (inserted idle time, the blocking of the paper's Section 4.3): a job of another
    query with an earlier deadline is released before that job would end, would miss its
    deadline behind it, would meet it if served at its release, and `candidate` has the laxity
    to run all its remaining work after that job's. An unpriced candidate (NaN) never waits.
    """
    laxity = candidate.deadline - now - candidate.remaining
    for job in sorted(upcoming, key=lambda u: (u.deadline, u.release, u.query)):
        if job.query == candidate.query or job.deadline >= candidate.deadline:
            continue
        if not now < job.release < now + duration:
            continue
        misses_behind = now + duration + job.remaining > job.deadline
        meets_first = job.release + job.remaining <= job.deadline
        if misses_behind and meets_first and laxity >= job.release - now + job.remaining:
            return IdleTime(candidate, duration, job)
    return None
