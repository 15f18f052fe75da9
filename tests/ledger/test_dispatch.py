"""The dispatcher on SQLite and PostgreSQL: policy order, one open request per window, leases
that expire, heartbeat and release, bad input, and lease safety under 10,000 contested claims
from concurrent worker processes."""

from __future__ import annotations

import multiprocessing
import threading
import time
import traceback
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
from sqlalchemy import select, text

from airflow_iqp.constants import BatchReason, JobKind, Mode, Policy, RequestState
from airflow_iqp.dynamic.dispatch import RankedEntry
from airflow_iqp.exceptions import LedgerLookupError
from airflow_iqp.ledger import dispatch, session_scope, store
from airflow_iqp.ledger.dispatch import Lease
from airflow_iqp.ledger.models import DispatchRequest, Resource
from airflow_iqp.planning.record import PlanRecord

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def _s(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _window(session: Session, query: str, start: datetime = T0) -> int:
    store.register_query(session, dag_id=query, name=query, sql="SELECT 1", mode=Mode.DYNAMIC, params={})
    return store.record_plan(
        session,
        query,
        start,
        start + timedelta(seconds=10),
        start + timedelta(seconds=60),
        10,
        PlanRecord(how="test"),
        [],
    )


def _register(
    session: Session,
    window_id: int,
    query: str,
    *,
    now: datetime,
    deadline: datetime | None = None,
    remaining: float = 1.0,
    slot: int = 0,
    kind: JobKind = JobKind.PARTIAL,
    lease_seconds: float = 30.0,
    resume_seconds: float = 0.0,
) -> int | None:
    return dispatch.register(
        session,
        window_id=window_id,
        query=query,
        kind=kind,
        slot=slot,
        reason=BatchReason.MIN_BATCH,
        deadline=deadline or _s(3600),
        remaining_cost=remaining,
        lease_seconds=lease_seconds,
        resume_seconds=resume_seconds,
        now=now,
    )


def _grant(url: str, now: datetime, policy: str = "edf", resources: int = 1) -> list[Lease]:
    with session_scope(url) as s:
        return dispatch.grant(s, policy=policy, resources=resources, now=now)


def _state(url: str, request: int) -> dispatch.RequestStatus:
    with session_scope(url) as s:
        return dispatch.status(s, request)


def _waiting(url: str, queries: list[str], now: datetime = T0) -> list[int]:
    """One waiting request per query, each in a window of its own."""
    with session_scope(url) as s:
        return [_register(s, _window(s, q), q, now=now) for q in queries]  # type: ignore[misc]


# -- policy order ---------------------------------------------------------------------------------

# (query, deadline, remaining cost) at T0: EDF keys 100/110/200/300, LLF keys (D - now - C)
# 90/60/195/200, SJF keys 10/50/5/100; RR by when the query was last served: qd never,
# qc at T0-30, qb at T0-20, qa at T0-10. So each policy serves a different request first.
REQUESTS = [("qa", 100, 10.0), ("qb", 110, 50.0), ("qc", 200, 5.0), ("qd", 300, 100.0)]
ORDER = {"edf": "abcd", "llf": "bacd", "sjf": "cabd", "rr": "dcba"}
# The stored ranking of the first grant, best first, with each candidate's key.
FIRST_KEYS: dict[str, list[float | None]] = {
    "edf": [_s(100).timestamp(), _s(110).timestamp(), _s(200).timestamp(), _s(300).timestamp()],
    "llf": [60.0, 90.0, 195.0, 200.0],
    "sjf": [5.0, 10.0, 50.0, 100.0],
    "rr": [None, _s(-30).timestamp(), _s(-20).timestamp(), _s(-10).timestamp()],
}


@pytest.mark.parametrize("policy", list(Policy))
def test_each_policy_serves_the_waiting_requests_in_its_order(ledger_db: str, policy: Policy) -> None:
    windows: dict[str, int] = {}
    with session_scope(ledger_db) as s:
        for query, _, _ in REQUESTS:
            windows[query] = _window(s, query)
    for query, served in (("qc", -30), ("qb", -20), ("qa", -10)):  # history for round robin
        with session_scope(ledger_db) as s:
            _register(s, windows[query], query, now=_s(served - 1))
        (lease,) = _grant(ledger_db, _s(served), policy)
        with session_scope(ledger_db) as s:
            assert dispatch.release(s, lease, _s(served + 1)) is True
    with session_scope(ledger_db) as s:
        ids = {
            query: _register(s, windows[query], query, now=T0, deadline=_s(deadline), remaining=remaining)
            for query, deadline, remaining in REQUESTS
        }
    expected = [ids[f"q{letter}"] for letter in ORDER[policy]]
    with session_scope(ledger_db) as s:
        assert dispatch.would_grant(s, policy=policy, resources=1, now=T0) == expected[:1]
        assert dispatch.would_grant(s, policy=policy, resources=3, now=T0) == expected[:3]

    order = []
    for step in range(4):
        (lease,) = _grant(ledger_db, _s(step), policy)
        assert _grant(ledger_db, _s(step), policy) == []  # held: nothing more to hand out
        order.append(lease.request)
        assert (lease.resource, lease.fence, lease.expires) == (0, 4 + step, _s(step + 30))
        with session_scope(ledger_db) as s:
            assert dispatch.release(s, lease, _s(step + 0.5)) is True
    assert order == expected

    with session_scope(ledger_db) as s:
        first = s.get(DispatchRequest, expected[0])
        assert first is not None
        assert first.ranking is not None
        assert first.state == RequestState.RELEASED
        assert first.granted_at == T0
        ranked = [RankedEntry.read(r) for r in first.ranking]
        assert [r.request for r in ranked] == expected
        assert [r.query for r in ranked] == [f"q{letter}" for letter in ORDER[policy]]
        keys = [r.key for r in ranked]
        assert [k is None for k in keys] == [k is None for k in FIRST_KEYS[policy]]
        assert [k for k in keys if k is not None] == pytest.approx([k for k in FIRST_KEYS[policy] if k is not None])
        last = s.get(DispatchRequest, expected[-1])
        assert last is not None
        assert last.ranking is not None
        assert [RankedEntry.read(r).request for r in last.ranking] == expected[-1:]


# -- requests and leases ------------------------------------------------------------------------


def test_live_requests_go_before_backfill_requests_which_go_oldest_window_first(ledger_db: str) -> None:
    """A backfilled window's deadline is long past: by EDF alone it would take every grant."""
    with session_scope(ledger_db) as s:
        store.register_query(s, dag_id="backfilled", name="b", sql="SELECT 1", mode=Mode.STATIC, params={})
        old = []
        for days in (3, 9, 6):
            start = T0 - timedelta(days=days)
            window = store.record_plan(
                s,
                "backfilled",
                start,
                start + timedelta(seconds=10),
                start + timedelta(seconds=20),
                1,
                PlanRecord(),
                [],
                backfill=True,
            )
            old.append((days, _register(s, window, "backfilled", now=_s(0), deadline=start + timedelta(seconds=20))))
        live = _register(s, _window(s, "live"), "live", now=_s(1), deadline=_s(3600))
    served = []
    for step in range(4):
        (lease,) = _grant(ledger_db, _s(2 + step))
        served.append(lease.request)
        with session_scope(ledger_db) as s:
            dispatch.release(s, lease, _s(2.5 + step))
    assert served == [live] + [request for _, request in sorted(old, reverse=True)]


def test_a_window_has_one_open_request(ledger_db: str) -> None:
    with session_scope(ledger_db) as s:
        window = _window(s, "q1")
        first = _register(s, window, "q1", now=T0, slot=0)
        assert first is not None
        assert _register(s, window, "q1", now=T0, slot=0) == first  # a retried task gets its id back
        assert _register(s, window, "q1", now=T0, slot=1) is None  # another slot waits
        assert _register(s, window, "q1", now=T0, slot=-1, kind=JobKind.MERGE) is None
    (lease,) = _grant(ledger_db, _s(1))
    assert lease.request == first
    with session_scope(ledger_db) as s:
        assert _register(s, window, "q1", now=_s(2), slot=1) is None  # granted is still open
        assert _register(s, window, "q1", now=_s(2), slot=0) == first
        assert dispatch.release(s, lease, _s(3)) is True
    with session_scope(ledger_db) as s:
        second = _register(s, window, "q1", now=_s(4), slot=1)
        assert second is not None
        assert second != first
        assert _register(s, window, "q1", now=_s(4), slot=0) is None
    assert [_state(ledger_db, r).state for r in (first, second)] == [RequestState.RELEASED, RequestState.WAITING]


def test_two_resources_grant_two_and_then_none_while_held(ledger_db: str) -> None:
    a, b, c = _waiting(ledger_db, ["qa", "qb", "qc"])
    leases = _grant(ledger_db, _s(1), resources=2)
    assert [(lease.request, lease.resource, lease.fence) for lease in leases] == [(a, 0, 1), (b, 1, 1)]
    assert _grant(ledger_db, _s(2), resources=2) == []
    with session_scope(ledger_db) as s:
        assert dispatch.would_grant(s, policy="edf", resources=2, now=_s(2)) == []
        assert dispatch.would_grant(s, policy="edf", resources=3, now=_s(2)) == [c]  # a third would serve c
        assert dispatch.release(s, leases[1], _s(3)) is True
    (lease,) = _grant(ledger_db, _s(4), resources=2)
    assert (lease.request, lease.resource, lease.fence) == (c, 1, 2)
    assert [_state(ledger_db, r).state for r in (a, b, c)] == [
        RequestState.GRANTED,
        RequestState.RELEASED,
        RequestState.GRANTED,
    ]


def test_nothing_is_granted_while_the_lease_is_live(ledger_db: str) -> None:
    a, b = _waiting(ledger_db, ["qa", "qb"])
    (lease,) = _grant(ledger_db, T0)
    assert lease.request == a
    assert lease.expires == _s(30)
    for later in (1, 15, 29.999):
        assert _grant(ledger_db, _s(later)) == []
    with session_scope(ledger_db) as s:
        assert dispatch.would_grant(s, policy="edf", resources=1, now=_s(29)) == []
        assert dispatch.would_grant(s, policy="edf", resources=1, now=_s(31)) == [b]
    assert _state(ledger_db, b).state == RequestState.WAITING
    assert _state(ledger_db, a) == dispatch.RequestStatus(a, RequestState.GRANTED, lease)


def test_an_expired_lease_is_reclaimed_and_its_stale_holder_is_fenced_off(ledger_db: str) -> None:
    a, b, c = _waiting(ledger_db, ["qa", "qb", "qc"])
    (old,) = _grant(ledger_db, T0)
    assert (old.request, old.fence) == (a, 1)
    (new,) = _grant(ledger_db, _s(31))  # a's holder died: no heartbeat for 30 s
    assert (new.request, new.resource, new.fence, new.expires) == (b, 0, 2, _s(61))
    assert _state(ledger_db, a) == dispatch.RequestStatus(a, RequestState.EXPIRED, None)
    with session_scope(ledger_db) as s:
        assert s.get(DispatchRequest, a).released_at == _s(31)  # type: ignore[union-attr]
    with session_scope(ledger_db) as s:  # the stale holder wakes up
        assert dispatch.heartbeat(s, old, _s(32)) is None
    with session_scope(ledger_db) as s:
        assert dispatch.release(s, old, _s(33)) is False
    with session_scope(ledger_db) as s:
        resource = s.get(Resource, 0)
        assert resource is not None
        assert (resource.holder_id, resource.fence) == (b, 2)
        assert resource.lease_expires == _s(61)
    assert _state(ledger_db, a).state == RequestState.EXPIRED
    assert _grant(ledger_db, _s(34)) == []  # b still holds it: c waits
    assert _state(ledger_db, b) == dispatch.RequestStatus(b, RequestState.GRANTED, new)
    assert _state(ledger_db, c).state == RequestState.WAITING


def test_a_heartbeat_extends_the_lease_so_it_is_not_reclaimed(ledger_db: str) -> None:
    a, b = _waiting(ledger_db, ["qa", "qb"])
    (lease,) = _grant(ledger_db, T0)
    with session_scope(ledger_db) as s:
        extended = dispatch.heartbeat(s, lease, _s(20))
    assert extended == Lease(a, 0, 1, _s(50))
    assert _grant(ledger_db, _s(40)) == []  # past the first expiry, within the extended one
    assert _state(ledger_db, a) == dispatch.RequestStatus(a, RequestState.GRANTED, extended)
    (taken,) = _grant(ledger_db, _s(51))  # no heartbeat since: now it is reclaimed
    assert (taken.request, taken.fence) == (b, 2)
    with session_scope(ledger_db) as s:
        assert dispatch.heartbeat(s, extended, _s(52)) is None


def test_a_grant_waits_for_its_deferred_task_to_take_it_then_runs_a_lease_from_the_take(ledger_db: str) -> None:
    with session_scope(ledger_db) as s:
        a, b = (_register(s, _window(s, q), q, now=T0, resume_seconds=20.0) for q in ("qa", "qb"))
    assert a is not None
    assert b is not None
    (granted,) = _grant(ledger_db, T0)
    assert (granted.request, granted.expires) == (a, _s(50))  # a lease, and the task's resume
    assert _grant(ledger_db, _s(45)) == []  # untaken, yet not reclaimed: its task is coming back
    with session_scope(ledger_db) as s:
        taken = dispatch.take(s, granted, "qa/r/partial/0/1", _s(46))
    assert taken == Lease(a, 0, 1, _s(76))  # from the take on, a lease's term
    assert _state(ledger_db, a) == dispatch.RequestStatus(a, RequestState.GRANTED, taken)
    assert _grant(ledger_db, _s(75)) == []
    (reclaimed,) = _grant(ledger_db, _s(77))  # no heartbeat since the take
    assert (reclaimed.request, reclaimed.expires) == (b, _s(127))
    # A task that never comes back keeps the resource no longer than the lease and its resume.
    (after,) = _waiting(ledger_db, ["qc"])
    assert _grant(ledger_db, _s(126)) == []
    assert _grant(ledger_db, _s(128))[0].request == after
    assert _state(ledger_db, b).state == RequestState.EXPIRED


def test_a_request_queued_before_its_task_runs_waits_no_resume_until_its_task_registers(ledger_db: str) -> None:
    with session_scope(ledger_db) as s:
        window = _window(s, "qa")
        _register(s, window, "qa", now=T0, kind=JobKind.MERGE, slot=-1)  # a follow-up
    (granted,) = _grant(ledger_db, T0)
    assert granted.expires == _s(30)  # a lease only: its task may be long in coming
    with session_scope(ledger_db) as s:
        dispatch.release(s, granted, _s(1))
        window = _window(s, "qb")
        later = _register(s, window, "qb", now=_s(1), kind=JobKind.MERGE, slot=-1)
        assert _register(s, window, "qb", now=_s(2), kind=JobKind.MERGE, slot=-1, resume_seconds=20.0) == later
    (granted,) = _grant(ledger_db, _s(3))
    assert (granted.request, granted.expires) == (later, _s(53))  # its task is here: it may be deferred


def test_a_grant_gives_its_job_cores_which_the_lease_carries_while_it_is_extended(ledger_db: str) -> None:
    a, b = _waiting(ledger_db, ["qa", "qb"])
    with session_scope(ledger_db) as s:
        (lease,) = dispatch.grant(s, policy="edf", resources=1, now=T0, cores=3)
        extended = dispatch.heartbeat(s, lease, _s(20))
    assert (lease.request, lease.cores) == (a, 3)
    assert extended == Lease(a, 0, 1, _s(50), cores=3)
    assert _state(ledger_db, a).lease == extended
    with session_scope(ledger_db) as s:
        assert s.get(DispatchRequest, a).cores == 3  # type: ignore[union-attr]
        dispatch.release(s, extended, _s(21))
    (default,) = _grant(ledger_db, _s(22))  # no count given: the connection's default applies
    assert (default.request, default.cores) == (b, None)
    with session_scope(ledger_db) as s, pytest.raises(ValueError, match="cores must be >= 1"):
        dispatch.grant(s, policy="edf", resources=1, now=_s(23), cores=0)


def test_confirm_extends_only_a_live_lease_so_nothing_commits_after_it_ran_out(ledger_db: str) -> None:
    """A holder checks its lease before committing: an expired one fails the check even while
    nobody has reclaimed it (a heartbeat would revive it), and so does one granted on."""
    a, b = _waiting(ledger_db, ["qa", "qb"])
    (lease,) = _grant(ledger_db, T0)
    with session_scope(ledger_db) as s:
        confirmed = dispatch.confirm(s, lease, _s(29))
    assert confirmed == Lease(a, 0, 1, _s(59))
    assert _grant(ledger_db, _s(40)) == []  # a confirmed lease is not reclaimed
    with session_scope(ledger_db) as s:
        assert dispatch.confirm(s, confirmed, _s(60)) is None  # expired, though still a's
    with session_scope(ledger_db) as s:
        resource = s.get(Resource, 0)
        assert resource is not None
        assert (resource.holder_id, resource.lease_expires) == (a, _s(59))  # not extended
    (taken,) = _grant(ledger_db, _s(61))
    assert (taken.request, taken.fence) == (b, 2)
    with session_scope(ledger_db) as s:
        assert dispatch.confirm(s, confirmed, _s(62)) is None  # b's now: a different holder and fence


def test_release_frees_the_resource_for_the_next_request(ledger_db: str) -> None:
    a, b = _waiting(ledger_db, ["qa", "qb"])
    (first,) = _grant(ledger_db, T0)
    with session_scope(ledger_db) as s:
        assert dispatch.release(s, first, _s(5)) is True
    assert _state(ledger_db, a) == dispatch.RequestStatus(a, RequestState.RELEASED, None)
    (second,) = _grant(ledger_db, _s(6))
    assert (second.request, second.fence) == (b, 2)
    with session_scope(ledger_db) as s:
        assert dispatch.release(s, first, _s(7)) is False  # twice: the second one does nothing
        assert s.get(DispatchRequest, a).released_at == _s(5)  # type: ignore[union-attr]
    assert _state(ledger_db, b).state == RequestState.GRANTED
    assert _grant(ledger_db, _s(8)) == []


def test_bad_input_is_refused_naming_the_field(ledger_db: str) -> None:
    (a,) = _waiting(ledger_db, ["qa"])
    with session_scope(ledger_db) as s:
        window = _window(s, "qb")
    for seconds in (0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="lease_seconds"), session_scope(ledger_db) as s:
            _register(s, window, "qb", now=T0, lease_seconds=seconds)
    for bad in (0, -1):
        with pytest.raises(ValueError, match="resources"), session_scope(ledger_db) as s:
            dispatch.grant(s, policy="edf", resources=bad, now=T0)
        with pytest.raises(ValueError, match="resources"), session_scope(ledger_db) as s:
            dispatch.would_grant(s, policy="edf", resources=bad, now=T0)
    with pytest.raises(ValueError, match="policy"), session_scope(ledger_db) as s:
        dispatch.grant(s, policy="fifo", resources=1, now=T0)
    with pytest.raises(LedgerLookupError, match="no dispatch request 10000"), session_scope(ledger_db) as s:
        dispatch.status(s, 10_000)
    (lease,) = _grant(ledger_db, T0)
    assert lease.request == a
    # A misconfigured policy must not go unnoticed just because the resource is busy.
    for call in (dispatch.grant, dispatch.would_grant):
        with pytest.raises(ValueError, match="policy"), session_scope(ledger_db) as s:
            call(s, policy="fifo", resources=1, now=_s(1))
    with session_scope(ledger_db) as s:
        assert s.scalar(select(DispatchRequest.id).where(DispatchRequest.window_id == window)) is None


def test_a_heartbeat_that_commits_during_a_grant_keeps_its_lease(
    ledger_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A late holder heartbeats while a grant that saw its lease expired is between its read and
    its compare-and-set. Either the heartbeat wins (and keeps the resource) or the grant does
    (and the heartbeat learns the lease is lost) — never both. On SQLite the heartbeat waits for
    the grant's write lock; on PostgreSQL it commits in between."""
    a, b = _waiting(ledger_db, ["qa", "qb"])
    (old,) = _grant(ledger_db, T0)
    beat: dict[str, Any] = {}

    def late_heartbeat() -> None:
        with session_scope(ledger_db) as s:
            beat["lease"] = dispatch.heartbeat(s, old, _s(31))

    choices = dispatch._choices

    def choices_then_heartbeat(*args: Any, **kwargs: Any) -> Any:
        found = choices(*args, **kwargs)
        holder = threading.Thread(target=late_heartbeat)
        holder.start()
        holder.join(timeout=1.0)  # PostgreSQL: done; SQLite: blocked on our write lock
        beat["thread"] = holder
        return found

    monkeypatch.setattr(dispatch, "_choices", choices_then_heartbeat)
    granted = _grant(ledger_db, _s(31))
    beat["thread"].join(timeout=30)
    assert not beat["thread"].is_alive()
    # PostgreSQL: the heartbeat commits between the grant's read and its update, and wins.
    # SQLite: it waits for the grant's write lock, and learns its lease was lost.
    assert (beat["lease"] is not None) == ledger_db.startswith("postgresql")
    if beat["lease"] is not None:  # the heartbeat won: a keeps the resource until T0+61
        assert beat["lease"] == Lease(a, 0, 1, _s(61))
        assert granted == []
        assert [_state(ledger_db, r).state for r in (a, b)] == [RequestState.GRANTED, RequestState.WAITING]
    else:  # the grant won
        assert [(lease.request, lease.fence) for lease in granted] == [(b, 2)]
        assert [_state(ledger_db, r).state for r in (a, b)] == [RequestState.EXPIRED, RequestState.GRANTED]


# -- lease safety under contention ---------------------------------------------------------------

WORKERS = 6
HOLD_SECONDS = 0.002
# A claimer that got nothing waits this long before claiming again, as a polling task would.
# Without it SQLite starves releases: a waiting writer polls for the lock with growing sleeps
# (up to 100 ms) while the spinning claimers retake it at once, and grants collapse to ~1 %.
CLAIM_PAUSE_SECONDS = 0.002
POLICIES = list(Policy)
ORDERING_LOCK = 4242


def _clock(session: Session, exclusive: bool) -> datetime:
    """The test's `now`, read after this transaction is ordered behind every earlier grant or
    release it can see, so the ledger's timestamps follow the real order of events. On SQLite
    that is the write lock of BEGIN IMMEDIATE (all transactions serialize). On PostgreSQL grants
    share an advisory lock (they still race each other for the resource rows: the contest) and
    releases take it exclusively, so no release commits between a grant's clock and its read."""
    if session.get_bind().dialect.name == "postgresql":
        lock = "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"
        session.execute(text(f"SELECT {lock}({ORDERING_LOCK})"))
    else:
        session.connection()  # BEGIN IMMEDIATE
    return datetime.now(UTC)


def _hold_and_release(
    url: str, lease: Lease, shared: dict[str, Any], resources: int, stats: dict[str, Any]
) -> str | None:
    occupancy, violations = shared["occupancy"], shared["violations"]
    with occupancy.get_lock():
        if occupancy[lease.resource] != 0 or occupancy[resources] >= resources:
            violations.value += 1
        occupancy[lease.resource] += 1
        occupancy[resources] += 1
    time.sleep(HOLD_SECONDS)
    with occupancy.get_lock():
        occupancy[lease.resource] -= 1
        occupancy[resources] -= 1
    started = time.perf_counter()
    with session_scope(url) as s:
        released = dispatch.release(s, lease, _clock(s, exclusive=True))
    waited = time.perf_counter() - started
    stats["release_seconds"] += waited
    stats["release_max"] = max(stats["release_max"], waited)
    return None if released else f"release of {lease} returned False"


def _claimer(url: str, worker: int, window_id: int, resources: int, shared: dict[str, Any]) -> None:
    query, policy = f"q{worker}", POLICIES[worker % len(POLICIES)]
    claims, in_flight, problems = shared["claims"], shared["in_flight"], []
    stats: dict[str, Any] = {
        "claims": 0,
        "overlapped": 0,
        "held": 0,
        "handed_over": 0,
        "release_seconds": 0.0,
        "release_max": 0.0,
    }
    request: int | None = None
    try:
        while True:
            if request is None:
                with session_scope(url) as s:
                    now = datetime.now(UTC)
                    request = _register(
                        s,
                        window_id,
                        query,
                        now=now,
                        deadline=now + timedelta(seconds=5 + worker),
                        remaining=0.1 * (worker + 1),
                        lease_seconds=600,
                    )
                if request is None:
                    problems.append(f"worker {worker} could not register in its own window")
                    break
            with claims.get_lock():
                if claims.value >= shared["total"]:
                    break
                claims.value += 1
                in_flight.value += 1
                overlapped = in_flight.value > 1  # another claimer is inside its grant too
            stats["claims"] += 1
            stats["overlapped"] += overlapped
            with session_scope(url) as s:
                leases = dispatch.grant(s, policy=policy, resources=resources, now=_clock(s, exclusive=False))
                mine = next((lease for lease in leases if lease.request == request), None)
                if mine is None:  # someone else's grant may have served us (ours is valid once committed)
                    found = dispatch.status(s, request)
                    if found.state == RequestState.GRANTED:
                        mine, stats["handed_over"] = found.lease, stats["handed_over"] + 1
                    elif found.state != RequestState.WAITING:
                        problems.append(f"request {request} is {found.state} without being released")
            with claims.get_lock():
                in_flight.value -= 1
            if mine is not None:
                stats["held"] += 1
                if problem := _hold_and_release(url, mine, shared, resources, stats):
                    problems.append(problem)
                request = None
            else:
                time.sleep(CLAIM_PAUSE_SECONDS)
        shared["barrier"].wait(timeout=300)  # no grant happens after this: settle what is left
        if request is not None and (found := _state(url, request)).state == RequestState.GRANTED:
            stats["held"] += 1
            if problem := _hold_and_release(url, found.lease, shared, resources, stats):  # type: ignore[arg-type]
                problems.append(problem)
        shared["results"].put((worker, problems, stats))
    except Exception:  # the parent shows it
        shared["barrier"].abort()
        shared["results"].put((worker, [traceback.format_exc()], stats))


@pytest.mark.parametrize(("resources", "total"), [(1, 10_000), (2, 3_000)], ids=["1", "2"])
def test_contested_claims_never_grant_a_resource_twice(ledger_db: str, resources: int, total: int) -> None:
    """`total` grant calls by WORKERS processes, each with one open request at a time that it holds
    for a few ms and releases whenever it is granted (by its own grant call or another's). The
    resources=2 run is shorter to keep each backend near a minute on two loaded cores."""
    with session_scope(ledger_db) as s:
        windows = [_window(s, f"q{w}") for w in range(WORKERS)]
    ctx = multiprocessing.get_context("fork")
    shared = {
        "total": total,
        "claims": ctx.Value("i", 0),
        "in_flight": ctx.Value("i", 0, lock=False),  # guarded by the claims lock
        "occupancy": ctx.Array("i", resources + 1),  # per resource, then the total
        "violations": ctx.Value("i", 0),
        "barrier": ctx.Barrier(WORKERS),
        "results": ctx.Queue(),
    }
    workers = [ctx.Process(target=_claimer, args=(ledger_db, w, windows[w], resources, shared)) for w in range(WORKERS)]
    started = time.perf_counter()
    for p in workers:
        p.start()
    results = [shared["results"].get(timeout=600) for _ in workers]
    elapsed = time.perf_counter() - started
    for p in workers:
        p.join(timeout=30)
    problems = [problem for _, found, _ in results for problem in found]
    assert problems == []
    assert shared["violations"].value == 0
    assert shared["claims"].value == total == sum(stats["claims"] for _, _, stats in results)

    with session_scope(ledger_db) as s:
        requests = s.execute(
            select(
                DispatchRequest.id,
                DispatchRequest.state,
                DispatchRequest.resource_id,
                DispatchRequest.fence,
                DispatchRequest.granted_at,
                DispatchRequest.released_at,
            ).where(DispatchRequest.granted_at.is_not(None))
        ).all()
        fences = dict(s.execute(select(Resource.id, Resource.fence)).all())
    held = sum(stats["held"] for _, _, stats in results)
    handed_over = sum(stats["handed_over"] for _, _, stats in results)
    dialect = ledger_db.split(":", 1)[0]
    release_mean = sum(stats["release_seconds"] for _, _, stats in results) / max(held, 1)
    release_max = max(stats["release_max"] for _, _, stats in results)
    overlapped = sum(stats["overlapped"] for _, _, stats in results)
    print(
        f"\n{dialect} resources={resources}: {total} claims by {WORKERS} processes in {elapsed:.1f} s"
        f" = {total / elapsed:.0f} claims/s, {overlapped} while another claim was in flight;"
        f" {len(requests)} grants ({handed_over} found via status);"
        f" release took {release_mean * 1000:.1f} ms on average, {release_max * 1000:.0f} ms at most"
    )
    assert len(requests) == held
    assert all(r.state == RequestState.RELEASED and r.released_at is not None for r in requests)
    by_resource: dict[int, list[Any]] = defaultdict(list)
    for r in requests:
        by_resource[r.resource_id].append(r)
    assert set(by_resource) == set(range(resources))
    for resource, granted in by_resource.items():
        granted.sort(key=lambda r: r.fence)
        # Every fence from 1 to the resource's is one grant: none lost, none given twice.
        assert [r.fence for r in granted] == list(range(1, fences[resource] + 1))
        for before, after in zip(granted, granted[1:]):
            assert before.granted_at < after.granted_at, (resource, before, after)
            assert before.granted_at < before.released_at <= after.granted_at, (resource, before, after)
    assert overlapped >= total // 2  # the claims really were concurrent
    assert len(requests) >= total // 40 * resources  # enough grants for the contest to mean something


def test_a_granted_request_is_run_by_one_task_try_until_its_lease_runs_out(ledger_db: str) -> None:
    [request] = _waiting(ledger_db, ["q1"])
    [lease] = _grant(ledger_db, _s(1))
    assert lease.request == request
    with session_scope(ledger_db) as s:
        assert dispatch.take(s, lease, "q1/r/partial/0/1", _s(2))
        assert not dispatch.take(s, lease, "q1/r/partial/0/2", _s(3))  # the earlier try still holds it
        again = dispatch.take(s, lease, "q1/r/partial/0/1", _s(4))
        assert again is not None
        assert again.expires == _s(34)  # each take starts a lease's term
        assert dispatch.take(s, lease, "q1/r/partial/0/2", again.expires + timedelta(seconds=1))  # ran out
        taken_by = s.scalar(select(DispatchRequest.taken_by).where(DispatchRequest.id == request))
    assert taken_by == "q1/r/partial/0/2"
