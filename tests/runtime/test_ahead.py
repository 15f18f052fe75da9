"""When a partial task leaves the triggerer ahead of its batch, read from a real SQLite ledger."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from airflow_iqp.constants import BatchReason, Mode
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.planning.record import PlanRecord, ReplanNote
from airflow_iqp.runtime.ahead import START_AHEAD, start_ahead
from airflow_iqp.runtime.descriptors import DynamicSlot, StaticBatch
from airflow_iqp.runtime.inputs import InputSpec
from airflow_iqp.streams.files import DataFile
from airflow_iqp.streams.spec import FileStream

if TYPE_CHECKING:
    from pathlib import Path

T0 = datetime(2026, 1, 1, tzinfo=UTC)
WINDOW = timedelta(seconds=100)
STREAMS = {"lineitem": FileStream("/data/lineitem")}
INPUT = InputSpec.of(STREAMS, T0, WINDOW).to_dict()


def ledger(tmp_path: Path, mode: Mode, batches: list[dict[str, object]]) -> tuple[str, int]:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with session_scope(url) as s:
        store.register_query(s, dag_id="iqp_q6", name="q6", sql="SELECT 1", mode=mode, params={})
        window_id = store.record_plan(s, "iqp_q6", T0, T0 + WINDOW, T0 + 2 * WINDOW, 10, PlanRecord(), batches)
    return url, window_id


def at(seconds: float) -> float:
    return (T0 + timedelta(seconds=seconds)).timestamp()


def test_a_planned_batch_starts_ahead_of_its_release_as_the_ledger_has_it_now(tmp_path: Path) -> None:
    """A replan that moves the batch's release moves its start with it."""
    row = {"index": 0, "first_tuple": 1, "last_tuple": 5, "latest_start": T0, "planned_start": T0}
    row["predicted_cost"] = 1.0
    url, window_id = ledger(tmp_path, Mode.STATIC, [{**row, "release": T0 + timedelta(seconds=60)}])
    batch = StaticBatch(window_id=window_id, input=INPUT, index=0, upto=5, planned_start=T0, predicted_cost=1.0)
    with session_scope(url) as s:
        assert not start_ahead(s, batch, at(60 - START_AHEAD - 1))
        assert start_ahead(s, batch, at(60 - START_AHEAD))
        note = ReplanNote(at=T0, after_batch=0, why="test", batches=1, feasible=True, reason=None, blocking_left=0.0)
        store.record_replan(s, window_id, [{**row, "release": T0 + timedelta(seconds=90)}], T0, note)
        assert not start_ahead(s, batch, at(60))
        assert start_ahead(s, batch, at(90 - START_AHEAD))


def test_only_the_slot_whose_turn_it_is_starts_ahead_of_the_windows_close(tmp_path: Path) -> None:
    url, window_id = ledger(tmp_path, Mode.DYNAMIC, [])

    def slot(n: int) -> DynamicSlot:
        return DynamicSlot(
            window_id=window_id, slot=n, slots=3, input=INPUT, expected_files=10, min_batch=4, max_batch=6
        )

    closing = at(100 - START_AHEAD)
    with session_scope(url) as s:
        assert not start_ahead(s, slot(0), at(100 - START_AHEAD - 1))  # too early
        assert start_ahead(s, slot(0), closing)
        assert not start_ahead(s, slot(0), at(100))  # closed: its trigger knows at once whether it has a batch
        assert not start_ahead(s, slot(1), closing)  # not its turn
        one = DataFile("lineitem", "file:///data/lineitem/a.parquet", "a.parquet", 100, T0)
        store.add_dynamic_batch(s, window_id, 0, BatchReason.MIN_BATCH, {"lineitem": [one]}, 1, 1, 1.0, T0)
        assert not start_ahead(s, slot(0), closing)  # it has had its turn
        assert start_ahead(s, slot(1), closing)
