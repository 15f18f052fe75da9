"""One ranking everywhere: the monitor's queue, read from a real ledger the way the API reads it,
is the order in which the live dispatcher then grants, for every policy, with a backfill's
request waiting among live ones (its deadline long past: by the deadline alone it would go first).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_iqp.constants import BatchReason, JobKind, Mode, Policy
from airflow_iqp.ledger import dispatch, session_scope, store
from airflow_iqp.planning.record import PlanRecord
from airflow_iqp.ui import read, views

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
DAGS = ("live_a", "live_b", "backfilled")
# Who the live dispatcher serves, by policy, at 3 s: live_a (deadline 100 s, 80 s of work, its
# DAG served at -4 s by the holder's grant), live_b (deadline 200 s, 10 s of work, never served),
# and the backfill (deadline three days ago, 1 s of work, never served, registered first), last.
GRANTED = {
    Policy.EDF: ["live_a", "live_b", "backfilled"],
    Policy.LLF: ["live_a", "live_b", "backfilled"],
    Policy.SJF: ["live_b", "live_a", "backfilled"],
    Policy.RR: ["live_b", "live_a", "backfilled"],
}


def _s(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _request(url: str, dag: str, start: datetime, deadline: datetime, remaining: float, now: datetime) -> int:
    """A window of `dag` starting at `start` (a backfill's if it is the backfilled DAG) and its request."""
    with session_scope(url) as s:
        window = store.record_plan(
            s, dag, start, start + timedelta(seconds=10), deadline, 1, PlanRecord(), [], backfill=dag == "backfilled"
        )
        request = dispatch.register(
            s,
            window_id=window,
            query=dag,
            kind=JobKind.PARTIAL,
            slot=0,
            reason=BatchReason.PLANNED,
            deadline=deadline,
            remaining_cost=remaining,
            lease_seconds=30.0,
            now=now,
        )
    assert request is not None
    return request


@pytest.mark.parametrize("policy", list(Policy))
def test_the_monitors_queue_is_the_order_the_dispatcher_grants(ledger_db: str, policy: Policy) -> None:
    with session_scope(ledger_db) as s:
        for dag in DAGS:
            store.register_query(s, dag_id=dag, name=dag, sql="SELECT 1", mode=Mode.STATIC, params={})
    holder = _request(ledger_db, "live_a", _s(-600), _s(-300), 5.0, now=_s(-5))
    with session_scope(ledger_db) as s:
        (held,) = dispatch.grant(s, policy=policy, resources=1, now=_s(-4))
    assert held.request == holder
    old = T0 - timedelta(days=3)
    names = {
        _request(ledger_db, "backfilled", old, old + timedelta(seconds=20), 1.0, now=_s(0)): "backfilled",
        _request(ledger_db, "live_a", T0, _s(100), 80.0, now=_s(1)): "live_a",
        _request(ledger_db, "live_b", T0, _s(200), 10.0, now=_s(2)): "live_b",
    }

    with session_scope(ledger_db) as s:  # as the API's /dispatcher reads it
        rows = read.dispatcher(s, _s(3) - timedelta(hours=1))
    view = views.dispatcher(rows, policy, _s(3), readable=set(DAGS))
    shown = [entry.request for entry in view.queue]

    with session_scope(ledger_db) as s:
        assert dispatch.release(s, held, _s(4))
    granted = []
    for step in range(len(names)):
        with session_scope(ledger_db) as s:
            (lease,) = dispatch.grant(s, policy=policy, resources=1, now=_s(5 + step))
            granted.append(lease.request)
            assert dispatch.release(s, lease, _s(5.5 + step))
    assert shown == granted
    assert [names[request] for request in granted] == GRANTED[policy]

    # the first grant's stored ranking is that order too, and shows the backfill's key as its window's start
    with session_scope(ledger_db) as s:
        rows = read.dispatcher(s, _s(0))
    first = next(g for g in views.dispatcher(rows, policy, _s(9), readable=set(DAGS)).grants if g.request == shown[0])
    assert [first.request, *(o.request for o in first.others)] == shown
    assert first.others[-1].key_at == old
