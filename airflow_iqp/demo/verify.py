"""Check a merged window against one Spark SQL pass over the same files.

The window's files are the ones a fresh listing of the declared streams puts in it (not what
the batches say they read), the static inputs are the declared ones, and the query runs whole
in one local SparkSession. Integers and strings must be equal; floats and decimals within a
relative 1e-9 (the batched plan adds in another order).
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from airflow_iqp.operators.window import spark_uri
from airflow_iqp.results.publish import read_result
from airflow_iqp.runtime.inputs import InputSpec, files_by_stream
from airflow_iqp.settings import driver_address

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime

    from pyspark.sql import DataFrame, SparkSession

    from airflow_iqp.declaration import Declaration
    from airflow_iqp.streams.spec import FileStream

REL_TOL = 1e-9
MASTER = "local[2]"  # the single pass runs in this process


def window_paths(
    declaration: Declaration, start: datetime, end: datetime
) -> tuple[dict[str, list[str]], dict[str, str]]:
    """The files of each stream in the window as Spark names them, and a sample file per stream
    (from any window) to read an empty stream's schema from.
    """
    selection = InputSpec.of(declaration.streams, start, end - start).look()
    samples = {f.stream: spark_uri(f.uri) for u in (*selection.later, *selection.earlier) for f in u.files}
    paths = {s: [spark_uri(f.uri) for f in files] for s, files in files_by_stream(selection.units).items()}
    return paths, samples


def _read(spark: SparkSession, stream: FileStream, paths: list[str]) -> DataFrame:
    reader = spark.read.format(str(stream.format)).options(**stream.options)
    if stream.schema:
        reader = reader.schema(stream.schema)
    return reader.load(paths)


def single_pass(spark: SparkSession, declaration: Declaration, start: datetime, end: datetime) -> list[dict[str, Any]]:
    """The query over the window's files and the static inputs, in one Spark SQL statement."""
    paths, samples = window_paths(declaration, start, end)
    views = []
    try:
        for name, stream in declaration.streams.items():
            if paths.get(name):
                frame = _read(spark, stream, paths[name])
            elif name in samples:  # no file in the window: an empty table with the stream's schema
                frame = _read(spark, stream, [samples[name]]).limit(0)
            else:
                raise ValueError(f"stream {name} has no file in any window to take its schema from")
            frame.createOrReplaceTempView(name)
            views.append(name)
        for name, static in declaration.static.items():
            table = spark.table(static.table) if static.table else spark.read.parquet(spark_uri(str(static.path)))
            table.createOrReplaceTempView(name)
            views.append(name)
        return [row.asDict() for row in spark.sql(declaration.query.sql).collect()]
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


def verify_window(
    spark: SparkSession, declaration: Declaration, start: datetime, end: datetime, result_location: str
) -> tuple[list[dict[str, Any]], list[str]]:
    """(published result rows, differences from the single pass); no differences means the window is exact."""
    result = read_result(result_location, declaration.output_conn_id)
    expected = single_pass(spark, declaration, start, end)
    return result, compare_rows(result, expected)


def local_spark() -> SparkSession:
    """One small in-process session, UTC like the jobs."""
    import os
    import warnings

    from pyspark.sql import SparkSession

    os.environ.update(driver_address(MASTER).env)  # the JVM Spark starts reads it from the environment
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    spark = (
        SparkSession.builder.master(MASTER)
        .appName("iqp-demo-verify")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark
