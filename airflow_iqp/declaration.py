"""What a DAG file declares about one intermittent query, checked when the DAG file is parsed.

A declaration names a query file, a window, a deadline after the window end, the landing
directory its stream files arrive in, the expected arrival rate (or "learn"), and a fitted
cost model. Everything that can be wrong with it is found here, at parse time, with a message
that says what to fix, so a broken declaration never reaches a worker.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Literal

from airflow_iqp.constants import ExecutionPath, Mode
from airflow_iqp.exceptions import InvalidDeclaration
from airflow_iqp.planning import ArrivalCurve, MinBatch, PiecewiseLinearCost, Plan, min_batch_size, plan_single_query
from airflow_iqp.planning.cost_model_file import FittedCostModel, load_cost_model
from airflow_iqp.queries import QueryDefinition, load_query
from airflow_iqp.sql import Decomposition, decompose
from airflow_iqp.validation import number

COST_MODELS_DIR = Path(__file__).resolve().parents[1] / "cost_models"
LEARN = "learn"


@dataclass(frozen=True)
class ArrivalRate:
    """Expected input: stream files per second, each holding about rows_per_file rows."""

    files_per_second: float
    rows_per_file: float

    def __post_init__(self) -> None:
        for name in ("files_per_second", "rows_per_file"):
            try:
                value = number(getattr(self, name), f"rate.{name}", above=0)
            except ValueError as err:
                raise InvalidDeclaration(str(err)) from None
            object.__setattr__(self, name, value)

    def files_in(self, window: timedelta) -> int:
        """Files expected in one window; at least one, so every window plans a batch."""
        return max(1, round(window.total_seconds() * self.files_per_second))


@dataclass(frozen=True)
class Declaration:
    """One intermittent query as its DAG file declared it, checked whole by `declare`."""

    query: QueryDefinition
    decomposition: Decomposition
    window: timedelta
    deadline: timedelta  # after the window end
    landing: Path
    rate: ArrivalRate | Literal["learn"]
    cost_model: FittedCostModel
    mode: Mode = Mode.STATIC  # static: batches planned per window; dynamic: MinBatch, picked live
    alpha: float | None = None  # dynamic: batched cost may exceed one batch by this fraction
    tau_max: float | None = None  # dynamic: seconds one batch may hold the shared resource

    @property
    def name(self) -> str:
        """The query's name: DAG id, ledger key and cost-model file name derive from it."""
        return self.query.name

    def dynamic_limits(self) -> tuple[float, float]:
        """The MinBatch limits (alpha, tau_max), which only a dynamic declaration has."""
        if self.alpha is None or self.tau_max is None:
            raise InvalidDeclaration(
                f"{self.name} is declared mode={self.mode.value!r}: it has no alpha and tau_max to size MinBatch with"
            )
        return self.alpha, self.tau_max


def file_costs(model: FittedCostModel, rows_per_file: float) -> tuple[PiecewiseLinearCost, PiecewiseLinearCost]:
    """Partial cost by files instead of rows (batches are cut at file boundaries), and merge cost."""
    points = [(rows / rows_per_file, seconds) for rows, seconds in model.partial.points]
    return PiecewiseLinearCost(points), model.merge


@dataclass(frozen=True)
class WindowPlan:
    """A plan in seconds from the window start, plus the merge job every window runs."""

    plan: Plan
    merge_seconds: float  # the merge job's cost beyond what the plan already counts

    @property
    def finish(self) -> float:
        """Seconds from the window start until the merge ends."""
        return self.plan.finish + self.merge_seconds


def merge_costs(model: FittedCostModel) -> tuple[float, PiecewiseLinearCost]:
    """The merge job that always runs (merge(1)), and what k partials add to it."""
    always = model.merge.cost(1)
    return always, PiecewiseLinearCost([(k, max(0.0, s - always)) for k, s in model.merge.points])


@dataclass(frozen=True)
class DynamicBatching:
    """Dynamic mode in files: at least `min_batch` per batch, at most `max_batch` (tau_max)."""

    min_batch: MinBatch
    max_batch: int
    expected_files: int

    @property
    def slots(self) -> int:
        """Mapped batch slots per window: the MinBatch batches, as many again for batches fired
        early by slow input or a closed window, and one for the rest. Unused slots are skipped.
        """
        return 2 * self.min_batch.batches(self.expected_files) + 1


def dynamic_batching(declaration: Declaration, rate: ArrivalRate) -> DynamicBatching:
    """MinBatch and the tau_max bound of a dynamic declaration, in files at `rate`."""
    alpha, tau_max = declaration.dynamic_limits()
    files = rate.files_in(declaration.window)
    cost, _ = file_costs(declaration.cost_model, rate.rows_per_file)
    _, extra_merge = merge_costs(declaration.cost_model)
    one_file = cost.cost(1)
    if one_file > tau_max:
        raise InvalidDeclaration(
            f"tau_max ({tau_max:g} s) is below the cost of one file of {declaration.name} "
            f"(~{rate.rows_per_file:g} rows: {one_file:.1f} s by the cost model): no batch fits; raise tau_max"
        )
    found = min_batch_size(total=files, cost=cost, agg_cost=extra_merge, alpha=alpha, tau_max=tau_max)
    return DynamicBatching(found, max(found.size, min(files, cost.max_tuples(tau_max))), files)


def plan_files(declaration: Declaration, rate: ArrivalRate, method: str = "greedy") -> WindowPlan:
    """Plan one window, files evenly spaced at the rate.

    The planner assumes one batch needs no merge, but our partial output is never the final
    answer (AVG travels as sum and count), so a merge job always runs: plan against the
    deadline less merge(1), with merge(k) - merge(1) for k batches.
    """
    files = rate.files_in(declaration.window)
    window_s = declaration.window.total_seconds()
    cost, _ = file_costs(declaration.cost_model, rate.rows_per_file)
    always, extra_merge = merge_costs(declaration.cost_model)
    plan = plan_single_query(
        total=files,
        arrival=ArrivalCurve.fixed_rate(0.0, (files - 1) / rate.files_per_second, files),
        window_end=window_s,
        deadline=window_s + declaration.deadline.total_seconds() - always,
        cost=cost,
        agg_cost=extra_merge,
        method=method,
    )
    return WindowPlan(plan, always)


def _resolve_cost_model(cost_model: str | Path, execution_path: ExecutionPath) -> FittedCostModel:
    path = Path(cost_model)
    if path.suffix != ".json":
        path = COST_MODELS_DIR / f"{cost_model}.json"
    try:
        return load_cost_model(path, execution_path)
    except ValueError as err:
        raise InvalidDeclaration(f"cost_model: {err} (fit one with `iqp fit-cost-model QUERY`)") from None


def declare(
    *,
    query: str,
    window: timedelta,
    deadline: timedelta,
    landing: str | Path,
    rate: ArrivalRate | Literal["learn"],
    cost_model: str | Path,
    mode: Mode | str = Mode.STATIC,
    alpha: float | None = None,
    tau_max: float | timedelta | None = None,
    execution_path: ExecutionPath = ExecutionPath.SPARK_SUBMIT,
) -> Declaration:
    """Check a declaration whole; the first problem found is raised as InvalidDeclaration."""
    try:
        definition = load_query(query)
    except ValueError as err:
        raise InvalidDeclaration(f"query: {err}") from None
    try:
        decomposition = decompose(definition.sql, definition.streams)
    except ValueError as err:  # UnsupportedQuery and parse errors
        raise InvalidDeclaration(f"query {definition.name} ({definition.path}): {err}") from None
    if not isinstance(window, timedelta) or window <= timedelta(0):
        raise InvalidDeclaration(f"window must be a positive timedelta, got {window!r}")
    if not isinstance(deadline, timedelta) or deadline < timedelta(0):
        raise InvalidDeclaration(f"deadline must be a timedelta >= 0 after the window end, got {deadline!r}")
    if rate != LEARN and not isinstance(rate, ArrivalRate):
        raise InvalidDeclaration(
            f"rate must be ArrivalRate(files_per_second=..., rows_per_file=...) or 'learn', got {rate!r}"
        )
    if isinstance(tau_max, timedelta):
        tau_max = tau_max.total_seconds()
    checked_mode, alpha, tau_max = _check_mode(mode, alpha, tau_max)
    declaration = Declaration(
        query=definition,
        decomposition=decomposition,
        window=window,
        deadline=deadline,
        landing=Path(landing),
        rate=rate,
        cost_model=_resolve_cost_model(cost_model, execution_path),
        mode=checked_mode,
        alpha=alpha,
        tau_max=tau_max,
    )
    if checked_mode is Mode.DYNAMIC:
        if isinstance(rate, ArrivalRate):
            dynamic_batching(declaration, rate)  # tau_max against one file's cost
        return declaration
    if isinstance(rate, ArrivalRate):
        planned = plan_files(declaration, rate)
        if planned.plan.earliest_deadline is not None:  # set exactly when the deadline cannot be met
            earliest = planned.plan.earliest_deadline + planned.merge_seconds - window.total_seconds()
            raise InvalidDeclaration(
                f"deadline {deadline.total_seconds():g} s after the window end can never be met for "
                f"{rate.files_in(window)} files of ~{rate.rows_per_file:g} rows per window: the earliest "
                f"feasible deadline is {math.ceil(earliest * 10) / 10:g} s after the window end"
            )
    return declaration


def _check_mode(mode: str, alpha: object, tau_max: object) -> tuple[Mode, float | None, float | None]:
    """The mode and, in dynamic mode, alpha and tau_max as checked floats."""
    try:
        checked = Mode(mode)
    except ValueError:
        modes = ", ".join(repr(m.value) for m in Mode)
        raise InvalidDeclaration(f"mode must be one of {modes}, got {mode!r}") from None
    if checked is Mode.STATIC:
        if alpha is not None or tau_max is not None:
            raise InvalidDeclaration("alpha and tau_max apply to mode='dynamic' only; static mode plans its batches")
        return checked, None, None
    try:
        checked_alpha = number(alpha, "alpha", above=0)
    except ValueError:
        raise InvalidDeclaration(
            f"alpha must be a number > 0 (how much batching may add to one batch's cost, e.g. 0.5), got {alpha!r}"
        ) from None
    try:
        checked_tau_max = number(tau_max, "tau_max", above=0)
    except ValueError:
        raise InvalidDeclaration(
            f"tau_max must be a positive timedelta or number of seconds (how long one batch may hold the "
            f"shared Spark resource), got {tau_max!r}"
        ) from None
    return checked, checked_alpha, checked_tau_max
