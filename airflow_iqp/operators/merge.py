"""`final_merge`: once every batch is done, spark-submit the merge job over the committed
partials. It queues with the dispatcher like a batch, ranked by its own cost.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_iqp.constants import BatchReason, BatchStatus, ExecutionPath, JobKind, WindowStatus
from airflow_iqp.declaration import Declaration, merge_costs
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.links.output import BatchOutputLink
from airflow_iqp.operators.dispatched import DispatchedSparkSubmitOperator, ResourceRequest
from airflow_iqp.operators.window import JOBS_DIR, run_window, spark_env, window_dir
from airflow_iqp.spark.jobs.output import read_marker

if TYPE_CHECKING:
    from airflow.sdk import Context

MERGE_SLOT = -1  # the merge's slot in dispatcher requests: partials use their map index


def merge_request(declaration: Declaration, window: store.WindowSummary) -> ResourceRequest:
    """The merge asks for the resource with its window's deadline and its own cost."""
    always, extra = merge_costs(declaration.cost_model)
    partials = sum(b.status == BatchStatus.DONE for b in window.batches)
    return ResourceRequest(
        window_id=window.id,
        query=declaration.name,
        kind=JobKind.MERGE,
        slot=MERGE_SLOT,
        reason=BatchReason.ALL_PROCESSED,
        deadline=window.deadline,
        remaining_cost=always + extra.cost(partials),
    )


class FinalMergeOperator(DispatchedSparkSubmitOperator):
    """The window's final merge, queued with the dispatcher like a batch."""

    operator_extra_links = (BatchOutputLink(),)

    def __init__(self, *, declaration: Declaration, work_dir: str, window_id: Any, **kwargs: Any) -> None:
        super().__init__(application=str(JOBS_DIR / "merge_job.py"), env_vars=spark_env(), **kwargs)
        self.declaration = declaration
        self.work_dir = work_dir
        self.window_id = window_id

    template_fields = (*DispatchedSparkSubmitOperator.template_fields, "window_id")

    def execute(self, context: Context) -> Any:
        """Queue for the resource (the window's last batch has usually queued it already)."""
        return self.queue_for_resource(context, self.resource_request(context))

    def resource_request(self, context: Context) -> ResourceRequest:
        """See `merge_request`."""
        with session_scope() as session:
            return merge_request(self.declaration, store.window_summary(session, int(self.window_id)))

    def run_granted(self, context: Context) -> str:
        """Merge the committed partials, then close the window in the ledger."""
        window_id = int(self.window_id)
        with session_scope() as session:
            summary = store.window_summary(session, window_id)
        partials = [b.output_location for b in summary.batches if b.status == BatchStatus.DONE and b.output_location]
        result = window_dir(Path(self.work_dir), self.declaration, run_window(context)[0]) / "result"
        self.application_args = ["--query", str(self.declaration.query.path), "--output", str(result), *partials]
        self._hook = None
        started = datetime.now(UTC)
        try:
            super().execute(context)
        except BaseException:
            with session_scope() as session:
                store.record_merge(session, window_id, datetime.now(UTC), None, None, status=WindowStatus.FAILED)
            raise
        finished = datetime.now(UTC)
        marker = read_marker(result)
        with session_scope() as session:
            met = store.record_merge(session, window_id, finished, sum(marker["input_rows"].values()), str(result))
            store.record_cost_observation(
                session,
                self.declaration.name,
                ExecutionPath.SPARK_SUBMIT,
                JobKind.MERGE,
                len(partials),
                (finished - started).total_seconds(),
            )
        self.log.info(
            "window %d merged %d partials into %s; deadline %s",
            window_id,
            len(partials),
            result,
            "met" if met else "MISSED",
        )
        context["ti"].xcom_push(key="output_location", value=str(result))
        return str(result)
