"""The task side of the dispatcher: settings from the Airflow config, and the lease keeper that
heartbeats while a Spark job runs and kills the job if the lease is lost."""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from airflow_iqp.ledger import dispatch, session_scope, store
from airflow_iqp.operators.dispatched import DispatchSettings, _LeaseKeeper

if TYPE_CHECKING:
    from pathlib import Path

LOG = logging.getLogger(__name__)


def test_settings_come_from_the_iqp_config_section(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__IQP__POLICY", "LLF")
    monkeypatch.setenv("AIRFLOW__IQP__RESOURCES", "3")
    monkeypatch.setenv("AIRFLOW__IQP__LEASE_SECONDS", "90")
    assert DispatchSettings.load() == DispatchSettings("llf", 3, 90.0)


def grant_one(url: str, lease_seconds: float, now: datetime) -> dispatch.Lease:
    with session_scope(url) as s:
        store.register_query(s, "q6", "SELECT 1", "static", {})
        window = store.record_plan(s, "q6", now, now + timedelta(seconds=10), now + timedelta(seconds=60), 1, {}, [])
        dispatch.register(
            s,
            window_id=window,
            query="q6",
            kind="partial",
            slot=0,
            reason="planned",
            deadline=now + timedelta(seconds=60),
            remaining_cost=1.0,
            lease_seconds=lease_seconds,
            now=now,
        )
        [lease] = dispatch.grant(s, policy="edf", resources=1, now=now)
    return lease


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The task's ledger connection, as a worker would get it."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    monkeypatch.setenv("AIRFLOW_CONN_IQP_DEFAULT", url)
    return url


def test_the_keeper_extends_the_lease_while_the_job_runs(url: str) -> None:
    lease = grant_one(url, 5.0, datetime.now(UTC))
    lost = threading.Event()
    keeper = _LeaseKeeper(lease, every=0.1, on_lost=lost.set, log=LOG)
    keeper.start()
    threading.Event().wait(0.5)
    keeper.stop()
    assert not lost.is_set()
    assert not keeper.lost
    assert keeper.lease.fence == lease.fence
    assert keeper.lease.expires > lease.expires


def test_the_keeper_kills_the_job_when_the_lease_went_to_someone_else(url: str) -> None:
    start = datetime.now(UTC) - timedelta(minutes=5)
    lease = grant_one(url, 5.0, start)  # expired long ago: this holder stalled
    with session_scope(url) as s:  # another window's request takes the resource over
        window = store.record_plan(
            s,
            "q6",
            start + timedelta(seconds=10),
            start + timedelta(seconds=20),
            start + timedelta(seconds=90),
            1,
            {},
            [],
        )
        dispatch.register(
            s,
            window_id=window,
            query="q6",
            kind="partial",
            slot=0,
            reason="planned",
            deadline=start + timedelta(seconds=90),
            remaining_cost=1.0,
            lease_seconds=600,
            now=datetime.now(UTC),
        )
        [taken] = dispatch.grant(s, policy="edf", resources=1, now=datetime.now(UTC))
    assert taken.fence == lease.fence + 1
    lost = threading.Event()
    keeper = _LeaseKeeper(lease, every=0.05, on_lost=lost.set, log=LOG)
    keeper.start()
    assert lost.wait(5), "the stale holder's job was not killed"
    keeper.stop()
    assert keeper.lost
