"""The `plan` task: plan the window's batches (static mode) or its MinBatch and slots (dynamic
mode), and record window and plan in the ledger.

Which plan a window gets:
- learning the cost model and none yet: the calibration plan — one unit as soon as it lands,
  the rest once the input is final (two partial sizes and a merge for the first model);
- a backfill, or its input is already final (a past window: `airflow dags test`, a catch-up):
  planned for cost, not for a deadline that has passed — one batch, or for a dynamic query
  batches of at most tau_max of work, so that no such job holds the shared resource longer;
- no rate to plan with yet (rate="learn", no history): one batch once the input is final;
- otherwise the paper's plan: static batches as late as the deadline allows (Algorithm 1), or
  MinBatch and dynamic slots. A static plan leaves room before its deadline for the longest job
  another query may hold the shared resource for (the non-preemptive blocking term); every plan
  records its demand (work per window, work after the close, longest job) in the ledger, and
  admission tests every query's together: a deadline that cannot hold is logged as a warning and
  kept in the window's plan (`admission`).
The queries sharing the resource are the ones declared in the DAG files beside this one's (its
folder's files that call `intermittent_query`, run here as Airflow parses them), priced from
their declarations with the rates and models their own plans use (`demand.shared_demands`), and
any other whose plan recorded its demand in the ledger. So the first window of a fresh ledger is
planned with the room every later one leaves, whichever query's `plan` runs first.
Static batches are cut by count: batch i takes the untaken units among the window's first
`upto` (in arrival order); the last batch takes everything left once the input is final.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.api.datamodels._generated import DagRunType

from airflow_iqp.constants import Mode
from airflow_iqp.dag_files import plan_tasks
from airflow_iqp.exceptions import InputGone, InvalidDeclaration, InvalidSetting
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.operators.window import run_window
from airflow_iqp.planning.admission import admit
from airflow_iqp.planning.record import MinBatchPlan, PlanRecord
from airflow_iqp.runtime.costs import measures_intercept, planning_margin, planning_model, planning_rate
from airflow_iqp.runtime.demand import Priced, longest_jobs, shared_demands, static_plan, window_demand
from airflow_iqp.runtime.descriptors import DynamicSlot, StaticBatch
from airflow_iqp.runtime.inputs import InputSpec
from airflow_iqp.runtime.sizing import dynamic_batching, file_costs, merge_costs
from airflow_iqp.spark.paths import execution_path

if TYPE_CHECKING:
    from airflow.sdk import Context
    from sqlalchemy.orm import Session

    from airflow_iqp.declaration import ArrivalRate, CostModel, Declaration
    from airflow_iqp.planning.admission import RecurringQuery
    from airflow_iqp.streams.assign import WindowSelection


@dataclass(frozen=True)
class PlannedBatch:
    """One static batch: the window's units up to `upto` (None: the rest, once final)."""

    index: int
    upto: int | None
    release: float  # seconds from the window start
    start: float
    cost: float


