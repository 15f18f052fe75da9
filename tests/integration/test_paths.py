"""A window on the spark-submit path, through `airflow dags test`: the `iqp_spark` connection of
type `spark` runs every job as a spark-submit (every other Airflow test runs on the session's
Spark Connect server). The result equals pandas over the window's files, and the jobs' costs are
recorded and learned under the spark-submit path only. (Both paths on one cluster, the same
window, the same result: tests/spark/test_cluster.py.)

A past window is one batch and the merge, two applications of 15-30 s each on two busy cores.
"""

from __future__ import annotations

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


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory, airflow_metadata: Path) -> Setup:
    env = AirflowEnv(tmp_path_factory.mktemp("airflow"), SPARK_SUBMIT)
    env.copy_metadata(airflow_metadata)
    return Setup(env, tmp_path_factory.mktemp("data"))


@pytest.fixture(scope="module")
def products(setup: Setup) -> pd.DataFrame:
    return write_products(setup)


def test_a_window_on_spark_submit_equals_pandas_and_learns_under_its_path(setup: Setup, products: pd.DataFrame) -> None:
    sales = setup.data / "sales"
    files = [write_sales(sales, W0 + timedelta(seconds=4 + 13 * i), 30 + i, seed=300 + i) for i in range(4)]
    write_sales(sales, W0 + MINUTE + timedelta(seconds=5), 20, seed=399)  # the next window's
    dag_id = "sales_spark_submit"
    (setup.env.dags / f"{dag_id}.sql").write_text(SALES_SQL)
    setup.dag(
        dag_id,
        query=f"{dag_id}.sql",
        stream="sales",
        path=sales,
        window=MINUTE,
        static={"products": str(setup.data / "dim" / "products")},
    )
    setup.run(dag_id, W0)
    window = setup.window(dag_id, W0)
    assert window.status == WindowStatus.MERGED
    assert_rows(read_result(str(window.result_uri)), expected_sales(files, products))
    with session_scope(setup.env.ledger) as session:  # learning: the calibration's jobs fit a first model
        observed = {p: store.cost_observations(session, dag_id, p) for p in ExecutionPath}
        learned = {p for p in ExecutionPath if store.latest_cost_model(session, dag_id, p) is not None}
    assert {o.kind for o in observed[ExecutionPath.SPARK_SUBMIT]} == {JobKind.PARTIAL, JobKind.MERGE}, observed
    assert [p for p, found in observed.items() if found] == [ExecutionPath.SPARK_SUBMIT]
    assert learned == {ExecutionPath.SPARK_SUBMIT}
