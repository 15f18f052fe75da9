"""`partial_aggregate`: one mapped task per batch (static) or batch slot (dynamic), a deferrable
run of the partial job (spark-submit or Spark Connect) that runs only with a lease from the
dispatcher.

Static mode: the task waits in the triggerer until the window holds the batch's units (or its
input is final), then queues. Dynamic mode: the slot waits until a batch is eligible
(airflow_iqp.runtime.slots), queues, and cuts the batch when granted. Either way the exact files are
frozen in the ledger before the job is submitted — a file is frozen at most once per DAG — so a
retry processes the same files and replaces its own output, and no file is counted twice.
What differs between the two is a strategy chosen by the task's descriptor (`StaticBatchWork`,
`DynamicSlotWork`, on the abstract `BatchWork`): the same mapped task runs either, as a dynamic
query's past window runs static batches.

An unreadable file fails the batch with its name; with `on_corrupt="quarantine"` it is moved
aside, recorded, left out of the batch (the window's result is flagged incomplete) and the job
runs again on the rest.
"""

from __future__ import annotations

import functools
import time
from abc import ABC, abstractmethod
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from airflow.sdk.exceptions import AirflowSkipException
from airflow.triggers.base import StartTriggerArgs

from airflow_iqp.constants import BatchReason, BatchStatus, JobKind, OnCorrupt
from airflow_iqp.dynamic import window_remaining, work_left
from airflow_iqp.exceptions import CorruptInput
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.links.output import BatchOutputLink
from airflow_iqp.operators.dispatched import SHORT_WAIT, DispatchedSparkSubmitOperator, ResourceRequest
from airflow_iqp.operators.merge import merge_request
from airflow_iqp.operators.window import JOBS_DIR, partial_spec, run_window, spark_env, window_dir
from airflow_iqp.runtime.costs import cut_cost, observe, planning_model
from airflow_iqp.runtime.descriptors import DynamicSlot, StaticBatch, descriptor
from airflow_iqp.runtime.inputs import files_by_stream, untaken
from airflow_iqp.runtime.replan import replan_window
from airflow_iqp.runtime.sizing import file_costs, merge_costs
from airflow_iqp.runtime.slots import SlotAction, decide
from airflow_iqp.spark.connect import window_session
from airflow_iqp.spark.jobs.inputs import CorruptFile
from airflow_iqp.spark.jobs.inputs import CorruptInput as UnreadableInput
from airflow_iqp.spark.jobs.output import read_marker
from airflow_iqp.streams.quarantine import quarantine
from airflow_iqp.triggers.batch_ready import BatchReadyTrigger
from airflow_iqp.triggers.partial_start import PartialStartTrigger
from airflow_iqp.triggers.window_input import WindowInputTrigger

if TYPE_CHECKING:
    from collections.abc import Callable

    from airflow.sdk import Context
    from sqlalchemy.orm import Session

    from airflow_iqp.constants import ExecutionPath
    from airflow_iqp.declaration import CostModel, Declaration
    from airflow_iqp.ledger.rows import BatchRow, WindowRow
    from airflow_iqp.streams.assign import InputUnit, WindowSelection

Descriptor = TypeVar("Descriptor", StaticBatch, DynamicSlot)


