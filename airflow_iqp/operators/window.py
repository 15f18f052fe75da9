"""What the operators of a window share: the run's window, work paths, and the Spark job specs."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, cast
from urllib.parse import urlsplit

from airflow_iqp.spark.jobs.spec import MergeSpec, PartialSpec, StaticInput, StreamInput
from airflow_iqp.streams.fetch import local_path

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from airflow.sdk import Context

    from airflow_iqp.declaration import Declaration
    from airflow_iqp.spark.jobs.spec import Format

JOBS_DIR = Path(__file__).resolve().parents[1] / "spark" / "jobs"


def window_dir(work_dir: Path, dag_id: str, window_start: datetime) -> Path:
    """Where a window's job specs, partial outputs and merged result live before publishing."""
    return work_dir / dag_id / window_start.strftime("%Y%m%dT%H%M%S")


def run_window(context: Context) -> tuple[datetime, datetime]:
    """The run's window: its data interval, which every run of WindowTimetable has, as plain UTC
    datetimes (pendulum's differences are Intervals that stdlib arithmetic does not take).
    """
    start, end = context["data_interval_start"], context["data_interval_end"]
    if start is None or end is None:
        raise ValueError(
            f"run {context['run_id']} has no data interval, so no window to process: trigger IQP DAGs with a "
            "logical date (the window start), or let WindowTimetable schedule them"
        )
    return _plain(start), _plain(end)


def _plain(at: datetime) -> datetime:
    return datetime(*at.astimezone(UTC).timetuple()[:6], at.microsecond, tzinfo=UTC)


def spark_env() -> dict[str, str]:
    """The Spark driver runs this interpreter, which has airflow_iqp installed. Where the driver
    listens is the connection's business, read when the job runs (`settings.driver_address`).
    """
    return {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}


def spark_uri(uri: str) -> str:
    """How Spark names a path or URI: local ones as paths, `s3://` as Hadoop's `s3a://` (static
    inputs on object stores are read by Spark itself).
    """
    parts = urlsplit(uri)
    if parts.scheme in ("", "file", "local"):
        return parts.path
    if parts.scheme == "s3":
        return "s3a" + uri[len("s3") :]
    return uri


def partial_spec(
    declaration: Declaration,
    files: Mapping[str, Sequence[str]],
    output: Path,
    schema_files: Mapping[str, str | None],
) -> PartialSpec:
    """The partial job of one batch: its frozen file URIs per stream (none: an empty batch, read with
    the declared schema or a schema file's), the static inputs, and where to commit. Files on an
    object store are copied next to `output` first (streams/fetch.py).
    """
    cache = output.parent / "inputs"
    streams = {}
    for name, stream in declaration.streams.items():
        chosen = files.get(name, ())
        sample = schema_files.get(name)
        streams[name] = StreamInput(
            format=cast("Format", str(stream.format)),
            schema=stream.schema,
            options=dict(stream.options),
            files=[local_path(uri, stream.conn_id, cache) for uri in chosen],
            schema_file=None if chosen or sample is None else local_path(sample, stream.conn_id, cache),
        )
    static = {
        name: StaticInput(path=None if s.path is None else spark_uri(s.path), table=s.table)
        for name, s in declaration.static.items()
    }
    return PartialSpec(
        name=declaration.name,
        query=str(declaration.query.path),
        streams=streams,
        static=static,
        output=str(output),
    )


def merge_spec(declaration: Declaration, partials: Sequence[str], output: Path) -> MergeSpec:
    """The merge job of a window over its committed partials."""
    return MergeSpec(
        name=declaration.name,
        query=str(declaration.query.path),
        streams=list(declaration.streams),
        partials=list(partials),
        output=str(output),
    )
