"""The capacity plan at run time, over a real SQLite ledger: a grant gets the plan's open-phase
cores while every window is open, its closed-phase cores once one has closed with its work
undone, the fixed count or the connection's default when the plan is not asked for, and what
each grant gave is read back as cores over time.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from airflow_iqp.constants import BatchReason, JobKind, Mode, Policy, WindowStatus
from airflow_iqp.ledger import dispatch, session_scope, store
from airflow_iqp.ledger.models import Window
from airflow_iqp.planning.admission import RecurringQuery
from airflow_iqp.planning.record import PlanRecord
from airflow_iqp.runtime import capacity
from airflow_iqp.settings import DispatchSettings

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
WINDOW = timedelta(seconds=120)
# iqp_a's final work is due 30 s after its close: more than one core needs; iqp_b has room.
DEMANDS = (
    RecurringQuery(name="iqp_a", period=120, deadline=150, work=50, longest_job=20, final_work=20),
    RecurringQuery(name="iqp_b", period=120, deadline=360, work=40, longest_job=10, final_work=10),
)
PLAN = DispatchSettings(cores="plan", max_cores=4)


def register(url: str) -> dict[str, int]:
    """Both queries with their demand recorded, and one window of each from T0."""
    windows = {}
    with session_scope(url) as s:
        for demand in DEMANDS:
            params = {"window_s": demand.period, "deadline_s": demand.deadline - demand.period}
            store.register_query(
                s, dag_id=demand.name, name=demand.name, sql="SELECT 1", mode=Mode.STATIC, params=params
            )
            store.record_demand(s, demand)
            windows[demand.name] = store.record_plan(
                s,
                demand.name,
                T0,
                T0 + WINDOW,
                T0 + timedelta(seconds=demand.deadline),
                10,
                PlanRecord(how="greedy"),
                [],
            )
    return windows


def phases(s: Session) -> tuple[int, int]:
    """The plan's open- and closed-phase cores, both counts that meet every deadline."""
    plan = capacity.plan(s, PLAN)
    assert plan is not None
    assert plan.open.cores is not None
    assert plan.closed.cores is not None
    return plan.open.cores, plan.closed.cores


def request_merge(s: Session, windows: dict[str, int], query: str, now: datetime) -> None:
    """The query's window's merge asks the dispatcher for the resource at `now`."""
    deadline = next(d.deadline for d in DEMANDS if d.name == query)
    dispatch.register(
        s,
        window_id=windows[query],
        query=query,
        kind=JobKind.MERGE,
        slot=-1,
        reason=BatchReason.ALL_PROCESSED,
        deadline=T0 + timedelta(seconds=deadline),
        remaining_cost=5.0,
        lease_seconds=10.0,
        now=now,
    )


def test_a_grant_gets_the_plans_cores_for_the_phase_the_windows_are_in(ledger: str) -> None:
    with session_scope(ledger) as s:
        assert capacity.grant_cores(s, PLAN, T0) is None, "no demand recorded: the connection's default"
    windows = register(ledger)
    with session_scope(ledger) as s:
        opened, closed = phases(s)
        assert opened < closed <= PLAN.max_cores, "the case the plan exists for"
        assert capacity.grant_cores(s, PLAN, T0 + timedelta(seconds=60)) == opened
        assert capacity.grant_cores(s, PLAN, T0 + WINDOW) == closed, "closed, nothing merged"
        s.get_one(Window, windows["iqp_a"]).status = WindowStatus.MERGED.value
        assert capacity.grant_cores(s, PLAN, T0 + WINDOW + timedelta(seconds=20)) == closed, "iqp_b's due"
        s.get_one(Window, windows["iqp_b"]).status = WindowStatus.MERGED.value
        assert capacity.grant_cores(s, PLAN, T0 + WINDOW + timedelta(seconds=40)) == opened, "all merged"


def test_without_the_plan_a_grant_gets_the_fixed_count_or_the_connections_default(ledger: str) -> None:
    register(ledger)
    with session_scope(ledger) as s:
        assert capacity.grant_cores(s, DispatchSettings(cores=3), T0 + WINDOW) == 3
        assert capacity.grant_cores(s, DispatchSettings(), T0 + WINDOW) is None


