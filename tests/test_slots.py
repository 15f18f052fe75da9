"""Dynamic batch slots: when a slot waits, runs (and with which files), or skips."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from airflow_iqp.constants import BatchReason, JobKind, Mode
from airflow_iqp.ledger import dispatch, session_scope, store
from airflow_iqp.slots import SlotAction, SlotDecision, SlotSpec, decide
from airflow_iqp.tpch.manifest import part_name

if TYPE_CHECKING:
    from pathlib import Path

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def world(tmp_path: Path) -> tuple[str, Path, SlotSpec]:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    landing = tmp_path / "landing"
    (landing / "lineitem").mkdir(parents=True)
    with session_scope(url) as s:
        store.register_query(s, "q6", "SELECT 1", Mode.DYNAMIC, {})
        window_id = store.record_plan(s, "q6", T0, T0 + timedelta(seconds=100), T0 + timedelta(seconds=160), 10, {}, [])
    spec = SlotSpec(
        window_id=window_id,
        slot=0,
        slots=4,
        landing=str(landing),
        streams=["lineitem"],
        indexes=list(range(20, 30)),
        window_start=T0.timestamp(),
        window_end=T0.timestamp() + 100,
        expected_files=10,
        min_batch=4,
        max_batch=6,
    )
    return url, landing, spec


def land(landing: Path, *indexes: int) -> None:
    for i in indexes:
        (landing / "lineitem" / part_name(i)).write_bytes(b"")


def at(url: str, spec: SlotSpec, seconds: float, slot: int = 0) -> SlotDecision:
    with session_scope(url) as s:
        return decide(s, SlotSpec(**(spec.as_dict() | {"slot": slot})), T0.timestamp() + seconds)


def cut(url: str, spec: SlotSpec, slot: int, positions: list[int]) -> int:
    with session_scope(url) as s:
        return store.add_dynamic_batch(
            s, spec.window_id, slot, BatchReason.MIN_BATCH, spec.paths(positions), 1, len(positions), 1.0, T0
        )


def test_waits_for_min_batch_then_takes_what_landed_up_to_max_batch(world) -> None:
    url, landing, spec = world
    land(landing, 20, 21)
    assert at(url, spec, 10).action is SlotAction.WAIT
    land(landing, 22, 23, 24)
    decision = at(url, spec, 10)
    assert (decision.action, decision.reason, decision.take) == (
        SlotAction.RUN,
        BatchReason.MIN_BATCH,
        (20, 21, 22, 23, 24),
    )
    land(landing, 25, 26, 27)
    assert at(url, spec, 10).take == (20, 21, 22, 23, 24, 25)  # tau_max: at most 6 files


def test_slow_input_fires_when_min_batch_should_have_landed(world) -> None:
    url, landing, spec = world
    land(landing, 20, 21)
    # 10 files expected over 100 s: the 4th is due at 3/9 of the window.
    assert at(url, spec, 33).action is SlotAction.WAIT
    decision = at(url, spec, 34)
    assert (decision.action, decision.reason, decision.take) == (SlotAction.RUN, BatchReason.SLOW_INPUT, (20, 21))


def test_closed_window_runs_what_is_left_and_skips_once_all_is_taken(world) -> None:
    url, landing, spec = world
    land(landing, *range(20, 30))
    cut(url, spec, 1, list(range(20, 27)))
    decision = at(url, spec, 50)
    assert (decision.action, decision.reason, decision.take, decision.processed) == (
        SlotAction.RUN,
        BatchReason.ALL_IN,
        (27, 28, 29),
        7,
    )
    cut(url, spec, 2, [27, 28, 29])
    assert at(url, spec, 101).action is SlotAction.SKIP


def test_one_slot_of_a_window_queues_at_a_time(world) -> None:
    url, landing, spec = world
    land(landing, *range(20, 26))
    with session_scope(url) as s:
        dispatch.register(
            s,
            window_id=spec.window_id,
            query="q6",
            kind=JobKind.PARTIAL,
            slot=3,
            reason=BatchReason.MIN_BATCH,
            deadline=T0 + timedelta(seconds=160),
            remaining_cost=1.0,
            lease_seconds=60,
            now=T0,
        )
    assert at(url, spec, 10, slot=0).action is SlotAction.WAIT
    assert (at(url, spec, 10, slot=3).action, at(url, spec, 10, slot=3).reason) == (
        SlotAction.RUN,
        BatchReason.MIN_BATCH,
    )


def test_the_last_free_slot_waits_for_every_file_and_takes_them_all(world) -> None:
    url, landing, spec = world
    for slot, positions in ((1, [20]), (2, [21]), (3, [22])):  # three of four slots used up
        cut(url, spec, slot, positions)
    land(landing, *range(20, 29))
    assert at(url, spec, 200).action is SlotAction.WAIT  # file 29 is still missing, whatever the time
    land(landing, 29)
    decision = at(url, spec, 200)
    assert (decision.action, decision.take) == (SlotAction.RUN, tuple(range(23, 30)))  # 7 files: past max_batch


def test_a_failed_batch_is_retried_by_its_own_slot(world) -> None:
    url, landing, spec = world
    land(landing, *range(20, 25))
    cut(url, spec, 0, [20, 21, 22, 23, 24])
    assert (at(url, spec, 10).action, at(url, spec, 10).reason) == (SlotAction.RUN, BatchReason.RETRY)