class PartialAggregateOperator(DispatchedSparkSubmitOperator):
    """One planned batch (static) or one batch slot (dynamic) of a window; see the module doc.
    `batch` is the descriptor the `plan` task handed out, as plain values (it is mapped over).
    """

    operator_extra_links = (BatchOutputLink(),)
    # Each task starts waiting in the triggerer, with no task process (see
    # airflow_iqp.triggers.partial_start); `airflow dags test` runs `execute` instead.
    start_from_trigger = True
    start_trigger_args = StartTriggerArgs(
        trigger_cls=f"{PartialStartTrigger.__module__}.{PartialStartTrigger.__qualname__}",
        trigger_kwargs={"poll_interval": 1.0},
        next_method="on_started",
    )

    def __init__(self, *, batch: dict[str, Any], declaration: Declaration, work_dir: str, **kwargs: Any) -> None:
        super().__init__(application=str(JOBS_DIR / "partial_job.py"), env_vars=spark_env(), **kwargs)
        self.batch = batch
        self.declaration = declaration
        self.work_dir = work_dir

    @property
    def work(self) -> StaticBatchWork | DynamicSlotWork:
        """What this task does its own way: a planned batch's or a slot's."""
        found = descriptor(self.batch)
        return StaticBatchWork(self, found) if isinstance(found, StaticBatch) else DynamicSlotWork(self, found)

    @property
    def window_id(self) -> int:
        """The task's window in the ledger."""
        return self.work.descriptor.window_id

    def already_done(self, context: Context) -> str | None:
        """See the base class: this task's batch, done."""
        self.set_label(context)
        if (output := self.done_output()) is not None:
            self.log.info("this batch was done by an earlier attempt: %s", output)
            context["ti"].xcom_push(key="output_location", value=output)
        return output

    def done_output(self) -> str | None:
        """The output of this task's batch if the ledger holds it done."""
        work = self.work
        with session_scope() as session:
            batches = store.window_summary(session, self.window_id).batches
        mine = [b for b in batches if work.is_mine(b) and b.status == BatchStatus.DONE]
        return mine[0].output_location if mine else None

    def connect_session(self) -> tuple[str, bool]:
        """See the base class: the window's session, left open for its next batch and its merge."""
        return window_session(self.dag_id, self.window_id), False

    def set_label(self, context: Context, text: str | None = None) -> None:
        """The map index label; every entry point sets one, or rendering it fails the task."""
        context["batch_label"] = text or self.work.descriptor.label  # type: ignore[typeddict-unknown-key]  # our key, for map_index_template

    def resume_granted(self, context: Context, event: dict[str, Any], **kwargs: Any) -> Any:
        """The base class's resume, with the map index label set first."""
        self.set_label(context)
        return super().resume_granted(context, event, **kwargs)

    # -- waiting for input -------------------------------------------------------------------

    def execute(self, context: Context) -> Any:
        """Wait until the batch may queue (`BatchWork.wait`), then queue. A batch the ledger has
        done already is not run again (see `already_done`).
        """
        return self.start(context, patience=0.0)

    def on_started(self, context: Context, event: dict[str, Any] | None = None) -> Any:
        """Back from `PartialStartTrigger`: the batch may queue now, or is due within
        `runtime.ahead.START_AHEAD`, so wait for it up to SHORT_WAIT in this process.
        """
        return self.start(context, patience=SHORT_WAIT)

    def start(self, context: Context, patience: float) -> Any:
        """`execute`, waiting up to `patience` seconds in this process before deferring."""
        self.set_label(context)
        if (output := self.already_done(context)) is not None:
            return output
        return self.work.wait(context, patience)

    def on_landed(self, context: Context, event: dict[str, Any] | None = None) -> Any:
        """Static: the batch's units are there (or the input is final); queue for the resource."""
        self.set_label(context)
        return self.queue_for_resource(context, self.resource_request(context))

    def on_ready(self, context: Context, event: dict[str, Any] | None = None) -> Any:
        """Dynamic: back from `BatchReadyTrigger`; see `DynamicSlotWork.wait`."""
        return self.work.wait(context)

    def registration_refused(self, context: Context) -> Any:
        """Another task of the window queued first: wait again (`BatchWork.wait_again`)."""
        return self.work.wait_again(context)

    # -- what the dispatcher ranks ------------------------------------------------------------

    def resource_request(self, context: Context) -> ResourceRequest:
        """Ranked by the window's deadline and the work the window still needs, merge included."""
        work = self.work
        listed = work.listed()  # before the ledger is read: a listing may take a while
        with session_scope() as session:
            window = store.window_summary(session, self.window_id)
            model = planning_model(session, self.declaration, self.execution_path())
            remaining, slot, reason = work.remaining(session, window, model, listed)
        return ResourceRequest(
            window_id=window.id,
            query=self.declaration.dag_id,
            kind=JobKind.PARTIAL,
            slot=slot,
            reason=reason,
            deadline=window.deadline,
            remaining_cost=remaining,
        )

    # -- with the lease -------------------------------------------------------------------------

    def run_granted(self, context: Context) -> str:
        """Freeze (or cut) the batch's files, run the partial job, record what it did."""
        self.set_label(context)
        work, window_id = self.work, self.window_id
        selection = work.descriptor.window_input.look_own()
        with session_scope() as session:
            index = work.take(session, selection)
            batch = next(b for b in store.window_summary(session, window_id).batches if b.index == index)
            if batch.attempts:  # a retry reads its files as they are now; nothing counted them yet
                listed = [f for u in (*selection.units, *selection.earlier, *selection.later) for f in u.files]
                if changed := store.refresh_frozen(session, window_id, index, listed):
                    self.log.warning(
                        "batch %d: %d file(s) were replaced since the last attempt: %s", index, len(changed), changed
                    )
            attempt = store.start_batch(session, window_id, index)
        files = batch.files or {}
        if (label := work.taken_label(batch)) is not None:
            self.set_label(context, label)
        directory = window_dir(Path(self.work_dir), self.declaration.dag_id, run_window(context)[0])
        directory.mkdir(parents=True, exist_ok=True)
        output = self.leased_output(directory / f"batch-{index:04d}")
        self.log.info("batch %d attempt %d: %s", index, attempt, {s: len(f) for s, f in files.items()})
        path = self.execution_path()
        run = functools.partial(self._run_job, context, index, files, selection, output)
        ended = recorded_partial(self.declaration, path, window_id, index, output, run)
        work.recorded(index, ended)
        context["ti"].xcom_push(key="output_location", value=str(output))
        return str(output)

    def _run_job(
        self, context: Context, index: int, files: dict[str, list[str]], selection: WindowSelection, output: Path
    ) -> float:
        """Run the partial job over `files`, its seconds (`run_spark_job`); quarantine unreadable
        files when declared to (the seconds are then the run over the rest).
        """
        decl = self.declaration
        samples = self.work.descriptor.window_input.schema_samples(selection)
        while True:
            spec = partial_spec(decl, files, output, schema_files=samples)
            try:
                return self.run_spark_job(context, spec, output.with_suffix(".spec.json"))
            except UnreadableInput as err:
                names = ", ".join(f"{c.file} ({c.error})" for c in err.files)
                if decl.on_corrupt is not OnCorrupt.QUARANTINE:
                    raise CorruptInput(f"batch {index}: unreadable input file(s): {names}") from None
                files = self._quarantine(index, files, err.files)
                self.log.warning("batch %d: quarantined %s; running again on the rest", index, names)

    def _quarantine(self, index: int, files: dict[str, list[str]], corrupt: list[CorruptFile]) -> dict[str, list[str]]:
        """Move each corrupt file aside and out of the batch; returns the batch's files left."""
        window_id = self.window_id
        for entry in corrupt:
            stream = entry.stream
            uri = next((u for u in files.get(stream, []) if u.removeprefix("file://") == entry.file), entry.file)
            moved = quarantine(self.declaration.streams[stream], uri)
            with session_scope() as session:
                store.quarantine_file(session, window_id, index, stream, uri, note=f"{entry.error}; moved to {moved}")
        with session_scope() as session:
            batch = next(b for b in store.window_summary(session, window_id).batches if b.index == index)
        return batch.files or {}

    def follow_up(self, session: Session, context: Context) -> ResourceRequest | None:
        """After the window's last batch, its merge queues at once (see the base class)."""
        window = store.window_summary(session, self.window_id)
        if any(b.status not in (BatchStatus.DONE, BatchStatus.SKIPPED) for b in window.batches):
            return None
        if not self.work.window_done(session):
            return None
        return merge_request(self.declaration, window, planning_model(session, self.declaration, self.execution_path()))


