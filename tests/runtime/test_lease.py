"""The lease keeper on a real SQLite ledger: it extends the lease while the job runs, calls back
at each beat, kills the job if the lease went to someone else (or cannot be renewed before it
runs out), and a job's confirmation before its commit fails once the lease is gone. A holder
killed with SIGKILL loses its resource within one lease term, and cannot commit after."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from airflow_iqp.constants import BatchReason, JobKind, Mode, Policy
from airflow_iqp.exceptions import LeaseLostError
from airflow_iqp.ledger import dispatch, session_scope, store
from airflow_iqp.planning.record import PlanRecord
from airflow_iqp.runtime.lease import LeaseKeeper, tag
from airflow_iqp.settings import DispatchSettings

if TYPE_CHECKING:
    from pathlib import Path

    from sqlalchemy.orm import Session

LOG = logging.getLogger(__name__)


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The task's ledger connection, as a worker would get it."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    monkeypatch.setenv("AIRFLOW_CONN_IQP_DEFAULT", url)
    return url


def queue_partial(
    s: Session, dag_id: str, start: datetime, deadline: datetime, lease_seconds: float, now: datetime
) -> None:
    """A 10 s window of `dag_id` opening at `start`, and one partial request of it registered at `now`."""
    window = store.record_plan(s, dag_id, start, start + timedelta(seconds=10), deadline, 1, PlanRecord(), [])
    dispatch.register(
        s,
        window_id=window,
        query=dag_id,
        kind=JobKind.PARTIAL,
        slot=0,
        reason=BatchReason.PLANNED,
        deadline=deadline,
        remaining_cost=1.0,
        lease_seconds=lease_seconds,
        now=now,
    )


def grant_one(url: str, lease_seconds: float, now: datetime, cores: int | None = None) -> dispatch.Lease:
    """A window of DAG q6 with one partial request, granted the one resource at `now` (with `cores`)."""
    with session_scope(url) as s:
        store.register_query(s, dag_id="q6", name="q6", sql="SELECT 1", mode=Mode.STATIC, params={})
        queue_partial(s, "q6", now, now + timedelta(seconds=60), lease_seconds, now)
        [lease] = dispatch.grant(s, policy=Policy.EDF, resources=1, now=now, cores=cores)
    return lease


def stale_lease(url: str) -> dispatch.Lease:
    """A lease that expired long ago (its holder stalled) and whose resource went to another request."""
    start = datetime.now(UTC) - timedelta(minutes=5)
    lease = grant_one(url, 5.0, start)
    with session_scope(url) as s:
        queue_partial(s, "q6", start + timedelta(seconds=10), start + timedelta(seconds=90), 600, datetime.now(UTC))
        [taken] = dispatch.grant(s, policy=Policy.EDF, resources=1, now=datetime.now(UTC))
    assert taken.fence == lease.fence + 1
    return lease


def test_the_keeper_extends_the_lease_while_the_job_runs_and_calls_back_at_each_beat(url: str) -> None:
    lease = grant_one(url, 5.0, datetime.now(UTC))
    lost = threading.Event()
    beats: list[datetime] = []
    keeper = LeaseKeeper(
        lease, every=0.1, on_lost=lost.set, log=LOG, on_beat=lambda: beats.append(keeper.lease.expires)
    )
    keeper.start()
    threading.Event().wait(0.5)
    keeper.stop()
    assert not lost.is_set()
    assert not keeper.lost
    assert keeper.lease.fence == lease.fence
    assert keeper.lease.expires > lease.expires
    assert len(beats) >= 2
    assert beats == sorted(beats), "each beat sees the lease it extended"


def test_the_keeper_kills_the_job_when_the_lease_went_to_someone_else(url: str) -> None:
    lease = stale_lease(url)
    lost = threading.Event()
    keeper = LeaseKeeper(lease, every=0.05, on_lost=lost.set, log=LOG)
    keeper.start()
    assert lost.wait(5), "the stale holder's job was not killed"
    keeper.stop()
    assert keeper.lost


def test_heartbeats_that_keep_failing_until_the_lease_runs_out_lose_it(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    lease = grant_one(url, 1.0, datetime.now(UTC))
    monkeypatch.setenv("AIRFLOW_CONN_IQP_DEFAULT", "postgresql://iqp@127.0.0.1:1/ledger")  # nothing listens there
    lost = threading.Event()
    keeper = LeaseKeeper(lease, every=0.05, on_lost=lost.set, log=LOG)
    keeper.start()
    assert lost.wait(10), "the job outlived a lease nobody could renew"
    keeper.stop()
    assert keeper.lost
    assert datetime.now(UTC) >= lease.expires


def test_a_job_confirms_a_live_lease(url: str) -> None:
    lease = grant_one(url, 30.0, datetime.now(UTC))
    keeper = LeaseKeeper(lease, every=60, on_lost=lambda: None, log=LOG)
    keeper.confirm()
    assert keeper.lease.fence == lease.fence
    assert keeper.lease.expires >= lease.expires
    assert tag(keeper.lease) == f"iqp-r{lease.request}-f{lease.fence}"


def test_a_job_is_refused_its_commit_once_the_lease_went(url: str) -> None:
    keeper = LeaseKeeper(stale_lease(url), every=60, on_lost=lambda: None, log=LOG)
    with pytest.raises(LeaseLostError, match="nothing was committed"):
        keeper.confirm()


HOLDER = """
import logging, os, sys
from datetime import datetime
from airflow_iqp.ledger.dispatch import Lease
from airflow_iqp.runtime.lease import LeaseKeeper

