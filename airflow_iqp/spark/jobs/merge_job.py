"""spark-submit application: merge all committed partial outputs of a window into the result.

    spark-submit merge_job.py --spec merge.spec.json

The spec (`spec.MergeSpec`) names the query file, its stream tables, the window's committed
partial outputs and the output. Only committed partials of the same query are accepted, and no
input file may appear in two of them (that would count its rows twice). A window without input
merges the one partial made over no files: the query's answer over no rows. The result is one
Parquet file, so an ORDER BY survives the write. Exit codes: 0 committed, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_iqp.constants import JobKind
from airflow_iqp.spark.jobs.common import BAD_INPUT, JobError, load_decomposition, run_script, session
from airflow_iqp.spark.jobs.locations import local_path, spark_location
from airflow_iqp.spark.jobs.spec import MergeSpec, read_spec

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from pyspark.sql import SparkSession


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The merge job's command line."""
    parser = argparse.ArgumentParser(prog="merge_job", description=__doc__.split("\n")[0])
    parser.add_argument("--spec", type=Path, required=True, help="JSON job spec: query, streams, partials, output")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the job; bad input is one line on stderr and exit code 2."""
    args = parse_args(argv)
    try:
        run(read_spec(MergeSpec, args.spec))
    except JobError as err:
        print(f"merge_job: error: {err}", file=sys.stderr)
        return BAD_INPUT
    return 0


def check_partials(name: str, partials: Sequence[Path]) -> dict[str, int]:
    """Input rows per stream behind all partials, after checking each is a committed, disjoint partial of `name`."""
    from airflow_iqp.spark.jobs.output import read_marker

    seen: dict[Path, Path] = {}
    rows: dict[str, int] = {}
    for path in partials:
        marker = read_marker(path)
        if marker.get("kind") != JobKind.PARTIAL or marker.get("query") != name:
            raise JobError(
                f"{path} is not a partial output of query {name} (its marker says {marker.get('kind')} "
                f"of {marker.get('query')})"
            )
        for files in marker["inputs"].values():
            for file in files:
                key = local_path(file)
                if key in seen:
                    raise JobError(f"input file {file} is in two partials, {seen[key]} and {path}")
                seen[key] = path
        for stream, n in marker["input_rows"].items():
            rows[stream] = rows.get(stream, 0) + n
    return rows


def run(
    spec: MergeSpec, spark: SparkSession | None = None, before_commit: Callable[[], None] | None = None
) -> dict[str, Any]:
    """Check, merge and commit; returns the commit marker. `spark` and `before_commit` as in
    `partial_job.run`.
    """
    from airflow_iqp.spark.jobs.output import write_committed
    from airflow_iqp.spark.runner import run_merge

    decomposition = load_decomposition(local_path(spec.query), spec.streams)
    partials = [local_path(p) for p in spec.partials]
    input_rows = check_partials(spec.name, partials)
    spark = spark or session(f"iqp-merge-{spec.name}")
    result = run_merge(spark, decomposition, [spark.read.parquet(spark_location(p)) for p in partials])
    marker = {
        "kind": JobKind.MERGE.value,
        "query": spec.name,
        "partials": [str(p) for p in partials],
        "input_rows": input_rows,
    }
    return write_committed(result.coalesce(1), local_path(spec.output), marker, before_commit)


if __name__ == "__main__":
    run_script(main)
