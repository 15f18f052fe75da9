"""Inserted idle time in the live dispatcher, on SQLite and PostgreSQL: the demo's collision,
where q14's long batch asks for the resource 0.3 s before q6's last batch (an earlier
deadline) is released, and what is left alone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest
from sqlalchemy import update

from airflow_iqp.constants import BatchReason, BatchStatus, JobKind, Mode, Policy, RequestState
from airflow_iqp.ledger import dispatch, session_scope, store
from airflow_iqp.ledger.models import Batch, DispatchRequest
from airflow_iqp.planning.record import MinBatchPlan, PlanRecord

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def _s(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _q6_window(session: Session, last_release: float) -> int:
    """q6, static: its first batch done, its last (20 s) released at `last_release`, a 1 s
    merge, due at 165 s."""
    store.register_query(session, dag_id="iqp_q6", name="q6", sql="SELECT 6", mode=Mode.STATIC, params={})
    batches = [
        {"index": i, "first_tuple": first, "last_tuple": last, "predicted_cost": cost}
        | {"release": _s(release), "latest_start": _s(release), "planned_start": _s(release)}
        for i, (first, last, cost, release) in enumerate([(1, 100, 10.0, 60.0), (101, 240, 20.0, last_release)])
    ]
    plan = PlanRecord(mode=Mode.STATIC, merge_cost=1.0)
    window = store.record_plan(session, "iqp_q6", T0, _s(120), _s(165), 240, plan, batches)
    session.execute(
        update(Batch).where(Batch.window_id == window, Batch.batch_index == 0).values(status=BatchStatus.DONE)
    )
    return window


def _q14_request(session: Session, now: datetime) -> int:
    """q14, dynamic (tau_max 30 s): a batch of up to 30 s and its merge left, due at 270 s."""
    store.register_query(session, dag_id="iqp_q14", name="q14", sql="SELECT 14", mode=Mode.DYNAMIC, params={})
    limits = MinBatchPlan(alpha=0.5, tau_max=30.0, min_batch=4, max_batch=8, cost_ratio=1.2, slots=5)
    plan = PlanRecord(mode=Mode.DYNAMIC, merge_cost=1.0, dynamic=limits)
    window = store.record_plan(session, "iqp_q14", T0, _s(120), _s(270), 240, plan, [])
    request = dispatch.register(
        session,
        window_id=window,
        query="iqp_q14",
        kind=JobKind.PARTIAL,
        slot=3,
        reason=BatchReason.MIN_BATCH,
        deadline=_s(270),
        remaining_cost=31.0,
        lease_seconds=60.0,
        now=now,
    )
    assert request is not None
    return request


def _q6_request(session: Session, window: int, now: datetime) -> int:
    request = dispatch.register(
        session,
        window_id=window,
        query="iqp_q6",
        kind=JobKind.PARTIAL,
        slot=1,
        reason=BatchReason.PLANNED,
        deadline=_s(165),
        remaining_cost=21.0,
        lease_seconds=60.0,
        now=now,
    )
    assert request is not None
    return request


@pytest.mark.parametrize("policy", [Policy.EDF, Policy.LLF])
def test_the_resource_waits_for_the_earlier_deadline_released_moments_later(ledger_db: str, policy: Policy) -> None:
    with session_scope(ledger_db) as s:
        q6_window = _q6_window(s, last_release=119.5)
        q14 = _q14_request(s, now=_s(119.2))
    with session_scope(ledger_db) as s:
        assert dispatch.would_grant(s, policy=policy, resources=1, now=_s(119.2)) == []
        assert dispatch.grant(s, policy=policy, resources=1, now=_s(119.2)) == []
    with session_scope(ledger_db) as s:
        held = s.get(DispatchRequest, q14)
        assert held is not None
        assert held.state == RequestState.WAITING
        assert held.held is not None
        assert "behind iqp_q14's 30.0 s job" in held.held
        assert "idle until iqp_q6 is released" in held.held
    # Its trigger polls once a second: q6's task registers at 120.4 s; until then it still waits.
    with session_scope(ledger_db) as s:
        assert dispatch.grant(s, policy=policy, resources=1, now=_s(120.2)) == []
        q6 = _q6_request(s, q6_window, now=_s(120.4))
    with session_scope(ledger_db) as s:
        (lease,) = dispatch.grant(s, policy=policy, resources=1, now=_s(120.4))
        assert lease.request == q6  # served first: 120.4 + 21 s meets 165 s
        assert dispatch.release(s, lease, _s(140.4)) is True
    with session_scope(ledger_db) as s:
        (lease,) = dispatch.grant(s, policy=policy, resources=1, now=_s(140.4))
        assert lease.request == q14  # then q14: 140.4 + 31 s is far within 270 s


@pytest.mark.parametrize(
    ("policy", "last_release", "resources", "why"),
    [
        (Policy.EDF, 160.0, 1, "q6's batch is released after q14's job ends"),
        (Policy.EDF, 100.0, 1, "q6's batch was released long ago: its input is late, no reason to wait"),
        (Policy.SJF, 119.5, 1, "SJF does not rank by deadlines"),
        (Policy.EDF, 119.5, 2, "a second resource is there for q6"),
    ],
)
def test_the_resource_is_granted_at_once_otherwise(
    ledger_db: str, policy: Policy, last_release: float, resources: int, why: str
) -> None:
    with session_scope(ledger_db) as s:
        _q6_window(s, last_release=last_release)
        q14 = _q14_request(s, now=_s(119.2))
    with session_scope(ledger_db) as s:
        assert dispatch.would_grant(s, policy=policy, resources=resources, now=_s(119.2)) == [q14], why
        (lease,) = dispatch.grant(s, policy=policy, resources=resources, now=_s(119.2))
        assert lease.request == q14, why
