"""The Connect server's lease controller on a real standalone cluster (`iqp connect-server start
--cores plan`): with no window in the ledger, the executors the server started with are kept to
the end of their paid unit and released then, not as soon as they are idle, and none while a job
runs (the server's warm-up: a kill would lose its shuffle output); once a window opens,
the plan's open-phase cores are leased at once. A job outside the plan, once every executor is
gone, gets one. The ledger records each executor's lease.
About 60 s on two busy cores: a server and a 20 s unit or two, on the package's cluster.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from airflow_iqp.constants import Mode
from airflow_iqp.ledger import leases, session_scope, store
from airflow_iqp.ledger.engine import migrate
from airflow_iqp.planning.admission import RecurringQuery
from airflow_iqp.planning.record import PlanRecord
from airflow_iqp.runtime import capacity
from airflow_iqp.runtime.leases import LEAD
from airflow_iqp.runtime.leases import NOTICE as LATEST_NOTICE
from airflow_iqp.settings import DispatchSettings
from airflow_iqp.spark.connect import ConnectJob
from airflow_iqp.spark.connect_server import free_port, start, stop
from tests.spark.cluster import Cluster, Executor, executors

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

pytestmark = pytest.mark.heavy

BTU = 20.0  # short, so the unit the test waits out is short; an idle release (a few s) is still far below it
NOTICE = min(LATEST_NOTICE, BTU / 4)  # how long before its unit's end an idle executor goes, as the controller has it
SETTINGS = DispatchSettings(cores="plan", max_cores=2, billing_unit_seconds=BTU)
DEMAND = RecurringQuery(name="iqp_a", period=120, deadline=150, work=50, longest_job=20, final_work=20)


def lives(cluster: Cluster, before: set[str]) -> list[Executor]:
    """The server's executors as the workers recorded them: those of applications not in `before`."""
    return [e for log in sorted(cluster.logs.glob("worker-*.log")) for e in executors(log) if e.app not in before]


def recorded(ledger: str) -> list[leases.Held]:
    """The executor leases the controller recorded."""
    with session_scope(ledger, read_only=True) as s:
        return leases.held(s, datetime.min.replace(tzinfo=UTC), datetime.now(UTC))


def wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
    give_up = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < give_up, what
        time.sleep(0.5)


def open_window(ledger: str) -> int:
    """A query with its demand, and its window open from now for two minutes; the plan's open-phase cores."""
    now = datetime.now(UTC)
    with session_scope(ledger) as s:
        params = {"window_s": DEMAND.period, "deadline_s": DEMAND.deadline - DEMAND.period}
        store.register_query(s, dag_id=DEMAND.name, name=DEMAND.name, sql="SELECT 1", mode=Mode.STATIC, params=params)
        store.record_demand(s, DEMAND)
        end, deadline = now + timedelta(seconds=DEMAND.period), now + timedelta(seconds=DEMAND.deadline)
        store.record_plan(s, DEMAND.name, now, end, deadline, 10, PlanRecord(how="greedy"), [])
        plan = capacity.plan(s, SETTINGS)
    assert plan is not None
    assert plan.open.cores is not None
    return plan.open.cores


def test_the_servers_executors_are_leased_as_the_plan_says_and_released_at_the_end_of_their_paid_unit(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW__IQP__BILLING_UNIT_SECONDS", f"{BTU:g}")
    monkeypatch.setenv("AIRFLOW__IQP__MAX_CORES", str(SETTINGS.max_cores))
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    ledger = f"sqlite:///{tmp_path / 'ledger.db'}"
    migrate(ledger)
    before = cluster.app_ids()  # the package's cluster: the tests before this one ran theirs
    server = start(tmp_path / "server", port=free_port(), master=cluster.url, cores="plan", ledger=ledger)
    warmed = datetime.now(UTC)  # `start` returns once its warm-up job ran
    try:
        wait(lambda: bool(lives(cluster, before)), 60, "the server starts with the executors the master gives it")
        wait(
            lambda: all(e.finished for e in lives(cluster, before)),
            3 * BTU + 20,
            "with no window in the ledger, the plan needs none: each goes at the end of its unit",
        )
        wait(
            lambda: [h.end is not None for h in recorded(ledger)] == [True] * len(lives(cluster, before)),
            5,
            "the ledger has every executor the workers launched, and its release (the controller's next step)",
        )
        for n, h in enumerate(recorded(ledger)):
            assert h.end is not None
            held = (h.end - h.start).total_seconds()  # from its registration: a start takes 3-11 s here
            units = max(1, round(held / BTU))
            assert units * BTU - NOTICE - 2 <= held <= units * BTU + 2, (
                f"executor {n} held {held:.1f} s: idle, but paid"
            )
            assert h.end <= warmed + timedelta(seconds=BTU + 2), f"executor {n} kept past the unit the warm-up ended in"
        log = (tmp_path / "server" / "server.log").read_text(errors="replace")
        assert "FetchFailed" not in log, "an executor was killed while the warm-up's job needed its shuffle output"
        with ConnectJob(server.url_with_token, "iqp-lease-test") as job:  # outside the plan: not left waiting
            assert job.spark.range(1000).count() == 1000
        cores = open_window(ledger)
        assert cores >= 1
        wait(
            lambda: sum(e.finished is None for e in lives(cluster, before)) == cores,
            LEAD + 30,
            f"a window opened: its plan's {cores} core(s) are leased",
        )
    finally:
        stop(tmp_path / "server")