@dataclass(frozen=True)
class Sharing:
    """The queries sharing the Spark resource with this one: priced from their declarations
    (this one first), and known only by the demand their plans recorded.
    """

    priced: list[Priced]
    recorded: list[RecurringQuery]

    @property
    def own(self) -> Priced:
        """This query, priced."""
        return self.priced[0]


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
        beside = self.beside()
        with session_scope() as session:
            self.register(session)
            model = planning_model(session, decl, path)
            rate = planning_rate(session, decl)
            admission, room = None, None
            backfill = context["dag_run"].run_type == DagRunType.BACKFILL
            if backfill or datetime.now(UTC) >= final_at:
                how, batches = self.historical(session, window_input, model, rate, backfill)
            elif model is None:
                how, batches = "calibration: one unit first, the rest once final", self.calibration(end - start)
            elif rate is None:
                how, batches = "no rate learned yet: one batch once the input is final", self.one_batch(end - start)
            elif decl.mode is Mode.DYNAMIC:
                return self.open_slots(session, context, window_input, self.sharing(session, rate, model, beside))
            else:
                how, batches, admission, room = self.planned(session, self.sharing(session, rate, model, beside))
            window_id = self.record(session, context, batches, how, rate, model, backfill, admission, room)
            handed = [
                StaticBatch(
                    window_id=window_id,
                    index=b.index,
                    upto=b.upto,
                    planned_start=start + timedelta(seconds=b.start),
                    predicted_cost=b.cost,
                    input=window_input.to_dict(),
                ).to_dict()
                for b in batches
            ]
            store.hand_out(session, window_id, handed)
        self.log.info("window %s..%s: %s; %d batch(es)", start, end, how, len(batches))
        return handed

    def historical(
        self,
        session: Session,
        window_input: InputSpec,
        model: CostModel | None,
        rate: ArrivalRate | None,
        backfill: bool,
    ) -> tuple[str, list[PlannedBatch]]:
        """A past window, all its files in: the cheapest plan now. One batch, or for a dynamic
        query batches of at most tau_max of work (by the model at the rate's rows per file).
        Learning and no model yet: the calibration plan, which a past window runs at once.
        """
        decl = self.declaration
        selection = window_input.look_back()
        _check_input_kept(session, decl.dag_id, selection, backfill, window_input)
        if model is None:
            return "historical calibration: one unit, then the rest", self.calibration(decl.window)
        units = len(selection.units)
        per_batch = units
        if decl.tau_max is not None and rate is not None:
            per_batch = max(1, file_costs(model, rate.rows_per_file).max_tuples(decl.tau_max))
        count = max(1, math.ceil(units / per_batch)) if units else 1
        what = "backfill" if backfill else "historical"
        batches = [
            PlannedBatch(i, None if i == count - 1 else per_batch * (i + 1), 0.0, 0.0, 0.0) for i in range(count)
        ]
        if count == 1:
            return f"{what}: {units} file(s), one batch now", batches
        return f"{what}: {units} file(s) in {count} batches of at most {per_batch} (tau_max)", batches

    def calibration(self, window: timedelta) -> list[PlannedBatch]:
        """A one-unit batch as soon as it lands, and the rest once the input is final."""
        return [PlannedBatch(0, 1, 0.0, 0.0, 0.0), *self.one_batch(window, index=1)]

    def one_batch(self, window: timedelta, index: int = 0) -> list[PlannedBatch]:
        """Everything in one batch once the window's input is final."""
        end = window.total_seconds()
        return [PlannedBatch(index, None, end, end, 0.0)]

    def beside(self) -> list[PlanWindowOperator]:
        """The plan tasks of the other IQP DAGs declared in the files of this DAG file's folder
        that call `intermittent_query`; a file that fails to parse is logged and left out.
        """
        folder = self.declaration.dag_folder
        found: dict[str, PlanWindowOperator] = {}
        for path in sorted(folder.glob("*.py")) if folder is not None else []:
            try:
                if "intermittent_query" in path.read_text(errors="replace"):
                    found.update(plan_tasks(path))
            except Exception as err:  # another DAG's broken file must not stop this window's plan
                self.log.warning("%s left out of the queries sharing the resource: %s", path, err)
        return [task for dag_id, task in found.items() if dag_id != self.declaration.dag_id]

    def sharing(
        self, session: Session, rate: ArrivalRate, model: CostModel, beside: list[PlanWindowOperator]
    ) -> Sharing:
        """This query and the ones declared beside it, priced with the rate and model their own
        plans use (those without both yet have no price and are left out), and the recorded
        demands of the other queries.
        """
        priced = [Priced(self.declaration, rate, model)]
        for task in beside:
            other = task.declaration
            try:
                other_model = planning_model(session, other, execution_path(task.spark_conn_id))
            except (InvalidDeclaration, InvalidSetting) as err:
                self.log.warning("%s left out of the queries sharing the resource: %s", other.dag_id, err)
                continue
            other_rate = planning_rate(session, other)
            if other_model is not None and other_rate is not None:
                priced.append(Priced(other, other_rate, other_model))
        names = {p.declaration.dag_id for p in priced}
        return Sharing(priced, [q for q in store.demands(session) if q.name not in names])

    def planned(self, session: Session, sharing: Sharing) -> tuple[str, list[PlannedBatch], str, float]:
        """The paper's static plan, in units of the window, leaving room for the longest job
        another query may hold the shared resource for; admission's verdict; and that room (seconds).
        """
        rate, model = sharing.own.rate, sharing.own.model
        longest = longest_jobs(sharing.priced, sharing.recorded)
        planned, room, blocker = static_plan(self.declaration, rate, model, longest)
        admission = self.admit(session, window_demand(self.declaration, rate, model, room), sharing)
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
        return how, batches, admission, room

    def admit(self, session: Session, demand: RecurringQuery, sharing: Sharing) -> str:
        """Record the query's demand and test every sharing query's together (admission):
        a deadline that cannot hold is logged as a warning, naming the query and the shortfall.
        """
        store.record_demand(session, demand)
        queries = shared_demands(sharing.priced, sharing.recorded)
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
        backfill: bool,
        admission: str | None,
        blocking: float | None = None,
    ) -> int:
        """The window and its static batches in the ledger; returns the window id. `blocking`,
        the room left for another query's longest job, is recorded for a plan made for the
        deadline only: a batch that ends off it replans the rest with it (`runtime.replan`).
        """
        decl = self.declaration
        start, end = run_window(context)
        expected = 0 if rate is None else rate.files_in(decl.window)
        merge = merge_costs(model)[0] if model is not None else 0.0
        last_end = max((b.start + b.cost for b in batches), default=0.0)
        merge_start = None if model is None else last_end  # unpriced batches plan no time for it
        return store.record_plan(
            session,
            decl.dag_id,
            start,
            end,
            end + decl.deadline,
            expected_tuples=0 if rate is None else round(expected * rate.rows_per_file),
            plan=PlanRecord(
                mode=decl.mode,
                how=how,
                files_per_second=None if rate is None else rate.files_per_second,
                rows_per_file=None if rate is None else rate.rows_per_file,
                expected_files=expected,
                merge_start=merge_start,
                merge_cost=merge,
                admission=admission,
                blocking=blocking,
                margin=planning_margin(session, decl, execution_path(self.spark_conn_id)),
            ),
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
            predicted_finish=None if merge_start is None else start + timedelta(seconds=merge_start + merge),
            run_id=context["run_id"],
            backfill=backfill,
        )

    def open_slots(
        self, session: Session, context: Context, window_input: InputSpec, sharing: Sharing
    ) -> list[dict[str, Any]]:
        """Dynamic mode: no batches in advance, only MinBatch and the slots that will cut them."""
        decl = self.declaration
        start, end = run_window(context)
        rate, model = sharing.own.rate, sharing.own.model
        batching = dynamic_batching(decl, rate, model)
        alpha, tau_max = decl.dynamic_limits()
        admission = self.admit(session, window_demand(decl, rate, model), sharing)
        always, extra_merge = merge_costs(model)
        path = execution_path(self.spark_conn_id)
        first_unit = measures_intercept(session, decl, path)
        slots = batching.slots + first_unit  # the one-unit batch needs a slot of its own
        window_id = store.record_plan(
            session,
            decl.dag_id,
            start,
            end,
            end + decl.deadline,
            expected_tuples=round(batching.expected_files * rate.rows_per_file),
            plan=PlanRecord(
                mode=Mode.DYNAMIC,
                how="dynamic: MinBatch",
                files_per_second=rate.files_per_second,
                rows_per_file=rate.rows_per_file,
                expected_files=batching.expected_files,
                merge_cost=always + extra_merge.cost(batching.min_batch.batches(batching.expected_files)),
                admission=admission,
                margin=planning_margin(session, decl, path),
                dynamic=MinBatchPlan(
                    alpha=alpha,
                    tau_max=tau_max,
                    min_batch=batching.min_batch.size,
                    max_batch=batching.max_batch,
                    cost_ratio=batching.min_batch.cost_ratio,
                    slots=slots,
                    first_unit=first_unit,
                ),
            ),
            batches=[],
            run_id=context["run_id"],
        )
        self.log.info(
            "window %s..%s: dynamic, MinBatch %d files (cost x%.2f), at most %d, %d slots%s",
            start,
            end,
            batching.min_batch.size,
            batching.min_batch.cost_ratio,
            batching.max_batch,
            slots,
            "; the first batch one unit, for the cost model's intercept" if first_unit else "",
        )
        planned_at = time.time()  # when the slots' turns begin (`runtime.slots`)
        handed = [
            DynamicSlot(
                window_id=window_id,
                slot=slot,
                slots=slots,
                input=window_input.to_dict(),
                expected_files=batching.expected_files,
                min_batch=batching.min_batch.size,
                max_batch=batching.max_batch,
                first_unit=first_unit,
                planned_at=planned_at,
            ).to_dict()
            for slot in range(slots)
        ]
        store.hand_out(session, window_id, handed)
        return handed


def _check_input_kept(
    session: Session, dag_id: str, selection: WindowSelection, backfill: bool, window_input: InputSpec
) -> None:
    """Refuse to run a past window again over part of its input: every file its last run froze
    must still be listed, and a backfilled window with no files must have older files beside it
    (else its files are gone, or it predates the stream).
    """
    where = ", ".join(f"{name}: {stream.path}" for name, stream in sorted(window_input.file_streams().items()))
    window = f"window {selection.start.isoformat()}..{selection.end.isoformat()} of {dag_id}"
    known = store.window_id(session, dag_id, selection.start)
    listed = {f.uri for unit in selection.units for f in unit.files}
    gone = sorted(store.frozen_files(session, known) - listed) if known is not None else []
    if gone:
        raise InputGone(
            f"{window}: {len(gone)} file(s) its last run read are no longer listed ({where}), first {gone[0]}; "
            "restore them or leave the window's published result as it is. Nothing was written."
        )
    if backfill and not selection.units and not selection.earlier:
        raise InputGone(
            f"{window}: no input file for it, and none for any earlier window ({where}): its files are gone "
            "(retention?) or the stream starts later; backfill from a later date. Nothing was written."
        )