request, resource, fence, expires, every = sys.argv[1:]
lease = Lease(int(request), int(resource), int(fence), datetime.fromisoformat(expires))
keeper = LeaseKeeper(lease, float(every), on_lost=lambda: os._exit(3), log=logging.getLogger("holder"),
                     on_beat=lambda: print("beat", flush=True))
keeper.start()
keeper.join()
"""


def test_a_killed_holders_lease_lapses_within_a_term_and_the_next_request_is_granted(url: str) -> None:
    """A process holds the lease, its keeper heartbeating it past its first term; SIGKILL, and a
    waiting request (a grant tried every 0.2 s, as the waiting tasks' triggers do every second) gets
    the resource within one term of the last beat, with the next fence: the dead holder's lease
    can no longer be confirmed, so nothing it left could be committed.
    """
    settings = DispatchSettings(lease_seconds=5)
    lease = grant_one(url, settings.lease_seconds, datetime.now(UTC))
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            HOLDER,
            *map(str, (lease.request, lease.resource, lease.fence)),
            lease.expires.isoformat(),
            str(settings.heartbeat_seconds),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ | {"AIRFLOW_CONN_IQP_DEFAULT": url},
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "beat\n", "the holder never renewed its lease"
        now = datetime.now(UTC)
        with session_scope(url) as s:
            queue_partial(s, "q6", now, now + timedelta(seconds=90), settings.lease_seconds, now)
        time.sleep(max(0.0, (lease.expires - datetime.now(UTC)).total_seconds()) + 0.5)
        with session_scope(url) as s:
            assert dispatch.grant(s, policy=Policy.EDF, resources=1, now=datetime.now(UTC)) == []
            assert dispatch.status(s, lease.request).lease is not None, "renewed past its first term"
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    killed = time.monotonic()
    granted: list[dispatch.Lease] = []
    while not granted and time.monotonic() - killed < 3 * settings.lease_seconds:
        time.sleep(0.2)
        with session_scope(url) as s:
            granted = dispatch.grant(s, policy=Policy.EDF, resources=1, now=datetime.now(UTC))
    recovered = time.monotonic() - killed
    print(f"next grant {recovered:.1f} s after the holder was killed (lease {settings.lease_seconds:g} s)")
    assert granted, f"no grant within {3 * settings.lease_seconds:g} s of the kill"
    [taken] = granted
    assert taken.request != lease.request
    assert taken.fence == lease.fence + 1
    assert recovered <= settings.lease_seconds + 2, "within a term of the last beat, and a look or two (a busy machine)"
    with session_scope(url) as s:
        assert dispatch.confirm(s, lease, datetime.now(UTC)) is None
