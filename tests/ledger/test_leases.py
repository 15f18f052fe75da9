"""The lease controller's record of its executors, over a real SQLite ledger: each executor once,
released when it is no longer running, read back over a period.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow_iqp.ledger import leases, session_scope

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def t(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_executors_are_recorded_once_and_released_when_they_no_longer_run(ledger_db: str) -> None:
    with session_scope(ledger_db) as s:
        leases.record(s, "app-1", {"0": t(0), "1": t(2)}, t(3))
        leases.record(s, "app-1", {"0": t(0), "1": t(2)}, t(4))  # a step that sees the same: nothing new
        leases.record(s, "app-1", {"1": t(2)}, t(50))
        leases.record(s, "app-2", {"0": t(60)}, t(61))  # another server's executor 0
    with session_scope(ledger_db, read_only=True) as s:
        assert leases.held(s, t(0), t(100)) == [
            leases.Held(1, t(0), t(50)),
            leases.Held(1, t(2), None),
            leases.Held(1, t(60), None),
        ]
        assert leases.held(s, t(51), t(59)) == [leases.Held(1, t(2), None)], "released before the period"
    with session_scope(ledger_db) as s:
        leases.record(s, "app-1", {"0": t(0), "1": t(2)}, t(70))  # 0 again: a released lease is not reopened
    with session_scope(ledger_db, read_only=True) as s:
        assert [h.end for h in leases.held(s, t(0), t(100))] == [t(50), None, None]
