"""Fitted cost models on disk (cost_models/<query>.json): data, not code.

The file holds what was measured and the fitted piecewise-linear models for each execution
path (`in_process`: one shared Spark session; `spark_submit`: one application per batch),
each with a `partial` model (seconds by tuples in a batch) and a `merge` model (seconds by
number of partials).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from airflow_iqp.planning.cost import PiecewiseLinearCost

PATHS = ("in_process", "spark_submit")


@dataclass(frozen=True)
class FittedCostModel:
    query: str
    path: str
    partial: PiecewiseLinearCost
    merge: PiecewiseLinearCost
    source: Path


def _model(section: object, where: str) -> PiecewiseLinearCost:
    if not isinstance(section, dict) or "points" not in section:
        raise ValueError(f"{where} must be an object with fitted 'points'")
    try:
        return PiecewiseLinearCost(section["points"])
    except (TypeError, ValueError) as err:
        raise ValueError(f"{where}: {err}") from None


def load_cost_model(path: str | Path, execution_path: str = "spark_submit") -> FittedCostModel:
    """Read one fitted cost model; every problem names the file and the field to fix."""
    path = Path(path)
    if execution_path not in PATHS:
        raise ValueError(f"execution path must be one of {', '.join(PATHS)}, got {execution_path!r}")
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"cost model {path} does not exist") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"cost model {path} is not valid JSON: {err}") from None
    fitted = document.get("paths", {}).get(execution_path) if isinstance(document, dict) else None
    if not isinstance(fitted, dict):
        raise ValueError(f"cost model {path} has no paths.{execution_path} section")
    where = f"cost model {path} paths.{execution_path}"
    return FittedCostModel(
        query=str(document.get("query", path.stem)),
        path=execution_path,
        partial=_model(fitted.get("partial"), f"{where}.partial"),
        merge=_model(fitted.get("merge"), f"{where}.merge"),
        source=path,
    )
