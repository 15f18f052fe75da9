"""Check a merged window against one Spark SQL pass over the same files.

The window's files are the ones the stream descriptor puts in it (not what the batches say they
read), the static tables come from the generated stream's `static/`, and the query runs whole
in one local SparkSession. Integers and strings must be equal; floats and decimals within a
relative 1e-9 (the batched plan adds in another order).
"""

from __future__ import annotations

import math
import os
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq

from airflow_iqp.data.descriptor import StreamDescriptor, load_descriptor
from airflow_iqp.tpch.manifest import STATIC_DIR, STREAM_DIR, part_name
from airflow_iqp.queries import QueryDefinition, load_query

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime

    from pyspark.sql import DataFrame, SparkSession

REL_TOL = 1e-9


def window_paths(descriptor: StreamDescriptor, landing: Path, stream: str, start: datetime, end: datetime) -> list[str]:
    """The landing paths of a stream's files in the window, by the replay's descriptor."""
    return [str(Path(landing) / stream / part_name(i)) for i in descriptor.window_files(start, end)]


def _stream_frame(spark: SparkSession, descriptor: StreamDescriptor, paths: list[str], stream: str) -> DataFrame:
    if paths:
        return spark.read.parquet(*paths)
    # No file in the window: an empty table with the stream's schema.
    schema = spark.read.parquet(str(descriptor.source / STREAM_DIR / stream / part_name(0))).schema
    return spark.createDataFrame([], schema)


def single_pass(
    spark: SparkSession, query: QueryDefinition, landing: Path, start: datetime, end: datetime
) -> list[dict[str, Any]]:
    """The query over the window's files and the static tables, in one Spark SQL statement."""
    descriptor = load_descriptor(landing)
    views = []
    try:
        for stream in query.streams:
            paths = window_paths(descriptor, landing, stream, start, end)
            _stream_frame(spark, descriptor, paths, stream).createOrReplaceTempView(stream)
            views.append(stream)
        for table in query.static_tables:
            spark.read.parquet(str(descriptor.source / STATIC_DIR / table)).createOrReplaceTempView(table)
            views.append(table)
        return [row.asDict() for row in spark.sql(query.sql).collect()]
    finally:
        for view in views:
            spark.catalog.dropTempView(view)


def _equal(actual: Any, expected: Any) -> bool:
    if actual is None or expected is None:
        return actual is None and expected is None
    if isinstance(actual, bool) or isinstance(expected, bool):
        return actual == expected
    if isinstance(actual, int) and isinstance(expected, int):
        return actual == expected
    if isinstance(actual, float | Decimal | int) and isinstance(expected, float | Decimal | int):
        if isinstance(actual, Decimal) and isinstance(expected, Decimal):
            if actual == expected:
                return True
            return abs(actual - expected) <= Decimal(REL_TOL) * max(abs(actual), abs(expected))
        a, e = float(actual), float(expected)
        if math.isnan(a) or math.isnan(e):
            return math.isnan(a) and math.isnan(e)
        return math.isclose(a, e, rel_tol=REL_TOL, abs_tol=0.0)
    return actual == expected


def compare_rows(actual: Sequence[dict[str, Any]], expected: Sequence[dict[str, Any]], limit: int = 5) -> list[str]:
    """What differs between two results, row by row in order; empty when they agree."""
    problems: list[str] = []
    if len(actual) != len(expected):
        problems.append(f"{len(actual)} result rows, single pass has {len(expected)}")
    for i, (a, e) in enumerate(zip(actual, expected)):
        if list(a) != list(e):
            problems.append(f"row {i}: columns {list(a)} but single pass has {list(e)}")
        else:
            for column in a:
                if not _equal(a[column], e[column]):
                    problems.append(f"row {i} {column}: {a[column]!r} but single pass gives {e[column]!r}")
        if len(problems) >= limit:
            problems.append("...")
            break
    return problems


def read_result(location: str | Path) -> list[dict[str, Any]]:
    """A committed result as rows, in its order."""
    return pq.read_table(str(location)).to_pylist()


def verify_window(
    spark: SparkSession, query: str, landing: Path, start: datetime, end: datetime, result_location: str | Path
) -> tuple[list[dict[str, Any]], list[str]]:
    """(result rows, differences from the single pass); no differences means the window is exact."""
    result = read_result(result_location)
    expected = single_pass(spark, load_query(query), landing, start, end)
    return result, compare_rows(result, expected)


def local_spark() -> SparkSession:
    """One small in-process session, UTC like the jobs."""
    import warnings

    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("iqp-demo-verify")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark
