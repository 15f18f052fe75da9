"""Each query's cost model and deadline, by the paper's protocol: window end + delta x the
cumulative single-batch costs, the queries taken in the order given (plus REACTION_S, below).

A query's single-batch cost is what the cost model our DAG plans with predicts for one partial
over the whole window and a merge of that one partial: known before any run, as a deadline must
be. That model is the packaged one's Spark Connect section, or, for a query fitted without one,
its in-process section (a warm Spark, as a Connect server is; Tier S's `Setting.cost_path`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from airflow_iqp.constants import ExecutionPath
from airflow_iqp.declaration import EXAMPLE_COST_MODELS
from airflow_iqp.planning.cost_model_file import load_cost_model

# Our departure from the protocol: every deadline also gets this many seconds, since anything run
# through Airflow (ours and the one-shot baseline alike) needs a scheduler loop and a task process
# after the window closes before any Spark work starts, while the first query's cost is ~2 s.
REACTION_S = 10.0

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path


def connect_model(query: str, into: Path) -> Path:
    """The query's cost model file with a Spark Connect section, written into `into`."""
    packaged: dict[str, Any] = json.loads((EXAMPLE_COST_MODELS / f"{query}.json").read_text())
    paths = packaged["paths"]
    section = paths.get(ExecutionPath.SPARK_CONNECT.value, paths[ExecutionPath.IN_PROCESS.value])
    target = into / f"{query}.json"
    target.write_text(json.dumps({"query": query, "unit": packaged["unit"], "paths": {"spark_connect": section}}))
    return target


def single_batch_cost(model: Path, rows: int) -> float:
    """Seconds one batch of `rows` tuples and its merge take, by the model's Connect section."""
    fitted = load_cost_model(model, ExecutionPath.SPARK_CONNECT)
    return fitted.partial.cost(rows) + fitted.merge.cost(1)


def deadline_offsets(costs: Mapping[str, float], queries: Sequence[str], delta: float) -> dict[str, float]:
    """Seconds after the window's end each query's result is due: REACTION_S + delta x the
    cumulative costs.
    """
    offsets, total = {}, 0.0
    for query in queries:
        total += costs[query]
        offsets[query] = REACTION_S + delta * total
    return offsets
