"""One ranking: the simulator's queue and the live dispatcher on a real SQLite ledger serve the
same waiting jobs in the same order, for every policy, ties included."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from airflow_iqp.constants import BatchReason, JobKind, Mode, Policy
from airflow_iqp.dynamic import QueryState
from airflow_iqp.ledger import dispatch, session_scope, store
from airflow_iqp.planning import ArrivalCurve, LinearCost
from airflow_iqp.planning.record import PlanRecord
from airflow_iqp.simulation.queue import Waiter, pick

if TYPE_CHECKING:
    from pathlib import Path

    from sqlalchemy.orm import Session

T0 = datetime(2026, 1, 1, tzinfo=UTC)  # the simulator's time 0 on the ledger's clock
NOW = 100.0


@dataclass(frozen=True)
class Job:
    """One waiting job: its query's deadline and cost, when it asked, when its query last ran."""

    query: str
    deadline: float
    cost: float
    asked: float
    last_served: float


# In workload order (the simulator's ids; the ledger registers in this order, so its ids
# follow). At NOW, laxity D - NOW - cost: qd -10; qc, qb, qa, qf 90; qe 195.
QUEUE = [
    Job("qe", 300.0, 5.0, 40.0, 20.0),
    Job("qc", 200.0, 10.0, 40.0, -math.inf),
    Job("qb", 200.0, 10.0, 40.0, -math.inf),  # ties qc on everything: the id decides, not the name
    Job("qa", 200.0, 10.0, 50.0, 10.0),  # ties qc and qb but asked later
    Job("qd", 150.0, 60.0, 45.0, 30.0),
    Job("qf", 250.0, 60.0, 45.0, -math.inf),  # LLF ties qa..qc; SJF ties qd (the id decides)
]
ORDER = {
    Policy.EDF: ["qd", "qc", "qb", "qa", "qf", "qe"],
    Policy.LLF: ["qd", "qc", "qb", "qf", "qa", "qe"],
    Policy.SJF: ["qe", "qc", "qb", "qa", "qd", "qf"],
    Policy.RR: ["qc", "qb", "qf", "qa", "qe", "qd"],  # never served first, then longest ago
}


def waiter(index: int, job: Job) -> Waiter:
    """A one-tuple query whose tuple lands when the job asks: the simulator finds that time."""
    state = QueryState(
        name=job.query,
        declared_total=1,
        arrival=ArrivalCurve.from_points([(job.asked, 1)]),
        window_end=job.asked,
        deadline=job.deadline,
        cost=LinearCost(job.cost),
        agg_cost=None,
        alpha=0.5,
        tau_max=100.0,
        submit_at=0.0,
    )
    return Waiter(state, index, since=0.0, last_served=job.last_served)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def window(session: Session, query: str, start: float) -> int:
    store.register_query(session, dag_id=query, name=query, sql="SELECT 1", mode=Mode.DYNAMIC, params={})
    return store.record_plan(session, query, at(start), at(start + 10), at(start + 60), 1, PlanRecord(how="test"), [])


def served_by_the_ledger(url: str, policy: Policy, remaining: dict[str, float]) -> tuple[list[str], list[str]]:
    """Round robin's history first (each query served at its last_served, in its own earlier
    window), then the queue; returns whom `would_grant` names and whom `grant` serves in turn.
    """
    history = sorted((job.last_served, job.query) for job in QUEUE if job.last_served > -math.inf)
    for served, query in history:
        with session_scope(url) as s:
            request = dispatch.register(
                s,
                window_id=window(s, query, served - 5),
                query=query,
                kind=JobKind.PARTIAL,
                slot=0,
                reason=BatchReason.MIN_BATCH,
                deadline=at(served + 50),
                remaining_cost=1.0,
                lease_seconds=30.0,
                now=at(served - 1),
            )
        with session_scope(url) as s:
            (lease,) = dispatch.grant(s, policy=policy, resources=1, now=at(served))
            assert lease.request == request
            assert dispatch.release(s, lease, at(served + 1))
    names: dict[int, str] = {}
    with session_scope(url) as s:
        for job in QUEUE:
            request = dispatch.register(
                s,
                window_id=window(s, job.query, job.asked),
                query=job.query,
                kind=JobKind.PARTIAL,
                slot=0,
                reason=BatchReason.ALL_IN,
                deadline=at(job.deadline),
                remaining_cost=remaining[job.query],
                lease_seconds=30.0,
                now=at(job.asked),
            )
            assert request is not None
            names[request] = job.query
    with session_scope(url, read_only=True) as s:
        named = [names[r] for r in dispatch.would_grant(s, policy=policy, resources=len(QUEUE), now=at(NOW))]
    granted = []
    for step in range(len(QUEUE)):
        with session_scope(url) as s:
            (lease,) = dispatch.grant(s, policy=policy, resources=1, now=at(NOW + step))
            granted.append(names[lease.request])
            assert dispatch.release(s, lease, at(NOW + step + 0.5))
    return named, granted


@pytest.mark.parametrize("policy", list(Policy))
def test_the_simulator_and_the_ledger_serve_one_queue_in_the_same_order(tmp_path: Path, policy: Policy) -> None:
    waiters = [waiter(i, job) for i, job in enumerate(QUEUE)]
    simulated = [w.state.name for w in pick(policy, waiters, NOW, min_batch=True)]
    assert [w.registered for w in waiters] == [job.asked for job in QUEUE]  # found from the arrivals
    remaining = {w.state.name: w.candidate(NOW, min_batch=True).remaining for w in waiters}
    assert remaining == {job.query: job.cost for job in QUEUE}

    named, served = served_by_the_ledger(f"sqlite:///{tmp_path / 'ledger.db'}", policy, remaining)

    assert simulated == named == served == ORDER[policy]


def test_the_simulator_serves_in_turn_as_the_ledger_does() -> None:
    # Picking the first and taking it out of the queue, as the ledger's successive grants do,
    # gives the same order as the first ranking (no key changes while a query waits).
    for policy in Policy:
        waiters = [waiter(i, job) for i, job in enumerate(QUEUE)]
        served = []
        for step in range(len(QUEUE)):
            first = pick(policy, waiters, NOW + step, min_batch=True)[0]
            served.append(first.state.name)
            waiters.remove(first)
        assert served == ORDER[policy]
