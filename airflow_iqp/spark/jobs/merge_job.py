"""spark-submit application: merge all committed partial outputs of a window into the result.

    spark-submit merge_job.py --query q3 --output OUT/q3/result OUT/q3/batch-0000 OUT/q3/batch-0001 ...

Only committed partials are accepted, and no input file may appear in two of them (that would
count its rows twice). The result is one Parquet file, so an ORDER BY survives the write.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_iqp.constants import JobKind
from airflow_iqp.spark.jobs.common import JobError, load_decomposition, run_script, session

if TYPE_CHECKING:
    from collections.abc import Sequence


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The merge job's command line."""
    parser = argparse.ArgumentParser(prog="merge_job", description=__doc__.split("\n")[0])
    parser.add_argument("--query", required=True, help="query name (e.g. q3) or path of its .sql file")
    parser.add_argument("--output", type=Path, required=True, help="Parquet directory of the final result")
    parser.add_argument("partials", type=Path, nargs="+", help="committed partial outputs of the window")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the job; bad input is one line on stderr and exit code 2."""
    args = parse_args(argv)
    try:
        run(args)
    except JobError as err:
        print(f"merge_job: error: {err}", file=sys.stderr)
        return 2
    return 0


def check_partials(name: str, partials: Sequence[Path]) -> dict[str, int]:
    """Input rows per stream behind all partials, after checking each is a committed, disjoint partial of `name`."""
    from airflow_iqp.spark.jobs.output import read_marker

    if len({p.absolute() for p in partials}) != len(partials):
        raise JobError("a partial output is given twice")
    seen: dict[str, Path] = {}
    rows: dict[str, int] = {}
    for path in partials:
        marker = read_marker(path)
        if marker.get("kind") != JobKind.PARTIAL or marker.get("query") != name:
            raise JobError(
                f"{path} is not a partial output of query {name} (its marker says {marker.get('kind')} "
                f"of {marker.get('query')})"
            )
        for files in marker["inputs"].values():
            for f in files:
                if f in seen:
                    raise JobError(f"input file {f} is in two partials, {seen[f]} and {path}")
                seen[f] = path
        for stream, n in marker["input_rows"].items():
            rows[stream] = rows.get(stream, 0) + n
    return rows


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Check, merge and commit; returns the commit marker."""
    from airflow_iqp.spark.jobs.output import write_committed
    from airflow_iqp.spark.runner import run_merge

    name, decomposition, _ = load_decomposition(args.query)
    input_rows = check_partials(name, args.partials)
    spark = session(f"iqp-merge-{name}")
    result = run_merge(spark, decomposition, [spark.read.parquet(str(p)) for p in args.partials])
    marker = {
        "kind": JobKind.MERGE.value,
        "query": name,
        "partials": [str(p.absolute()) for p in args.partials],
        "input_rows": input_rows,
    }
    return write_committed(result.coalesce(1), args.output, marker)


if __name__ == "__main__":
    run_script(main)
