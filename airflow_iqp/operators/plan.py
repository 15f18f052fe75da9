"""The `plan` task: plan the window's batches (static mode) or its MinBatch and slots (dynamic
mode), and record window and plan in the ledger.

Which plan a window gets:
- learning the cost model and none yet: the calibration plan — one unit as soon as it lands,
  the rest once the input is final (two partial sizes and a merge for the first model);
- its input is already final (a past window: `airflow dags test`, a catch-up): one batch, now;
- no rate to plan with yet (rate="learn", no history): one batch once the input is final;
- otherwise the paper's plan: static batches as late as the deadline allows (Algorithm 1), or
  MinBatch and dynamic slots. A static plan leaves room before its deadline for the longest job
  another registered query may hold the shared resource for (the non-preemptive blocking term);
  every plan records its demand (work per window, work after the close, longest job) in the
  ledger, and admission tests every registered query's together: a deadline that cannot hold
  is logged as a warning and kept in the window's plan (`admission`).
Static batches are cut by count: batch i takes the untaken units among the window's first
`upto` (in arrival order); the last batch takes everything left once the input is final.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_iqp.constants import Mode
from airflow_iqp.costs import planning_model, planning_rate
from airflow_iqp.declaration import dynamic_batching, merge_costs, plan_files
from airflow_iqp.demand import window_demand
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.operators.dispatched import execution_path
from airflow_iqp.operators.window import run_window
from airflow_iqp.planning.admission import admit, blocking
from airflow_iqp.slots import SlotSpec
from airflow_iqp.window_input import InputSpec

if TYPE_CHECKING:
    from airflow.sdk import Context
    from sqlalchemy.orm import Session

    from airflow_iqp.declaration import ArrivalRate, CostModel, Declaration
    from airflow_iqp.planning.admission import RecurringQuery


@dataclass(frozen=True)
class PlannedBatch:
    """One static batch: the window's units up to `upto` (None: the rest, once final)."""

    index: int
    upto: int | None
    release: float  # seconds from the window start
    start: float
    cost: float


