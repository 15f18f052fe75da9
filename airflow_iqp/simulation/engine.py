"""Discrete-event simulation of the multi-query dynamic mode on one non-preemptive resource.

The paper's Fig. 7 compares policies on a shared cluster that runs one batch at a time. This
replays that without Spark: queries' arrival curves and fitted cost models drive the clock,
the live dispatcher's ranking (simulation/queue.py) decides who runs, and every batch and merge
is logged so that invariants (no overlap, no batch before its input) can be checked.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from airflow_iqp.constants import JobKind
from airflow_iqp.dynamic import QueryState, check_policy, inserted_idle, next_ready_time, ready_job
from airflow_iqp.planning.arrival import ArrivalCurve
from airflow_iqp.simulation.queue import Waiter, pick, upcoming
from airflow_iqp.validation import number, whole_number

if TYPE_CHECKING:
    from collections.abc import Sequence

    from airflow_iqp.dynamic import Job
    from airflow_iqp.planning.capacity import Speedup
    from airflow_iqp.planning.cost import LinearCost, PiecewiseLinearCost


@dataclass
class SimQuery:
    """One query's window: `total` None means unknown until the window closes (estimated)."""

    name: str
    total: int | None
    arrival: ArrivalCurve
    window_end: float
    deadline: float
    cost: LinearCost | PiecewiseLinearCost
    agg_cost: LinearCost | PiecewiseLinearCost | None
    submit_at: float | None = None  # None: at the first arrival

    def __post_init__(self) -> None:
        where = f"query {self.name!r}"
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name must be a non-empty string, got {self.name!r}")
        if not isinstance(self.arrival, ArrivalCurve) or self.arrival.total < 1:
            raise ValueError(f"{where}: arrival must be an ArrivalCurve with at least one tuple")
        if self.total is not None:
            self.total = whole_number(self.total, f"{where}: total", minimum=1)
            if self.total > self.arrival.total:
                raise ValueError(
                    f"{where}: total ({self.total}) exceeds the {self.arrival.total} tuples of its arrival"
                )
        self.window_end = number(self.window_end, f"{where}: window_end")
        self.deadline = number(self.deadline, f"{where}: deadline")
        if self.submit_at is not None:
            self.submit_at = number(self.submit_at, f"{where}: submit_at")

    @property
    def tuples(self) -> int:
        """Tuples its window really holds: the declared total, or all the arrival delivers."""
        return self.arrival.total if self.total is None else self.total

    def state(self, alpha: float, tau_max: float, margin: float = 1.0) -> QueryState:
        """The dynamic scheduler's state of this query at its submission; it estimates every job
        at `margin` times the model's cost (MinBatch, laxity, remaining work, idle time).
        """
        return QueryState(
            name=self.name,
            declared_total=self.total,
            arrival=self.arrival,
            window_end=self.window_end,
            deadline=self.deadline,
            cost=self.cost.scaled(margin),
            agg_cost=None if self.agg_cost is None else self.agg_cost.scaled(margin),
            alpha=alpha,
            tau_max=tau_max,
            submit_at=self.arrival.first_arrival if self.submit_at is None else self.submit_at,
        )


@dataclass(frozen=True)
class Noise:
    """Jobs that do not take what the model says: each takes the model's cost times a factor
    drawn from a lognormal of mean 1 and relative standard deviation `spread`, seeded by the
    query, the kind and the job's number, so every column meets the same surprises for the same
    job. The scheduler then estimates with a margin of `margin` standard deviations, as a
    learned model is planned with (`costs.planning_model`: 1 + mean + k std, the mean 0 here).
    """

    spread: float = 0.0
    margin: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        number(self.spread, "spread", minimum=0)
        number(self.margin, "margin", minimum=0)

    @property
    def estimate(self) -> float:
        """How many times the model's cost the scheduler expects a job to take."""
        return 1.0 + self.margin * self.spread

    def factor(self, query: str, kind: JobKind, index: int) -> float:
        """How many times the model's cost this job really takes."""
        if self.spread == 0:
            return 1.0
        sigma2 = math.log1p(self.spread**2)
        z = random.Random(f"{self.seed}/{query}/{kind}/{index}").gauss(0.0, 1.0)
        return math.exp(math.sqrt(sigma2) * z - sigma2 / 2)


