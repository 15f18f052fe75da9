"""The read-only triggers: each rebuilds itself from what it serializes (the triggerer stores
the kwargs and builds the trigger again, perhaps in another process), and fires on what it reads
from a real directory or a real SQLite ledger."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import time
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest
from airflow.serialization.serialized_objects import BaseSerialization
from airflow.triggers.base import TaskSkippedEvent, TriggerEvent
from airflow.utils.state import TaskInstanceState

from airflow_iqp.constants import BatchReason, JobKind, Mode, Policy, RequestState
from airflow_iqp.ledger import dispatch, session_scope, store
from airflow_iqp.planning.record import PlanRecord, ReplanNote
from airflow_iqp.runtime.ahead import START_AHEAD
from airflow_iqp.runtime.descriptors import DynamicSlot, StaticBatch, descriptor
from airflow_iqp.runtime.inputs import ORIGIN, InputSpec, files_by_stream
from airflow_iqp.runtime.slots import SlotAction
from airflow_iqp.streams.spec import FileStream
from airflow_iqp.streams.watch import LOOK_TTL
from airflow_iqp.triggers.batch_ready import OPEN_LOOKS, OPEN_POLL_MAX, BatchReadyTrigger
from airflow_iqp.triggers.grant import GRANT_DUE, GrantTrigger
from airflow_iqp.triggers.partial_start import AHEAD, PartialStartTrigger
from airflow_iqp.triggers.window_input import WindowInputTrigger

if TYPE_CHECKING:
    from pathlib import Path

    from airflow.triggers.base import BaseTrigger

# A window that is open whenever the tests run, since triggers look at the clock: the first
# hundred years of the timetable's windows.
T0 = ORIGIN
WINDOW = timedelta(days=36525)


def rebuilt(trigger: BaseTrigger) -> BaseTrigger:
    """What the triggerer builds from the trigger's serialized form after storing its kwargs."""
    classpath, kwargs = trigger.serialize()
    stored = json.loads(json.dumps(BaseSerialization.serialize(kwargs)))
    module, _, name = classpath.rpartition(".")
    return getattr(importlib.import_module(module), name)(**BaseSerialization.deserialize(stored))


def window_input(tmp_path: Path) -> dict[str, Any]:
    stream = FileStream(str(tmp_path / "sales"), lateness=timedelta(minutes=1), close_marker="_SUCCESS")
    return InputSpec.of({"sales": stream}, T0, WINDOW).to_dict()


def test_window_input_trigger_round_trips(tmp_path: Path) -> None:
    trigger = WindowInputTrigger(window_input(tmp_path), 3, poll_interval=0.5)
    again = rebuilt(trigger)
    assert isinstance(again, WindowInputTrigger)
    assert again.serialize() == trigger.serialize()
    assert InputSpec.from_dict(again.input) == InputSpec.from_dict(trigger.input)
    assert (again.need, again.poll_interval) == (3, 0.5)
    assert rebuilt(WindowInputTrigger(window_input(tmp_path), None)).serialize()[1]["need"] is None


def test_batch_ready_trigger_round_trips(tmp_path: Path) -> None:
    spec = DynamicSlot(
        window_id=7, slot=2, slots=5, input=window_input(tmp_path), expected_files=40, min_batch=8, max_batch=12
    )
    trigger = BatchReadyTrigger(spec.to_dict(), poll_interval=2.0)
    again = rebuilt(trigger)
    assert isinstance(again, BatchReadyTrigger)
    assert again.serialize() == trigger.serialize()
    assert descriptor(again.spec) == spec


@pytest.mark.parametrize("policy", list(Policy))
def test_grant_trigger_round_trips(policy: Policy) -> None:
    trigger = GrantTrigger(41, policy, 2, poll_interval=0.25)
    again = rebuilt(trigger)
    assert isinstance(again, GrantTrigger)
    assert again.serialize() == trigger.serialize()
    assert (again.request_id, again.policy, again.resources, again.poll_interval) == (41, policy, 2, 0.25)
    assert again.policy is policy


def land(directory: Path, name: str, at: datetime) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_bytes(b"rows")
    os.utime(directory / name, (at.timestamp(), at.timestamp()))


def first_event(trigger: BaseTrigger) -> dict[str, Any]:
    async def first() -> dict[str, Any]:
        async for event in trigger.run():
            return dict(event.payload)
        raise AssertionError("the trigger ended without an event")

    return asyncio.run(asyncio.wait_for(first(), timeout=30))


