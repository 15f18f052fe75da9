"""The demo fits its example queries' priors on its Connect server over one window's files, as
1, 2 and 4 batches and one unit, where `[iqp] prior_models` points: the DAGs learn from them, and
the next demo over the same stream reuses them."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import TYPE_CHECKING

from airflow_iqp.constants import ExecutionPath
from airflow_iqp.declaration import EXAMPLE_COST_MODELS, declare
from airflow_iqp.demo.priors import fit_priors
from airflow_iqp.planning.cost_model_file import load_cost_model
from airflow_iqp.runtime.costs import prior_model
from airflow_iqp.settings import option_env
from airflow_iqp.streams.spec import FileStream
from airflow_iqp.tpch.generate import generate

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

    from airflow_iqp.spark.connect_server import ConnectServer


def test_a_window_fit_is_the_dags_prior_and_is_reused(
    connect_server: ConnectServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """About 6 s: eight partials and three merges of q6 over 4 small files."""
    generate(tmp_path / "data", scale=0.001, files=6)
    out = tmp_path / "priors"

    assert fit_priors(connect_server.url_with_token, tmp_path / "data", ["q6"], 4, out) == ["q6"]
    document = json.loads((out / "q6.json").read_text())
    partial = document["paths"]["spark_connect"]["partial"]
    assert sorted({m["batches"] for m in partial["measured"]}, key=str) == [1, 2, 4, None]
    assert [m["partials"] for m in document["paths"]["spark_connect"]["merge"]["measured"]] == [1, 2, 4]
    assert not (out / "work").exists()

    q6 = declare(
        dag_id="iqp_q6",
        query="q6",
        window=timedelta(minutes=2),
        deadline=timedelta(minutes=2),
        streams={"lineitem": FileStream(str(tmp_path / "landing"))},
        output=str(tmp_path / "results/{dag_id}/{window_start}"),
    )
    packaged = {p: load_cost_model(EXAMPLE_COST_MODELS / "q6.json", p) for p in ExecutionPath}
    assert prior_model(q6, ExecutionPath.SPARK_CONNECT) == packaged[ExecutionPath.SPARK_CONNECT]
    monkeypatch.setenv(option_env("prior_models"), str(out))
    assert prior_model(q6, ExecutionPath.SPARK_CONNECT) == load_cost_model(out / "q6.json", ExecutionPath.SPARK_CONNECT)
    assert prior_model(q6, ExecutionPath.SPARK_SUBMIT) == packaged[ExecutionPath.SPARK_SUBMIT]  # not fitted here
    assert max(r for r, _ in load_cost_model(out / "q6.json", ExecutionPath.SPARK_CONNECT).partial.points) == max(
        m["tuples"] for m in partial["measured"]
    )

    assert fit_priors(connect_server.url_with_token, tmp_path / "data", ["q6"], 4, out) == []  # fitted before
