"""Fitted cost models on disk (cost_models/<query>.json): data, not code.

The file holds what was measured and the fitted piecewise-linear models for each execution
path (`in_process`: one shared Spark session; `spark_submit`: one application per batch;
`spark_connect`: jobs on a Spark Connect server, timed each in a session of its own), each with a
`partial` model (seconds by tuples in a batch) and a `merge` model (seconds by number of
partials).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from airflow_iqp.constants import ExecutionPath, JobKind
from airflow_iqp.planning.cost import PiecewiseLinearCost

PATHS = tuple(p.value for p in ExecutionPath)  # as the file's `paths` keys and the CLI's choices spell them


@dataclass(frozen=True)
class FittedCostModel:
    """One execution path's fitted partial and merge models, and the file they came from."""

    query: str
    path: ExecutionPath
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


def load_cost_model(
    path: str | Path, execution_path: ExecutionPath | str = ExecutionPath.SPARK_SUBMIT
) -> FittedCostModel:
    """Read one fitted cost model; every problem names the file and the field to fix."""
    path = Path(path)
    try:
        checked = ExecutionPath(execution_path)
    except ValueError:
        raise ValueError(f"execution path must be one of {', '.join(PATHS)}, got {execution_path!r}") from None
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"cost model {path} does not exist") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"cost model {path} is not valid JSON: {err}") from None
    fitted = document.get("paths", {}).get(checked.value) if isinstance(document, dict) else None
    if not isinstance(fitted, dict):
        raise ValueError(f"cost model {path} has no paths.{checked.value} section")
    where = f"cost model {path} paths.{checked.value}"
    return FittedCostModel(
        query=str(document.get("query", path.stem)),
        path=checked,
        partial=_model(fitted.get(JobKind.PARTIAL.value), f"{where}.{JobKind.PARTIAL.value}"),
        merge=_model(fitted.get(JobKind.MERGE.value), f"{where}.{JobKind.MERGE.value}"),
        source=path,
    )


def fitted_paths(path: str | Path) -> tuple[ExecutionPath, ...]:
    """The execution paths a model file has a section for (none if it cannot be read)."""
    try:
        document = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return ()
    sections = document.get("paths") if isinstance(document, dict) else None
    return tuple(p for p in ExecutionPath if isinstance(sections, dict) and p.value in sections)
