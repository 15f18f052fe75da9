"""A window's plan as the ledger keeps it (`Window.plan`, a JSON column): one typed, versioned
record written by the `plan` task and every replan, and read through its fields by the
operators, triggers, UI and demo, so no reader guesses at keys a writer may not have written.

Times are seconds from the window start, as the planner's are. Rows written before the record
had a version (a flat dict, the dynamic fields beside the others) still read: `PlanRecord.read`
maps them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from airflow_iqp.constants import Mode

_DYNAMIC_KEYS = ("alpha", "tau_max", "min_batch", "max_batch", "cost_ratio", "slots")


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MinBatchPlan(_Part):
    """Dynamic mode: no batches in advance, MinBatch and the slots that will cut them."""

    alpha: float
    tau_max: float  # seconds one batch may hold the shared resource
    min_batch: int  # files: the smallest batch keeping the batched cost within 1 + alpha of one batch
    max_batch: int  # files: at most tau_max of work
    cost_ratio: float  # batched cost at MinBatch against one batch
    slots: int
    first_unit: bool = False  # the first batch is one unit, for the model's intercept


class ReplanNote(_Part):
    """One replan of a static window's remaining batches (`runtime.replan`)."""

    at: datetime
    after_batch: int
    why: str
    batches: int  # batches left with units
    feasible: bool
    reason: str | None
    blocking_left: float  # seconds of room left for another query's longest job
    merge_start: float | None = None  # the merge's planned start after it; None in notes written before


class PlanRecord(_Part):
    """One window's plan. `merge_start` is when the merge is planned to start (the planned end
    of the last batch), None where nothing plans it ahead (dynamic slots); `blocking` is the room
    left for another query's longest job, recorded only by a plan made for the deadline (the
    ones a replan may remake); `dynamic` is there when MinBatch slots were opened.
    """

    version: Literal[1] = 1
    mode: Mode = Mode.STATIC  # the query's mode: a dynamic query's past window still runs static batches
    how: str = ""
    unit: Literal["files", "tuples"] = "files"
    files_per_second: float | None = None
    rows_per_file: float | None = None
    expected_files: int = 0
    merge_start: float | None = None
    merge_cost: float = 0.0
    admission: str | None = None
    blocking: float | None = None
    margin: dict[str, float] | None = None  # relative margins a refit model plans with
    dynamic: MinBatchPlan | None = None
    replans: tuple[ReplanNote, ...] = ()
    # What `plan` handed to `partial_aggregate` (its XCom), by map index: a partial task that
    # starts in the triggerer reads its own batch or slot here (`triggers.partial_start`)
    handed: tuple[dict[str, Any], ...] = ()

    @classmethod
    def read(cls, raw: dict[str, Any]) -> PlanRecord:
        """The record a row holds; a row without a version (written before the record) is mapped:
        its dynamic fields move into `dynamic`, keys no field reads are dropped.
        """
        if "version" in raw:
            return cls.model_validate(raw)
        old = {k: v for k, v in raw.items() if k in cls.model_fields and k not in ("dynamic", "merge_start")}
        if "min_batch" in raw:
            old["dynamic"] = {k: raw.get(k) for k in _DYNAMIC_KEYS}
        return cls.model_validate(old)

    def dump(self) -> dict[str, Any]:
        """The row to store: plain JSON values."""
        return self.model_dump(mode="json")

    def replanned(self, note: ReplanNote) -> PlanRecord:
        """The plan after a replan: the note kept, the merge moved to where it plans it."""
        return self.model_copy(update={"replans": (*self.replans, note), "merge_start": note.merge_start})

    @property
    def blocking_left(self) -> float | None:
        """The room for another query's longest job the window has left (the last replan's)."""
        return self.replans[-1].blocking_left if self.replans else self.blocking
