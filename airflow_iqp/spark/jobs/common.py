"""What both jobs share: their errors, the Spark session, loading the query, the entry point."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from airflow_iqp.exceptions import IqpError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from pyspark.sql import SparkSession

    from airflow_iqp.sql import Decomposition

BAD_INPUT = 2  # exit code: the spec, the query or an input is wrong; the message says what to fix
CORRUPT_INPUT = 3  # exit code: input files cannot be read; the report names them for quarantine


class JobError(IqpError):
    """Bad input to a job: reported in one line, and the job exits with BAD_INPUT."""


def session(app_name: str) -> SparkSession:
    """The active session when called in-process (tests), else a new one for spark-submit."""
    from pyspark.sql import SparkSession

    return SparkSession.builder.appName(app_name).getOrCreate()


_COMMENT_LINE = re.compile(r"\s*(--.*)?")


def query_sql(path: Path) -> str:
    """The SQL of a query file, without its leading `--` lines (e.g. an old name/streams header)."""
    try:
        lines = Path(path).read_text().splitlines()
    except FileNotFoundError:
        raise JobError(f"query file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as err:
        raise JobError(f"query file {path} cannot be read: {err}") from None
    body = next((i for i, line in enumerate(lines) if not _COMMENT_LINE.fullmatch(line)), len(lines))
    sql = "\n".join(lines[body:]).strip()
    if not sql:
        raise JobError(f"query file {path} holds no SQL")
    return sql


def load_decomposition(path: Path, streams: Iterable[str]) -> Decomposition:
    """The query in `path` split into partial and merge, with `streams` as the batched tables."""
    from airflow_iqp.sql import decompose

    try:
        return decompose(query_sql(path), streams)
    except ValueError as err:  # UnsupportedQuery, or SQL that does not parse
        raise JobError(f"query file {path}: {err}") from err


def run_script(main: Callable[[Sequence[str] | None], int]) -> None:
    """Entry point under spark-submit: run, stop the session this process made, exit with main's code."""
    code = main(sys.argv[1:])
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    sys.exit(code)
