"""The demo warms its Connect server up with each example query's own partial and merge jobs,
unrecorded, and leaves nothing of them behind."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_iqp.demo.warm import ROUNDS, warm_up
from airflow_iqp.tpch.generate import generate

if TYPE_CHECKING:
    from pathlib import Path

    from airflow_iqp.spark.connect_server import ConnectServer


def test_each_query_runs_its_partial_and_merge_every_round(connect_server: ConnectServer, tmp_path: Path) -> None:
    generate(tmp_path / "data", scale=0.001, files=2)
    out = tmp_path / "warm-up"

    seconds = warm_up(connect_server.url_with_token, tmp_path / "data", ["q6", "q14"], out)

    assert list(seconds) == ["q6", "q14"]
    assert all(len(jobs) == 2 * ROUNDS and all(s > 0 for s in jobs) for jobs in seconds.values())
    assert not out.exists()
