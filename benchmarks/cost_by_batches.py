"""Total cost of a query's whole stream by number of batches, normalized to one batch (paper Fig. 4).

Run: uv run python benchmarks/cost_by_batches.py [--data data/s001] [--queries q1,q3]
     uv run python benchmarks/cost_by_batches.py --from-models cost_models

Measuring: each query's stream is processed as 1, 2, 4, 8, 16, 32 batches in-process on one
shared session; a batch count's cost is the sum of its partial job times plus its merge time.
With --from-models nothing runs: see `model_totals`. Timings on a shared 2-core machine are noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from airflow_iqp.constants import ExecutionPath
from airflow_iqp.costfit.batches import Dataset, TpchSource, split
from airflow_iqp.costfit.measure import Measurements, Plan, measure
from airflow_iqp.planning.cost_model_file import FittedCostModel, load_cost_model

BATCHES = (1, 2, 4, 8, 16, 32)
Totals = dict[str, dict[int, tuple[float, str]]]  # query -> batches -> (seconds, "*" if predicted)


def measured_totals(data: Dataset, queries: list[str]) -> Totals:
    from airflow_iqp.costfit.progress import Progress
    from airflow_iqp.costfit.runners import InProcessRunner, local_session
    from airflow_iqp.queries import load_query

    runner = InProcessRunner(local_session())
    plan = Plan(splits=tuple(k for k in BATCHES if k <= data.manifest.files))
    progress = Progress(len(queries) * plan.jobs())
    totals: dict[str, dict[int, float]] = {}
    with tempfile.TemporaryDirectory(prefix="iqp-fig4-") as work:
        for query in queries:
            source = TpchSource(data, load_query(query))
            result = measure(source, runner, plan, Path(work) / query, progress.step, warm_up=True)
            totals[query] = result.split_totals()
    progress.close()
    return {query: {k: (v, "") for k, v in by_k.items()} for query, by_k in totals.items()}


def predicted_total(model: FittedCostModel, batches: int, tuples: list[int]) -> float:
    return sum(map(model.partial.cost, tuples)) + model.merge.cost(batches)


def model_totals(models: Path, data: Dataset, queries: list[str]) -> tuple[Totals, Totals]:
    """(in-process totals, spark-submit totals) from the model files, by number of batches.

    In-process totals are the splits measured while fitting; a batch count that was not measured
    is predicted from the fitted in-process model and marked. Spark-submit totals are all predicted
    from its fitted model at the tuple counts of the batches the data would be cut into.
    """
    from airflow_iqp.queries import load_query

    in_process: Totals = {}
    spark_submit: Totals = {}
    for query in queries:
        path = models / f"{query}.json"
        section = json.loads(path.read_text())["paths"][ExecutionPath.IN_PROCESS.value]
        recorded = Measurements(section["partial"]["measured"], section["merge"]["measured"]).split_totals()
        streams = load_query(query).streams
        files = data.manifest.files
        sizes = {k: [data.rows(streams, r) for r in split(files, k)] for k in BATCHES if k <= files}
        fitted = load_cost_model(path, ExecutionPath.IN_PROCESS)
        in_process[query] = {
            k: (recorded[k], "") if k in recorded else (predicted_total(fitted, k, n), "*") for k, n in sizes.items()
        }
        submit = load_cost_model(path, ExecutionPath.SPARK_SUBMIT)
        spark_submit[query] = {k: (predicted_total(submit, k, n), "") for k, n in sizes.items()}
    return in_process, spark_submit


def print_table(title: str, totals: Totals) -> None:
    """One row per query: each total divided by the one-batch total, which is shown in seconds."""
    print(f"\n{title}: total cost relative to one batch")
    print(f"{'query':<6}" + "".join(f"{k:>8}" for k in BATCHES) + f"{'1 batch s':>11}")
    for query, by_k in totals.items():
        one = by_k[1][0]
        cells = "".join(f"{by_k[k][0] / one:>7.2f}{by_k[k][1] or ' '}" if k in by_k else f"{'-':>8}" for k in BATCHES)
        print(f"{query:<6}{cells}{one:>11.2f}")


def main() -> None:
    from airflow_iqp.queries import list_queries

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=Path("data/s001"), help="made by `iqp data generate`")
    parser.add_argument("--queries", default="all", help="comma-separated names, or all")
    parser.add_argument("--from-models", type=Path, help="read model files (<query>.json) instead of measuring")
    args = parser.parse_args()
    queries = list(list_queries()) if args.queries == "all" else args.queries.split(",")
    if args.from_models:
        in_process, spark_submit = model_totals(args.from_models, Dataset.open(args.data), queries)
        print_table("in-process, measured while fitting (* = predicted by the fitted in-process model)", in_process)
        print_table("spark-submit, predicted by the fitted spark-submit models", spark_submit)
    else:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        print_table("in-process, measured", measured_totals(Dataset.open(args.data), queries))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
