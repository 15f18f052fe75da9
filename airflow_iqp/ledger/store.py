"""The ledger operations the Airflow tasks need, by DAG (`dag_id`) and window. Each takes the
caller's session, so a task groups its writes in one `session_scope()` transaction.

Queries, windows, batches and results live here; input files (`ledger.files`) and what the
learner reads (`ledger.history`) have modules of their own, and this one is the namespace
callers use for all of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from airflow_iqp.constants import CLOSED_WINDOW_STATES, BatchReason, BatchStatus, Mode, WindowStatus
from airflow_iqp.exceptions import LedgerLookupError
from airflow_iqp.ledger import lookup
from airflow_iqp.ledger.files import (
    FrozenFile,
    freeze,
    freeze_files,
    frozen_files,
    frozen_identities,
    quarantine_file,
    record_file_event,
    recorded_events,
    refresh_frozen,
    settled_anchor,
)
from airflow_iqp.ledger.history import (
    cost_observations,
    latest_cost_model,
    record_cost_observation,
    save_cost_model,
    window_inputs,
)
from airflow_iqp.ledger.models import Batch, Query, Result, Window, utcnow
from airflow_iqp.ledger.rows import BatchRow, WindowRow, window_row
from airflow_iqp.planning.admission import RecurringQuery
from airflow_iqp.planning.record import PlanRecord, ReplanNote

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from datetime import datetime

    from sqlalchemy.orm import Session

    from airflow_iqp.streams.files import DataFile

__all__ = [
    "BatchRow",
    "FrozenFile",
    "WindowRow",
    "add_dynamic_batch",
    "cost_observations",
    "fail_batch",
    "finish_batch",
    "freeze_files",
    "frozen_files",
    "frozen_identities",
    "latest_cost_model",
    "quarantine_file",
    "record_cost_observation",
    "record_file_event",
    "recorded_events",
    "planned_release",
    "planned_upto",
    "price_batch",
    "record_merge",
    "record_replan",
    "refresh_frozen",
    "record_plan",
    "record_result",
    "register_query",
    "save_cost_model",
    "settled_anchor",
    "skip_batch",
    "slot_batch",
    "start_batch",
    "window_id",
    "window_inputs",
    "window_summary",
]

NOT_STARTED = (BatchStatus.PLANNED, BatchStatus.WAITING)


def register_query(
    session: Session,
    *,
    dag_id: str,
    name: str,
    sql: str,
    mode: Mode,
    params: Mapping[str, Any],
    sql_path: str | None = None,
) -> int:
    """Insert the DAG's query, or bring a registered one up to date with its current definition.
    Several tasks may register the same DAG at once: the loser of the insert updates instead.
    """
    query = session.scalar(select(Query).where(Query.dag_id == dag_id))
    if query is None:
        try:
            with session.begin_nested():
                query = Query(dag_id=dag_id, name=name, sql=sql, sql_path=sql_path, mode=mode, params=dict(params))
                session.add(query)
        except IntegrityError:
            query = session.scalars(select(Query).where(Query.dag_id == dag_id)).one()
    query.name, query.sql, query.sql_path, query.mode = name, sql, sql_path, mode
    query.params = dict(params)
    session.flush()
    return query.id


def record_demand(session: Session, demand: RecurringQuery) -> None:
    """What the DAG's newest plan asks of the shared resource per window (`demand.window_demand`):
    other queries plan with room for its longest job, and admission tests them all.
    """
    query = session.scalars(select(Query).where(Query.dag_id == demand.name)).one()
    query.params = {
        **query.params,
        "work_s": demand.work,
        "final_work_s": demand.final_work,
        "longest_job_s": demand.longest_job,
    }
    session.flush()


def demands(session: Session) -> list[RecurringQuery]:
    """Every registered DAG's demand, as its newest plan priced it (DAGs not yet planned with a
    cost model are left out).
    """
    keys = ("window_s", "deadline_s", "work_s", "final_work_s", "longest_job_s")
    found = []
    for query in session.scalars(select(Query).order_by(Query.dag_id)):
        p = query.params
        if all(isinstance(p.get(key), int | float) for key in keys):
            found.append(
                RecurringQuery(
                    name=query.dag_id,
                    period=p["window_s"],
                    deadline=p["window_s"] + p["deadline_s"],
                    work=p["work_s"],
                    longest_job=p["longest_job_s"],
                    final_work=p["final_work_s"],
                )
            )
    return found


def record_plan(
    session: Session,
    dag_id: str,
    window_start: datetime,
    window_end: datetime,
    deadline: datetime,
    expected_tuples: int,
    plan: PlanRecord,
    batches: Sequence[Mapping[str, Any]],
    predicted_finish: datetime | None = None,
    run_id: str | None = None,
    backfill: bool = False,
) -> int:
    """Store a window's plan and return the window id. Re-planning the same window replaces the
    batches that have not started; started ones (or ones with frozen files) stay as they are, and
    a new batch with the index of a kept one is dropped. `run_id` is the Airflow DAG run that
    plans it (the last one to plan it, where several did; None keeps the one recorded);
    `backfill` says that a backfill plans it (see `Window.backfill`).

    A closed (merged or failed) window planned again is run again from its files: a backfill
    with `--reprocess-behavior`, or a cleared run. Its batches go, with their claims on the
    files, so the new batches can take them; its published results stay in `results` and its
    current result stays current until the new merge publishes one.

    Each batch is a mapping with index, first_tuple, last_tuple, release, latest_start,
    planned_start and predicted_cost.
    """
    query_id = lookup.query_id(session, dag_id)
    window = session.scalar(
        select(Window).where(Window.query_id == query_id, Window.window_start == window_start).with_for_update()
    )
    if window is None:
        window = Window(query_id=query_id, window_start=window_start)
        session.add(window)
    elif window.status in CLOSED_WINDOW_STATES:
        _reopen(session, window)
    window.window_end, window.deadline, window.expected_tuples = window_end, deadline, expected_tuples
    window.backfill = backfill
    window.plan, window.predicted_finish = plan.dump(), predicted_finish
    if run_id is not None:
        window.run_id = run_id

    kept = {b.batch_index for b in window.batches if b.status not in NOT_STARTED or b.files is not None}
    window.batches = [b for b in window.batches if b.batch_index in kept]
    session.flush()  # delete the replaced batches before their indexes are reused
    window.batches += [
        Batch(
            batch_index=b["index"],
            first_tuple=b["first_tuple"],
            last_tuple=b["last_tuple"],
            release=b["release"],
            latest_start=b["latest_start"],
            planned_start=b["planned_start"],
            predicted_cost=b["predicted_cost"],
        )
        for b in batches
        if b["index"] not in kept
    ]
    session.flush()
    return window.id


def planned_upto(session: Session, window_id: int, index: int) -> int:
    """How far into the window a static batch takes units now: its plan's, or a replan's."""
    found = session.scalar(select(Batch.last_tuple).where(Batch.window_id == window_id, Batch.batch_index == index))
    if found is None:
        raise LedgerLookupError(f"window {window_id} batch", index)
    return found


def planned_release(session: Session, window_id: int, index: int) -> datetime:
    """When a static batch's last unit is due to land now: its plan's, or a replan's."""
    found = session.scalar(select(Batch.release).where(Batch.window_id == window_id, Batch.batch_index == index))
    if found is None:
        raise LedgerLookupError(f"window {window_id} batch", index)
    return found


