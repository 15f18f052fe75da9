"""The same window on both execution paths, through `airflow dags test`: the `iqp_spark`
connection of type `spark` runs every job as a spark-submit, of type `spark_connect` on the test
session's Spark Connect server. Both give the same result, equal to pandas over the window's
files, and each records its jobs' costs under its own path.

This is the one integration test that runs spark-submit: a past window is one batch and the
merge, two applications of 25-60 s each on two busy cores.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING

import pytest

from airflow_iqp.constants import ExecutionPath, JobKind, WindowStatus
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.results.publish import read_result
from tests.integration.airflow_env import SPARK_SUBMIT, AirflowEnv
from tests.integration.test_real_inputs import (
    MINUTE,
    SALES_SQL,
    W0,
    Setup,
    assert_rows,
    expected_sales,
    write_products,
    write_sales,
)

if TYPE_CHECKING:
    from pathlib import Path

    import pandas as pd

    from airflow_iqp.spark.connect_server import ConnectServer


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory, connect_server: ConnectServer, airflow_metadata: Path) -> Setup:
    env = AirflowEnv(tmp_path_factory.mktemp("airflow"), connect_server.connection())
    env.copy_metadata(airflow_metadata)
    return Setup(env, tmp_path_factory.mktemp("data"))


@pytest.fixture(scope="module")
def products(setup: Setup) -> pd.DataFrame:
    return write_products(setup)


def test_the_same_window_on_spark_submit_and_on_connect_gives_the_same_result(
    setup: Setup, products: pd.DataFrame
) -> None:
    sales = setup.data / "sales"
    files = [write_sales(sales, W0 + timedelta(seconds=4 + 13 * i), 30 + i, seed=300 + i) for i in range(4)]
    write_sales(sales, W0 + MINUTE + timedelta(seconds=5), 20, seed=399)  # the next window's
    results = {}
    for path, env in (
        (ExecutionPath.SPARK_CONNECT, setup.env),
        (ExecutionPath.SPARK_SUBMIT, replace(setup.env, spark=SPARK_SUBMIT)),
    ):
        dag_id = f"sales_{path.value}"
        (setup.env.dags / f"{dag_id}.sql").write_text(SALES_SQL)
        setup.dag(
            dag_id,
            query=f"{dag_id}.sql",
            stream="sales",
            path=sales,
            window=MINUTE,
            static={"products": str(setup.data / "dim" / "products")},
        )
        Setup(env, setup.data).run(dag_id, W0)
        window = setup.window(dag_id, W0)
        assert window.status == WindowStatus.MERGED
        results[path] = read_result(str(window.result_uri))
        with session_scope(setup.env.ledger) as session:  # learning: the calibration's jobs fit a first model
            observed = {p: store.cost_observations(session, dag_id, p) for p in ExecutionPath}
            learned = {p for p in ExecutionPath if store.latest_cost_model(session, dag_id, p) is not None}
        assert {o.kind for o in observed[path]} == {JobKind.PARTIAL, JobKind.MERGE}, f"{path}: {observed}"
        assert [p for p, found in observed.items() if found] == [path], f"{dag_id} ran on {path.value}"
        assert learned == {path}
    assert results[ExecutionPath.SPARK_CONNECT] == results[ExecutionPath.SPARK_SUBMIT]
    assert_rows(results[ExecutionPath.SPARK_CONNECT], expected_sales(files, products))
