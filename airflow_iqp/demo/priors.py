"""Fit the example queries' priors on this machine, at the demo's sizes.

The packaged cost_models/ were measured on another machine over at most ~60k rows (scale 0.01);
a demo window reads ~1M rows. Learning keeps its prior's shape and learns its scale
(`learning.prior`), so a window's first batch larger than any before is priced along the
packaged model's tail: in three 3-window demos q14's batch of 1.03M rows, its first past 227k,
was predicted 1.90-2.68 s and took 1.32-1.74 s (this machine's cost grows more slowly past
~200k rows). So the demo measures each query on its warmed server over one window's files as
1, 2 and 4 batches and one unit (`costfit.measure`, as `iqp fit-cost-model` does), writes the
fits where `[iqp] prior_models` points, and its DAGs learn from those. A fit is kept per stream
(its scale and files) and reused by the next demo on the same machine.
"""

from __future__ import annotations

import json
import shutil
from typing import TYPE_CHECKING

from airflow_iqp.constants import ExecutionPath
from airflow_iqp.costfit.batches import Dataset, TpchSource
from airflow_iqp.costfit.measure import Plan, measure
from airflow_iqp.costfit.model import write_model
from airflow_iqp.costfit.runners import ConnectRunner
from airflow_iqp.planning.cost_model_file import fitted_paths
from airflow_iqp.queries import load_query

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path


# A window's files as 1, 2 and 4 batches (partials of all, a half and a quarter; merges of 1, 2
# and 4), and a one-unit partial: a dynamic window's first batch while it measures its intercept.
PLAN = Plan(splits=(1, 2, 4), single_partials=(1,))


def fitted_here(model: Path, about: dict[str, object]) -> bool:
    """Whether `model` holds a Connect fit over the same data (`about`): a demo fitted it before."""
    if ExecutionPath.SPARK_CONNECT not in fitted_paths(model):
        return False
    document = json.loads(model.read_text())
    return all(document.get(key) == value for key, value in about.items())


def fit_priors(url: str, source: Path, queries: Sequence[str], units: int, out: Path) -> list[str]:
    """Each query's Spark Connect model over `units` files of the stream at `source`, measured on
    the server at `url` and written to `out`/<query>.json, unless a fit over the same data is
    there; returns the queries measured now.
    """
    data = Dataset.open(source)
    about: dict[str, object] = {"scale": data.manifest.scale, "files": units, "stream": source.name}
    runner = ConnectRunner(url)
    measured = []
    for name in queries:
        model = out / f"{name}.json"
        if fitted_here(model, about):
            continue
        work = out / "work" / name
        try:
            jobs = measure(TpchSource(data, load_query(name), units), runner, PLAN, work, lambda _: None)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        write_model(model, name, about, {ExecutionPath.SPARK_CONNECT: jobs})
        measured.append(name)
    shutil.rmtree(out / "work", ignore_errors=True)
    return measured
