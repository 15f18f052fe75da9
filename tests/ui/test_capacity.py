"""The capacity view (used, planned, leased) over a real SQLite ledger written by the ledger's own
operations: two queries that recorded their demand, one that did not, and grants with and
without cores. Every expected number below is worked out by hand from these times.

Times are seconds after the chart's start, `SINCE` = now - 3600 s:

- iqp_a and iqp_b: 600 s windows due 300 s after their close, opening at 1800, 2400 and 3000 s,
  each with 200 s of final work (400 s after a close: two cores at the default speedup, one
  core while the windows are open): the plan is 0 cores until 1800 s, then 1 while open and
  2 from each close (2400, 3000 s) to its deadline (2700, 3300 s);
- iqp_c recorded no demand: its grant from -50 to 50 s (2 cores) is used but not planned, and
  its grant before the chart is not drawn at all;
- iqp_a holds 2 cores over 1900-1960 s and 3 over 2450-2500 s, iqp_b the connection's default
  over 1960-2000 s and 1 core from 3500 s on (still held).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from airflow_iqp.constants import BatchReason, JobKind, Mode, Policy
from airflow_iqp.ledger import dispatch, engine, leases, session_scope, store
from airflow_iqp.planning.admission import RecurringQuery
from airflow_iqp.planning.record import PlanRecord
from airflow_iqp.ui import capacity, cores
from airflow_iqp.ui.models import CoreStep

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from sqlalchemy.orm import Session

    from airflow_iqp.ui.models import CapacityView

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SINCE = NOW - timedelta(hours=1)
WINDOW, DUE = 600.0, 300.0
A, B, C = "iqp_a", "iqp_b", "iqp_c"
DEFAULT_CORES = 4


def at(seconds: float) -> datetime:
    return SINCE + timedelta(seconds=seconds)


def _window(s: Session, dag_id: str, start: float) -> int:
    return store.record_plan(
        s, dag_id, at(start), at(start + WINDOW), at(start + WINDOW + DUE), 0, PlanRecord(how="test"), []
    )


def _grant(s: Session, window_id: int, dag_id: str, start: float, end: float | None, held: int | None) -> None:
    dispatch.register(
        s,
        window_id=window_id,
        query=dag_id,
        kind=JobKind.PARTIAL,
        slot=0,
        reason=BatchReason.PLANNED,
        deadline=at(start + 1000),
        remaining_cost=10.0,
        lease_seconds=3600.0,
        now=at(start),
    )
    (lease,) = dispatch.grant(s, policy=Policy.EDF, resources=1, now=at(start), cores=held)
    if end is not None:
        dispatch.release(s, lease, at(end))


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with session_scope(url) as s:
        for dag_id in (A, B, C):
            params = {"window_s": WINDOW, "deadline_s": DUE}
            store.register_query(s, dag_id=dag_id, name=dag_id, sql="SELECT 1", mode=Mode.STATIC, params=params)
        for dag_id, early in ((A, 100.0), (B, 150.0)):
            store.record_demand(s, RecurringQuery(dag_id, WINDOW, WINDOW + DUE, early + 200.0, 60.0, 200.0))
        a = [_window(s, A, start) for start in (1800, 2400, 3000)]
        b = [_window(s, B, start) for start in (1800, 2400, 3000)]
        c = [_window(s, C, start) for start in (-1000, -600)]  # due at -100 and 300 s
        _grant(s, c[0], C, -400, -300, 2)  # released before the chart
        _grant(s, c[1], C, -50, 50, 2)
        _grant(s, a[0], A, 1900, 1960, 2)
        _grant(s, b[0], B, 1960, 2000, None)
        _grant(s, a[1], A, 2450, 2500, 3)
        _grant(s, b[2], B, 3500, None, 1)
    yield url
    engine(url).dispose()
    engine(url, read_only=True).dispose()


def shown(url: str, btu: float, readable: set[str] | None = None) -> CapacityView:
    with session_scope(url, read_only=True) as s:
        rows = capacity.capacity_rows(s, SINCE, NOW)
    return cores.view(
        rows,
        since=SINCE,
        now=NOW,
        confidence=0.95,
        btu=(btu, "test"),
        default_cores=DEFAULT_CORES,
        readable={A, B, C} if readable is None else readable,
    )


def series(steps: list[CoreStep]) -> list[tuple[float, int]]:
    return [(s.at_s, s.cores) for s in steps]


def test_used_is_every_grants_cores_a_grant_naming_none_at_the_default(ledger: str) -> None:
    view = shown(ledger, btu=600)
    assert series(view.used) == [
        (0, 2),
        (50, 0),
        (1900, 2),
        (1960, DEFAULT_CORES),
        (2000, 0),
        (2450, 3),
        (2500, 0),
        (3500, 1),
    ]
    assert view.used_core_s == pytest.approx(50 * 2 + 60 * 2 + 40 * DEFAULT_CORES + 50 * 3 + 100 * 1)
    assert (view.grants, view.default_grants, view.default_cores) == (5, 1, DEFAULT_CORES)
    assert view.core_ticks == [0, 1, 2, 3, 4]
    assert view.ticks_s == [0, 600, 1200, 1800, 2400, 3000, 3600]  # SINCE is 11:00: on the clock's ten minutes
    five_past = cores.clock_ticks(SINCE + timedelta(minutes=5), 3600)
    assert five_past == [300, 900, 1500, 2100, 2700, 3300]


def test_planned_follows_the_windows_phases_of_the_queries_that_recorded_a_demand(ledger: str) -> None:
    view = shown(ledger, btu=600)
    assert view.plan is not None
    assert (view.plan.queries, view.plan.open_cores, view.plan.closed_cores) == (2, 1, 2)
    assert view.plan.needed_by in (A, B)  # named as the DAG, not its final work
    assert series(view.planned) == [(0, 0), (1800, 1), (2400, 2), (2700, 1), (3000, 2), (3300, 1)]
    hidden = shown(ledger, btu=600, readable={C})
    assert hidden.plan is not None
    assert hidden.plan.needed_by is None


def test_leased_keeps_a_core_to_the_end_of_its_paid_unit_and_bills_started_units(ledger: str) -> None:
    view = shown(ledger, btu=600)
    # iqp_c's job at 0 s leases one core till the end of its unit (600 s); the core leased at
    # 2400 s stays to 3000 s, though the plan drops to one at 2700 s; the one leased at 3000 s
    # stays to the end, though the plan drops again at 3300 s.
    assert series(view.leased) == [(0, 1), (600, 0), (1800, 1), (2400, 2)]
    assert view.billed_core_s == 600 + 1800 + 600 + 600
    assert view.fixed_billed_core_s == 2 * 3600  # the peak, two cores, all along
    assert view.btu_s == 600
    fine = shown(ledger, btu=60)
    assert series(fine.leased) == [(0, 1), (60, 0), (1800, 1), (2400, 2), (2700, 1), (3000, 2), (3300, 1)]
    assert fine.billed_core_s == 60 + 1800 + 300 + 300


def test_no_grants_and_no_demand_is_an_empty_view(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    with session_scope(url) as s:
        store.register_query(s, dag_id=A, name=A, sql="SELECT 1", mode=Mode.STATIC, params={})
    view = shown(url, btu=60)
    assert (view.used, view.grants, view.plan, view.planned, view.leased) == (
        [CoreStep(at_s=0, cores=0)],
        0,
        None,
        [],
        [],
    )
    assert (view.billed_core_s, view.fixed_billed_core_s, view.used_core_s) == (None, None, 0)
    engine(url).dispose()
    engine(url, read_only=True).dispose()


def test_leased_is_what_the_lease_controller_recorded_when_it_ran(ledger: str) -> None:
    with session_scope(ledger) as s:  # the controller's steps: two executors come, one goes, one is still held
        leases.record(s, "app-1", {"0": at(1800), "1": at(1810)}, at(1811))
        leases.record(s, "app-1", {"1": at(1810)}, at(2350))
        leases.record(s, "app-1", {"1": at(1810), "2": at(3000)}, at(3001))
    view = shown(ledger, btu=600)
    assert series(view.leased) == [(0, 0), (1800, 1), (1810, 2), (2350, 1), (3000, 2)]
    assert view.billed_core_s == 600 + 3 * 600 + 600, "0: one unit; 1: 1810-3600, three started; 2: one"
