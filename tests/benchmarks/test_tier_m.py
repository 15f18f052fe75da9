from __future__ import annotations

import json
from typing import TYPE_CHECKING, cast

import pytest

from airflow_iqp.declaration import EXAMPLE_COST_MODELS
from benchmarks.tierm.airflow_side import AirflowWindow
from benchmarks.tierm.deadlines import REACTION_S, deadline_offsets, fitted_models, single_batch_cost
from benchmarks.tierm.run import QueryResult, SystemRun
from benchmarks.tierm.table import totals

if TYPE_CHECKING:
    from pathlib import Path

    from benchmarks.tierm.airflow_side import Stream
    from benchmarks.tierm.services import Services


def test_deadlines_grow_with_the_cumulative_costs_in_the_given_order() -> None:
    offsets = deadline_offsets({"a": 2.0, "b": 3.0, "c": 1.0}, ["b", "a", "c"], delta=2.0)
    assert offsets == {"b": REACTION_S + 6.0, "a": REACTION_S + 10.0, "c": REACTION_S + 12.0}


def test_a_stream_s_fitted_models_are_reused_not_measured_again(tmp_path: Path) -> None:
    """Models already fitted for the stream are returned as they are: no server, no measurement."""
    packaged = json.loads((EXAMPLE_COST_MODELS / "q6.json").read_text())
    fitted = {"query": "q6", "unit": "rows", "paths": {"spark_connect": packaged["paths"]["spark_connect"]}}
    (tmp_path / "q6.json").write_text(json.dumps(fitted))
    models = fitted_models(tmp_path / "no-stream-here", ["q6"], tmp_path)
    assert models == {"q6": tmp_path / "q6.json"}
    assert single_batch_cost(models["q6"], 10_000) > single_batch_cost(models["q6"], 1_000) > 0


def _run(config: str, cpu: dict[str, float], ready: float | None, exact: bool = True) -> SystemRun:
    return SystemRun(config, cpu, 2**30, 60.0, {"q1": QueryResult(ready, 1.0, exact)}, 0.0)


def test_a_result_counts_only_if_exact_and_in_time_and_a_refused_query_not_at_all() -> None:
    assert _run("x", {}, 5.0).met("q1", 5.0) is True
    assert _run("x", {}, 5.1).met("q1", 5.0) is False
    assert _run("x", {}, 1.0, exact=False).met("q1", 5.0) is False
    refused = SystemRun("x", {}, 0, 0.0, {}, 0.0, refused={"q1": "a subquery on a stream"})
    assert refused.met("q1", 5.0) is None


def test_the_total_divides_by_ours_and_shows_airflows_share() -> None:
    ours = _run("ours-loose", {"spark": 10.0, "scheduler": 5.0, "tasks": 5.0}, 1.0)
    streaming = _run("SS-default", {"spark": 60.0}, 1.0)
    table = totals([ours, streaming], {"tight": {"q1": 0.5}, "loose": {"q1": 2.0}})
    lines = table.splitlines()
    assert lines[2].split("|")[6].strip() == "50%"  # Airflow's share of ours
    assert lines[3].split("|")[8].strip() == "3.00x"  # streaming / ours-loose
    assert lines[3].split("|")[10:12] == [" 0/1 ", " 1/1 "]  # met tight, met loose
    assert ours.airflow == pytest.approx(10.0)


def test_task_priorities_follow_the_deadlines(tmp_path: Path) -> None:
    window = AirflowWindow(
        services=cast("Services", None),
        stream=cast("Stream", None),
        config="ours-loose",
        work=tmp_path,
        deadlines={"q1": 16.0, "q3": 27.0, "q4": 42.0},
    )
    assert [window._priority(q) for q in ("q1", "q3", "q4")] == [3, 2, 1]