class Cores(Protocol):
    """Elastic capacity: how many cores the resource holds when a job is granted (the job runs
    on all of them and takes its one-core time over `speedup.at(cores)`), told when the
    resource has nothing ready and when everything is done, so that it can lease and release.
    """

    speedup: Speedup

    def grant(self, now: float, backlog: float) -> int:
        """Cores (>= 1) for the job granted at `now`; `backlog`: one-core seconds of every ready job."""

    def idle(self, now: float) -> None:
        """Nothing is ready at `now`."""

    def finish(self, now: float) -> None:
        """Every query's window ended at `now`."""


@dataclass(frozen=True)
class LogEntry:
    """One job on the resource, from `start` to `end`, on `cores` cores."""

    query: str
    kind: JobKind
    size: int  # tuples of a partial; partials merged by a merge
    start: float
    end: float
    cores: int = 1


@dataclass(frozen=True)
class IdleEntry:
    """The resource left idle from `start` to `end` although a job was ready, and why."""

    start: float
    end: float
    passed_over: str  # the query whose ready job was held back
    waits_for: str  # the query with the earlier deadline it was kept free for
    reason: str


@dataclass(frozen=True)
class Outcome:
    """How one query's window ended."""

    finish: float
    deadline: float
    batches: int
    cost: float  # seconds its jobs held the resource

    @property
    def met(self) -> bool:
        """The result was complete by the deadline."""
        return self.finish <= self.deadline


@dataclass
class SimResult:
    """Every query's outcome and every job, in the order they ran (and, with inserted idle
    time, every stretch the resource was kept free while a job was ready).
    """

    outcomes: dict[str, Outcome]
    log: list[LogEntry]
    single_batch_cost: float  # sum of cost(N) over the queries: the normalizer
    idles: list[IdleEntry] = field(default_factory=list)
    met_count: int = field(init=False)

    def __post_init__(self) -> None:
        self.met_count = sum(o.met for o in self.outcomes.values())

    @property
    def total_cost(self) -> float:
        """Seconds the resource was busy."""
        return sum(o.cost for o in self.outcomes.values())

    @property
    def normalized_cost(self) -> float:
        """Total cost over the sum of single-batch costs (the paper's Fig. 7, bottom)."""
        return self.total_cost / self.single_batch_cost if self.single_batch_cost > 0 else 1.0

    @property
    def all_met(self) -> bool:
        """Every query met its deadline."""
        return self.met_count == len(self.outcomes)


def _check(queries: Sequence[SimQuery], alpha: float, tau_max: float) -> None:
    number(alpha, "alpha", above=0)
    number(tau_max, "tau_max", above=0)
    if not queries:
        raise ValueError("queries must hold at least one query")
    seen: set[str] = set()
    for q in queries:
        if q.name in seen:
            raise ValueError(f"queries: duplicate name {q.name!r}")
        seen.add(q.name)
        if q.cost.cost(1) > tau_max:
            raise ValueError(
                f"tau_max ({tau_max:g} s) is below the cost of one tuple of query {q.name!r} ({q.cost.cost(1):g} s)"
            )


