"""`late_files`: after a window's merge, the files that came for windows that had already merged.

Each run lists its streams once more when its own merge is done, back as far as their
`history=` lets files land (`InputSpec.recent_units`; without one, every window). A unit of input
(a file, or a file set of several streams) that belongs to a window whose merge has started, and
that no batch froze, is late: it is recorded on that window in the ledger (once, however often it is
seen) and the window reports it. With `on_late="remerge"`, the late units become one more batch
of their window and the window is merged again, replacing its published result atomically (the
ledger keeps the earlier result in its history). A unit of a window that never ran (skipped by
`catchup=False`) is recorded with no window, so a backfill can pick it up. A listed file whose
name was frozen before with other contents (size, time, ETag) is refused and recorded as
rewritten: its first version is the one that counted.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowSkipException
from airflow.triggers.base import StartTriggerArgs

from airflow_iqp.constants import BatchReason, BatchStatus, JobKind, OnLate
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.operators.dispatched import DispatchedSparkSubmitOperator, ResourceRequest
from airflow_iqp.operators.partial import recorded_partial
from airflow_iqp.operators.window import JOBS_DIR, merge_spec, partial_spec, run_window, spark_env, window_dir
from airflow_iqp.results.publish import publish
from airflow_iqp.runtime import late
from airflow_iqp.runtime.inputs import InputSpec, files_by_stream
from airflow_iqp.spark.jobs.output import read_marker
from airflow_iqp.triggers.late_start import LateFilesStartTrigger

if TYPE_CHECKING:
    from airflow.sdk import Context
    from sqlalchemy.orm import Session

    from airflow_iqp.declaration import Declaration
    from airflow_iqp.streams.assign import InputUnit
    from airflow_iqp.streams.files import DataFile

LATE_SLOT = -2  # the late re-merge's slot in dispatcher requests


class LateFilesOperator(DispatchedSparkSubmitOperator):
    """Records late and rewritten files; re-merges windows with late files when declared to."""

    # Each task starts in the triggerer and takes a task process only when there is something to
    # record (see airflow_iqp.triggers.late_start); `airflow dags test` runs `execute` instead.
    start_from_trigger = True

    def __init__(self, *, declaration: Declaration, work_dir: str, **kwargs: Any) -> None:
        super().__init__(application=str(JOBS_DIR / "partial_job.py"), env_vars=spark_env(), **kwargs)
        self.declaration = declaration
        self.work_dir = work_dir
        self.start_trigger_args = StartTriggerArgs(
            trigger_cls=f"{LateFilesStartTrigger.__module__}.{LateFilesStartTrigger.__qualname__}",
            trigger_kwargs={"remerge": declaration.on_late is OnLate.REMERGE, "poll_interval": 1.0},
            next_method="on_started",
        )

    def already_done(self, context: Context) -> str | None:
        """Never: a retry lists the streams again and takes the late units no batch froze."""
        return None

    def execute(self, context: Context) -> Any:
        """Find late and rewritten files; queue the re-merges, if any are due."""
        decl = self.declaration
        start, _ = run_window(context)
        listed = InputSpec.of(decl.streams, start, decl.window).recent_units()
        with session_scope() as session:
            merged = self.record(session, listed)
        if not merged:
            raise AirflowSkipException("no late file for any merged window")
        counts = ", ".join(f"{ws:%Y-%m-%d %H:%M:%S}: {len(units)} unit(s)" for ws, units in merged.items())
        self.log.warning("late files of merged windows (%s)", counts)
        if decl.on_late is not OnLate.REMERGE:
            raise AirflowSkipException(f"late files recorded on their windows ({counts}); on_late='record'")
        return self.queue_for_resource(context, self.resource_request(context))

    def on_started(self, context: Context, event: dict[str, Any] | None = None) -> Any:
        """Back from `LateFilesStartTrigger`, which saw something to record: as `execute`."""
        return self.execute(context)

    def record(self, session: Session, units: list[InputUnit]) -> dict[datetime, list[InputUnit]]:
        """Record late and rewritten files; returns the late units of merged windows by window start."""
        dag_id = self.declaration.dag_id
        found = late.look(session, dag_id, units)
        for event in found.events:
            store.record_file_event(session, dag_id, event.window_id, event.file, event.status, event.note)
        return found.merged

    def resource_request(self, context: Context) -> ResourceRequest:
        """Ranked as part of this run: its window's deadline (the late windows' own have passed)."""
        with session_scope() as session:
            window = store.window_summary(session, self._window_id(session, context))
        return ResourceRequest(
            window_id=window.id,
            query=self.declaration.dag_id,
            kind=JobKind.MERGE,
            slot=LATE_SLOT,
            reason=BatchReason.LATE,
            deadline=window.deadline,
            remaining_cost=0.0,
        )

    def _window_id(self, session: Session, context: Context) -> int:
        start, _ = run_window(context)
        found = store.window_id(session, self.declaration.dag_id, start)
        if found is None:
            raise RuntimeError(f"{self.declaration.dag_id}: the window starting {start} is not in the ledger")
        return found

    def run_granted(self, context: Context) -> list[str]:
        """For each merged window with late units: one more batch of them, then the merge again."""
        decl = self.declaration
        start, _ = run_window(context)
        listed = InputSpec.of(decl.streams, start, decl.window).recent_units()
        with session_scope() as session:
            merged = self.record(session, listed)
        published = []
        for window_start, units in sorted(merged.items()):
            published.append(self.remerge(context, window_start, files_by_stream(units)))
        return published

    def remerge(self, context: Context, window_start: datetime, files: dict[str, list[DataFile]]) -> str:
        """Process one window's late units and merge the window again; returns where its result went."""
        decl = self.declaration
        now = datetime.now(UTC)
        with session_scope() as session:
            window_id = store.window_id(session, decl.dag_id, window_start)
            if window_id is None:
                raise RuntimeError(f"{decl.dag_id}: window {window_start} vanished from the ledger")
            index = store.add_dynamic_batch(
                session, window_id, LATE_SLOT, BatchReason.LATE, files, first=0, last=0, predicted_cost=0.0, now=now
            )
            batch = next(b for b in store.window_summary(session, window_id).batches if b.index == index)
            store.start_batch(session, window_id, index)
        directory = window_dir(Path(self.work_dir), decl.dag_id, window_start)
        directory.mkdir(parents=True, exist_ok=True)
        output = self.leased_output(directory / f"batch-{index:04d}")
        spec = partial_spec(decl, batch.files or {}, output, {})
        run = functools.partial(self.run_spark_job, context, spec, output.with_suffix(".spec.json"))
        ended = recorded_partial(decl, self.execution_path(), window_id, index, output, run)
        with session_scope() as session:
            summary = store.window_summary(session, window_id)
        partials = [b.output_location for b in summary.batches if b.status == BatchStatus.DONE and b.output_location]
        committed = self.leased_output(directory / f"result-{ended:%Y%m%dT%H%M%S}")
        self.run_spark_job(context, merge_spec(decl, partials, committed), committed.with_suffix(".spec.json"))
        marker = read_marker(committed)
        target = decl.output.render(
            dag_id=decl.dag_id, query=decl.name, window_start=summary.window_start, window_end=summary.window_end
        )
        location = publish(
            committed,
            target,
            {
                "dag_id": decl.dag_id,
                "query": decl.name,
                "window_start": summary.window_start.isoformat(),
                "window_end": summary.window_end.isoformat(),
                "input_rows": marker["input_rows"],
                "rows": marker["rows"],
                "incomplete": summary.incomplete,
                "remerged_for_late_files": True,
                "committed_at": datetime.now(UTC).isoformat(),
            },
            conn_id=decl.output_conn_id,
        )
        with session_scope() as session:
            store.record_result(session, window_id, location, sum(marker["input_rows"].values()), datetime.now(UTC))
        self.log.info(
            "window %s: %d late unit(s) merged in; result replaced at %s", window_start, len(partials), location
        )
        return location
