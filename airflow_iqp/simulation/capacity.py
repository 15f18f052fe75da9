"""Elastic capacity on the paper's protocol: who leases how many cores, and what it is billed.

Three controllers lease cores from a `planning.elastic.LeasePool` billed by the same BTU:

* `fixed`: the capacity model's peak, leased from the windows' start until the last job ends
  (provisioning for the peak);
* `elastic`: the capacity model's plan (`planning.capacity`): the open phase's cores while
  the windows are open, the closed phase's from their close until every query is done; cores
  the plan no longer needs go at the end of their paid unit, unless it needs them again;
* `reactive`: a threshold controller that knows no plan (Hochreiner et al.'s baseline, and
  Spark's dynamic allocation): one core more at a grant while the ready work exceeds a
  threshold (up to the fixed capacity), every core released as soon as nothing is ready.

A job runs on every core held when it is granted (`simulation.engine.Cores`), one job at a
time, EDF with MinBatch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from airflow_iqp.constants import Policy
from airflow_iqp.planning.admission import RecurringQuery
from airflow_iqp.planning.capacity import DEFAULT_SPEEDUP, Capacity, QueryDemand, Speedup, capacity
from airflow_iqp.planning.elastic import LeasePool
from airflow_iqp.planning.min_batch import min_batch_size
from airflow_iqp.simulation.engine import simulate

if TYPE_CHECKING:
    from collections.abc import Sequence

    from airflow_iqp.simulation.engine import SimQuery, SimResult
    from airflow_iqp.simulation.protocol import Experiment

CONTROLLERS = ("elastic", "fixed", "reactive")
BTU = 60.0
CONFIDENCE = 0.95


def window_task(query: SimQuery, alpha: float, tau_max: float) -> RecurringQuery:
    """The query's window as admission's recurring task on one core: its MinBatch batches and
    the merge (the last batch and the merge only after the close), as `runtime.demand` prices
    a dynamic declaration.
    """
    total = query.tuples
    mb = min_batch_size(total=total, cost=query.cost, agg_cost=query.agg_cost, alpha=alpha, tau_max=tau_max)
    full, rest = divmod(total, mb.size)
    batches = [query.cost.cost(mb.size)] * full + ([query.cost.cost(rest)] if rest else [])
    merge = query.agg_cost.cost(len(batches)) if query.agg_cost is not None and len(batches) > 1 else 0.0
    start = query.arrival.first_arrival if query.submit_at is None else query.submit_at
    return RecurringQuery(
        name=query.name,
        period=query.window_end - start,
        deadline=query.deadline - start,
        work=math.fsum([*batches, merge]),
        longest_job=max(query.cost.cost(mb.size), merge),
        final_work=batches[-1] + merge,
    )


class Fixed:
    """`cores` leased for the whole run."""

    def __init__(self, cores: int, speedup: Speedup, btu: float, start: float) -> None:
        self.cores, self.speedup, self.pool = cores, speedup, LeasePool(btu)
        self.pool.need(start, cores)

    def grant(self, now: float, backlog: float) -> int:
        """All of them, whatever the backlog."""
        return self.cores

    def idle(self, now: float) -> None:
        """They stay leased."""

    def finish(self, now: float) -> None:
        """Released at the end of their paid unit."""
        self.pool.close(now)


class Planned:
    """The capacity model's plan: `open` cores until `close`, `closed` cores after it, at least
    one for a ready job; what the plan stops needing goes at the end of its paid unit.
    """

    def __init__(self, open_cores: int, closed_cores: int, close: float, speedup: Speedup, btu: float) -> None:
        self.open, self.closed, self.close = open_cores, closed_cores, close
        self.speedup, self.pool = speedup, LeasePool(btu)

    def planned(self, now: float) -> int:
        """The cores the plan needs at `now`."""
        return self.open if now < self.close else self.closed

    def grant(self, now: float, backlog: float) -> int:
        """The plan's cores, and every paid core still held (whatever the backlog)."""
        self.pool.need(now, max(1, self.planned(now)))
        return self.pool.held(now)

    def idle(self, now: float) -> None:
        """The plan's cores stay; more go at the end of their paid unit."""
        self.pool.need(now, self.planned(now))

    def finish(self, now: float) -> None:
        """Every core goes at the end of its paid unit."""
        self.pool.close(now)


