"""The lease controller's steps on a ledger with no window (the plan needs no executor), over a
cluster kept in memory: what it kills and when. tests/spark/test_lease_driver.py runs it in a
Connect server's driver on a real standalone cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from airflow_iqp.ledger import leases, session_scope
from airflow_iqp.runtime.leases import LeaseController
from airflow_iqp.settings import DispatchSettings

BTU = 20.0  # the notice is then a quarter unit: 5 s
T0 = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)


@dataclass
class Cluster:
    """Executors registered at T0, one core each; a job runs while `running` is set."""

    application: str = "app-1"
    running: bool = False
    alive: dict[str, float] = field(default_factory=lambda: {"0": T0.timestamp(), "1": T0.timestamp()})
    killed: list[str] = field(default_factory=list)

    def started(self) -> dict[str, float]:
        return dict(self.alive)

    def busy(self) -> bool:
        return self.running

    def request(self, total: int) -> None:
        pass

    def release(self, ids: tuple[str, ...]) -> list[str]:
        for executor in ids:
            del self.alive[executor]
        self.killed.extend(ids)
        return list(ids)


def controller(url: str, cluster: Cluster) -> LeaseController:
    return LeaseController(cluster, DispatchSettings(cores="plan", max_cores=2, billing_unit_seconds=BTU), url)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_idle_executors_the_plan_does_not_need_go_within_the_notice_of_their_units_end(ledger: str) -> None:
    cluster = Cluster()
    lease = controller(ledger, cluster)
    lease.step(at(1))
    assert cluster.killed == [], "paid to the end of the unit: kept"
    lease.step(at(16))
    assert sorted(cluster.killed) == ["0", "1"]
    lease.step(at(17))
    with session_scope(ledger, read_only=True) as s:
        held = leases.held(s, T0, at(18))
    assert [(h.start, h.end) for h in held] == [(T0, at(17))] * 2


def test_no_executor_is_killed_while_a_job_runs_it_may_hold_its_shuffle_output(ledger: str) -> None:
    cluster = Cluster(running=True)
    lease = controller(ledger, cluster)
    lease.step(at(16))
    assert cluster.killed == [], "a job runs: every executor is kept"
    cluster.running = False
    lease.step(at(21))
    assert cluster.killed == [], "its next unit began while the job ran: paid, so kept to its end"
    lease.step(at(36))
    assert sorted(cluster.killed) == ["0", "1"]
