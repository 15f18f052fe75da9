"""Dynamic mode: what one mapped batch slot of a window may do now — wait, run, or skip.

A window gets more slots than it should need (DynamicBatching.slots). When a batch becomes
eligible (dynamic/eligibility.py: MinBatch landed, the window's input final, the window closed,
or input running late), the slot whose turn it is registers with the dispatcher: the lowest
slot that has cut no batch. Without turns every waiting slot's trigger fired at once and each
took a task process only to find the batch queued by another. A turn yields: once a batch has
been eligible for `patience` seconds since the turn began with no slot registered, any free
slot may take it, so a slot that is not waiting (its task cleared or failed) holds nothing up.
A slot that started in the triggerer waits YIELD_AFTER; one already on a worker process none,
since taking the batch costs it nothing more (and `airflow dags test`, which runs a run's tasks
one at a time in no set order, starts every slot on one). The ledger lets one request per
window be open, so a query runs one batch at a time. The slot
that is granted cuts the batch: it freezes the landed units no batch has taken, at most
max_batch of them (the tau_max bound), except the last free slot, which waits until the
window's input is final and takes the rest. While the cost model has no per-job cost of its
own (`runtime.costs.measures_intercept`), the window's first batch is one unit, cut as soon as
one has landed. Once the input is final and every unit is taken,
the slots left over skip; a window whose input is final with no unit at all runs one empty
batch, so its merge commits the query's answer over no rows. Read by the trigger (read-only)
and by the task, in the caller's session.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from sqlalchemy import func, select

from airflow_iqp.constants import OPEN_REQUEST_STATES, BatchReason, JobKind
from airflow_iqp.dynamic import batch_reason, expected_time_of
from airflow_iqp.ledger import store
from airflow_iqp.ledger.models import Batch, DispatchRequest
from airflow_iqp.runtime.inputs import untaken

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sqlalchemy.orm import Session

    from airflow_iqp.runtime.descriptors import DynamicSlot
    from airflow_iqp.streams.assign import InputUnit, WindowSelection


# Seconds an eligible batch waits for the slot in turn: its trigger looks every second, then a
# task process starts and registers, which took 10-25 s in Tier M's quick run (13 DAGs, 2 cores;
# with 10 here every slot of a window fired)
YIELD_AFTER = 60.0


class SlotAction(StrEnum):
    """What a slot may do now."""

    WAIT = "wait"  # no batch is eligible yet, or another slot of the window is queued
    RUN = "run"  # queue with the dispatcher (or this slot already has)
    SKIP = "skip"  # the window's input is final and every unit of it is taken


@dataclass(frozen=True)
class SlotDecision:
    """A slot's action now, why, and what it would take if it cut its batch now."""

    action: SlotAction
    reason: BatchReason | None = None
    take: tuple[InputUnit, ...] = ()  # the units the batch would take if cut now
    processed: int = 0  # units already taken by batches of the window
    batches: int = 0  # batches cut so far


def decide(
    session: Session, spec: DynamicSlot, selection: WindowSelection, now: float, patience: float = 0.0
) -> SlotDecision:
    """Whether the slot waits, runs or skips at `now` (epoch seconds), from a listing of the
    window's input and the ledger; out of turn, only once a batch has been eligible `patience`
    seconds.
    """
    if store.slot_batch(session, spec.window_id, spec.slot) is not None:
        return SlotDecision(SlotAction.RUN, BatchReason.RETRY)  # this slot's batch failed before: same files again
    frozen = store.frozen_files(session, spec.window_id)
    waiting = untaken(selection.units, frozen)
    processed = len(selection.units) - len(waiting)
    cut_by = list(session.scalars(select(Batch.slot).where(Batch.window_id == spec.window_id)))  # one per batch
    batches = len(cut_by)
    if selection.final and not waiting and batches > 0:
        return SlotDecision(SlotAction.SKIP, processed=processed, batches=batches)
    last = batches >= spec.slots - 1  # the last free slot takes everything, once the input is final
    one_unit = spec.first_unit and batches == 0  # for the cost model's intercept
    take = tuple(waiting if last else waiting[: 1 if one_unit else spec.max_batch])
    holder = session.execute(
        select(DispatchRequest.slot, DispatchRequest.reason).where(
            DispatchRequest.window_id == spec.window_id,
            DispatchRequest.kind == JobKind.PARTIAL,
            DispatchRequest.state.in_(OPEN_REQUEST_STATES),
        )
    ).one_or_none()
    if holder is not None:
        action = SlotAction.RUN if holder.slot == spec.slot else SlotAction.WAIT  # run: this slot registered already
        return SlotDecision(action, BatchReason(holder.reason), take, processed, batches)
    window = spec.window_input
    start, end = window.window_start.timestamp(), window.window_end.timestamp()
    min_batch = 1 if one_unit else spec.min_batch
    late_at = expected_time_of(processed + min_batch, spec.expected_files, start, end)
    if selection.final and (last or not waiting):  # the rest, or one empty batch so the merge has a partial
        reason: BatchReason | None = BatchReason.ALL_IN
    elif last:
        reason = None
    else:
        reason = batch_reason(
            waiting=len(waiting),
            min_batch=min_batch,
            all_in=selection.final,
            window_closed=now >= end,
            input_late=now >= late_at,
        )
    if reason is None:
        return SlotDecision(SlotAction.WAIT, None, take, processed, batches)
    if spec.slot in cut_by:  # it has had a turn: it waits until nothing is left, then skips
        return SlotDecision(SlotAction.WAIT, None, take, processed, batches)
    if spec.slot != turn(spec.slots, cut_by) and patience > 0:
        since = max(eligible_since(selection, waiting, min_batch, late_at, now), turn_began(session, spec))
        if now < since + patience:
            return SlotDecision(SlotAction.WAIT, None, take, processed, batches)
    return SlotDecision(SlotAction.RUN, reason, take, processed, batches)


def turn(slots: int, cut_by: Sequence[int | None]) -> int | None:
    """The slot whose turn it is: the lowest of `slots` that has cut no batch (None: all have)."""
    return min(set(range(slots)) - set(cut_by), default=None)


def holds_turn(session: Session, spec: DynamicSlot) -> bool:
    """Whether it is `spec`'s turn to cut the window's next batch."""
    cut_by = session.scalars(select(Batch.slot).where(Batch.window_id == spec.window_id))
    return turn(spec.slots, list(cut_by)) == spec.slot


def turn_began(session: Session, spec: DynamicSlot) -> float:
    """When the current turn began: the window's last batch ended (or was cut, if it has not
    ended), or the slots were handed out.
    """
    last = session.scalar(
        select(func.max(func.coalesce(Batch.actual_end, Batch.release))).where(Batch.window_id == spec.window_id)
    )
    return spec.planned_at if last is None else max(spec.planned_at, last.timestamp())


def eligible_since(
    selection: WindowSelection, waiting: Sequence[InputUnit], min_batch: int, late_at: float, now: float
) -> float:
    """The first time a batch was eligible by the conditions that hold at `now` (the input is
    final from when it is certain to be, or from now if a close marker made it so).
    """
    end, final_at = selection.end.timestamp(), selection.final_at.timestamp()
    since = [end] if now >= end else []
    if len(waiting) >= min_batch:
        since.append(waiting[min_batch - 1].arrived.timestamp())
    if selection.final:
        since.append(final_at if now >= final_at else now)
    if now >= late_at:
        since.append(late_at)
    return min(since, default=now)
