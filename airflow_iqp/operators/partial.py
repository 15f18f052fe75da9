"""`partial_aggregate`: one mapped task per batch (static) or batch slot (dynamic), a deferrable
spark-submit of the partial job that runs only with a lease from the dispatcher.

Static mode: the task waits in the triggerer until its planned files have landed, then queues.
Dynamic mode: the slot waits until a batch is eligible (airflow_iqp.slots), queues, and cuts
the batch when granted. Either way the exact file list is frozen in the ledger before the
job is submitted, so a retry processes the same files and replaces its own output.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowSkipException

from airflow_iqp.constants import BatchReason, BatchStatus, ExecutionPath, JobKind, Mode
from airflow_iqp.declaration import Declaration, file_costs, merge_costs
from airflow_iqp.dynamic import work_left
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.links.output import BatchOutputLink
from airflow_iqp.operators.dispatched import DispatchedSparkSubmitOperator, ResourceRequest
from airflow_iqp.operators.merge import merge_request
from airflow_iqp.operators.window import JOBS_DIR, WindowFiles, describe, run_window, spark_env, window_dir
from airflow_iqp.slots import SlotAction, SlotSpec, decide
from airflow_iqp.spark.jobs.output import read_marker
from airflow_iqp.triggers.batch_ready import BatchReadyTrigger
from airflow_iqp.triggers.files import FilesLandedTrigger

if TYPE_CHECKING:
    from airflow.sdk import Context
    from sqlalchemy.orm import Session


class PartialAggregateOperator(DispatchedSparkSubmitOperator):
    """One planned batch (static) or one batch slot (dynamic) of a window; see the module doc."""

    operator_extra_links = (BatchOutputLink(),)

    def __init__(self, *, batch: dict[str, Any], declaration: Declaration, work_dir: str, **kwargs: Any) -> None:
        super().__init__(application=str(JOBS_DIR / "partial_job.py"), env_vars=spark_env(), **kwargs)
        self.batch = batch
        self.declaration = declaration
        self.work_dir = work_dir

    @property
    def is_dynamic(self) -> bool:
        """Whether this task is a dynamic-mode slot rather than a planned batch."""
        return self.declaration.mode is Mode.DYNAMIC

    def _window(self, context: Context) -> WindowFiles:
        return WindowFiles(self.declaration, *run_window(context))

    def _label(self, context: Context, text: str | None = None) -> None:
        """The map index label; every entry point sets one, or rendering it fails the task."""
        if text is None:
            text = f"slot {self.batch['slot']}" if self.is_dynamic else describe(self.batch)
        context["batch_label"] = text  # type: ignore[typeddict-unknown-key]  # our key, for map_index_template

    def resume_granted(self, context: Context, event: dict[str, Any], **kwargs: Any) -> Any:
        """The base class's resume, with the map index label set first."""
        self._label(context)
        return super().resume_granted(context, event, **kwargs)

    # -- waiting for input -------------------------------------------------------------------

    def execute(self, context: Context) -> Any:
        """Static: wait for the batch's files, then queue. Dynamic: see `on_ready`."""
        self._label(context)
        if self.is_dynamic:
            return self.on_ready(context)
        files = self._window(context).batch(self.batch["first"], self.batch["last"])
        paths = [p for stream_files in files.values() for p in stream_files]
        if not paths:
            with session_scope() as session:
                store.skip_batch(session, self.batch["window_id"], self.batch["index"])
            raise AirflowSkipException(f"batch {self.batch['index']}: no files of the window fall in it")
        trigger = FilesLandedTrigger(paths)
        if trigger.missing():
            self.defer(trigger=trigger, method_name="on_landed")
        return self.on_landed(context)

    def on_landed(self, context: Context, event: dict[str, Any] | None = None) -> Any:
        """Static: every file of the batch has landed; queue for the resource."""
        self._label(context)
        return self.queue_for_resource(context, self.resource_request(context))

    def on_ready(self, context: Context, event: dict[str, Any] | None = None) -> Any:
        """Dynamic: queue when a batch is eligible, skip when the window has nothing left."""
        spec = SlotSpec(**self.batch)
        self._label(context)
        with session_scope() as session:
            decision = decide(session, spec, time.time())
        if decision.action is SlotAction.SKIP:
            raise AirflowSkipException(
                f"slot {spec.slot}: every file of the window is taken by {decision.batches} batches"
            )
        if decision.action is SlotAction.WAIT:
            self.defer(trigger=BatchReadyTrigger(spec.as_dict()), method_name="on_ready")
        return self.queue_for_resource(context, self.resource_request(context))

    def registration_refused(self, context: Context) -> Any:
        """Another slot of the window queued first: wait for the batch after it."""
        return self.on_ready(context)

    # -- what the dispatcher ranks ------------------------------------------------------------

    def resource_request(self, context: Context) -> ResourceRequest:
        """Ranked by the window's deadline and the work the window still needs, merge included."""
        decl = self.declaration
        with session_scope() as session:
            window = store.window_summary(session, self.batch["window_id"])
            if self.is_dynamic:
                spec = SlotSpec(**self.batch)
                decision = decide(session, spec, time.time())
        plan = window.plan
        if self.is_dynamic:
            cost, _ = file_costs(decl.cost_model, plan["rows_per_file"])
            always, extra_merge = merge_costs(decl.cost_model)
            pending = max(spec.expected_files, len(spec.indexes)) - decision.processed
            remaining = always + work_left(pending, spec.min_batch, decision.batches, cost, extra_merge)
            slot, reason = spec.slot, decision.reason or BatchReason.RETRY
        else:
            remaining = plan["merge_cost"] + sum(
                b.predicted_cost for b in window.batches if b.status != BatchStatus.DONE
            )
            slot, reason = self.batch["index"], BatchReason.PLANNED
        return ResourceRequest(
            window_id=window.id,
            query=decl.name,
            kind=JobKind.PARTIAL,
            slot=slot,
            reason=reason,
            deadline=window.deadline,
            remaining_cost=remaining,
        )

    # -- with the lease -------------------------------------------------------------------------

    def run_granted(self, context: Context) -> str:
        """Freeze (or cut) the batch's files, run the partial job, record what it did."""
        self._label(context)
        window = self._window(context)
        window_id = self.batch["window_id"]
        with session_scope() as session:
            if self.is_dynamic:
                index = self._cut(session, SlotSpec(**self.batch))
            else:
                index = self.batch["index"]
                store.freeze_batch_files(
                    session, window_id, index, window.batch(self.batch["first"], self.batch["last"])
                )
            batch = next(b for b in store.window_summary(session, window_id).batches if b.index == index)
            attempt = store.start_batch(session, window_id, index)
        files = batch.files or {}
        if self.is_dynamic:
            reason = f" · {batch.reason}" if batch.reason else ""
            self._label(context, f"batch {index} · files {batch.first_tuple}..{batch.last_tuple}{reason}")
        directory = window_dir(Path(self.work_dir), self.declaration, run_window(context)[0])
        directory.mkdir(parents=True, exist_ok=True)
        batch_file = directory / f"batch-{index:04d}.json"
        batch_file.write_text(json.dumps(files))
        output = directory / f"batch-{index:04d}"
        self.application_args = [
            "--query",
            str(self.declaration.query.path),
            "--batch",
            str(batch_file),
            "--static",
            str(window.static_dir),
            "--manifest",
            str(window.manifest_path),
            "--output",
            str(output),
        ]
        self._hook = None  # the hook is built from application_args
        self.log.info("batch %d attempt %d: %s", index, attempt, {s: len(f) for s, f in files.items()})
        started = datetime.now(UTC)
        try:
            super().execute(context)
        except BaseException:
            with session_scope() as session:
                store.fail_batch(session, window_id, index)
            raise
        ended = datetime.now(UTC)
        rows = sum(read_marker(output)["input_rows"].values())
        seconds = (ended - started).total_seconds()
        with session_scope() as session:
            store.finish_batch(session, window_id, index, started, ended, rows, seconds, str(output))
            store.record_cost_observation(
                session, self.declaration.name, ExecutionPath.SPARK_SUBMIT, JobKind.PARTIAL, rows, seconds
            )
        context["ti"].xcom_push(key="output_location", value=str(output))
        return str(output)

    def follow_up(self, session: Session, context: Context) -> ResourceRequest | None:
        """After the window's last batch, its merge queues at once (see the base class)."""
        window = store.window_summary(session, self.batch["window_id"])
        if any(b.status not in (BatchStatus.DONE, BatchStatus.SKIPPED) for b in window.batches):
            return None
        if self.is_dynamic and decide(session, SlotSpec(**self.batch), time.time()).action is not SlotAction.SKIP:
            return None  # files are still to land or to be cut
        return merge_request(self.declaration, window)

    def _cut(self, session: Session, spec: SlotSpec) -> int:
        """Dynamic: this slot's unfinished batch (a retry), else a new one of the files waiting now."""
        if (index := store.slot_batch(session, spec.window_id, spec.slot)) is not None:
            return index
        decision = decide(session, spec, time.time())
        if not decision.take:
            raise RuntimeError(f"slot {spec.slot} was granted with no file to take ({decision})")
        plan = store.window_summary(session, spec.window_id).plan
        cost, _ = file_costs(self.declaration.cost_model, plan["rows_per_file"])
        positions = sorted(decision.take)
        return store.add_dynamic_batch(
            session,
            spec.window_id,
            spec.slot,
            decision.reason,
            spec.paths(positions),
            first=spec.indexes.index(positions[0]) + 1,
            last=spec.indexes.index(positions[-1]) + 1,
            predicted_cost=cost.cost(len(positions)),
            now=datetime.now(UTC),
        )