def test_window_input_trigger_fires_on_enough_units_or_a_final_input(tmp_path: Path) -> None:
    sales = tmp_path / "sales"
    land(sales, "a.parquet", T0 + timedelta(minutes=1))
    land(sales, "b.parquet", T0 + timedelta(minutes=2))
    land(sales, "elsewhere.parquet", T0 - timedelta(minutes=1))
    assert WindowInputTrigger(window_input(tmp_path), 3).ready() is None  # 2 of 3, and more may come
    assert WindowInputTrigger(window_input(tmp_path), None).ready() is None  # the rest: only once final
    assert WindowInputTrigger(window_input(tmp_path), 2).ready() == {"units": 2, "final": False}
    land(sales, "_SUCCESS", T0 + timedelta(minutes=3))  # the producer closes the window early
    time.sleep(LOOK_TTL)  # the looks of one moment share a listing: the next one sees the marker
    assert WindowInputTrigger(window_input(tmp_path), None).ready() == {"units": 2, "final": True}
    assert first_event(WindowInputTrigger(window_input(tmp_path), 3, poll_interval=0.05)) == {
        "units": 2,
        "final": True,
    }


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, int]:
    """The triggers' ledger, as a triggerer would reach it, with one window of a dynamic DAG."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    monkeypatch.setenv("AIRFLOW_CONN_IQP_DEFAULT", url)
    with session_scope(url) as s:
        store.register_query(s, dag_id="iqp_sales", name="sales", sql="SELECT 1", mode=Mode.DYNAMIC, params={})
        window_id = store.record_plan(s, "iqp_sales", T0, T0 + WINDOW, T0 + 2 * WINDOW, 10, PlanRecord(), [])
    return url, window_id


def test_window_input_trigger_waits_as_far_as_the_ledger_plans_its_batch(
    tmp_path: Path, ledger: tuple[str, int]
) -> None:
    """A replan moves a waiting static batch's end: the trigger reads it at every look."""
    url, window_id = ledger
    row = {"release": T0, "latest_start": T0, "planned_start": T0, "predicted_cost": 1.0}
    with session_scope(url) as s:
        window_id = store.record_plan(
            s,
            "iqp_sales",
            T0,
            T0 + WINDOW,
            T0 + 2 * WINDOW,
            10,
            PlanRecord(),
            [{"index": 0, "first_tuple": 1, "last_tuple": 3, **row}],
        )
    land(tmp_path / "sales", "a.parquet", T0 + timedelta(minutes=1))
    land(tmp_path / "sales", "b.parquet", T0 + timedelta(minutes=2))
    trigger = rebuilt(WindowInputTrigger(window_input(tmp_path), 3, batch=(window_id, 0)))
    assert isinstance(trigger, WindowInputTrigger)
    assert trigger.ready() is None  # 2 of 3
    with session_scope(url) as s:
        note = ReplanNote(at=T0, after_batch=0, why="test", batches=1, feasible=True, reason=None, blocking_left=0.0)
        store.record_replan(s, window_id, [{"index": 0, "first_tuple": 1, "last_tuple": 2, **row}], T0, note)
    assert trigger.ready() == {"units": 2, "final": False}


def test_batch_ready_trigger_fires_when_the_slot_may_run(tmp_path: Path, ledger: tuple[str, int]) -> None:
    _, window_id = ledger
    spec = DynamicSlot(
        window_id=window_id, slot=0, slots=3, input=window_input(tmp_path), expected_files=4, min_batch=2, max_batch=4
    )
    land(tmp_path / "sales", "a.parquet", T0 + timedelta(minutes=1))
    trigger = BatchReadyTrigger(spec.to_dict(), poll_interval=0.05)
    assert trigger.look().action is SlotAction.WAIT  # one unit, MinBatch is two, and the window is open
    land(tmp_path / "sales", "b.parquet", T0 + timedelta(minutes=2))
    time.sleep(LOOK_TTL)  # the looks of one moment share a listing: the next one sees the new file
    assert trigger.look().action is SlotAction.RUN
    assert first_event(trigger) == {"action": "run"}


def test_batch_ready_trigger_ends_a_slot_with_nothing_left_as_skipped(tmp_path: Path, ledger: tuple[str, int]) -> None:
    url, window_id = ledger
    spec = DynamicSlot(
        window_id=window_id, slot=1, slots=3, input=window_input(tmp_path), expected_files=1, min_batch=1, max_batch=4
    )
    land(tmp_path / "sales", "a.parquet", T0 + timedelta(minutes=1))
    land(tmp_path / "sales", "_SUCCESS", T0 + timedelta(minutes=2))  # the window's input is final
    selection = InputSpec.from_dict(window_input(tmp_path)).look_own()
    with session_scope(url) as s:  # slot 0 took the window's one file
        store.add_dynamic_batch(s, window_id, 0, BatchReason.ALL_IN, files_by_stream(selection.units), 1, 1, 1.0, T0)
    trigger = BatchReadyTrigger(spec.to_dict(), poll_interval=0.05)
    assert trigger.look().action is SlotAction.SKIP

    async def first() -> TriggerEvent:
        async for event in trigger.run():
            return event
        raise AssertionError("the trigger ended without an event")

    event = asyncio.run(first())
    assert isinstance(event, TaskSkippedEvent)  # the triggerer ends the task: no worker resumes it
    assert event.task_instance_state == TaskInstanceState.SKIPPED


