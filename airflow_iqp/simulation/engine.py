"""Discrete-event simulation of the multi-query dynamic mode on one non-preemptive resource.

The paper's Fig. 7 compares policies on a shared cluster that runs one batch at a time. This
replays that without Spark: queries' arrival curves and fitted cost models drive the clock,
and every batch and merge is logged so that invariants (no overlap, no batch before its input)
can be checked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from airflow_iqp.dynamic import QueryState, make_policy, next_ready_time, ready_job
from airflow_iqp.dynamic.policies import POLICIES
from airflow_iqp.planning.arrival import ArrivalCurve

if TYPE_CHECKING:
    from collections.abc import Sequence

    from airflow_iqp.planning.cost import CostModel, LinearCost, PiecewiseLinearCost


@dataclass
class SimQuery:
    """One query's window: `total` None means unknown until the window closes (estimated)."""

    name: str
    total: int | None
    arrival: ArrivalCurve
    window_end: float
    deadline: float
    cost: LinearCost | PiecewiseLinearCost
    agg_cost: CostModel | None
    submit_at: float | None = None

    def __post_init__(self) -> None:
        where = f"query {self.name!r}"
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name must be a non-empty string, got {self.name!r}")
        if not isinstance(self.arrival, ArrivalCurve) or self.arrival.total < 1:
            raise ValueError(f"{where}: arrival must be an ArrivalCurve with at least one tuple")
        if self.total is not None and (
            isinstance(self.total, bool) or not isinstance(self.total, int) or not 1 <= self.total <= self.arrival.total
        ):
            raise ValueError(
                f"{where}: total must be a whole number in 1..{self.arrival.total} (the arrival's tuples), "
                f"got {self.total!r}"
            )
        for name in ("window_end", "deadline", "submit_at"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)
            ):
                raise ValueError(f"{where}: {name} must be a finite number of seconds, got {value!r}")

    @property
    def tuples(self) -> int:
        return self.arrival.total if self.total is None else self.total


@dataclass(frozen=True)
class LogEntry:
    query: str
    kind: str  # "partial" or "merge"
    size: int  # tuples of a partial; partials merged by a merge
    start: float
    end: float


@dataclass(frozen=True)
class Outcome:
    finish: float
    deadline: float
    batches: int
    cost: float

    @property
    def met(self) -> bool:
        return self.finish <= self.deadline


@dataclass
class SimResult:
    outcomes: dict[str, Outcome]
    log: list[LogEntry]
    single_batch_cost: float  # sum of cost(N) over the queries: the normalizer
    met_count: int = field(init=False)

    def __post_init__(self) -> None:
        self.met_count = sum(o.met for o in self.outcomes.values())

    @property
    def total_cost(self) -> float:
        return sum(o.cost for o in self.outcomes.values())

    @property
    def normalized_cost(self) -> float:
        return self.total_cost / self.single_batch_cost if self.single_batch_cost > 0 else 1.0

    @property
    def all_met(self) -> bool:
        return self.met_count == len(self.outcomes)


def _check(queries: Sequence[SimQuery], policy: str, alpha: float, tau_max: float) -> None:
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {policy!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not math.isfinite(alpha) or alpha <= 0:
        raise ValueError(f"alpha must be a finite number > 0, got {alpha!r}")
    if isinstance(tau_max, bool) or not isinstance(tau_max, int | float) or math.isnan(tau_max):
        raise ValueError(f"tau_max must be a number of seconds, got {tau_max!r}")
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


def simulate(
    queries: Sequence[SimQuery], *, policy: str, alpha: float, tau_max: float, min_batch: bool = True
) -> SimResult:
    """Run every query's window to its final merge; `min_batch=False` is the traditional baseline."""
    _check(queries, policy, alpha, tau_max)
    states = [
        QueryState(
            name=q.name,
            declared_total=q.total,
            arrival=q.arrival,
            window_end=float(q.window_end),
            deadline=float(q.deadline),
            cost=q.cost,
            agg_cost=q.agg_cost,
            alpha=float(alpha),
            tau_max=float(tau_max),
            submit_at=q.arrival.first_arrival if q.submit_at is None else float(q.submit_at),
        )
        for q in queries
    ]
    choose = make_policy(policy, [s.name for s in states], min_batch)
    log: list[LogEntry] = []
    now = min(s.submit_at for s in states)
    while not all(s.done for s in states):
        jobs = {s.name: job for s in states if (job := ready_job(s, now, min_batch)) is not None}
        if not jobs:
            later = min(next_ready_time(s, now, min_batch) for s in states)
            if not now < later < math.inf:
                raise AssertionError(f"simulation stalled at {now}: next event at {later}")
            now = later
            continue
        state = choose([s for s in states if s.name in jobs], now)
        job = jobs[state.name]
        end = now + job.cost
        log.append(LogEntry(job.query, job.kind, job.size, now, end))
        state.spent += job.cost
        if job.kind == "merge":
            state.finish = end
        else:
            state.processed += job.size
            state.batches += 1
            if state.all_processed and state.batches == 1:
                state.finish = end  # one batch: nothing to merge
        now = end
    return SimResult(
        outcomes={s.name: Outcome(s.finish, s.deadline, s.batches, s.spent) for s in states},  # type: ignore[arg-type]
        log=log,
        single_batch_cost=sum(q.cost.cost(q.tuples) for q in queries),
    )
