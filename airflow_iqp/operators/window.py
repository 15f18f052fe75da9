"""What the three operators of a window share: the declaration, paths, and the ledger."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_iqp.data.descriptor import StreamDescriptor, load_descriptor
from airflow_iqp.data.manifest import MANIFEST_NAME, STATIC_DIR, load_manifest, part_name
from airflow_iqp.settings import spark_local_ip

if TYPE_CHECKING:
    from datetime import datetime

    from airflow.sdk import Context

    from airflow_iqp.declaration import Declaration

JOBS_DIR = Path(__file__).resolve().parents[1] / "spark" / "jobs"


def window_dir(work_dir: Path, declaration: Declaration, window_start: datetime) -> Path:
    """Where a window's batch files, partial outputs and result live."""
    return work_dir / declaration.name / window_start.strftime("%Y%m%dT%H%M%S")


def run_window(context: Context) -> tuple[datetime, datetime]:
    """The run's window: its data interval, which every run of WindowTimetable has."""
    start, end = context["data_interval_start"], context["data_interval_end"]
    if start is None or end is None:
        raise ValueError(
            f"run {context['run_id']} has no data interval, so no window to process: trigger IQP DAGs with a "
            "logical date (the window start), or let WindowTimetable schedule them"
        )
    return start, end


def spark_env() -> dict[str, str]:
    """The Spark driver runs this interpreter, which has airflow_iqp installed."""
    return {
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": spark_local_ip(),
    }


class WindowFiles:
    """The window's stream files, from the landing directory's descriptor and the manifest."""

    def __init__(self, declaration: Declaration, window_start: datetime, window_end: datetime) -> None:
        self.declaration = declaration
        self.descriptor: StreamDescriptor = load_descriptor(declaration.landing)
        self.manifest = load_manifest(self.descriptor.source / MANIFEST_NAME)
        self.indexes = list(self.descriptor.window_files(window_start, window_end))

    @property
    def manifest_path(self) -> Path:
        """The manifest the Spark jobs check input files against."""
        return self.descriptor.source / MANIFEST_NAME

    @property
    def static_dir(self) -> Path:
        """The static tables the query joins with."""
        return self.descriptor.source / STATIC_DIR

    def batch(self, first: int, last: int | None) -> dict[str, list[str]]:
        """Landing paths per stream of window positions first..last (1-based; None: to the end)."""
        chosen = self.indexes[first - 1 : last]
        return {
            stream: [str(self.declaration.landing / stream / part_name(i)) for i in chosen]
            for stream in self.declaration.decomposition.streams
        }

    def rows(self, indexes: list[int] | None = None) -> int:
        """Rows of the query's streams in these window files (default: all of them), by the manifest."""
        chosen = self.indexes if indexes is None else indexes
        return sum(
            self.manifest.streams[stream][i].rows for stream in self.declaration.decomposition.streams for i in chosen
        )

    def rows_per_file(self) -> float:
        """Mean rows per file of the window; 1 for an empty window, so a rate stays positive."""
        return self.rows() / len(self.indexes) if self.indexes else 1.0


def describe(batch: dict[str, Any]) -> str:
    """Map-index label: which batch, how many files, when the plan starts it."""
    last = "end" if batch["last"] is None else batch["last"]
    return f"batch {batch['index']} · files {batch['first']}..{last} · start {batch['planned_start'][11:19]}"
