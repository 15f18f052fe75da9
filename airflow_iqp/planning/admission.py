"""Admission: can every deadline hold when the declared queries share one non-preemptive resource?

Each query is a recurring task: every window releases `work` seconds of jobs (its batches and
merge) due `deadline` seconds after the window starts (the window plus the deadline after its
end), and none of its jobs can be preempted once granted, so it may hold the resource for its
longest job. The test is George, Rivierre and Spuri's (1996) for non-preemptive EDF (the
paper's Section 4.3): from a synchronous start, at every absolute deadline t,

    demand(t) + blocking(t) <= t,

where demand(t) is the work of every window due by t, and blocking(t) is the longest job of
another query whose deadline is later than t, which may have taken the resource just before.

A window's work cannot all start when it opens: its input lands during the window, and its last
batch and the merge (`final_work`) only once it has closed. The final work is therefore a task
of its own, released at the window's end and due `deadline - period` after it; the rest is
taken as available from the window's start (the single-query planner places it against the
arrival of its input). Both parts are tested as if released together, the worst case for
independent tasks. Times are exact fractions, so a deadline met exactly counts as met.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

from airflow_iqp.validation import number

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

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
    final_work: float = 0.0  # of `work`, what cannot start before the window ends (last batch, merge)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name must be a non-empty string, got {self.name!r}")
        where = f"query {self.name!r}"
        object.__setattr__(self, "period", number(self.period, f"{where}: period", above=0))
        object.__setattr__(self, "deadline", number(self.deadline, f"{where}: deadline", above=0))
        object.__setattr__(self, "work", number(self.work, f"{where}: work", minimum=0))
        object.__setattr__(self, "longest_job", number(self.longest_job, f"{where}: longest_job", minimum=0))
        final = number(self.final_work, f"{where}: final_work", minimum=0)
        if final > self.work:
            raise ValueError(f"{where}: final_work ({final:g} s) is more than its work per window ({self.work:g} s)")
        if final > 0 and self.deadline < self.period:
            raise ValueError(
                f"{where}: deadline ({self.deadline:g} s) is before its window ends ({self.period:g} s), "
                "but final work only starts then"
            )
        object.__setattr__(self, "final_work", final)


@dataclass(frozen=True)
class QueryAdmission:
    """How one query's deadlines fare: its first deadline that fails and the shortfall there
    (negative slack), or, when all hold, the least slack over them.
    """

    name: str
    slack: float  # t - demand(t) - blocking(t) at its first failing deadline, else at its tightest
    at: float  # that deadline, seconds from the synchronous start
    blocked_by: str | None  # whose longest job is the blocking term there
    final: bool = False  # the deadline is its final work's, released when its window closes

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


def _due(t: Fraction, deadline: Fraction, period: Fraction) -> int:
    """Releases due by t, one every period, the first due at `deadline`."""
    return 0 if t < deadline else math.floor((t - deadline) / period) + 1


@dataclass(frozen=True)
class _Task:
    """A query in exact arithmetic: the work available from the window's start (due `deadline`)
    and the final work released at its end (due `final_deadline` after the window starts, as if
    released at its start).
    """

    name: str
    period: Fraction
    deadline: Fraction
    work: Fraction
    longest_job: Fraction
    final_work: Fraction

    @property
    def final_deadline(self) -> Fraction:
        return self.deadline - self.period

    def demand(self, t: Fraction) -> Fraction:
        """Work of its windows due by t."""
        early = _due(t, self.deadline, self.period) * (self.work - self.final_work)
        return early + _due(t, self.final_deadline, self.period) * self.final_work

    def deadlines(self) -> list[Fraction]:
        """The relative deadlines of its parts that carry work (at least one, to report on)."""
        if self.final_work == 0:
            return [self.deadline]
        return [self.final_deadline] if self.final_work == self.work else [self.final_deadline, self.deadline]


def _tasks(queries: Sequence[RecurringQuery]) -> list[_Task]:
    if not queries:
        raise ValueError("admission needs at least one query")
    names = [q.name for q in queries]
    if duplicate := next((n for n in names if names.count(n) > 1), None):
        raise ValueError(f"query {duplicate!r} is listed twice")
    return [
        _Task(
            q.name,
            Fraction(q.period),
            Fraction(q.deadline),
            Fraction(q.work),
            Fraction(q.longest_job),
            Fraction(q.final_work),
        )
        for q in queries
    ]


def _parts(tasks: list[_Task]) -> list[tuple[int, Fraction, Fraction]]:
    """(task position, relative deadline, work per window) of every part of every task."""
    parts = []
    for i, t in enumerate(tasks):
        for deadline in t.deadlines():
            work = t.final_work if deadline == t.final_deadline else t.work - t.final_work
            parts.append((i, deadline, work))
    return parts


def _horizon(tasks: list[_Task], utilization: Fraction) -> Fraction:
    """The last deadline worth testing: past it no deadline can fail (utilization <= 1), or one
    has already failed (utilization > 1).

    Over parts of deadline D, period T and work C: demand(t) <= U t + sum max(0, T - D) C / T,
    so with U < 1 nothing fails past (B + sum max(0, T - D) C / T) / (1 - U); demand(t) >=
    U t - sum D C / T, so with U > 1 a deadline past sum D C / T / (U - 1) fails; with U = 1
    the slack repeats every hyperperiod.
    """
    parts = _parts(tasks)
    latest = max(deadline for _, deadline, _ in parts)
    if utilization < 1:
        blocking = max(t.longest_job for t in tasks)
        spare = sum(
            (max(Fraction(0), tasks[i].period - deadline) * work / tasks[i].period for i, deadline, work in parts),
            Fraction(0),
        )
        return max(latest, (blocking + spare) / (1 - utilization))
    if utilization > 1:
        due = sum((deadline * work / tasks[i].period for i, deadline, work in parts), Fraction(0))
        return max(latest, due / (utilization - 1) + max(t.period for t in tasks))
    hyperperiod = Fraction(
        math.lcm(*(t.period.numerator for t in tasks)), math.gcd(*(t.period.denominator for t in tasks))
    )
    return hyperperiod + latest


def _releases(deadline: Fraction, period: Fraction, position: int, final: bool) -> Iterator[tuple[Fraction, int, bool]]:
    """A part's absolute deadlines from a synchronous start, without end."""
    k = 0
    while True:
        yield deadline + k * period, position, final
        k += 1


def _deadlines(tasks: list[_Task], horizon: Fraction) -> Iterator[tuple[Fraction, int, bool]]:
    """Every absolute deadline up to the horizon, in time order, with its task's position and
    whether it is its final work's.
    """
    parts = _parts(tasks)
    count = sum(_due(horizon, deadline, tasks[i].period) for i, deadline, _ in parts)
    if count > MAX_DEADLINES:
        raise ValueError(
            f"the test interval holds {count} deadlines (more than {MAX_DEADLINES}): the utilization "
            "is too close to 1 to decide; give the queries more room"
        )
    releases = (_releases(d, tasks[i].period, i, d == tasks[i].final_deadline) for i, d, _ in parts)
    for at, i, final in heapq.merge(*releases):
        if at > horizon:
            return
        yield at, i, final


def admit(queries: Sequence[RecurringQuery]) -> Admission:
    """Run the demand test over `queries`; ValueError for an empty list or a repeated name."""
    tasks = _tasks(queries)
    utilization = sum((t.work / t.period for t in tasks), Fraction(0))
    found: dict[int, QueryAdmission] = {}
    failed: set[int] = set()
    first_miss: QueryAdmission | None = None
    for at, i, final in _deadlines(tasks, _horizon(tasks, utilization)):
        if i in failed:
            continue
        # Its own jobs run one at a time in window order and are in its demand: only others block it.
        others = (t for j, t in enumerate(tasks) if j != i and t.deadline > at)
        blocker = max(others, key=lambda t: t.longest_job, default=None)
        blocking = blocker.longest_job if blocker is not None else Fraction(0)
        slack = at - sum((t.demand(at) for t in tasks), Fraction(0)) - blocking
        blocked_by = blocker.name if blocker is not None and blocking > 0 else None
        result = QueryAdmission(tasks[i].name, float(slack), float(at), blocked_by, final)
        if i not in found or slack < 0 or result.slack < found[i].slack:
            found[i] = result
        if slack < 0:
            failed.add(i)
            first_miss = first_miss or result
            if len(failed) == len(tasks):
                break
    return Admission(tuple(found[i] for i in range(len(tasks))), float(utilization), first_miss)


def blocking(name: str, longest_jobs: Mapping[str, float]) -> tuple[float, str | None]:
    """The longest job another query may hold the resource for when `name`'s work is released
    (non-preemptive blocking), and whose; (0, None) when no other query shares it.

    A query plans against its deadline less this, so that a job granted just before its own
    cannot push it past the deadline.
    """
    others = {other: seconds for other, seconds in longest_jobs.items() if other != name and seconds > 0}
    if not others:
        return 0.0, None
    longest = max(others, key=lambda other: (others[other], other))
    return others[longest], longest
