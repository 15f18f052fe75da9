"""`manifest.json`: what `iqp data generate` wrote, so replay and the Spark jobs can check files.

The jobs compare every input file's row count with the manifest, which turns a truncated or
mixed-up file into an error instead of a silently wrong answer.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from airflow_iqp.atomic import write_json

MANIFEST_NAME = "manifest.json"
STREAM_DIR = "stream"
STATIC_DIR = "static"


def part_name(index: int) -> str:
    """File name of stream file `index`; zero-padded so that name order is arrival order."""
    return f"part-{index:05d}.parquet"


@dataclass(frozen=True)
class StreamFile:
    """One generated file of a stream and its row count."""

    index: int
    name: str
    rows: int


@dataclass(frozen=True)
class Manifest:
    """What one `iqp data generate` run wrote: scale, clock, and every file with its rows."""

    scale: float
    files: int
    seconds_per_file: float
    base_time: str  # ISO 8601, UTC: event time of the start of file 0
    event_time_columns: dict[str, str]  # stream -> its event-time column
    streams: dict[str, list[StreamFile]]  # stream -> one entry per file index
    static: dict[str, int]  # static table -> row count

    def expected_rows(self, stream: str, file_name: str) -> int:
        """Rows the manifest records for `file_name` of `stream`; KeyError names what is unknown."""
        if stream not in self.streams:
            raise KeyError(f"stream {stream!r} is not in the manifest (it has {sorted(self.streams)})")
        for entry in self.streams[stream]:
            if entry.name == file_name:
                return entry.rows
        raise KeyError(f"file {file_name!r} of stream {stream!r} is not in the manifest")


def write_manifest(path: Path, manifest: Manifest) -> None:
    """Write via a temporary file and rename, so a reader never sees half a manifest."""
    write_json(path, asdict(manifest))


def load_manifest(path: Path) -> Manifest:
    """Read a manifest written by `write_manifest`."""
    raw = json.loads(Path(path).read_text())
    return Manifest(
        scale=raw["scale"],
        files=raw["files"],
        seconds_per_file=raw["seconds_per_file"],
        base_time=raw["base_time"],
        event_time_columns=raw["event_time_columns"],
        streams={s: [StreamFile(**f) for f in files] for s, files in raw["streams"].items()},
        static=raw["static"],
    )
