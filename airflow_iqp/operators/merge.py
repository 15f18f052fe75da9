"""`final_merge`: once every batch is done, run the merge job over the committed
partials, publish the result where the DAG declared, and announce it as an Asset event. It
queues with the dispatcher like a batch, ranked by its own cost.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_iqp.constants import BatchReason, BatchStatus, JobKind, WindowStatus
from airflow_iqp.dynamic import window_remaining
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.links.output import BatchOutputLink
from airflow_iqp.operators.dispatched import DispatchedSparkSubmitOperator, ResourceRequest
from airflow_iqp.operators.window import JOBS_DIR, merge_spec, run_window, spark_env, window_dir
from airflow_iqp.results.publish import publish
from airflow_iqp.runtime.costs import observe, planning_model
from airflow_iqp.runtime.sizing import merge_costs
from airflow_iqp.spark.connect import window_session
from airflow_iqp.spark.jobs.output import read_marker

if TYPE_CHECKING:
    from airflow.sdk import Asset, Context

    from airflow_iqp.declaration import CostModel, Declaration

MERGE_SLOT = -1  # the merge's slot in dispatcher requests: partials use their map index


def merge_request(declaration: Declaration, window: store.WindowRow, model: CostModel | None) -> ResourceRequest:
    """The merge asks for the resource with its window's deadline and its own cost."""
    partials = sum(b.status == BatchStatus.DONE for b in window.batches)
    if model is None:
        cost = window.plan.merge_cost
    else:
        always, extra = merge_costs(model)
        cost = always + extra.cost(partials)
    return ResourceRequest(
        window_id=window.id,
        query=declaration.dag_id,
        kind=JobKind.MERGE,
        slot=MERGE_SLOT,
        reason=BatchReason.ALL_PROCESSED,
        deadline=window.deadline,
        remaining_cost=window_remaining(window.status, window.batches, cost),
    )


class FinalMergeOperator(DispatchedSparkSubmitOperator):
    """The window's final merge, queued with the dispatcher like a batch; its outlet is the
    DAG's result Asset.
    """

    operator_extra_links = (BatchOutputLink(),)
    template_fields = (*DispatchedSparkSubmitOperator.template_fields, "window_id")

    def __init__(
        self,
        *,
        declaration: Declaration,
        work_dir: str,
        window_id: Any,
        result: Asset,
        **kwargs: Any,
    ) -> None:
        super().__init__(application=str(JOBS_DIR / "merge_job.py"), env_vars=spark_env(), outlets=[result], **kwargs)
        self.declaration = declaration
        self.work_dir = work_dir
        self.window_id = window_id
        self.result = result

    def execute(self, context: Context) -> Any:
        """Queue for the resource (the window's last batch has usually queued it already); a
        window the ledger holds merged by an earlier attempt of this task is not merged again.
        """
        if (output := self.already_done(context)) is not None:
            return output
        return self.queue_for_resource(context, self.resource_request(context))

    def already_done(self, context: Context) -> str | None:
        """See the base class: this task's window, merged and published."""
        with session_scope() as session:
            window = store.window_summary(session, int(self.window_id))
        if window.status != WindowStatus.MERGED or window.result_uri is None:
            return None
        self.log.info("window %d was merged by an earlier attempt: %s", window.id, window.result_uri)
        context["ti"].xcom_push(key="output_location", value=window.result_uri)
        return window.result_uri

    def connect_session(self) -> tuple[str, bool]:
        """See the base class: the window's session, which the merge, its last job, releases."""
        return window_session(self.dag_id, int(self.window_id)), True

    def resource_request(self, context: Context) -> ResourceRequest:
        """See `merge_request`."""
        path = self.execution_path()
        with session_scope() as session:
            window = store.window_summary(session, int(self.window_id))
            return merge_request(self.declaration, window, planning_model(session, self.declaration, path))

    def run_granted(self, context: Context) -> str:
        """Merge the committed partials, publish the result, close the window in the ledger."""
        decl = self.declaration
        window_id = int(self.window_id)
        start, end = run_window(context)
        with session_scope() as session:
            summary = store.window_summary(session, window_id)
        partials = [b.output_location for b in summary.batches if b.status == BatchStatus.DONE and b.output_location]
        committed = self.leased_output(window_dir(Path(self.work_dir), decl.dag_id, start) / "result")
        committed.parent.mkdir(parents=True, exist_ok=True)
        spec = merge_spec(decl, partials, committed)
        path = self.execution_path()
        try:
            seconds = self.run_spark_job(context, spec, committed.with_suffix(".spec.json"))
        except BaseException:
            with session_scope() as session:
                store.record_merge(session, window_id, datetime.now(UTC), None, None, status=WindowStatus.FAILED)
            raise
        merged = datetime.now(UTC)
        marker = read_marker(committed)
        rows = sum(marker["input_rows"].values())
        target = decl.output.render(dag_id=decl.dag_id, query=decl.name, window_start=start, window_end=end)
        location = publish(
            committed,
            target,
            {
                "dag_id": decl.dag_id,
                "query": decl.name,
                "window_start": start.isoformat(),
                "window_end": end.isoformat(),
                "input_rows": marker["input_rows"],
                "rows": marker["rows"],
                "incomplete": summary.incomplete,
                "committed_at": merged.isoformat(),
            },
            conn_id=decl.output_conn_id,
        )
        finished = datetime.now(UTC)
        with session_scope() as session:
            met = store.record_merge(session, window_id, finished, rows, str(committed))
            store.record_result(session, window_id, location, rows, finished)
            observe(session, decl, path, JobKind.MERGE, len(partials), seconds)
        context["outlet_events"][self.result].extra = {
            "window_start": start.isoformat(),
            "window_end": end.isoformat(),
            "uri": location,
            "rows": marker["rows"],
            "incomplete": summary.incomplete,
        }
        self.log.info(
            "window %d merged %d partials, published to %s; deadline %s",
            window_id,
            len(partials),
            location,
            "backfilled: none to meet" if met is None else "met" if met else "MISSED",
        )
        context["ti"].xcom_push(key="output_location", value=location)
        return location
