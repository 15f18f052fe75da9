"""spark-submit application: the partial aggregate of one batch of a query's input files.

    spark-submit partial_job.py --spec batch-0003.spec.json [--report batch-0003.report.json]

The spec (`spec.PartialSpec`) names the query file, each stream's files in the batch and how to
read them, the static inputs and the output. Every file is checked before anything is written
(see `inputs`); the output is committed atomically with a marker listing the inputs and their
rows per stream, or not at all.

Exit codes: 0 committed; 2 bad input (the one-line error says what to fix); 3 input files that
cannot be read: the error names the first, and `--report` (written only then) lists them all as
{"corrupt": [{"stream", "file", "error"}, ...]}, so the caller can quarantine them and rerun.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_iqp.atomic import write_json
from airflow_iqp.constants import JobKind
from airflow_iqp.spark.jobs.common import BAD_INPUT, CORRUPT_INPUT, JobError, load_decomposition, run_script, session
from airflow_iqp.spark.jobs.inputs import CorruptInput, check_exist, parquet_rows
from airflow_iqp.spark.jobs.locations import local_path
from airflow_iqp.spark.jobs.spec import PartialSpec, read_spec

if TYPE_CHECKING:
    from collections.abc import Sequence


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The partial job's command line."""
    parser = argparse.ArgumentParser(prog="partial_job", description=__doc__.split("\n")[0])
    parser.add_argument("--spec", type=Path, required=True, help="JSON job spec: query, streams' files, static, output")
    parser.add_argument("--report", type=Path, help="JSON file listing unreadable input files (written on exit 3)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the job; see the module doc for the exit codes."""
    args = parse_args(argv)
    if args.report is not None:
        args.report.unlink(missing_ok=True)  # a report left by an earlier attempt is not this run's
    try:
        run(read_spec(PartialSpec, args.spec))
    except CorruptInput as err:
        if args.report is not None:
            write_json(args.report, err.report())
        print(f"partial_job: error: {err}", file=sys.stderr)
        return CORRUPT_INPUT
    except JobError as err:
        print(f"partial_job: error: {err}", file=sys.stderr)
        return BAD_INPUT
    return 0


def run(spec: PartialSpec) -> dict[str, Any]:
    """Check, compute and commit; returns the commit marker."""
    from airflow_iqp.spark.jobs.inputs import read_static, read_stream, spark_failures, spark_rows, unreadable_files
    from airflow_iqp.spark.jobs.output import write_committed
    from airflow_iqp.spark.rewrite import referenced_tables
    from airflow_iqp.spark.runner import run_partial

    decomposition = load_decomposition(local_path(spec.query), spec.streams)
    streams = {name.lower(): stream for name, stream in spec.streams.items()}
    if set(streams) != set(decomposition.streams):
        raise JobError(
            f"query {spec.name} reads streams {sorted(decomposition.streams)}, the spec gives {sorted(streams)}"
        )
    undeclared = sorted(referenced_tables(decomposition.partial_sql) - set(streams) - {s.lower() for s in spec.static})
    if undeclared:
        raise JobError(
            f"query {spec.name} reads table(s) {undeclared}, which the spec gives as neither stream nor static"
        )
    check_exist(streams)

    rows, corrupt = {}, []
    for name, stream in streams.items():
        if stream.format == "parquet":
            rows[name], unreadable = parquet_rows(name, stream)
            corrupt += unreadable
    spark = session(f"iqp-partial-{spec.name}")
    static = {name: read_static(spark, name, table) for name, table in spec.static.items()}
    for name, stream in streams.items():
        if stream.format != "parquet":
            rows[name], unreadable = spark_rows(spark, name, stream)
            corrupt += unreadable
    if corrupt:
        raise CorruptInput(corrupt)

    frames = {name: read_stream(spark, name, stream) for name, stream in streams.items()}
    result = run_partial(spark, decomposition, frames, static)
    marker = {
        "kind": JobKind.PARTIAL.value,
        "query": spec.name,
        "inputs": {name: list(stream.files) for name, stream in streams.items()},
        "input_rows": rows,
    }
    try:
        return write_committed(result, local_path(spec.output), marker)
    except spark_failures():
        corrupt = [c for name, stream in streams.items() for c in unreadable_files(spark, name, stream)]
        if not corrupt:
            raise
        raise CorruptInput(corrupt) from None


if __name__ == "__main__":
    run_script(main)
