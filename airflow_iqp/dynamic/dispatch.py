"""Whom the shared Spark resource goes to next, among batches and merges of many queries.

The live dispatcher (ledger/dispatch.py) keeps its queue in the database; this is its pure
decision, in the same terms as the simulator's policies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_iqp.dynamic.policies import check_policy, rank

if TYPE_CHECKING:
    from collections.abc import Sequence


@dataclass(frozen=True)
class Candidate:
    """A registered batch or merge waiting for the resource; times in epoch seconds."""

    request: int
    query: str
    deadline: float
    remaining: float  # seconds of work its window still needs, its merge included
    registered: float
    last_served: float  # when its query last got the resource; -inf if never

    def key(self, policy: str, now: float) -> tuple[float, float, int]:
        """Smaller is served first; ties go to the earlier registration. Round robin serves
        the query that has waited longest since it was last served.
        """
        first = self.last_served if policy == "rr" else rank(policy, self.deadline, self.remaining, now)
        return (first, self.registered, self.request)


def best_first(policy: str, candidates: Sequence[Candidate], now: float) -> list[Candidate]:
    check_policy(policy)
    return sorted(candidates, key=lambda c: c.key(policy, now))
