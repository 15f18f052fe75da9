"""The `plan` task: plan the window's batches, record window and plan in the ledger."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import BaseOperator, Context

from airflow_iqp.declaration import ArrivalRate, Declaration, plan_files
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.operators.window import WindowFiles


def learned_rate(declaration: Declaration, window_start: datetime, window_end: datetime) -> ArrivalRate:
    """Rate of the previous window's files, on the stream's clock: what 'learn' plans with."""
    previous = WindowFiles(declaration, window_start - declaration.window, window_start)
    files = WindowFiles(declaration, window_start, window_end)
    sample = previous if previous.indexes else files
    return ArrivalRate(1.0 / sample.descriptor.seconds_per_file, max(sample.rows_per_file(), 1.0))


class PlanWindowOperator(BaseOperator):
    """Runs plan_single_query for the run's window; returns one descriptor per batch."""

    def __init__(self, *, declaration: Declaration, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.declaration = declaration

    def execute(self, context: Context) -> list[dict[str, Any]]:
        decl = self.declaration
        start, end = context["data_interval_start"], context["data_interval_end"]
        rate = decl.rate if isinstance(decl.rate, ArrivalRate) else learned_rate(decl, start, end)
        planned = plan_files(decl, rate)
        plan = planned.plan
        if not plan.feasible:
            self.log.warning("window %s: %s; running the earliest plan", start, plan.reason)

        def at(seconds: float) -> datetime:
            return start + timedelta(seconds=seconds)

        last = len(plan.batches) - 1
        batches = [
            {
                "index": i,
                "first_tuple": b.first,
                "last_tuple": b.last,
                "release": at(b.release),
                "latest_start": at(b.start),
                "planned_start": at(b.start),
                "predicted_cost": b.cost,
            }
            for i, b in enumerate(plan.batches)
        ]
        with session_scope() as session:
            store.register_query(
                session,
                decl.name,
                decl.query.sql,
                mode="static",
                params={"window_s": decl.window.total_seconds(), "deadline_s": decl.deadline.total_seconds()},
                sql_path=str(decl.query.path),
            )
            window_id = store.record_plan(
                session,
                decl.name,
                start,
                end,
                end + decl.deadline,
                expected_tuples=round(rate.files_in(decl.window) * rate.rows_per_file),
                plan={
                    "unit": "files",
                    "files_per_second": rate.files_per_second,
                    "rows_per_file": rate.rows_per_file,
                    "feasible": plan.feasible,
                    "reason": plan.reason,
                    "total_cost": plan.total_cost,
                    "merge_start": at(plan.batches[-1].end).isoformat(),
                    "merge_cost": planned.finish - plan.batches[-1].end,
                },
                batches=batches,
                predicted_finish=at(planned.finish),
            )
        self.log.info("window %s..%s: %d batches, predicted finish %s", start, end, len(batches), at(planned.finish))
        return [
            {
                "window_id": window_id,
                "index": b["index"],
                "first": b["first_tuple"],
                "last": None if b["index"] == last else b["last_tuple"],  # the last batch takes what is left
                "planned_start": b["planned_start"].isoformat(),
                "predicted_cost": b["predicted_cost"],
            }
            for b in batches
        ]