def test_the_plan_gives_no_more_than_the_cluster_has(ledger: str) -> None:
    register(ledger)
    with session_scope(ledger) as s:
        plan = capacity.plan(s, DispatchSettings(cores="plan", max_cores=1))
        assert plan is not None
        assert plan.closed.cores is None or plan.closed.cores > 1, "as timed: one core is slower than the models'"
        assert capacity.grant_cores(s, DispatchSettings(cores="plan", max_cores=1), T0 + WINDOW) == 1


def test_each_grants_cores_are_read_back_as_cores_over_time(ledger: str) -> None:
    windows = register(ledger)
    granted_at = T0 + WINDOW + timedelta(seconds=1)
    with session_scope(ledger) as s:
        request_merge(s, windows, "iqp_a", granted_at)
        cores = capacity.grant_cores(s, PLAN, granted_at)
        (lease,) = dispatch.grant(s, policy=Policy.EDF, resources=1, now=granted_at, cores=cores)
        dispatch.release(s, lease, granted_at + timedelta(seconds=7))
    with session_scope(ledger, read_only=True) as s:
        held = capacity.granted(s, T0, granted_at + timedelta(seconds=8))
        plan = capacity.plan(s, PLAN)
    assert plan is not None
    assert held == [
        capacity.Granted("iqp_a", JobKind.MERGE, plan.closed.cores, granted_at, granted_at + timedelta(seconds=7))
    ]


def test_a_measured_speedup_with_no_gain_from_cores_plans_one_core_open_and_all_once_none_is_enough(
    ledger: str,
) -> None:
    register(ledger)
    measured = DispatchSettings(cores="plan", max_cores=4, speedup=((1, 1.0),))
    with session_scope(ledger) as s:
        plan = capacity.plan(s, measured)
        default = capacity.plan(s, PLAN)
        assert plan is not None
        assert default is not None
        assert plan.speedup.points == ((1, 1.0),)
        assert plan.open.cores == 1
        assert plan.closed.cores is None, "iqp_a's 20 s after its close is due in 30 s, behind a 10 s job"
        assert default.closed.cores is not None, "the default speedup believes cores help"
        assert capacity.grant_cores(s, measured, T0 + WINDOW) == 4, "none is enough: every core the cluster has"


def test_a_lease_controller_needs_the_phases_cores_ahead_of_time_and_none_once_every_window_is_done(
    ledger: str,
) -> None:
    with session_scope(ledger) as s:
        assert capacity.needed(s, PLAN, T0, lead=10) == 0, "no demand recorded: nothing to lease"
    windows = register(ledger)
    with session_scope(ledger) as s:
        opened, closed = phases(s)
        assert capacity.needed(s, PLAN, T0 - timedelta(seconds=30), lead=10) == 0, "no window open yet"
        assert capacity.needed(s, PLAN, T0 + timedelta(seconds=30), lead=10) == opened
        closing = T0 + WINDOW - timedelta(seconds=5)
        assert capacity.needed(s, PLAN, closing, lead=10) == closed, "the close is within the lead"
        assert capacity.needed(s, PLAN, closing, lead=0) == opened
        one = DispatchSettings(cores="plan", max_cores=1)
        assert capacity.needed(s, one, closing, lead=10) == 1, "at most max_cores"
        for window in windows.values():
            s.get_one(Window, window).status = WindowStatus.MERGED.value
        assert capacity.needed(s, PLAN, T0 + WINDOW, lead=10) == 0, "every window merged"


def test_a_lease_controller_keeps_the_cores_a_granted_job_holds_after_every_window_is_done(ledger: str) -> None:
    windows = register(ledger)
    granted_at = T0 + WINDOW + timedelta(seconds=1)
    with session_scope(ledger) as s:
        request_merge(s, windows, "iqp_b", granted_at)
        (lease,) = dispatch.grant(s, policy=Policy.EDF, resources=1, now=granted_at, cores=3)
        for window in windows.values():  # a late merge still running: the windows say none is due
            s.get_one(Window, window).status = WindowStatus.MERGED.value
        running = granted_at + timedelta(seconds=1)
        assert capacity.needed(s, PLAN, running, lead=10) == 3, "the grant's cores, whatever the phase"
        dispatch.release(s, lease, granted_at + timedelta(seconds=7))
        assert capacity.needed(s, PLAN, granted_at + timedelta(seconds=8), lead=10) == 0
