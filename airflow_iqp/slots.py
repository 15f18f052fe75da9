"""Dynamic mode: what one mapped batch slot of a window may do now — wait, run, or skip.

A window gets more slots than it should need (DynamicBatching.slots). Slots are not ordered:
whichever sees a batch become eligible first (dynamic/eligibility.py: MinBatch landed, the
last file in, the window closed, or input running late) registers with the dispatcher; the
ledger lets one request per window be open, so a query runs one batch at a time. The slot
that is granted cuts the batch: it freezes the landed files no batch has taken, at most
max_batch of them (the tau_max bound), except the last free slot, which waits for every file
and takes the rest. Once every file of the window has landed and been taken, the slots left
over skip. Read by the trigger (read-only) and by the task, in the caller's session.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select

from airflow_iqp.constants import OPEN_REQUEST_STATES, BatchReason, JobKind
from airflow_iqp.data.manifest import part_name
from airflow_iqp.dynamic import batch_reason, expected_time_of
from airflow_iqp.ledger import store
from airflow_iqp.ledger.models import Batch, DispatchRequest

if TYPE_CHECKING:
    from sqlalchemy.orm import Session


@dataclass(frozen=True)
class SlotSpec:
    """One slot of one window, as the plan task hands it out (plain values: it travels in XCom
    and in trigger kwargs). Times are epoch seconds; indexes are the window's stream files.
    """

    window_id: int
    slot: int
    slots: int
    landing: str
    streams: list[str]
    indexes: list[int]
    window_start: float
    window_end: float
    expected_files: int
    min_batch: int
    max_batch: int

    def as_dict(self) -> dict[str, Any]:
        """The spec as plain values, for XCom and trigger kwargs; `SlotSpec(**d)` reads it back."""
        return asdict(self)

    def paths(self, positions: list[int]) -> dict[str, list[str]]:
        """Landing paths per stream of the window files at `positions`."""
        return {s: [os.path.join(self.landing, s, part_name(i)) for i in positions] for s in self.streams}


class SlotAction(StrEnum):
    """What a slot may do now."""

    WAIT = "wait"  # no batch is eligible yet, or another slot of the window is queued
    RUN = "run"  # queue with the dispatcher (or this slot already has)
    SKIP = "skip"  # every file of the window has landed and been taken


@dataclass(frozen=True)
class SlotDecision:
    """A slot's action now, why, and what it would take if it cut its batch now."""

    action: SlotAction
    reason: BatchReason | None = None
    take: tuple[int, ...] = ()  # the stream files the batch would take if cut now
    processed: int = 0  # files already taken by batches of the window
    batches: int = 0  # batches cut so far


def landed(spec: SlotSpec) -> list[int]:
    """Window files present in every stream (landing is atomic: a name that exists is whole)."""
    present = [
        set(os.listdir(os.path.join(spec.landing, s))) if os.path.isdir(os.path.join(spec.landing, s)) else set()
        for s in spec.streams
    ]
    return [i for i in spec.indexes if all(part_name(i) in names for names in present)]


def decide(session: Session, spec: SlotSpec, now: float) -> SlotDecision:
    """Whether the slot waits, runs or skips at `now`, from the landing directory and the ledger."""
    if store.slot_batch(session, spec.window_id, spec.slot) is not None:
        return SlotDecision(SlotAction.RUN, BatchReason.RETRY)  # this slot's batch failed before: same files again
    frozen = store.frozen_files(session, spec.window_id)
    first_stream = spec.streams[0]
    taken = {i for i in spec.indexes if os.path.join(spec.landing, first_stream, part_name(i)) in frozen}
    arrived = landed(spec)
    waiting = [i for i in arrived if i not in taken]
    all_in = len(arrived) == len(spec.indexes)
    batches = session.scalar(select(func.count()).select_from(Batch).where(Batch.window_id == spec.window_id)) or 0
    if all_in and not waiting:
        return SlotDecision(SlotAction.SKIP, processed=len(taken), batches=batches)
    last = batches >= spec.slots - 1  # the last free slot takes everything, once everything is in
    take = tuple(waiting if last else waiting[: spec.max_batch])
    holder = session.execute(
        select(DispatchRequest.slot, DispatchRequest.reason).where(
            DispatchRequest.window_id == spec.window_id,
            DispatchRequest.kind == JobKind.PARTIAL,
            DispatchRequest.state.in_(OPEN_REQUEST_STATES),
        )
    ).one_or_none()
    if holder is not None:
        action = SlotAction.RUN if holder.slot == spec.slot else SlotAction.WAIT  # run: this slot registered already
        return SlotDecision(action, BatchReason(holder.reason), take, len(taken), batches)
    if last:
        if not all_in:
            return SlotDecision(SlotAction.WAIT, None, take, len(taken), batches)
        return SlotDecision(SlotAction.RUN, BatchReason.ALL_IN, take, len(taken), batches)
    late_at = expected_time_of(len(taken) + spec.min_batch, spec.expected_files, spec.window_start, spec.window_end)
    reason = batch_reason(
        waiting=len(waiting),
        min_batch=spec.min_batch,
        all_in=all_in,
        window_closed=now >= spec.window_end,
        input_late=now >= late_at,
    )
    if reason is None:
        return SlotDecision(SlotAction.WAIT, None, take, len(taken), batches)
    return SlotDecision(SlotAction.RUN, BatchReason(reason), take, len(taken), batches)