def _grant(
    waiters: list[Waiter], ready: list[Waiter], jobs: dict[int, Job], now: float, min_batch: bool
) -> Waiter | IdleEntry:
    """With inserted idle time: the best ready query whose job holds no earlier deadline up
    (`dynamic.inserted_idle`), or, if every one would, the idle stretch until the next release.
    """
    future = [u for w in waiters if w.request not in jobs and (u := upcoming(w, now, min_batch)) is not None]
    held = None
    for w in ready:
        held = inserted_idle(w.candidate(now, min_batch), jobs[w.request].cost, future, now)
        if held is None:
            return w
    if held is None:  # nothing was ready: the caller never asks then
        raise RuntimeError(f"no ready job to grant at {now}")
    # Until the first release, the job waited for's at the latest.
    releases = (next_ready_time(w.state, now, min_batch) for w in waiters if w.request not in jobs)
    until = min((t for t in releases if t > now), default=held.waits_for.release)
    return IdleEntry(now, until, held.passed_over.query, held.waits_for.query, held.reason)


def simulate(
    queries: Sequence[SimQuery],
    *,
    policy: str,
    alpha: float,
    tau_max: float,
    min_batch: bool = True,
    idle: bool = False,
    noise: Noise | None = None,
    cores: Cores | None = None,
) -> SimResult:
    """Run every query's window to its final merge; `min_batch=False` is the traditional
    baseline, `idle=True` lets the resource wait for a job of an earlier deadline about to be
    released rather than start a job it would miss its deadline behind (inserted idle time).
    With `noise`, jobs take other than the model's cost and the scheduler plans with its margin.
    With `cores`, each job runs on the cores it grants (one core, the model's time, without);
    the scheduler still estimates on one core.
    """
    chosen_policy = check_policy(policy)
    _check(queries, alpha, tau_max)
    noise = noise or Noise()
    states = [q.state(alpha, tau_max, noise.estimate) for q in queries]
    models = {q.name: q for q in queries}
    waiters = [Waiter(s, i, s.submit_at) for i, s in enumerate(states)]
    log: list[LogEntry] = []
    idles: list[IdleEntry] = []
    finish: dict[str, float] = {}
    now = min(w.since for w in waiters)
    while len(finish) < len(waiters):
        jobs: dict[int, Job] = {}
        for w in waiters:
            if (job := ready_job(w.state, now, min_batch)) is not None:
                jobs[w.request] = job
            else:
                w.idle(now)
        if not jobs:
            if cores is not None:
                cores.idle(now)
            later = min(next_ready_time(w.state, now, min_batch) for w in waiters)
            if not now < later < math.inf:
                raise RuntimeError(f"simulation stalled at {now}: next event at {later}")
            now = later
            continue
        ranked = pick(chosen_policy, [w for w in waiters if w.request in jobs], now, min_batch)
        first = _grant(waiters, ranked, jobs, now, min_batch) if idle else ranked[0]
        if isinstance(first, IdleEntry):
            idles.append(first)
            now = first.end
            continue
        job, state = jobs[first.request], first.state
        seconds = _actual(models[job.query], job, state.batches, noise)
        granted = 1
        if cores is not None:
            granted = cores.grant(now, math.fsum(j.cost for j in jobs.values()))
            seconds /= cores.speedup.at(granted)
        end = now + seconds
        log.append(LogEntry(job.query, job.kind, job.size, now, end, granted))
        first.served(now, end)
        state.spent += seconds
        if job.kind == JobKind.MERGE:
            state.finish = finish[state.name] = end
        else:
            state.processed += job.size
            state.batches += 1
            if state.all_processed and state.batches == 1:
                state.finish = finish[state.name] = end  # one batch: nothing to merge
        now = end
    if cores is not None:
        cores.finish(now)
    return SimResult(
        outcomes={s.name: Outcome(finish[s.name], s.deadline, s.batches, s.spent) for s in states},
        log=log,
        single_batch_cost=sum(q.cost.cost(q.tuples) for q in queries),
        idles=idles,
    )


def _actual(query: SimQuery, job: Job, batches: int, noise: Noise) -> float:
    """What `job` really takes: the model's cost (not the scheduler's estimate) times its noise."""
    if job.kind == JobKind.MERGE:
        model = 0.0 if job.size <= 1 or query.agg_cost is None else query.agg_cost.cost(job.size)
    else:
        model = query.cost.cost(job.size)
    return model * noise.factor(query.name, job.kind, batches)
