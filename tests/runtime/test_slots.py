"""Dynamic batch slots: when a slot waits, runs (and with which units), or skips, from a listing
of the window's input and a real SQLite ledger."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from airflow_iqp.constants import BatchReason, JobKind, Mode
from airflow_iqp.ledger import dispatch, session_scope, store
from airflow_iqp.planning.record import PlanRecord
from airflow_iqp.runtime.descriptors import DynamicSlot
from airflow_iqp.runtime.inputs import ORIGIN, InputSpec
from airflow_iqp.runtime.slots import YIELD_AFTER, SlotAction, SlotDecision, decide
from airflow_iqp.streams.assign import select_window
from airflow_iqp.streams.files import DataFile, StreamListing
from airflow_iqp.streams.spec import FileStream

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

    from airflow_iqp.streams.assign import WindowSelection

T0 = datetime(2026, 1, 1, tzinfo=UTC)
WINDOW = timedelta(seconds=100)
STREAMS = {"lineitem": FileStream("/data/lineitem")}


def name(i: int) -> str:
    return f"part-{i:05d}.parquet"


def landed(i: int, at: float | None = None) -> DataFile:
    """File i of the stream, landed i + 1 seconds into the window unless said otherwise."""
    seconds = i + 1 if at is None else at
    return DataFile("lineitem", f"file:///data/lineitem/{name(i)}", name(i), 100, T0 + timedelta(seconds=seconds))


def listing(*indexes: int, markers: Iterable[DataFile] = (), streams: dict[str, FileStream] = STREAMS) -> Listing:
    return Listing(tuple(landed(i) for i in indexes), tuple(markers), streams)


@dataclass(frozen=True)
class Listing:
    """What a listing of the stream shows; `at` cuts it into the window as seen `seconds` in."""

    files: tuple[DataFile, ...]
    markers: tuple[DataFile, ...]
    streams: dict[str, FileStream]

    def at(self, seconds: float) -> WindowSelection:
        return select_window(
            self.streams,
            {"lineitem": StreamListing("lineitem", self.files, self.markers)},
            start=T0,
            window=WINDOW,
            origin=ORIGIN,
            now=T0 + timedelta(seconds=seconds),
        )


@pytest.fixture
def world(tmp_path: Path) -> tuple[str, DynamicSlot]:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with session_scope(url) as s:
        store.register_query(s, dag_id="iqp_q6", name="q6", sql="SELECT 1", mode=Mode.DYNAMIC, params={})
        window_id = store.record_plan(s, "iqp_q6", T0, T0 + WINDOW, T0 + timedelta(seconds=160), 10, PlanRecord(), [])
    spec = DynamicSlot(
        window_id=window_id,
        slot=0,
        slots=4,
        input=InputSpec.of(STREAMS, T0, WINDOW).to_dict(),
        expected_files=10,
        min_batch=4,
        max_batch=6,
    )
    return url, spec


def at(
    url: str, spec: DynamicSlot, seen: Listing, seconds: float, slot: int = 0, patience: float = 0.0
) -> SlotDecision:
    with session_scope(url) as s:
        slot_spec = spec.model_copy(update={"slot": slot})
        return decide(s, slot_spec, seen.at(seconds), T0.timestamp() + seconds, patience)


def cut(url: str, spec: DynamicSlot, slot: int, indexes: list[int]) -> int:
    with session_scope(url) as s:
        files = {"lineitem": [landed(i) for i in indexes]} if indexes else {}
        return store.add_dynamic_batch(
            s, spec.window_id, slot, BatchReason.MIN_BATCH, files, 1, max(len(indexes), 1), 1.0, T0
        )


def taken(decision: SlotDecision) -> list[str]:
    return [unit.relative for unit in decision.take]


def test_waits_for_min_batch_then_takes_what_landed_up_to_max_batch(world: tuple[str, DynamicSlot]) -> None:
    url, spec = world
    assert at(url, spec, listing(0, 1), 10).action is SlotAction.WAIT
    decision = at(url, spec, listing(*range(5)), 10)
    assert (decision.action, decision.reason) == (SlotAction.RUN, BatchReason.MIN_BATCH)
    assert taken(decision) == [name(i) for i in range(5)]
    assert taken(at(url, spec, listing(*range(8)), 10)) == [name(i) for i in range(6)]  # tau_max: at most 6


def test_a_first_unit_window_cuts_one_unit_first_then_min_batches(world: tuple[str, DynamicSlot]) -> None:
    url, spec = world
    first = spec.model_copy(update={"first_unit": True})
    assert at(url, first, listing(), 10).action is SlotAction.WAIT
    decision = at(url, first, listing(0, 1, 2), 10)  # under MinBatch, but one unit is the first batch
    assert (decision.action, decision.reason, taken(decision)) == (SlotAction.RUN, BatchReason.MIN_BATCH, [name(0)])
    cut(url, first, 0, [0])
    assert at(url, first, listing(0, 1, 2), 10, slot=1).action is SlotAction.WAIT  # then MinBatch again
    assert taken(at(url, first, listing(*range(5)), 10, slot=1)) == [name(i) for i in range(1, 5)]


def test_units_are_taken_in_arrival_order_not_by_name(world: tuple[str, DynamicSlot]) -> None:
    url, spec = world
    files = (landed(0, at=9), landed(1, at=3), landed(2, at=5), landed(3, at=1))
    decision = at(url, spec, Listing(files, (), STREAMS), 10)
    assert taken(decision) == [name(3), name(1), name(2), name(0)]


def test_slow_input_fires_when_min_batch_should_have_landed(world: tuple[str, DynamicSlot]) -> None:
    url, spec = world
    seen = listing(0, 1)
    # 10 files expected over 100 s: the 4th is due at 3/9 of the window.
    assert at(url, spec, seen, 33).action is SlotAction.WAIT
    decision = at(url, spec, seen, 34)
    assert (decision.action, decision.reason, taken(decision)) == (
        SlotAction.RUN,
        BatchReason.SLOW_INPUT,
        [name(0), name(1)],
    )


def test_closed_window_runs_what_is_left_and_skips_once_all_is_taken(world: tuple[str, DynamicSlot]) -> None:
    url, spec = world
    seen = listing(*range(10))
    cut(url, spec, 1, list(range(7)))
    assert at(url, spec, seen, 50).action is SlotAction.WAIT  # 3 waiting, fewer than MinBatch, window open
    decision = at(url, spec, seen, 100)
    assert (decision.action, decision.reason, taken(decision), decision.processed, decision.batches) == (
        SlotAction.RUN,
        BatchReason.ALL_IN,
        [name(7), name(8), name(9)],
        7,
        1,
    )
    cut(url, spec, 2, [7, 8, 9])
    decision = at(url, spec, seen, 101)
    assert (decision.action, decision.processed, decision.batches) == (SlotAction.SKIP, 10, 2)


def test_an_empty_final_window_runs_one_empty_batch_then_skips(world: tuple[str, DynamicSlot]) -> None:
    url, spec = world
    nothing = listing()
    assert at(url, spec, nothing, 50).action is SlotAction.WAIT  # the input may still come
    decision = at(url, spec, nothing, 100)
    assert (decision.action, decision.reason, decision.take) == (SlotAction.RUN, BatchReason.ALL_IN, ())
    cut(url, spec, 0, [])
    with session_scope(url) as s:
        store.finish_batch(s, spec.window_id, 0, T0, T0, 0, 1.0, "/out/0")
    for slot in range(spec.slots):
        assert at(url, spec, nothing, 101, slot=slot).action is SlotAction.SKIP


def test_files_of_other_windows_are_not_this_windows_input(world: tuple[str, DynamicSlot]) -> None:
    url, spec = world
    files = (landed(0, at=-5), landed(1, at=100), landed(2, at=150))
    decision = at(url, spec, Listing(files, (), STREAMS), 200)
    assert (decision.action, decision.reason, decision.take) == (SlotAction.RUN, BatchReason.ALL_IN, ())


def test_one_slot_of_a_window_queues_at_a_time(world: tuple[str, DynamicSlot]) -> None:
    url, spec = world
    seen = listing(*range(6))
    with session_scope(url) as s:
        dispatch.register(
            s,
            window_id=spec.window_id,
            query="iqp_q6",
            kind=JobKind.PARTIAL,
            slot=3,
            reason=BatchReason.MIN_BATCH,
            deadline=T0 + timedelta(seconds=160),
            remaining_cost=1.0,
            lease_seconds=60,
            now=T0,
        )
    assert at(url, spec, seen, 10, slot=0).action is SlotAction.WAIT
    holder = at(url, spec, seen, 10, slot=3)
    assert (holder.action, holder.reason) == (SlotAction.RUN, BatchReason.MIN_BATCH)


def running(url: str, spec: DynamicSlot, seen: Listing, seconds: float, patience: float = YIELD_AFTER) -> list[int]:
    """The slots that would run at `seconds`, each waiting `patience` out of its turn."""
    return [
        slot
        for slot in range(spec.slots)
        if at(url, spec, seen, seconds, slot=slot, patience=patience).action is SlotAction.RUN
    ]


def test_the_slots_take_turns_so_one_runs_when_a_batch_becomes_eligible(world: tuple[str, DynamicSlot]) -> None:
    url, spec = world
    seen = listing(*range(8))  # MinBatch (4) landed 4 s in, and again by 8 s
    assert running(url, spec, seen, 10) == [0]
    cut(url, spec, 0, [0, 1, 2, 3])
    with session_scope(url) as s:
        store.finish_batch(s, spec.window_id, 0, T0, T0 + timedelta(seconds=20), 4, 1.0, "/out/0")
    assert running(url, spec, seen, 21) == [1]  # slot 0 has had its turn


def test_a_turn_yields_once_a_batch_has_waited_for_its_slot(world: tuple[str, DynamicSlot]) -> None:
    url, spec = world
    seen = listing(*range(8))
    eligible = 4  # MinBatch landed
    assert running(url, spec, seen, eligible + YIELD_AFTER - 1) == [0]
    assert running(url, spec, seen, eligible + YIELD_AFTER) == [0, 1, 2, 3]  # slot 0 is not there to take it
    cut(url, spec, 2, [0, 1, 2, 3])  # a slot out of turn took it: 0 is still the lowest without a batch
    with session_scope(url) as s:
        store.finish_batch(s, spec.window_id, 0, T0, T0 + timedelta(seconds=20), 4, 1.0, "/out/0")
    assert running(url, spec, seen, 20 + YIELD_AFTER - 1) == [0]  # the turn began when the batch ended
    assert running(url, spec, seen, 20 + YIELD_AFTER) == [0, 1, 3]


def test_a_turn_begins_no_earlier_than_the_slots_were_handed_out(world: tuple[str, DynamicSlot]) -> None:
    url, spec = world
    planned = spec.model_copy(update={"planned_at": (T0 + timedelta(seconds=50)).timestamp()})
    seen = listing(*range(8))  # landed long before the plan, as in a backfill
    assert running(url, planned, seen, 50 + YIELD_AFTER - 1) == [0]
    assert running(url, planned, seen, 50 + YIELD_AFTER) == [0, 1, 2, 3]


def test_a_slot_on_a_worker_takes_an_eligible_batch_out_of_turn_at_once(world: tuple[str, DynamicSlot]) -> None:
    url, spec = world
    seen = listing(*range(8))
    assert running(url, spec, seen, 5, patience=0) == [0, 1, 2, 3]


def test_the_last_free_slot_waits_until_the_input_is_final_and_takes_it_all(world: tuple[str, DynamicSlot]) -> None:
    url, spec = world
    for slot, indexes in ((1, [0]), (2, [1]), (3, [2])):  # three of four slots used up
        cut(url, spec, slot, indexes)
    seen = listing(*range(10))
    waiting = at(url, spec, seen, 99)  # every expected file is there, but more may come until the window ends
    assert (waiting.action, waiting.reason) == (SlotAction.WAIT, None)
    decision = at(url, spec, seen, 100)
    assert (decision.action, decision.reason) == (SlotAction.RUN, BatchReason.ALL_IN)
    assert taken(decision) == [name(i) for i in range(3, 10)]  # 7 units: past max_batch


def test_a_close_marker_makes_the_input_final_before_the_window_ends(world: tuple[str, DynamicSlot]) -> None:
    url, spec = world
    streams = {"lineitem": FileStream("/data/lineitem", close_marker="_SUCCESS")}
    marker = DataFile("lineitem", "file:///data/lineitem/_SUCCESS", "_SUCCESS", 0, T0 + timedelta(seconds=20))
    for slot, indexes in ((1, [0]), (2, [1]), (3, [2])):
        cut(url, spec, slot, indexes)
    files = tuple(landed(i) for i in range(5))
    assert at(url, spec, Listing(files, (), streams), 30).action is SlotAction.WAIT
    decision = at(url, spec, Listing(files, (marker,), streams), 30)
    assert (decision.action, taken(decision)) == (SlotAction.RUN, [name(3), name(4)])


def test_a_failed_batch_is_retried_by_its_own_slot(world: tuple[str, DynamicSlot]) -> None:
    url, spec = world
    seen = listing(*range(5))
    cut(url, spec, 0, [0, 1, 2, 3, 4])
    decision = at(url, spec, seen, 10)
    assert (decision.action, decision.reason) == (SlotAction.RUN, BatchReason.RETRY)
    other = at(url, spec, seen, 10, slot=1)  # the files are taken: another slot has nothing to run
    assert (other.action, other.take) == (SlotAction.WAIT, ())
