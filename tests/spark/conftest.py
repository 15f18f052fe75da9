"""A small generated TPC-H stream, shared by the Spark tests, and hand-written decompositions.

The decompositions stand in for `airflow_iqp.sql.decompose` so the Spark layer is tested on
its own: a grouped aggregate, a join of both streams with static tables, a global aggregate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from airflow_iqp.sql import Decomposition
from airflow_iqp.tpch.generate import STATIC_TABLES, generate
from airflow_iqp.tpch.manifest import STATIC_DIR, STREAM_DIR, part_name
from tests.spark.cluster import Cluster, standalone_cluster

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from pathlib import Path

    from pyspark.sql import DataFrame, SparkSession

STREAM_FILES = 14


DECOMPOSITIONS = {
    "flags": Decomposition(
        partial_sql="SELECT l_returnflag, l_linestatus, count(*) AS cnt, sum(l_quantity) AS qty "
        "FROM lineitem WHERE l_shipdate <= date '1998-09-02' GROUP BY l_returnflag, l_linestatus",
        merge_sql="SELECT l_returnflag, l_linestatus, sum(cnt) AS cnt, sum(qty) AS qty FROM partials "
        "GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus",
        partials_view="partials",
        streams=("lineitem",),
        output_columns=("l_returnflag", "l_linestatus", "cnt", "qty"),
    ),
    "nations": Decomposition(
        partial_sql="SELECT n.n_name, count(*) AS cnt, sum(lineitem.l_extendedprice) AS revenue "
        "FROM orders JOIN lineitem ON o_orderkey = lineitem.l_orderkey "
        "JOIN customer ON c_custkey = o_custkey JOIN nation n ON n.n_nationkey = c_nationkey "
        "GROUP BY n.n_name",
        merge_sql="SELECT n_name, sum(cnt) AS cnt, sum(revenue) AS revenue FROM partials "
        "GROUP BY n_name ORDER BY n_name",
        partials_view="partials",
        streams=("orders", "lineitem"),
        output_columns=("n_name", "cnt", "revenue"),
    ),
    "total": Decomposition(
        partial_sql="SELECT count(*) AS cnt, sum(o_totalprice) AS total FROM orders",
        merge_sql="SELECT sum(cnt) AS cnt, sum(total) AS total FROM partials",
        partials_view="partials",
        streams=("orders",),
        output_columns=("cnt", "total"),
    ),
}


@pytest.fixture(scope="package")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One standalone cluster for the package's tests on one (its start costs 15 s): each test
    tells its own applications from those of the tests before it (`Cluster.app_ids`).
    """
    with standalone_cluster(tmp_path_factory.mktemp("cluster")) as running:
        yield running


@pytest.fixture(scope="session")
def tpch_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Scale 0.01 in 14 files: about 1,070 orders and 4,300 lineitems per file."""
    out = tmp_path_factory.mktemp("tpch") / "data"
    generate(out, scale=0.01, files=STREAM_FILES)
    return out


@pytest.fixture(scope="session")
def tpch_static(spark: SparkSession, tpch_dir: Path) -> Path:
    """Registers every static table as a view of the shared session; returns their directory."""
    for table in STATIC_TABLES:
        spark.read.parquet(str(tpch_dir / STATIC_DIR / table)).createOrReplaceTempView(table)
    return tpch_dir / STATIC_DIR


@pytest.fixture(scope="session")
def stream_files(tpch_dir: Path) -> Callable[[str, Sequence[int]], list[str]]:
    """stream_files("orders", range(3, 7)): paths of those file indexes of a stream."""

    def files(stream: str, indexes: Sequence[int]) -> list[str]:
        return [str(tpch_dir / STREAM_DIR / stream / part_name(i)) for i in indexes]

    return files


@pytest.fixture(scope="session")
def read_batch(
    spark: SparkSession,
    stream_files: Callable[[str, Sequence[int]], list[str]],
) -> Callable[[Sequence[str], Sequence[int]], dict[str, DataFrame]]:
    """read_batch(streams, indexes): {stream: DataFrame of those files}; no indexes, an empty batch."""

    def read(streams: Sequence[str], indexes: Sequence[int]) -> dict[str, DataFrame]:
        if not indexes:
            return {s: spark.read.parquet(*stream_files(s, [0])).limit(0) for s in streams}
        return {s: spark.read.parquet(*stream_files(s, indexes)) for s in streams}

    return read


@pytest.fixture(scope="session")
def decompositions() -> dict[str, Decomposition]:
    return DECOMPOSITIONS