class PlanWindowOperator(BaseOperator):
    """Plans the run's window and returns one descriptor per batch (or dynamic slot), with the
    cost model of the execution path its jobs will run on (the type of `spark_conn_id`).
    """

    def __init__(self, *, declaration: Declaration, spark_conn_id: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.declaration = declaration
        self.spark_conn_id = spark_conn_id

    def execute(self, context: Context) -> list[dict[str, Any]]:
        """Plan the run's window and record it; the descriptors are what `partial_aggregate` maps over."""
        decl = self.declaration
        start, end = run_window(context)
        window_input = InputSpec.of(decl.streams, start, decl.window)
        path = execution_path(self.spark_conn_id)
        final_at = end + max(s.lateness for s in decl.streams.values())
        with session_scope() as session:
            self.register(session)
            model = planning_model(session, decl, path)
            rate = planning_rate(session, decl)
            admission = None
            if model is None:
                how, batches = "calibration: one unit first, the rest once final", self.calibration(end - start)
            elif datetime.now(UTC) >= final_at:
                how, batches = "historical: its input is final, one batch now", [PlannedBatch(0, None, 0.0, 0.0, 0.0)]
            elif rate is None:
                how, batches = "no rate learned yet: one batch once the input is final", self.one_batch(end - start)
            elif decl.mode is Mode.DYNAMIC:
                return self.open_slots(session, context, window_input, rate, model)
            else:
                how, batches, admission = self.planned(session, rate, model)
            window_id = self.record(session, context, batches, how, rate, model, admission)
        self.log.info("window %s..%s: %s; %d batch(es)", start, end, how, len(batches))
        return [
            {
                "window_id": window_id,
                "index": b.index,
                "upto": b.upto,
                "planned_start": (start + timedelta(seconds=b.start)).isoformat(),
                "predicted_cost": b.cost,
                "input": window_input.to_dict(),
            }
            for b in batches
        ]

    def calibration(self, window: timedelta) -> list[PlannedBatch]:
        """A one-unit batch as soon as it lands, and the rest once the input is final."""
        return [PlannedBatch(0, 1, 0.0, 0.0, 0.0), *self.one_batch(window, index=1)]

    def one_batch(self, window: timedelta, index: int = 0) -> list[PlannedBatch]:
        """Everything in one batch once the window's input is final."""
        end = window.total_seconds()
        return [PlannedBatch(index, None, end, end, 0.0)]

    def planned(self, session: Session, rate: ArrivalRate, model: CostModel) -> tuple[str, list[PlannedBatch], str]:
        """The paper's static plan at `rate`, in units of the window, leaving room for the longest
        job another registered query may hold the shared resource for; and admission's verdict.
        """
        others = {q.name: q.longest_job for q in store.demands(session)}
        room, blocker = blocking(self.declaration.dag_id, others)
        planned = plan_files(self.declaration, rate, model, blocking=room)
        admission = self.admit(session, window_demand(self.declaration, rate, model, room))
        plan = planned.plan
        if not plan.feasible:
            self.log.warning("%s; running the earliest feasible plan", plan.reason)
        last = len(plan.batches) - 1
        batches = [
            PlannedBatch(i, None if i == last else b.last, b.release, b.start, b.cost)
            for i, b in enumerate(plan.batches)
        ]
        how = f"planned at {rate.files_per_second:g} files/s of ~{rate.rows_per_file:.0f} rows"
        if blocker is not None:
            how += f", {room:.1f} s left for {blocker}'s longest job"
        return how, batches, admission

    def admit(self, session: Session, demand: RecurringQuery) -> str:
        """Record the query's demand and test every registered query's together (admission):
        a deadline that cannot hold is logged as a warning, naming the query and the shortfall.
        """
        store.record_demand(session, demand)
        queries = store.demands(session)
        verdict = admit(queries)
        miss = verdict.first_miss
        if miss is None:
            return f"feasible: {len(queries)} queries, utilization {verdict.utilization:.2f}"
        text = (
            f"{miss.name} misses a deadline by {-miss.slack:.1f} s (+{miss.at:g} s"
            f"{' after close' if miss.final else ''}) with {len(queries)} queries sharing the resource"
        )
        self.log.warning("admission: %s", text)
        return text

    def register(self, session: Session) -> None:
        """The query's row in the ledger, kept up to date with the declaration."""
        decl = self.declaration
        params: dict[str, Any] = {"window_s": decl.window.total_seconds(), "deadline_s": decl.deadline.total_seconds()}
        if decl.mode is Mode.DYNAMIC:
            params |= {"alpha": decl.alpha, "tau_max_s": decl.tau_max}
        store.register_query(
            session,
            dag_id=decl.dag_id,
            name=decl.name,
            sql=decl.query.sql,
            mode=decl.mode,
            params=params,
            sql_path=str(decl.query.path),
        )

    def record(
        self,
        session: Session,
        context: Context,
        batches: list[PlannedBatch],
        how: str,
        rate: ArrivalRate | None,
        model: CostModel | None,
        admission: str | None,
    ) -> int:
        """The window and its static batches in the ledger; returns the window id."""
        decl = self.declaration
        start, end = run_window(context)
        expected = 0 if rate is None else rate.files_in(decl.window)
        merge = merge_costs(model)[0] if model is not None else 0.0
        finish = max((b.start + b.cost for b in batches), default=0.0) + merge
        return store.record_plan(
            session,
            decl.dag_id,
            start,
            end,
            end + decl.deadline,
            expected_tuples=0 if rate is None else round(expected * rate.rows_per_file),
            plan={
                "mode": decl.mode.value,
                "how": how,
                "unit": "files",
                "files_per_second": None if rate is None else rate.files_per_second,
                "rows_per_file": None if rate is None else rate.rows_per_file,
                "expected_files": expected,
                "merge_cost": merge,
                "admission": admission,
            },
            batches=[
                {
                    "index": b.index,
                    "first_tuple": 1 if i == 0 else (batches[i - 1].upto or 0) + 1,
                    "last_tuple": b.upto if b.upto is not None else max(expected, 1),
                    "release": start + timedelta(seconds=b.release),
                    "latest_start": start + timedelta(seconds=b.start),
                    "planned_start": start + timedelta(seconds=b.start),
                    "predicted_cost": b.cost,
                }
                for i, b in enumerate(batches)
            ],
            predicted_finish=None if model is None else start + timedelta(seconds=finish),
            run_id=context["run_id"],
        )

    def open_slots(
        self, session: Session, context: Context, window_input: InputSpec, rate: ArrivalRate, model: CostModel
    ) -> list[dict[str, Any]]:
        """Dynamic mode: no batches in advance, only MinBatch and the slots that will cut them."""
        decl = self.declaration
        start, end = run_window(context)
        batching = dynamic_batching(decl, rate, model)
        admission = self.admit(session, window_demand(decl, rate, model))
        always, extra_merge = merge_costs(model)
        window_id = store.record_plan(
            session,
            decl.dag_id,
            start,
            end,
            end + decl.deadline,
            expected_tuples=round(batching.expected_files * rate.rows_per_file),
            plan={
                "mode": "dynamic",
                "how": "dynamic: MinBatch",
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
                "admission": admission,
            },
            batches=[],
            run_id=context["run_id"],
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
                input=window_input.to_dict(),
                expected_files=batching.expected_files,
                min_batch=batching.min_batch.size,
                max_batch=batching.max_batch,
            ).to_dict()
            for slot in range(batching.slots)
        ]