@pytest.mark.parametrize("due_in", [3600.0, START_AHEAD / 2])
def test_a_partial_task_starts_when_its_batch_has_landed_or_ahead_of_its_release(
    tmp_path: Path, ledger: tuple[str, int], due_in: float
) -> None:
    """Due in an hour, the task starts once its two units are in; due within START_AHEAD, it
    starts before any has landed, to wait for them in its own process.
    """
    url, _ = ledger
    release = datetime.now(UTC) + timedelta(seconds=due_in)
    row = {"release": release, "latest_start": release, "planned_start": release, "predicted_cost": 1.0}
    with session_scope(url) as s:
        window_id = store.record_plan(
            s, "iqp_sales", T0, T0 + WINDOW, T0 + 2 * WINDOW, 10, PlanRecord(),
            [{"index": 0, "first_tuple": 1, "last_tuple": 2, **row}], run_id="scheduled__1",
        )  # fmt: skip
        batch = StaticBatch(
            window_id=window_id, input=window_input(tmp_path), index=0, upto=2, planned_start=release, predicted_cost=1
        )
        store.hand_out(s, window_id, [batch.to_dict()])
    if due_in > START_AHEAD:
        land(tmp_path / "sales", "a.parquet", T0 + timedelta(minutes=1))
        land(tmp_path / "sales", "b.parquet", T0 + timedelta(minutes=2))
    trigger = PartialStartTrigger(poll_interval=0.05)
    started = SimpleNamespace(dag_id="iqp_sales", run_id="scheduled__1", task_id="partial_aggregate", map_index=0)
    trigger.task_instance = started  # type: ignore[assignment]  # the fields a task instance gives it
    expected = AHEAD if due_in <= START_AHEAD else {"units": 2, "final": False}
    assert first_event(trigger) == expected


def test_grant_trigger_reports_a_decided_request_or_a_due_grant(ledger: tuple[str, int]) -> None:
    url, window_id = ledger
    now = datetime.now(UTC)
    with session_scope(url) as s:
        request = dispatch.register(
            s,
            window_id=window_id,
            query="iqp_sales",
            kind=JobKind.PARTIAL,
            slot=0,
            reason=BatchReason.MIN_BATCH,
            deadline=now + timedelta(minutes=5),
            remaining_cost=1.0,
            lease_seconds=60,
            now=now,
        )
    assert request is not None
    trigger = GrantTrigger(request, Policy.EDF, 1, poll_interval=0.05)
    assert trigger.look() == GRANT_DUE  # waiting, and a resource is free: the task should grant
    assert first_event(trigger) == {"request_id": request, "state": GRANT_DUE}
    with session_scope(url) as s:
        [lease] = dispatch.grant(s, policy=Policy.EDF, resources=1, now=now)
    assert lease.request == request
    assert trigger.look() == RequestState.GRANTED
    assert first_event(trigger) == {"request_id": request, "state": "granted"}


def test_a_slot_looks_less_often_until_its_window_closes_and_once_at_the_close(tmp_path: Path) -> None:
    opened = datetime(2026, 1, 1, tzinfo=UTC)  # the pauses are worked out for a given now
    stream = FileStream(str(tmp_path / "sales"))

    def slot(window: timedelta, start: datetime = opened) -> BatchReadyTrigger:
        spec = DynamicSlot(
            window_id=1, slot=3, slots=5, input=InputSpec.of({"sales": stream}, start, window).to_dict(),
            expected_files=4, min_batch=2, max_batch=4,
        )  # fmt: skip
        return BatchReadyTrigger(spec.to_dict(), poll_interval=1.0)

    now = opened.timestamp() + 60.0  # on a wall-clock multiple of every interval here
    ten_minutes = slot(timedelta(minutes=10))
    assert ten_minutes.pause(now) == 600 / OPEN_LOOKS  # 5 s
    close = opened.timestamp() + 600
    assert ten_minutes.pause(close + 0.25) == 0.75  # closed: every interval again
    off_the_beat = slot(timedelta(minutes=10), opened + timedelta(seconds=3))  # closes 3 s past a 5 s multiple
    assert off_the_beat.pause(close + 2) == pytest.approx(1.0)  # the next look is at its close, not 2 s after
    assert slot(timedelta(hours=10)).pause(now) == OPEN_POLL_MAX
    assert slot(timedelta(minutes=1)).pause(now) == 1.0  # never more often than the interval