class BatchWork(ABC, Generic[Descriptor]):
    """What a planned batch and a dynamic slot do their own way; the operator does the rest.
    `descriptor` is what the `plan` task handed this task.
    """

    def __init__(self, task: PartialAggregateOperator, descriptor: Descriptor) -> None:
        self.task = task
        self.descriptor: Descriptor = descriptor

    @abstractmethod
    def is_mine(self, batch: BatchRow) -> bool:
        """Whether a batch of the window in the ledger is this task's."""

    @abstractmethod
    def wait(self, context: Context, patience: float = 0.0) -> Any:
        """Wait until the batch may queue, up to `patience` seconds in this process and then
        deferred, and queue for the resource.
        """

    @abstractmethod
    def wait_again(self, context: Context) -> Any:
        """Another task of the window queued first: wait for the resource again."""

    @abstractmethod
    def remaining(
        self, session: Session, window: WindowRow, model: CostModel | None, listed: WindowSelection | None
    ) -> tuple[float, int, BatchReason]:
        """The work the window still needs (merge included), the request's slot and why it runs."""

    def listed(self) -> WindowSelection | None:
        """The window's input as listed now, where `remaining` needs it."""
        return None

    @abstractmethod
    def take(self, session: Session, selection: WindowSelection) -> int:
        """The batch's files, frozen once (a retry keeps them); returns the batch index."""

    @abstractmethod
    def window_done(self, session: Session) -> bool:
        """Whether, every batch of the window done, no unit is left for one more: the merge may queue."""

    def taken_label(self, batch: BatchRow) -> str | None:
        """A new map index label once the batch is known, or None to keep the descriptor's."""
        return None

    def recorded(self, index: int, ended: datetime) -> None:
        """After the batch is recorded done, in a transaction of its own."""