class Reactive:
    """Scale on backlog: one core more when a job is granted while the ready work (one-core
    seconds) exceeds `threshold`, up to `most`; every core released once nothing has been
    ready for `idle_timeout` seconds (Spark's dynamic allocation releases an executor idle for
    spark.dynamicAllocation.executorIdleTimeout, 60 s by default).
    """

    def __init__(self, threshold: float, most: int, speedup: Speedup, btu: float, idle_timeout: float = 60.0) -> None:
        self.threshold, self.most, self.idle_timeout = threshold, most, idle_timeout
        self.speedup, self.pool = speedup, LeasePool(btu)
        self.idle_since: float | None = None

    def _release_idle(self, now: float) -> None:
        """Release every core if the resource has been idle past the timeout by `now`."""
        if self.idle_since is not None and now - self.idle_since >= self.idle_timeout:
            at = self.idle_since + self.idle_timeout
            self.pool.release_now(at, self.pool.held(at))
        self.idle_since = None

    def grant(self, now: float, backlog: float) -> int:
        """One more core than held while the backlog is over the threshold, at least one."""
        self._release_idle(now)
        held = self.pool.held(now)
        wanted = max(1, held + (backlog > self.threshold))
        self.pool.need(now, min(wanted, max(self.most, 1)))
        return self.pool.held(now)

    def idle(self, now: float) -> None:
        """The idle clock starts (it keeps running if it already has)."""
        if self.idle_since is None:
            self.idle_since = now

    def finish(self, now: float) -> None:
        """Every core released at once."""
        self.pool.release_now(now, self.pool.held(now))


@dataclass(frozen=True)
class Run:
    """One controller's run: the simulation, what the provider bills and the most cores held."""

    controller: str
    result: SimResult
    billed: float  # core-seconds: started units x btu x cores
    peak: int


def plan(
    queries: Sequence[SimQuery],
    experiment: Experiment,
    confidence: float = CONFIDENCE,
    speedup: Speedup = DEFAULT_SPEEDUP,
) -> Capacity:
    """The capacity model over the queries' windows, with the experiment's job spread."""
    tasks = [window_task(q, experiment.alpha, experiment.tau_max) for q in queries]
    return capacity(
        [QueryDemand(t, cost_spread=experiment.noise.spread) for t in tasks], confidence=confidence, speedup=speedup
    )


def table(
    experiment: Experiment,
    deltas: Sequence[float],
    controllers: Sequence[str] = CONTROLLERS,
    *,
    btu: float = BTU,
    confidence: float = CONFIDENCE,
    speedup: Speedup = DEFAULT_SPEEDUP,
) -> dict[float, tuple[Capacity, list[Run]]]:
    """Plan and run every controller at every delta; no runs where no capacity is enough."""
    rows = {}
    for delta in deltas:
        queries = experiment.workload(delta)
        model = plan(queries, experiment, confidence, speedup)
        feasible = None not in (model.open.cores, model.closed.cores)
        rows[delta] = (model, run(queries, experiment, model, controllers, btu) if feasible else [])
    return rows


def run(
    queries: Sequence[SimQuery],
    experiment: Experiment,
    model: Capacity,
    controllers: Sequence[str] = CONTROLLERS,
    btu: float = BTU,
    threshold: float | None = None,
) -> list[Run]:
    """Run the queries under each controller (EDF with MinBatch), sized by `model`; the jobs
    meet the experiment's noise. The reactive controller scales up on more than `threshold`
    one-core seconds of ready work (default tau_max: more than one batch's worth).
    """
    if unknown := [c for c in controllers if c not in CONTROLLERS]:
        raise ValueError(f"unknown controller {unknown[0]!r}; choose from {', '.join(CONTROLLERS)}")
    opened, closed = model.open.cores, model.closed.cores
    if opened is None or closed is None:
        raise ValueError(
            f"no capacity up to {model.speedup.max_cores} cores meets every deadline "
            f"(needed by {model.peak.needed_by}): the speedup model flattens there"
        )
    fixed = max(opened, closed, 1)
    start = min(q.submit_at if q.submit_at is not None else q.arrival.first_arrival for q in queries)
    close = max(q.window_end for q in queries)
    noise = replace(experiment.noise, margin=0.0)
    runs = []
    for name in controllers:
        cores: Fixed | Planned | Reactive
        if name == "fixed":
            cores = Fixed(fixed, model.speedup, btu, start)
        elif name == "elastic":
            cores = Planned(opened, closed, close, model.speedup, btu)
        else:
            cores = Reactive(experiment.tau_max if threshold is None else threshold, fixed, model.speedup, btu)
        result = simulate(
            queries, policy=Policy.EDF, alpha=experiment.alpha, tau_max=experiment.tau_max, noise=noise, cores=cores
        )
        runs.append(Run(name, result, cores.pool.billed(), cores.pool.peak()))
    return runs
