"""Job outputs are committed atomically and carry a marker; readers accept only marked outputs.

The output is written beside its target under a dot-name, the marker `_IQP_COMMITTED` is added,
then the directory is renamed into place, replacing an earlier attempt at the same batch. So a
retry replaces its output rather than adding a second one, and a crash leaves no marked output.
A job run in the Airflow task (Spark Connect) checks its lease right before the rename: a job
that lost it commits nothing.
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_iqp.atomic import replace_dir, temp_sibling
from airflow_iqp.spark.jobs.common import JobError
from airflow_iqp.spark.jobs.locations import spark_location

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import DataFrame

MARKER = "_IQP_COMMITTED"  # Spark skips `_`-files when reading the directory


def write_committed(
    df: DataFrame, target: Path, marker: dict[str, Any], before_commit: Callable[[], None] | None = None
) -> dict[str, Any]:
    """Write `df` as Parquet to `target` with `marker` plus the written row count; returns the marker.

    `before_commit` runs just before the rename; if it raises, the written output is deleted.
    """
    import pyarrow.parquet as pq  # here, not at the top: every DAG parse and task process imports this module

    target = Path(target).absolute()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_sibling(target, "tmp")
    try:
        df.write.parquet(spark_location(tmp))
        rows = sum(pq.read_metadata(part).num_rows for part in tmp.glob("*.parquet"))  # footers: no Spark pass
        marker = {**marker, "rows": rows, "committed_at": datetime.now(UTC).isoformat()}
        (tmp / MARKER).write_text(json.dumps(marker, indent=2) + "\n")
        if before_commit is not None:
            before_commit()
        replace_dir(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return marker


def read_marker(output: Path) -> dict[str, Any]:
    """The marker of a committed output; JobError if `output` is missing or not committed."""
    path = Path(output) / MARKER
    if not Path(output).is_dir():
        raise JobError(f"output {output} does not exist")
    if not path.is_file():
        raise JobError(f"output {output} has no {MARKER} marker: it was never committed (or is half-written)")
    marker = json.loads(path.read_text())
    if not isinstance(marker, dict):
        raise JobError(f"{path} holds no JSON object: the output's commit marker is damaged")
    return marker
