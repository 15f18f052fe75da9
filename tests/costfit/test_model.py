"""Cost-model files: the round trip, one real measurement, the committed models (the fitter: tests/learning)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np

from airflow_iqp.constants import ExecutionPath
from airflow_iqp.costfit.measure import Measurements, Plan, measure
from airflow_iqp.costfit.model import write_model
from airflow_iqp.declaration import EXAMPLE_COST_MODELS
from airflow_iqp.planning.cost_model_file import load_cost_model
from airflow_iqp.queries import list_queries

if TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

IN_PROCESS, SPARK_SUBMIT = ExecutionPath.IN_PROCESS, ExecutionPath.SPARK_SUBMIT
TPCH = {"scale": 0.01, "files": 32}


def knee(x: np.ndarray) -> np.ndarray:
    """Flat-ish start-up, then a steeper rate past 8000 tuples: the shape Spark jobs show."""
    return np.where(x < 8000, 2.0 + x * 1e-4, 2.8 + (x - 8000) * 5e-4)


def synthetic(scale: float) -> Measurements:
    rng = np.random.default_rng(1)
    return Measurements(
        partial=[
            {"tuples": int(n), "seconds": float(knee(n) * scale), "batches": k}
            for k in (1, 2, 4)
            for n in rng.integers(1000, 32000, k)
        ],
        merge=[{"partials": k, "seconds": scale * (1 + 0.1 * k)} for k in (1, 2, 4)],
    )


def test_written_model_loads_for_both_paths(tmp_path: Path) -> None:
    path = tmp_path / "q3.json"
    write_model(path, "q3", TPCH, {IN_PROCESS: synthetic(1.0), SPARK_SUBMIT: synthetic(5.0)})
    document = json.loads(path.read_text())
    assert document["unit"] == "rows"
    assert document["scale"] == 0.01
    assert "hostname" not in json.dumps(document["machine"])
    assert document["machine"]["cpus"]
    for name in (IN_PROCESS, SPARK_SUBMIT):
        model = load_cost_model(path, name)
        section = document["paths"][name]
        assert [list(p) for p in model.partial.points] == section["partial"]["points"]
        assert len(section["partial"]["measured"]) == 7
        assert "rmse_seconds" in section["merge"]["fit_error"]
    assert load_cost_model(path, "spark_submit").merge.cost(4) > load_cost_model(path, "in_process").merge.cost(4)


def test_refitting_one_path_keeps_the_other(tmp_path: Path) -> None:
    path = tmp_path / "q3.json"
    write_model(path, "q3", TPCH, {IN_PROCESS: synthetic(1.0), SPARK_SUBMIT: synthetic(5.0)})
    before = json.loads(path.read_text())["paths"]["spark_submit"]
    write_model(path, "q3", TPCH, {IN_PROCESS: synthetic(2.0)})
    assert json.loads(path.read_text())["paths"]["spark_submit"] == before
    write_model(path, "q3", {**TPCH, "scale": 0.1}, {IN_PROCESS: synthetic(2.0)})  # other data: old paths are stale
    assert set(json.loads(path.read_text())["paths"]) == {"in_process"}


def test_real_in_process_measurement(spark: SparkSession, tmp_path: Path) -> None:
    """Two one-file batches and their merge: three real jobs, the least that exercises a split."""
    from airflow_iqp.costfit.batches import Dataset, TpchSource
    from airflow_iqp.costfit.runners import InProcessRunner
    from airflow_iqp.queries import load_query
    from airflow_iqp.tpch.generate import generate

    generate(tmp_path / "data", scale=0.001, files=2)
    data = Dataset.open(tmp_path / "data")
    steps: list[str] = []
    source = TpchSource(data, load_query("q6"))
    measured = measure(source, InProcessRunner(spark), Plan(splits=(2,)), tmp_path / "work", steps.append)
    assert len(steps) == Plan(splits=(2,)).jobs() == 3
    assert [p["tuples"] for p in measured.partial] == [data.rows(["lineitem"], range(i, i + 1)) for i in range(2)]
    assert list(measured.split_totals()) == [2]
    assert measured.split_totals()[2] > 0
    write_model(tmp_path / "q6.json", "q6", {"scale": 0.001, "files": 2}, {IN_PROCESS: measured})
    model = load_cost_model(tmp_path / "q6.json", "in_process")
    assert model.partial.cost(measured.partial[0]["tuples"]) > 0
    assert model.merge.cost(2) > 0


def test_committed_models_cover_every_query_on_both_paths() -> None:
    files = sorted(EXAMPLE_COST_MODELS.glob("*.json"))
    assert {f.stem for f in files} == set(list_queries())
    for path in files:
        for name in (IN_PROCESS, SPARK_SUBMIT):
            model = load_cost_model(path, name)
            assert model.query == path.stem
            assert len(model.partial.points) >= 2
            assert model.merge.cost(2) > 0
