"""What both jobs share: errors, the Spark session, loading the query, checking input files."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow.parquet as pq

from airflow_iqp.tpch.manifest import Manifest, load_manifest

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from pyspark.sql import SparkSession

    from airflow_iqp.spark.runner import Decomposition


class JobError(Exception):
    """Bad input to a job: reported in one line, and the job exits non-zero."""


def session(app_name: str) -> SparkSession:
    """The active session when called in-process (tests), else a new one for spark-submit."""
    from pyspark.sql import SparkSession

    return SparkSession.builder.appName(app_name).getOrCreate()


def load_decomposition(query: str) -> tuple[str, Decomposition, list[str]]:
    """(query name, its decomposition, the static tables it reads) for a query name or .sql path."""
    from airflow_iqp.queries import load_query
    from airflow_iqp.sql import decompose

    try:
        definition = load_query(query)
    except (FileNotFoundError, KeyError, ValueError) as err:
        raise JobError(f"cannot load query {query!r}: {err}") from err
    return definition.name, decompose(definition.sql, definition.streams), list(definition.static_tables)


def read_manifest(path: Path) -> Manifest:
    """The data set's manifest; JobError if it is missing."""
    if not Path(path).is_file():
        raise JobError(f"manifest {path} does not exist")
    return load_manifest(path)


def read_batch(path: Path) -> dict[str, list[Path]]:
    """A batch file: a JSON object mapping each stream to the list of its files in the batch.

    A file rather than arguments because one argument may not exceed 128 KiB on Linux, and a
    batch of thousands of paths does.
    """
    if not Path(path).is_file():
        raise JobError(f"batch file {path} does not exist")
    raw = json.loads(Path(path).read_text())
    if not isinstance(raw, dict) or not all(isinstance(v, list) for v in raw.values()):
        raise JobError(f"batch file {path} must hold a JSON object of stream -> list of file paths")
    return {stream: [Path(f).absolute() for f in files] for stream, files in raw.items()}


def check_batch(batch: dict[str, list[Path]], manifest: Manifest) -> dict[str, int]:
    """Rows per stream after checking every file exists and has the manifest's row count."""
    rows = {}
    for stream, files in batch.items():
        if not files:
            raise JobError(f"the batch lists no files for stream {stream!r}")
        if len(set(files)) != len(files):
            raise JobError(f"the batch lists a file of stream {stream!r} twice")
        rows[stream] = 0
        for path in files:
            if not path.is_file():
                raise JobError(f"input file {path} of stream {stream!r} does not exist")
            try:
                expected = manifest.expected_rows(stream, path.name)
            except KeyError as err:
                raise JobError(f"input file {path}: {err.args[0]}") from err
            actual = pq.read_metadata(path).num_rows
            if actual != expected:
                raise JobError(f"input file {path} has {actual} rows but the manifest records {expected}")
            rows[stream] += actual
    return rows


def register_static(spark: SparkSession, static_dir: Path, tables: Sequence[str]) -> None:
    """Each static table `t` is the Parquet directory `static_dir/t`, registered as view `t`."""
    for table in tables:
        path = Path(static_dir) / table
        if not path.is_dir():
            raise JobError(f"static table {table!r} not found: {path} does not exist")
        spark.read.parquet(str(path)).createOrReplaceTempView(table)


def run_script(main: Callable[[Sequence[str] | None], int]) -> None:
    """Entry point under spark-submit: run, stop the session this process made, exit with main's code."""
    code = main(sys.argv[1:])
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    sys.exit(code)
