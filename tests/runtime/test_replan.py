"""A static window replans its remaining batches on a real SQLite ledger when a batch ends off
its plan: late (within the blocking room: the deadline still holds), short (a cheaper model:
the next batch takes fewer units, released earlier), and not at all when the batch kept to it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from airflow_iqp.constants import Mode
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.planning import PiecewiseLinearCost
from airflow_iqp.planning.arrival import ArrivalCurve
from airflow_iqp.planning.record import PlanRecord, ReplanNote
from airflow_iqp.planning.replan import Remaining, replan
from airflow_iqp.runtime.replan import off_plan, replan_window
from airflow_iqp.streams.files import DataFile

if TYPE_CHECKING:
    from pathlib import Path

T0 = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
FILES, DEADLINE, BLOCKING = 20, 35.0, 3.0


@dataclass(frozen=True)
class Model:
    """1 s per file plus 1 s per batch (one row a file); a merge of k partials 1 + k/2 s."""

    partial: PiecewiseLinearCost
    merge: PiecewiseLinearCost

    @classmethod
    def per_file(cls, seconds: float) -> Model:
        return cls(
            PiecewiseLinearCost([(1, 1 + seconds), (2, 1 + 2 * seconds)]), PiecewiseLinearCost([(1, 1.5), (2, 2.0)])
        )


PLANNED = Model.per_file(1.0)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def planned_window(url: str) -> int:
    """20 files at 1 file/s in a 20 s window, due 35 s after its start, 3 s left for blocking:
    three batches, files 1-4 from 6.5 s, 5-12 from 11.5 s, 13-20 from 20.5 s."""
    plan = replan(
        Remaining(0, 0, FILES, tasks=FILES),
        arrival=ArrivalCurve.fixed_rate(0.0, FILES - 1.0, FILES),
        window_end=20.0,
        deadline=DEADLINE - BLOCKING,
        now=0.0,
        cost=PLANNED.partial,
        merge=PLANNED.merge,
    )
    assert [(b.first, b.last, b.start) for b in plan.batches] == [(1, 4, 6.5), (5, 12, 11.5), (13, 20, 20.5)]
    rows = [
        {
            "index": i,
            "first_tuple": b.first,
            "last_tuple": b.last,
            "release": at(b.release),
            "latest_start": at(b.start),
            "planned_start": at(b.start),
            "predicted_cost": b.cost,
        }
        for i, b in enumerate(plan.batches)
    ]
    recorded = PlanRecord(
        expected_files=FILES,
        files_per_second=1.0,
        rows_per_file=1.0,
        merge_start=plan.batches[-1].start + plan.batches[-1].cost,
        blocking=BLOCKING,
    )
    with session_scope(url) as s:
        store.register_query(s, dag_id="iqp_q6", name="q6", sql="SELECT 1", mode=Mode.STATIC, params={})
        return store.record_plan(s, "iqp_q6", T0, at(20), at(DEADLINE), FILES, recorded, rows)


@pytest.fixture
def window(tmp_path: Path) -> tuple[str, int]:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    return url, planned_window(url)


def run_first_batch(url: str, window_id: int, start: float, seconds: float) -> None:
    files = [DataFile("lineitem", f"file:///data/lineitem/{i}.parquet", f"{i}.parquet", 10, at(i)) for i in range(4)]
    with session_scope(url) as s:
        store.freeze_files(s, window_id, 0, {"lineitem": files})
        store.start_batch(s, window_id, 0)
        store.finish_batch(s, window_id, 0, at(start), at(start + seconds), 4, seconds, "/out/batch-0000")


def replanned(url: str, window_id: int, model: Model, now: float) -> tuple[ReplanNote | None, store.WindowRow]:
    with session_scope(url) as s:
        note = replan_window(s, window_id, 0, model, at(now))
    with session_scope(url) as s:
        return note, store.window_summary(s, window_id)


def test_a_batch_that_keeps_to_its_plan_changes_nothing(window: tuple[str, int]) -> None:
    url, window_id = window
    with session_scope(url) as s:
        before = store.window_summary(s, window_id)
    run_first_batch(url, window_id, start=6.5, seconds=5.0)
    note, after = replanned(url, window_id, PLANNED, now=11.5)
    assert note is None
    assert after.plan.replans == ()
    assert after.plan.merge_start == before.plan.merge_start
    assert [(b.last_tuple, b.planned_start) for b in after.batches[1:]] == [
        (b.last_tuple, b.planned_start) for b in before.batches[1:]
    ]


def test_a_batch_that_ran_short_with_the_same_model_leaves_the_plan_as_it_is(window: tuple[str, int]) -> None:
    url, window_id = window
    run_first_batch(url, window_id, start=3.0, seconds=2.5)
    with session_scope(url) as s:
        assert off_plan(store.window_summary(s, window_id).batches[0]) is not None
    note, after = replanned(url, window_id, PLANNED, now=5.5)
    assert note is None
    assert [b.last_tuple for b in after.batches] == [4, 12, 20]


def test_a_late_batch_moves_the_rest_and_the_deadline_still_holds(window: tuple[str, int]) -> None:
    """Two seconds late, within the 3 s left for blocking: the next batch takes fewer files so
    that the last one, larger, still ends the merge by the deadline; 1 s of room is left."""
    url, window_id = window
    run_first_batch(url, window_id, start=6.5, seconds=7.0)
    note, after = replanned(url, window_id, PLANNED, now=13.5)
    assert note is not None
    assert note.feasible
    assert note.blocking_left == 1.0
    assert "2.0 s after its planned end" in note.why
    assert after.plan.replans == (note,)
    nxt, last = after.batches[1], after.batches[2]
    assert after.plan.merge_start == note.merge_start == (last.planned_start - T0).total_seconds() + last.predicted_cost
    assert (nxt.first_tuple, last.last_tuple) == (5, 20)
    assert nxt.last_tuple < 12
    assert last.first_tuple == nxt.last_tuple + 1
    assert nxt.planned_start >= at(13.5)
    assert after.predicted_finish is not None
    assert after.predicted_finish <= after.deadline - timedelta(seconds=note.blocking_left)


def test_a_short_batch_with_a_cheaper_model_releases_the_next_one_earlier(window: tuple[str, int]) -> None:
    url, window_id = window
    run_first_batch(url, window_id, start=3.0, seconds=2.5)
    with session_scope(url) as s:
        old = store.window_summary(s, window_id).batches[1]
    note, after = replanned(url, window_id, Model.per_file(0.6), now=5.5)
    assert note is not None
    assert note.feasible
    nxt = after.batches[1]
    assert nxt.last_tuple < old.last_tuple
    assert nxt.release is not None
    assert old.release is not None
    assert nxt.release < old.release
    assert after.predicted_finish is not None
    assert after.predicted_finish <= after.deadline - timedelta(seconds=BLOCKING)


def test_a_second_late_batch_takes_the_room_the_first_left(window: tuple[str, int]) -> None:
    url, window_id = window
    run_first_batch(url, window_id, start=6.5, seconds=7.0)
    first, after = replanned(url, window_id, PLANNED, now=13.5)
    assert first is not None
    nxt = after.batches[1]
    started = (nxt.planned_start - T0).total_seconds()
    files = [
        DataFile("lineitem", f"file:///data/lineitem/{i}.parquet", f"{i}.parquet", 10, at(i))
        for i in range(4, nxt.last_tuple)
    ]
    with session_scope(url) as s:
        store.freeze_files(s, window_id, 1, {"lineitem": files})
        store.start_batch(s, window_id, 1)
        store.finish_batch(
            s, window_id, 1, at(started), at(started + nxt.predicted_cost + 2), 8, nxt.predicted_cost + 2, "/out/1"
        )
    with session_scope(url) as s:
        second = replan_window(s, window_id, 1, PLANNED, at(started + nxt.predicted_cost + 2))
    assert second is not None
    assert second.blocking_left == 0.0
    with session_scope(url) as s:
        assert [r.after_batch for r in store.window_summary(s, window_id).plan.replans] == [0, 1]
