"""spark-submit application: the partial aggregate of one batch of a query's input files.

    spark-submit partial_job.py --query q3 --batch batch.json --static DATA/static \
        --manifest DATA/manifest.json --output OUT/q3/batch-0003

`batch.json` maps each stream the query reads to the exact files of the batch. Every file is
checked against the manifest before Spark starts work; the output is committed atomically.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_iqp.constants import JobKind
from airflow_iqp.spark.jobs.common import (
    JobError,
    check_batch,
    load_decomposition,
    read_batch,
    read_manifest,
    register_static,
    run_script,
    session,
)

if TYPE_CHECKING:
    from collections.abc import Sequence


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The partial job's command line."""
    parser = argparse.ArgumentParser(prog="partial_job", description=__doc__.split("\n")[0])
    parser.add_argument("--query", required=True, help="query name (e.g. q3) or path of its .sql file")
    parser.add_argument("--batch", type=Path, required=True, help="JSON: stream -> list of the batch's files")
    parser.add_argument("--static", type=Path, required=True, help="directory holding <table>/ Parquet dirs")
    parser.add_argument("--manifest", type=Path, required=True, help="manifest.json of the generated stream")
    parser.add_argument("--output", type=Path, required=True, help="Parquet directory of this batch's result")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the job; bad input is one line on stderr and exit code 2."""
    args = parse_args(argv)
    try:
        run(args)
    except JobError as err:
        print(f"partial_job: error: {err}", file=sys.stderr)
        return 2
    return 0


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Check, compute and commit; returns the commit marker."""
    from airflow_iqp.spark.jobs.output import write_committed
    from airflow_iqp.spark.runner import run_partial

    batch = read_batch(args.batch)
    input_rows = check_batch(batch, read_manifest(args.manifest))
    name, decomposition, static_tables = load_decomposition(args.query)
    if set(batch) != set(decomposition.streams):
        raise JobError(f"query {name} reads streams {sorted(decomposition.streams)}, the batch gives {sorted(batch)}")
    spark = session(f"iqp-partial-{name}")
    register_static(spark, args.static, static_tables)
    frames = {stream: spark.read.parquet(*map(str, files)) for stream, files in batch.items()}
    result = run_partial(spark, decomposition, frames)
    marker = {
        "kind": JobKind.PARTIAL.value,
        "query": name,
        "inputs": {stream: [str(f) for f in files] for stream, files in batch.items()},
        "input_rows": input_rows,
    }
    return write_committed(result, args.output, marker)


if __name__ == "__main__":
    run_script(main)
