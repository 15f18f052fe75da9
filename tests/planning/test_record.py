"""The window plan record: what the ledger's `Window.plan` holds, written and read back, and the
rows written before the record (no version) still read."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from airflow_iqp.constants import Mode
from airflow_iqp.planning.record import MinBatchPlan, PlanRecord, ReplanNote

T0 = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
NOTE = ReplanNote(
    at=T0, after_batch=0, why="batch 0 ended 2.0 s after its planned end", batches=2, feasible=True,
    reason=None, blocking_left=1.0, merge_start=27.5,
)  # fmt: skip
STATIC = PlanRecord(
    mode=Mode.STATIC,
    how="planned at 2 files/s of ~430 rows",
    files_per_second=2.0,
    rows_per_file=430.0,
    expected_files=40,
    merge_start=24.5,
    merge_cost=5.0,
    admission="feasible: 1 queries, utilization 0.40",
    blocking=3.0,
    margin={"k": 2.0, "partial": 0.1, "merge": 0.05},
)
DYNAMIC = PlanRecord(
    mode=Mode.DYNAMIC,
    how="dynamic: MinBatch",
    files_per_second=2.0,
    rows_per_file=430.0,
    expected_files=40,
    merge_cost=6.0,
    dynamic=MinBatchPlan(alpha=0.5, tau_max=20.0, min_batch=8, max_batch=30, cost_ratio=1.4, slots=11),
)

# Rows as the plan task and a replan wrote them before the record had a version.
OLD_STATIC: dict[str, Any] = {
    "mode": "static",
    "how": "planned at 2 files/s of ~430 rows",
    "unit": "files",
    "files_per_second": 2.0,
    "rows_per_file": 430.0,
    "expected_files": 40,
    "merge_cost": 5.0,
    "admission": "feasible: 1 queries, utilization 0.40",
    "blocking": 3.0,
    "margin": None,
    "replans": [
        {
            "at": T0.isoformat(),
            "after_batch": 0,
            "why": "batch 0 ended 2.0 s after its planned end",
            "batches": 2,
            "feasible": True,
            "reason": None,
            "blocking_left": 1.0,
        }
    ],
}
OLD_DYNAMIC: dict[str, Any] = {
    "mode": "dynamic",
    "how": "dynamic: MinBatch",
    "unit": "files",
    "files_per_second": 2.0,
    "rows_per_file": 430.0,
    "alpha": 0.5,
    "tau_max": 20.0,
    "min_batch": 8,
    "max_batch": 30,
    "cost_ratio": 1.4,
    "slots": 11,
    "expected_files": 40,
    "merge_cost": 6.0,
    "admission": "feasible: 1 queries, utilization 0.40",
    "margin": None,
}


@pytest.mark.parametrize("record", [STATIC, DYNAMIC, STATIC.replanned(NOTE), PlanRecord()])
def test_a_record_round_trips_through_the_json_column(record: PlanRecord) -> None:
    stored = json.loads(json.dumps(record.dump()))
    assert stored["version"] == 1
    assert PlanRecord.read(stored) == record


def test_a_replan_keeps_its_note_and_moves_the_merge() -> None:
    replanned = STATIC.replanned(NOTE)
    assert replanned.replans == (NOTE,)
    assert replanned.merge_start == 27.5
    assert (STATIC.blocking_left, replanned.blocking_left) == (3.0, 1.0)


def test_an_old_static_row_reads_with_its_replans_and_no_merge_start() -> None:
    record = PlanRecord.read(OLD_STATIC)
    assert (record.mode, record.expected_files, record.blocking, record.merge_cost) == (Mode.STATIC, 40, 3.0, 5.0)
    assert record.dynamic is None
    assert record.merge_start is None  # never written before the record
    assert record.replans[0].at == T0
    assert record.replans[0].merge_start is None
    assert record.blocking_left == 1.0


def test_an_old_dynamic_row_moves_its_minbatch_fields_into_dynamic() -> None:
    record = PlanRecord.read(OLD_DYNAMIC)
    assert record.dynamic == DYNAMIC.dynamic
    assert record.model_copy(update={"admission": None}) == DYNAMIC


def test_an_old_row_drops_keys_no_field_reads() -> None:
    record = PlanRecord.read({"method": "greedy", "feasible": True, "merge_start": "2026-01-01T10:10:20+00:00"})
    assert record == PlanRecord()


def test_a_versioned_row_is_read_strictly() -> None:
    with pytest.raises(ValidationError):
        PlanRecord.read(STATIC.dump() | {"method": "greedy"})
    with pytest.raises(ValidationError):
        PlanRecord.read(STATIC.dump() | {"version": 2})