class StaticBatchWork(BatchWork[StaticBatch]):
    """A batch the plan cut by count: it waits for its units in `WindowInputTrigger`."""

    def is_mine(self, batch: BatchRow) -> bool:
        """See the base class: the same index."""
        return batch.index == self.descriptor.index

    def wait(self, context: Context, patience: float = 0.0) -> Any:
        """Wait for the batch's units, or for the input to be final: up to `patience` here (a
        task started ahead of its batch, `runtime.ahead`), then in the triggerer.
        """
        trigger = WindowInputTrigger.for_batch(self.descriptor)
        waited = time.monotonic() + patience
        while trigger.ready() is None:
            if time.monotonic() >= waited:
                self.task.defer(trigger=trigger, method_name="on_landed")
            time.sleep(1.0)
        return self.task.on_landed(context)

    def wait_again(self, context: Context) -> Any:
        """Wait in the trigger again, which fires at once, and queue again."""
        self.task.defer(trigger=WindowInputTrigger.for_batch(self.descriptor), method_name="on_landed")

    def remaining(
        self, session: Session, window: WindowRow, model: CostModel | None, listed: WindowSelection | None
    ) -> tuple[float, int, BatchReason]:
        """See the base class: the plan's costs of the batches not done, and its merge."""
        return (
            window_remaining(window.status, window.batches, window.plan.merge_cost),
            self.descriptor.index,
            BatchReason.PLANNED,
        )

    def take(self, session: Session, selection: WindowSelection) -> int:
        """This batch's files, frozen once (a retry keeps them).

        A batch takes the units up to its planned end (as the ledger holds it: a replan may have
        moved it) that no batch has taken, leaving those up to the end of an earlier batch that
        has not frozen its files yet: when a past window's batches all become ready at once (a
        backfill, `airflow dags test`), the order they run in does not change the plan's batch
        sizes. Its cost is priced again at the cut, by the model then (`runtime.costs.cut_cost`),
        as a dynamic batch's is.
        """
        window_id, index = self.descriptor.window_id, self.descriptor.index
        summary = store.window_summary(session, window_id)
        current = next(b for b in summary.batches if b.index == index)
        if current.files is not None:
            return index
        upto = None if self.descriptor.upto is None else current.last_tuple
        taken = store.frozen_files(session, window_id)
        pending = [b for b in summary.batches if b.index < index and b.files is None]
        reserved = max((b.last_tuple for b in pending if b.status != BatchStatus.SKIPPED), default=0)
        units = untaken(selection.units[reserved:upto], taken)
        if not units and not (upto is None and selection.final and not selection.units):
            store.skip_batch(session, window_id, index)
            session.commit()  # the skip must outlive the exception below, which rolls the caller's transaction back
            raise AirflowSkipException(
                f"batch {index}: none of the window's {len(selection.units)} unit(s) is left for it;"
                " other batches took them or will"
            )
        store.freeze_files(session, window_id, index, files_by_stream(units))
        task = self.task
        if (price := cut_cost(session, task.declaration, task.execution_path(), summary.plan, len(units))) is not None:
            store.price_batch(session, window_id, index, price)
        return index

    def window_done(self, session: Session) -> bool:
        """See the base class: the last batch, which took the rest once the input was final."""
        return self.descriptor.upto is None and self.descriptor.window_input.look_own().final

    def recorded(self, index: int, ended: datetime) -> None:
        """Replan the window's remaining batches if this one ended off its plan
        (`runtime.replan`), in a transaction of its own, still under the lease: the batch is
        recorded done whatever the replan does, and a plan that cannot be remade is kept.
        """
        task, window_id = self.task, self.descriptor.window_id
        try:
            with session_scope() as session:
                model = planning_model(session, task.declaration, task.execution_path())
                note = None if model is None else replan_window(session, window_id, index, model, ended)
        except ValueError as err:  # the planner refusing its input: the plan stands
            task.log.warning("window %d not replanned after batch %d: %s", window_id, index, err)
            return
        if note is not None:
            task.log.info(
                "window replanned: %s; %d batch(es) left with units, %s",
                note.why,
                note.batches,
                "deadline held" if note.feasible else note.reason,
            )


