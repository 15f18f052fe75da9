"""Run one batch's partial aggregate and the final merge of a decomposed query with Spark.

Each call hands its inputs to Spark as DataFrame arguments of `spark.sql`: the SQL is rewritten
so that each input table becomes a `{placeholder}` (the table's name stays as its alias), and
`spark.sql(sql, **frames)` binds the frames. Nothing here registers a view that the returned
DataFrame needs later: Spark Connect sends the frames' plans along with the SQL (resolved
lazily, at the write), and classic PySpark resolves its short-lived internal views eagerly,
before `spark.sql` returns. Registering our own views and dropping them on return, as this
module did, is only safe on classic Spark; keeping them until after the write would leak
session state into every caller. Tables not given as frames (catalog tables, a caller's views)
are read from the session by name.
"""

from __future__ import annotations

import re
import uuid
from functools import reduce
from typing import TYPE_CHECKING

from airflow_iqp.spark.rewrite import referenced_tables, rename_tables

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from pyspark.sql import DataFrame, SparkSession

    from airflow_iqp.sql import Decomposition


def _sql_with_frames(spark: SparkSession, sql: str, frames: Mapping[str, DataFrame]) -> DataFrame:
    """`sql` reading `frames[name]` wherever it reads table `name`, bound by `spark.sql`'s arguments."""
    tag = uuid.uuid4().hex[:12]
    tokens = {name: f"iqp_{i}_{tag}" for i, name in enumerate(frames)}
    template = rename_tables(sql, tokens).replace("{", "{{").replace("}", "}}")  # braces in the SQL stay literal
    for token in tokens.values():
        template = re.sub(rf"\b{token}\b", "{" + token + "}", template)
    return spark.sql(template, args=None, **{tokens[name]: df for name, df in frames.items()})


def _require_tables(spark: SparkSession, sql: str, provided: set[str]) -> None:
    missing = sorted(t for t in referenced_tables(sql) - provided if not spark.catalog.tableExists(t))
    if missing:
        raise ValueError(f"static table(s) {missing} are not registered in the Spark session")


def run_partial(
    spark: SparkSession,
    decomposition: Decomposition,
    inputs: Mapping[str, DataFrame],
    static: Mapping[str, DataFrame] | None = None,
) -> DataFrame:
    """The partial aggregate of one batch; `inputs` holds the batch's rows of each stream, `static`
    the static tables not read from the session.
    """
    streams = {s.lower() for s in decomposition.streams}
    given = {s.lower(): df for s, df in inputs.items()}
    if set(given) != streams:
        raise ValueError(f"the query reads streams {sorted(streams)} but the batch gives {sorted(given)}")
    frames = {**{t.lower(): df for t, df in (static or {}).items()}, **given}
    _require_tables(spark, decomposition.partial_sql, set(frames))
    return _sql_with_frames(spark, decomposition.partial_sql, frames)


def run_merge(spark: SparkSession, decomposition: Decomposition, partials: Sequence[DataFrame]) -> DataFrame:
    """The final result from all partial results of a window (empty partials are fine)."""
    if not partials:
        raise ValueError("the merge needs at least one partial result (an empty batch still has one)")
    union = reduce(lambda a, b: a.unionByName(b), partials)
    name = decomposition.partials_view.lower()
    _require_tables(spark, decomposition.merge_sql, {name})
    return _sql_with_frames(spark, decomposition.merge_sql, {name: union})