def record_replan(
    session: Session,
    window_id: int,
    batches: Sequence[Mapping[str, Any]],
    predicted_finish: datetime,
    note: ReplanNote,
) -> None:
    """A static window's remaining batches, replanned (`airflow_iqp.runtime.replan`): each mapping holds
    the index of a batch not frozen yet and its new first_tuple, last_tuple, release,
    latest_start, planned_start and predicted_cost. `note` (when, after which batch, why, where
    the merge now starts) is appended to the plan's `replans` and moves its merge.
    """
    window = session.scalar(select(Window).where(Window.id == window_id).with_for_update())
    if window is None:
        raise LedgerLookupError("window", window_id)
    rows = {b.batch_index: b for b in window.batches}
    for new in batches:
        row = rows[new["index"]]
        if row.files is not None:
            raise ValueError(f"window {window_id} batch {new['index']} has frozen its files: it cannot be replanned")
        for key in ("first_tuple", "last_tuple", "release", "latest_start", "planned_start", "predicted_cost"):
            setattr(row, key, new[key])
    window.plan = PlanRecord.read(window.plan).replanned(note).dump()
    window.predicted_finish = predicted_finish
    session.flush()


def _reopen(session: Session, window: Window) -> None:
    """A closed window back to planned, without its batches (their file claims go with them)."""
    window.batches = []
    session.flush()
    window.status, window.deadline_met, window.actual_finish, window.result_location = (
        WindowStatus.PLANNED,
        None,
        None,
        None,
    )


def add_dynamic_batch(
    session: Session,
    window_id: int,
    slot: int,
    reason: BatchReason | None,
    files: Mapping[str, Sequence[DataFile]],
    first: int,
    last: int,
    predicted_cost: float,
    now: datetime,
) -> int:
    """Cut a dynamic-mode batch: the slot that holds the window's lease freezes the files it
    takes (stream -> files, as `freeze_files`; `AlreadyFrozen` if another batch has any);
    returns the batch index (the window's batches in the order they were cut). `reason` is why
    the batch fired, None where that is not known.
    """
    window = lookup.window(session, window_id)
    index = len(window.batches)
    batch = Batch(
        batch_index=index,
        first_tuple=first,
        last_tuple=last,
        release=now,
        latest_start=now,
        planned_start=now,
        predicted_cost=predicted_cost,
        slot=slot,
        reason=reason,
    )
    window.batches.append(batch)
    session.flush()
    freeze(session, batch, files)
    return index


def hand_out(session: Session, window_id: int, handed: Sequence[Mapping[str, Any]]) -> None:
    """Keep the batches or slots `plan` hands to `partial_aggregate` (by map index) in the
    window's plan record, where a task started in the triggerer finds its own (`handed`).
    """
    window = lookup.window(session, window_id)
    window.plan = PlanRecord.read(window.plan).model_copy(update={"handed": tuple(dict(d) for d in handed)}).dump()


def handed(session: Session, dag_id: str, run_id: str, map_index: int) -> dict[str, Any]:
    """The batch or slot the DAG run's `plan` handed to the `partial_aggregate` task at `map_index`."""
    plan = session.scalars(
        select(Window.plan)
        .join(Query, Query.id == Window.query_id)
        .where(Query.dag_id == dag_id, Window.run_id == run_id)
    ).one_or_none()
    found = () if plan is None else PlanRecord.read(plan).handed
    if not 0 <= map_index < len(found):
        raise LedgerLookupError("batch or slot handed out", f"{dag_id} / {run_id} / partial_aggregate {map_index}")
    return found[map_index]


def slot_batch(session: Session, window_id: int, slot: int) -> int | None:
    """The unfinished batch a dynamic slot cut before (its retry runs the same files again)."""
    return session.scalar(
        select(Batch.batch_index).where(
            Batch.window_id == window_id, Batch.slot == slot, Batch.status != BatchStatus.DONE
        )
    )


def price_batch(session: Session, window_id: int, index: int, predicted_cost: float) -> None:
    """A planned batch priced again as it is cut (`runtime.costs.cut_cost`)."""
    lookup.batch(session, window_id, index).predicted_cost = predicted_cost
    session.flush()


def start_batch(session: Session, window_id: int, index: int, started_at: datetime | None = None) -> int:
    """Mark the batch (and its window) running; returns the attempt number, counting this one."""
    batch = lookup.batch(session, window_id, index)
    batch.status, batch.actual_start, batch.attempts = BatchStatus.RUNNING, started_at or utcnow(), batch.attempts + 1
    if batch.window.status == WindowStatus.PLANNED:
        batch.window.status = WindowStatus.RUNNING
    session.flush()
    return batch.attempts


