"""Admission: can every deadline hold when the declared queries share one non-preemptive resource?

Each query is a recurring task: every window releases `work` seconds of jobs (its batches and
merge) due `deadline` seconds after the window starts (the window plus the deadline after its
end), and none of its jobs can be preempted once granted, so it may hold the resource for its
longest job. The test is George, Rivierre and Spuri's (1996) for non-preemptive EDF (the
paper's Section 4.3): from a synchronous start, at every absolute deadline t,

    demand(t) + blocking(t) <= t,

where demand(t) is the work of every window due by t, and blocking(t) is the longest job of a
query whose deadline is later than t, which may have taken the resource just before. Work is
taken as available when its window starts; the single-query planner places it against the
arrival of its input. Times are exact fractions, so a deadline met exactly counts as met.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

from airflow_iqp.validation import number

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

# More deadlines than this in the test interval means a utilization within a hair of 1.
MAX_DEADLINES = 1_000_000


@dataclass(frozen=True)
class RecurringQuery:
    """One query on the shared resource, per window; all times in seconds."""

    name: str
    period: float  # the window: one release of work per window
    deadline: float  # after the window's start: the window plus the deadline after its end
    work: float  # its jobs per window, batches and merge
    longest_job: float  # the longest it may hold the resource without preemption

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name must be a non-empty string, got {self.name!r}")
        where = f"query {self.name!r}"
        object.__setattr__(self, "period", number(self.period, f"{where}: period", above=0))
        object.__setattr__(self, "deadline", number(self.deadline, f"{where}: deadline", above=0))
        object.__setattr__(self, "work", number(self.work, f"{where}: work", minimum=0))
        object.__setattr__(self, "longest_job", number(self.longest_job, f"{where}: longest_job", minimum=0))


@dataclass(frozen=True)
class QueryAdmission:
    """How one query's deadlines fare: its first deadline that fails and the shortfall there
    (negative slack), or, when all hold, the least slack over them.
    """

    name: str
    slack: float  # t - demand(t) - blocking(t) at its first failing deadline, else at its tightest
    at: float  # that deadline, seconds from the synchronous start
    blocked_by: str | None  # whose longest job is the blocking term there

    @property
    def met(self) -> bool:
        """Every deadline of the query holds."""
        return self.slack >= 0


@dataclass(frozen=True)
class Admission:
    """The test's answer: each query's result, and the first deadline that fails (if any)."""

    queries: tuple[QueryAdmission, ...]
    utilization: float
    first_miss: QueryAdmission | None  # the query whose deadline fails first, with its shortfall there

    @property
    def feasible(self) -> bool:
        """Every deadline of every query holds under non-preemptive EDF."""
        return self.first_miss is None


@dataclass(frozen=True)
class _Task:
    name: str
    period: Fraction
    deadline: Fraction
    work: Fraction
    longest_job: Fraction

    def demand(self, t: Fraction) -> Fraction:
        """Work of its windows due by t."""
        if t < self.deadline:
            return Fraction(0)
        return (math.floor((t - self.deadline) / self.period) + 1) * self.work


def _tasks(queries: Sequence[RecurringQuery]) -> list[_Task]:
    if not queries:
        raise ValueError("admission needs at least one query")
    names = [q.name for q in queries]
    if duplicate := next((n for n in names if names.count(n) > 1), None):
        raise ValueError(f"query {duplicate!r} is listed twice")
    return [
        _Task(q.name, Fraction(q.period), Fraction(q.deadline), Fraction(q.work), Fraction(q.longest_job))
        for q in queries
    ]


def _horizon(tasks: list[_Task], utilization: Fraction) -> Fraction:
    """The last deadline worth testing: past it no deadline can fail (utilization <= 1), or one
    has already failed (utilization > 1).

    demand(t) <= U t + sum max(0, T - D) U_i, so with U < 1 nothing fails past
    (B + sum max(0, T - D) U_i) / (1 - U); demand(t) >= U t - sum D U_i, so with U > 1 a
    deadline past sum D U_i / (U - 1) fails; with U = 1 the slack repeats every hyperperiod.
    """
    latest = max(t.deadline for t in tasks)
    if utilization < 1:
        blocking = max(t.longest_job for t in tasks)
        spare = sum((max(Fraction(0), t.period - t.deadline) * t.work / t.period for t in tasks), Fraction(0))
        return max(latest, (blocking + spare) / (1 - utilization))
    if utilization > 1:
        due = sum((t.deadline * t.work / t.period for t in tasks), Fraction(0))
        return max(latest, due / (utilization - 1) + max(t.period for t in tasks))
    hyperperiod = Fraction(
        math.lcm(*(t.period.numerator for t in tasks)), math.gcd(*(t.period.denominator for t in tasks))
    )
    return hyperperiod + latest


def _releases(task: _Task, position: int) -> Iterator[tuple[Fraction, int]]:
    """The task's absolute deadlines from a synchronous start, without end."""
    k = 0
    while True:
        yield task.deadline + k * task.period, position
        k += 1


def _deadlines(tasks: list[_Task], horizon: Fraction) -> Iterator[tuple[Fraction, int]]:
    """Every absolute deadline up to the horizon, in time order, with its task's position."""
    count = sum(math.floor((horizon - t.deadline) / t.period) + 1 for t in tasks if t.deadline <= horizon)
    if count > MAX_DEADLINES:
        raise ValueError(
            f"the test interval holds {count} deadlines (more than {MAX_DEADLINES}): the utilization "
            "is too close to 1 to decide; give the queries more room"
        )
    for at, i in heapq.merge(*(_releases(t, i) for i, t in enumerate(tasks))):
        if at > horizon:
            return
        yield at, i


def admit(queries: Sequence[RecurringQuery]) -> Admission:
    """Run the demand test over `queries`; ValueError for an empty list or a repeated name."""
    tasks = _tasks(queries)
    utilization = sum((t.work / t.period for t in tasks), Fraction(0))
    found: dict[int, QueryAdmission] = {}
    failed: set[int] = set()
    first_miss: QueryAdmission | None = None
    for at, i in _deadlines(tasks, _horizon(tasks, utilization)):
        if i in failed:
            continue
        blocker = max((t for t in tasks if t.deadline > at), key=lambda t: t.longest_job, default=None)
        blocking = blocker.longest_job if blocker is not None else Fraction(0)
        slack = at - sum((t.demand(at) for t in tasks), Fraction(0)) - blocking
        blocked_by = blocker.name if blocker is not None and blocking > 0 else None
        result = QueryAdmission(tasks[i].name, float(slack), float(at), blocked_by)
        if i not in found or slack < 0 or result.slack < found[i].slack:
            found[i] = result
        if slack < 0:
            failed.add(i)
            first_miss = first_miss or result
            if len(failed) == len(tasks):
                break
    return Admission(tuple(found[i] for i in range(len(tasks))), float(utilization), first_miss)
