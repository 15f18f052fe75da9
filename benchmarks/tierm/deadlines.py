"""Each query's cost model and deadline, by the paper's protocol: window end + delta x the
cumulative single-batch costs, the queries taken in the order given (plus REACTION_S, below).

A query's single-batch cost is what the cost model our DAG plans with predicts for one partial
over the whole window and a merge of that one partial: known before any run, as a deadline must
be. That model is fitted on the stream's own files (`iqp fit-cost-model --paths spark_connect`
on a private Connect server, once per generated stream), as a user fits a model on the files
they have. The packaged models were fitted on 60,000 rows at most, a twentieth of a Tier M
window's 1.2M: extrapolated that far, they planned the 20-minute run's 13 windows in 223
batches (2026-11-28), each with its own task process and job.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from airflow_iqp.constants import ExecutionPath
from airflow_iqp.planning.cost_model_file import load_cost_model

# Our departure from the protocol: every deadline also gets this many seconds, since anything run
# through Airflow (ours and the one-shot baseline alike) needs a scheduler loop and a task process
# after the window closes before any Spark work starts, while the first query's cost is ~2 s.
REACTION_S = 10.0

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence


def fitted_models(source: Path, queries: Sequence[str], into: Path) -> dict[str, Path]:
    """Each query's model file with a Spark Connect section fitted on the stream at `source`,
    measured once on one private server and kept in `into` (a model already there is reused).
    """
    from airflow_iqp.spark.connect_server import running

    models = {q: into / f"{q}.json" for q in queries}
    missing = [q for q, path in models.items() if not path.is_file()]
    if missing:
        into.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="iqp-tierm-fit-") as state, running(Path(state)) as server:
            on = ["--paths", "spark_connect", "--connect", server.url_with_token, "--out", str(into)]
            for query in missing:
                fit = ["fit-cost-model", query, "--data", str(source), *on]
                subprocess.run([sys.executable, "-m", "airflow_iqp.cli", *fit], check=True)
    return models


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