def finish_batch(
    session: Session,
    window_id: int,
    index: int,
    actual_start: datetime,
    actual_end: datetime,
    actual_tuples: int,
    actual_cost: float,
    output_location: str,
) -> None:
    """The batch's job succeeded: what it read, when it ran, what it cost and where it wrote."""
    batch = lookup.batch(session, window_id, index)
    batch.status, batch.actual_start, batch.actual_end = BatchStatus.DONE, actual_start, actual_end
    batch.actual_tuples, batch.actual_cost, batch.output_location = actual_tuples, actual_cost, output_location
    session.flush()


def fail_batch(session: Session, window_id: int, index: int, failed_at: datetime | None = None) -> None:
    """The batch's job failed; its frozen files stay, for the retry to run again."""
    batch = lookup.batch(session, window_id, index)
    batch.status, batch.actual_end = BatchStatus.FAILED, failed_at or utcnow()
    session.flush()


def skip_batch(session: Session, window_id: int, index: int) -> None:
    """A planned batch that no file of the window fell into (fewer files came than expected)."""
    lookup.batch(session, window_id, index).status = BatchStatus.SKIPPED
    session.flush()


def record_merge(
    session: Session,
    window_id: int,
    actual_finish: datetime,
    actual_tuples: int | None,
    result_location: str | None,
    status: WindowStatus = WindowStatus.MERGED,
) -> bool | None:
    """Close the window; returns whether it met its deadline (a failed merge never does), or None
    for a backfilled window: its deadline had passed before it was planned, so it has none to meet.
    """
    if status not in CLOSED_WINDOW_STATES:
        raise ValueError(f"a merge ends a window as merged or failed, not {status!r}")
    window = lookup.window(session, window_id)
    window.status, window.actual_finish = status, actual_finish
    window.actual_tuples, window.result_location = actual_tuples, result_location
    met = status == WindowStatus.MERGED and actual_finish <= window.deadline
    window.deadline_met = None if window.backfill else met
    session.flush()
    return window.deadline_met


def record_result(session: Session, window_id: int, uri: str, rows: int, finished_at: datetime) -> None:
    """A merged window's result was published at `uri`: it becomes the window's current result
    (`result_uri`, and `actual_tuples` = its input rows), and joins the window's result history
    with whether it came by the deadline, and whether it was incomplete and how many late files
    were known then. A re-merge (late files) or a backfill calls this again; earlier results
    stay in the history.

    The history is a table (`results`), not a JSON list on the window: two writers cannot lose
    each other's entry in a read-modify-write, and readers can query it.
    """
    window = lookup.window(session, window_id)
    if window.status != WindowStatus.MERGED:
        raise ValueError(f"window {window_id} is {window.status}: only a merged window has a result to publish")
    session.add(
        Result(
            window_id=window_id,
            uri=uri,
            rows=rows,
            finished_at=finished_at,
            deadline_met=None if window.backfill else finished_at <= window.deadline,
            incomplete=window.incomplete,
            late_files=window.late_files,
        )
    )
    window.result_uri, window.actual_tuples = uri, rows
    session.flush()


def record_forecast(session: Session, window_id: int, predicted_finish: datetime) -> None:
    """Keep an open window's predicted finish current (airflow_iqp.runtime.forecasts); a closed window
    keeps the last one it had.
    """
    session.execute(
        update(Window)
        .where(Window.id == window_id, Window.status.not_in(CLOSED_WINDOW_STATES))
        .values(predicted_finish=predicted_finish)
    )


def window_summary(session: Session, window_id: int) -> WindowRow:
    """A detached snapshot of a window and its batches, safe to use after the session closes."""
    return window_row(lookup.window(session, window_id))


def window_id(session: Session, dag_id: str, window_start: datetime) -> int | None:
    """The id of the DAG's window that starts at `window_start`, if it was planned."""
    return session.scalar(
        select(Window.id).join(Query).where(Query.dag_id == dag_id, Window.window_start == window_start)
    )