class DynamicSlotWork(BatchWork[DynamicSlot]):
    """A slot: it waits until `slots.decide` says a batch is eligible, and cuts it when granted."""

    def is_mine(self, batch: BatchRow) -> bool:
        """See the base class: the batch this slot cut."""
        return batch.slot == self.descriptor.slot

    def wait(self, context: Context, patience: float = 0.0) -> Any:
        """Queue when a batch is eligible, skip when the window has nothing left; a slot waits
        SHORT_WAIT in this process before deferring, whatever `patience` says.
        """
        spec, task = self.descriptor, self.task
        task.set_label(context)
        waited = time.monotonic() + SHORT_WAIT
        while True:  # a short wait here, not in the triggerer (see SHORT_WAIT)
            selection = spec.window_input.look_own()
            with session_scope() as session:
                decision = decide(session, spec, selection, time.time())
            if decision.action is not SlotAction.WAIT or time.monotonic() > waited:
                break
            time.sleep(1.0)
        if decision.action is SlotAction.SKIP:
            raise AirflowSkipException(
                f"slot {spec.slot}: every unit of the window is taken by {decision.batches} batches"
            )
        if decision.action is SlotAction.WAIT:
            task.defer(trigger=BatchReadyTrigger(spec.to_dict()), method_name="on_ready")
        return task.queue_for_resource(context, task.resource_request(context))

    def wait_again(self, context: Context) -> Any:
        """Wait for the batch after the one queued."""
        return self.wait(context)

    def listed(self) -> WindowSelection:
        """See the base class: what has landed decides what the slot would take."""
        return self.descriptor.window_input.look_own()

    def remaining(
        self, session: Session, window: WindowRow, model: CostModel | None, listed: WindowSelection | None
    ) -> tuple[float, int, BatchReason]:
        """See the base class: with a model, the files not taken yet in MinBatch batches and the
        merge of them all; without one, the plan's merge and the costs of the batches not done.
        """
        spec = self.descriptor
        selection = listed if listed is not None else self.listed()
        decision = decide(session, spec, selection, time.time())
        rows_per_file = window.plan.rows_per_file
        if model is None or rows_per_file is None:
            return (
                window_remaining(window.status, window.batches, window.plan.merge_cost),
                spec.slot,
                BatchReason.PLANNED,
            )
        cost = file_costs(model, rows_per_file)
        always, extra_merge = merge_costs(model)
        pending = max(spec.expected_files, len(selection.units)) - decision.processed
        remaining = always + work_left(pending, spec.min_batch, decision.batches, cost, extra_merge)
        return remaining, spec.slot, decision.reason or BatchReason.RETRY

    def take(self, session: Session, selection: WindowSelection) -> int:
        """This slot's unfinished batch (a retry), else a new one of the units waiting now."""
        spec, task = self.descriptor, self.task
        if (index := store.slot_batch(session, spec.window_id, spec.slot)) is not None:
            return index
        decision = decide(session, spec, selection, time.time())
        plan = store.window_summary(session, spec.window_id).plan
        predicted = cut_cost(session, task.declaration, task.execution_path(), plan, len(decision.take))
        first = _position(selection.units, decision.take[0]) if decision.take else 0
        return store.add_dynamic_batch(
            session,
            spec.window_id,
            spec.slot,
            decision.reason,
            files_by_stream(decision.take),
            first=first,
            last=first + len(decision.take) - 1,
            predicted_cost=0.0 if predicted is None else predicted,
            now=datetime.now(UTC),
        )

    def window_done(self, session: Session) -> bool:
        """See the base class: every slot left would skip (units may still land, or be cut)."""
        spec = self.descriptor
        return decide(session, spec, spec.window_input.look_own(), time.time()).action is SlotAction.SKIP

    def taken_label(self, batch: BatchRow) -> str | None:
        """The batch the slot cut: which, its units and why it fired."""
        reason = f" · {batch.reason}" if batch.reason else ""
        return f"batch {batch.index} · units {batch.first_tuple}..{batch.last_tuple}{reason}"


def _position(units: tuple[InputUnit, ...], unit: InputUnit) -> int:
    """A unit's 1-based position in the window's arrival order."""
    return units.index(unit) + 1


def recorded_partial(
    declaration: Declaration,
    path: ExecutionPath,
    window_id: int,
    index: int,
    output: Path,
    run: Callable[[], float],
) -> datetime:
    """Run a batch's partial job (`run`, under the task's lease; it returns the job's seconds)
    and record it: failed if it raises, else done with its input rows and cost, observed for the
    cost model. Returns its end.
    """
    started = datetime.now(UTC)
    try:
        seconds = run()
    except BaseException:
        with session_scope() as session:
            store.fail_batch(session, window_id, index)
        raise
    ended = datetime.now(UTC)
    rows = sum(read_marker(output)["input_rows"].values())
    with session_scope() as session:
        store.finish_batch(session, window_id, index, started, ended, rows, seconds, str(output))
        observe(session, declaration, path, JobKind.PARTIAL, rows, seconds)
    return ended
