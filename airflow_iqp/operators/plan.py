"""The `plan` task: plan the window's batches (static mode) or its MinBatch and slots (dynamic
mode), and record window and plan in the ledger.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator, Context

from airflow_iqp.constants import Mode
from airflow_iqp.declaration import ArrivalRate, Declaration, dynamic_batching, merge_costs, plan_files
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.operators.window import WindowFiles, run_window
from airflow_iqp.slots import SlotSpec

if TYPE_CHECKING:
    from sqlalchemy.orm import Session


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
        """Plan the run's window and record it; the descriptors are what `partial_aggregate` maps over."""
        decl = self.declaration
        start, end = run_window(context)
        rate = decl.rate if isinstance(decl.rate, ArrivalRate) else learned_rate(decl, start, end)
        if decl.mode is Mode.DYNAMIC:
            return self.open_slots(start, end, rate)
        planned = plan_files(decl, rate)
        plan = planned.plan
        if not plan.feasible:
            self.log.warning("window %s: %s; running the earliest plan", start, plan.reason)

        def at(seconds: float) -> datetime:
            return start + timedelta(seconds=seconds)

        last = len(plan.batches) - 1
        batches: list[dict[str, Any]] = [
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
            self.register(session)
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
                "index": i,
                "first": b.first,
                "last": None if i == last else b.last,  # the last batch takes what is left
                "planned_start": at(b.start).isoformat(),
                "predicted_cost": b.cost,
            }
            for i, b in enumerate(plan.batches)
        ]

    def register(self, session: Session) -> None:
        """Register the query in the ledger, or bring it up to date with this declaration."""
        decl = self.declaration
        params: dict[str, float | None] = {
            "window_s": decl.window.total_seconds(),
            "deadline_s": decl.deadline.total_seconds(),
        }
        if decl.mode is Mode.DYNAMIC:
            params |= {"alpha": decl.alpha, "tau_max_s": decl.tau_max}
        store.register_query(
            session, decl.name, decl.query.sql, mode=decl.mode, params=params, sql_path=str(decl.query.path)
        )

    def open_slots(self, start: datetime, end: datetime, rate: ArrivalRate) -> list[dict[str, Any]]:
        """Dynamic mode: no batches in advance, only MinBatch and the slots that will cut them."""
        decl = self.declaration
        batching = dynamic_batching(decl, rate)
        window = WindowFiles(decl, start, end)
        always, extra_merge = merge_costs(decl.cost_model)
        with session_scope() as session:
            self.register(session)
            window_id = store.record_plan(
                session,
                decl.name,
                start,
                end,
                end + decl.deadline,
                expected_tuples=round(batching.expected_files * rate.rows_per_file),
                plan={
                    "mode": Mode.DYNAMIC.value,
                    "unit": "files",
                    "files_per_second": rate.files_per_second,
                    "rows_per_file": rate.rows_per_file,
                    "alpha": decl.alpha,
                    "tau_max": decl.tau_max,
                    "min_batch": batching.min_batch.size,
                    "max_batch": batching.max_batch,
                    "cost_ratio": batching.min_batch.cost_ratio,
                    "slots": batching.slots,
                    "expected_files": batching.expected_files,
                    "merge_cost": always + extra_merge.cost(batching.min_batch.batches(batching.expected_files)),
                },
                batches=[],
            )
        self.log.info(
            "window %s..%s: dynamic, MinBatch %d files (cost x%.2f), at most %d, %d slots",
            start,
            end,
            batching.min_batch.size,
            batching.min_batch.cost_ratio,
            batching.max_batch,
            batching.slots,
        )
        return [
            SlotSpec(
                window_id=window_id,
                slot=slot,
                slots=batching.slots,
                landing=str(decl.landing),
                streams=list(decl.decomposition.streams),
                indexes=window.indexes,
                window_start=start.timestamp(),
                window_end=end.timestamp(),
                expected_files=batching.expected_files,
                min_batch=batching.min_batch.size,
                max_batch=batching.max_batch,
            ).as_dict()
            for slot in range(batching.slots)
        ]
