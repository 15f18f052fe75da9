"""The window deadline alert: when it is due, what the triggerer logs when a window missed it, and
that the DAG the scheduler reads keeps it (only `airflow dags test` runs go without, see
tests/integration/test_dags_test.py)."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from airflow.sdk.definitions.callback import AsyncCallback
from airflow.serialization.serialized_objects import DagSerialization

from airflow_iqp.deadlines import ALERT_NAME, DeadlineDAG, log_missed_window, window_deadline_alert
from airflow_iqp.timetables.window import WindowTimetable

if TYPE_CHECKING:
    import pytest

# The context Airflow passes a deadline callback (airflow.models.deadline.Deadline.handle_miss).
CONTEXT = {
    "dag_run": {
        "dag_id": "iqp_q6",
        "dag_run_id": "scheduled__window_2026-01-01T10:00:00+00:00_2026-01-01T10:02:00+00:00",
        "data_interval_start": "2026-01-01T10:00:00Z",
        "data_interval_end": "2026-01-01T10:02:00Z",
    },
    "deadline": {"id": "0198", "deadline_time": "2026-01-01T10:02:45Z"},
}


def test_the_default_callback_says_which_window_missed_its_deadline(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="airflow_iqp.deadlines"):
        asyncio.run(log_missed_window(context=CONTEXT))
    assert [r.getMessage() for r in caplog.records] == [
        "IQP window 2026-01-01T10:00:00Z..2026-01-01T10:02:00Z of iqp_q6 "
        "(run scheduled__window_2026-01-01T10:00:00+00:00_2026-01-01T10:02:00+00:00) "
        "missed its deadline 2026-01-01T10:02:45Z"
    ]


def test_the_alert_is_due_a_window_and_a_deadline_after_the_logical_date() -> None:
    alert = window_deadline_alert(timedelta(minutes=10), timedelta(minutes=5))
    assert (alert.interval, alert.name) == (timedelta(minutes=15), ALERT_NAME)
    assert isinstance(alert.callback, AsyncCallback)
    own = AsyncCallback(log_missed_window, kwargs={"who": "me"})
    assert window_deadline_alert(timedelta(minutes=10), timedelta(0), own).callback is own


def test_the_dag_as_serialized_for_the_scheduler_keeps_its_alert() -> None:
    window, deadline = timedelta(minutes=2), timedelta(seconds=45)
    dag = DeadlineDAG(
        dag_id="iqp_q6",
        schedule=WindowTimetable(window),
        start_date=datetime(2026, 1, 1, tzinfo=UTC),
        deadline=window_deadline_alert(window, deadline),
    )
    (stored,) = DagSerialization.to_dict(dag)["dag"]["deadline"]
    assert (stored["name"], stored["interval"]["__data__"]) == (ALERT_NAME, 165.0)
    assert stored["callback"]["__data__"]["path"] == "airflow_iqp.deadlines.log_missed_window"
