"""`late_files` starts in the triggerer: it resumes on a worker only when the run's listing shows a
late or rewritten file the ledger does not hold yet (or, with `on_late="remerge"`, late units of a
merged window), on real files and a real SQLite ledger."""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import TYPE_CHECKING

import pytest
from airflow.triggers.base import TaskSkippedEvent, TriggerEvent

from airflow_iqp.constants import Mode
from airflow_iqp.declaration import declare
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.operators.late import LateFilesOperator
from airflow_iqp.planning.record import PlanRecord
from airflow_iqp.runtime.descriptors import StaticBatch
from airflow_iqp.runtime.inputs import InputSpec
from airflow_iqp.streams.spec import FileStream
from airflow_iqp.triggers.late_start import RESUME, LateFilesStartTrigger
from tests.triggers.test_triggers import rebuilt

if TYPE_CHECKING:
    from pathlib import Path

DAG_ID = "iqp_sales"
WINDOW = timedelta(minutes=1)
W0 = datetime(2026, 1, 1, 10, tzinfo=UTC)  # merged, with one frozen file
W1 = W0 + WINDOW  # this run's window, still running
RUN_ID = "scheduled__w1"


def land(directory: Path, name: str, at: datetime) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_bytes(b"rows")
    os.utime(directory / name, (at.timestamp(), at.timestamp()))


def stream(tmp_path: Path) -> FileStream:
    return FileStream(str(tmp_path / "sales"))


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """W0 merged with counted.parquet frozen; W1 planned by the run RUN_ID, own.parquet landed in it."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    monkeypatch.setenv("AIRFLOW_CONN_IQP_DEFAULT", url)
    land(tmp_path / "sales", "counted.parquet", W0 + timedelta(seconds=10))
    land(tmp_path / "sales", "own.parquet", W1 + timedelta(seconds=10))
    spec = InputSpec.of({"sales": stream(tmp_path)}, W0, WINDOW)
    row = {"index": 0, "first_tuple": 1, "last_tuple": 1, "predicted_cost": 1.0}
    with session_scope(url) as s:
        store.register_query(s, dag_id=DAG_ID, name="sales", sql="SELECT 1", mode=Mode.STATIC, params={})
        w0 = store.record_plan(
            s, DAG_ID, W0, W1, W1 + WINDOW, 1, PlanRecord(),
            [{**row, "release": W1, "latest_start": W1, "planned_start": W1}],
        )  # fmt: skip
        store.freeze_files(s, w0, 0, {"sales": list(spec.look().units[0].files)})
        store.start_batch(s, w0, 0)
        store.finish_batch(s, w0, 0, W1, W1, 1, 1.0, "/data/iqp/batch-0000")
        store.record_merge(s, w0, W1, 1, "/data/iqp/result")
        end = W1 + WINDOW
        w1 = store.record_plan(
            s, DAG_ID, W1, end, end + WINDOW, 1, PlanRecord(),
            [{**row, "release": end, "latest_start": end, "planned_start": end}], run_id=RUN_ID,
        )  # fmt: skip
        handed = StaticBatch(
            window_id=w1,
            input=InputSpec.of({"sales": stream(tmp_path)}, W1, WINDOW).to_dict(),
            index=0,
            upto=None,
            planned_start=end,
            predicted_cost=1.0,
        )
        store.hand_out(s, w1, [handed.to_dict()])
    return url


def record(url: str, tmp_path: Path) -> None:
    """What the task does once resumed: list the run's window and record what it found."""
    declaration = declare(
        dag_id=DAG_ID,
        query="q6",
        window=WINDOW,
        deadline=WINDOW,
        streams={"lineitem": stream(tmp_path)},
        output="/results/{dag_id}/{window_start}",
    )
    operator = LateFilesOperator(task_id="late_files", declaration=declaration, work_dir=str(tmp_path / "work"))
    units = InputSpec.of({"sales": stream(tmp_path)}, W1, WINDOW).recent_units()
    with session_scope(url) as s:
        operator.record(s, units)


def started(trigger: LateFilesStartTrigger, run_id: str = RUN_ID) -> TriggerEvent:
    trigger.task_instance = SimpleNamespace(dag_id=DAG_ID, run_id=run_id, task_id="late_files", map_index=-1)  # type: ignore[assignment]  # the fields a task instance gives it

    async def first() -> TriggerEvent:
        async for event in trigger.run():
            return event
        raise AssertionError("the trigger ended without an event")

    return asyncio.run(asyncio.wait_for(first(), timeout=30))


def test_the_trigger_round_trips() -> None:
    again = rebuilt(LateFilesStartTrigger(remerge=True, poll_interval=0.5))
    assert isinstance(again, LateFilesStartTrigger)
    assert (again.remerge, again.poll_interval) == (True, 0.5)


def test_with_nothing_late_the_task_ends_skipped_in_the_triggerer(ledger: str) -> None:
    event = started(LateFilesStartTrigger(remerge=True))
    assert isinstance(event, TaskSkippedEvent)


def test_a_late_file_resumes_the_task_until_it_is_recorded(ledger: str, tmp_path: Path) -> None:
    land(tmp_path / "sales", "late.parquet", W0 + timedelta(seconds=20))  # W0 has merged
    event = started(LateFilesStartTrigger(remerge=False))
    assert not isinstance(event, TaskSkippedEvent)
    assert event.payload == RESUME
    record(ledger, tmp_path)
    assert isinstance(started(LateFilesStartTrigger(remerge=False)), TaskSkippedEvent)  # recorded once: nothing new
    assert started(LateFilesStartTrigger(remerge=True)).payload == RESUME  # still to be merged in


def test_a_rewritten_file_resumes_the_task_until_it_is_recorded(ledger: str, tmp_path: Path) -> None:
    land(tmp_path / "sales", "counted.parquet", W0 + timedelta(seconds=11))  # the frozen name, other contents
    assert started(LateFilesStartTrigger(remerge=True)).payload == RESUME
    record(ledger, tmp_path)
    assert isinstance(started(LateFilesStartTrigger(remerge=True)), TaskSkippedEvent)


def test_a_run_that_planned_no_window_resumes_the_task(ledger: str) -> None:
    assert started(LateFilesStartTrigger(remerge=False), run_id="manual__unplanned").payload == RESUME
