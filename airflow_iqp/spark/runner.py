"""Run one batch's partial aggregate and the final merge of a decomposed query with Spark.

Each call registers its inputs as uniquely named temporary views, rewrites the SQL to read
them, and drops them before returning. `spark.sql` analyses the query eagerly, binding the
views' plans into the returned DataFrame, so it stays valid after the views are gone (PySpark's
own `spark.sql("... {df}", df=df)` relies on the same).
"""

from __future__ import annotations

import uuid
from contextlib import contextmanager
from functools import reduce
from typing import TYPE_CHECKING, Protocol

from airflow_iqp.spark.rewrite import referenced_tables, rename_tables

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

    from pyspark.sql import DataFrame, SparkSession


class Decomposition(Protocol):
    """What this module needs of `airflow_iqp.sql.Decomposition` (read-only, as it is frozen)."""

    @property
    def partial_sql(self) -> str:
        """The per-batch query."""
        ...

    @property
    def merge_sql(self) -> str:
        """The query over the union of all partials."""
        ...

    @property
    def partials_view(self) -> str:
        """The table name `merge_sql` reads the partials from."""
        ...

    @property
    def streams(self) -> Sequence[str]:
        """The stream tables a batch gives rows of."""
        ...


@contextmanager
def _temp_views(spark: SparkSession, frames: Mapping[str, DataFrame]) -> Iterator[dict[str, str]]:
    """Register each frame under a fresh name; yields {given name: view name}."""
    tag = uuid.uuid4().hex[:12]
    names = {name: f"__iqp_{name}_{tag}" for name in frames}
    try:
        for name, df in frames.items():
            df.createTempView(names[name])
        yield names
    finally:
        for view in names.values():
            spark.catalog.dropTempView(view)


def _require_tables(spark: SparkSession, sql: str, provided: set[str]) -> None:
    missing = sorted(t for t in referenced_tables(sql) - provided if not spark.catalog.tableExists(t))
    if missing:
        raise ValueError(f"static table(s) {missing} are not registered in the Spark session")


def run_partial(spark: SparkSession, decomposition: Decomposition, inputs: Mapping[str, DataFrame]) -> DataFrame:
    """The partial aggregate of one batch; `inputs` holds the batch's rows of each stream."""
    streams = {s.lower() for s in decomposition.streams}
    given = {s.lower(): df for s, df in inputs.items()}
    if set(given) != streams:
        raise ValueError(f"the query reads streams {sorted(streams)} but the batch gives {sorted(given)}")
    _require_tables(spark, decomposition.partial_sql, streams)
    with _temp_views(spark, given) as views:
        return spark.sql(rename_tables(decomposition.partial_sql, views))


def run_merge(spark: SparkSession, decomposition: Decomposition, partials: Sequence[DataFrame]) -> DataFrame:
    """The final result from all partial results of a window (empty partials are fine)."""
    if not partials:
        raise ValueError("the merge needs at least one partial result (an empty batch still has one)")
    union = reduce(lambda a, b: a.unionByName(b), partials)
    name = decomposition.partials_view
    _require_tables(spark, decomposition.merge_sql, {name.lower()})
    with _temp_views(spark, {name: union}) as views:
        return spark.sql(rename_tables(decomposition.merge_sql, views))
