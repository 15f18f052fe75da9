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

from airflow_iqp.planning import ArrivalCurve, PiecewiseLinearCost, Plan, plan_single_query
from airflow_iqp.planning.cost_model_file import FittedCostModel, load_cost_model
from airflow_iqp.queries import QueryDefinition, load_query
from airflow_iqp.sql import Decomposition, decompose

COST_MODELS_DIR = Path(__file__).resolve().parents[1] / "cost_models"
LEARN = "learn"


class InvalidDeclaration(ValueError):
    """A DAG file's intermittent query cannot work as declared; the message says what to fix."""


@dataclass(frozen=True)
class ArrivalRate:
    """Expected input: stream files per second, each holding about rows_per_file rows."""

    files_per_second: float
    rows_per_file: float

    def __post_init__(self) -> None:
        for name in ("files_per_second", "rows_per_file"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
                raise InvalidDeclaration(f"rate.{name} must be a positive number, got {value!r}")

    def files_in(self, window: timedelta) -> int:
        return max(1, round(window.total_seconds() * self.files_per_second))


@dataclass(frozen=True)
class Declaration:
    query: QueryDefinition
    decomposition: Decomposition
    window: timedelta
    deadline: timedelta  # after the window end
    landing: Path
    rate: ArrivalRate | Literal["learn"]
    cost_model: FittedCostModel

    @property
    def name(self) -> str:
        return self.query.name


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
        return self.plan.finish + self.merge_seconds


def plan_files(declaration: Declaration, rate: ArrivalRate, method: str = "greedy") -> WindowPlan:
    """Plan one window, files evenly spaced at the rate.

    The planner assumes one batch needs no merge, but our partial output is never the final
    answer (AVG travels as sum and count), so a merge job always runs: plan against the
    deadline less merge(1), with merge(k) - merge(1) for k batches.
    """
    files = rate.files_in(declaration.window)
    window_s = declaration.window.total_seconds()
    cost, merge = file_costs(declaration.cost_model, rate.rows_per_file)
    always = merge.cost(1)
    extra_merge = PiecewiseLinearCost([(k, max(0.0, s - always)) for k, s in merge.points])
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


def _resolve_cost_model(cost_model: str | Path, execution_path: str) -> FittedCostModel:
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
    execution_path: str = "spark_submit",
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
        raise InvalidDeclaration(f"rate must be ArrivalRate(files_per_second=..., rows_per_file=...) or 'learn', got {rate!r}")
    declaration = Declaration(
        query=definition,
        decomposition=decomposition,
        window=window,
        deadline=deadline,
        landing=Path(landing),
        rate=rate,
        cost_model=_resolve_cost_model(cost_model, execution_path),
    )
    if isinstance(rate, ArrivalRate):
        planned = plan_files(declaration, rate)
        if not planned.plan.feasible:
            earliest = planned.plan.earliest_deadline + planned.merge_seconds - window.total_seconds()
            raise InvalidDeclaration(
                f"deadline {deadline.total_seconds():g} s after the window end can never be met for "
                f"{rate.files_in(window)} files of ~{rate.rows_per_file:g} rows per window: the earliest "
                f"feasible deadline is {math.ceil(earliest * 10) / 10:g} s after the window end"
            )
    return declaration
