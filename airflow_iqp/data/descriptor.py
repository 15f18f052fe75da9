"""The landing directory's `_iqp_stream.json`: which stream lands there, and on what clock.

Replay writes it when it starts, before the first file lands. A window's files are the ones
whose slot (epoch + index * seconds_per_file) starts inside the window, so every file belongs
to exactly one window, whenever it actually arrives.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from airflow_iqp.atomic import write_json

DESCRIPTOR_NAME = "_iqp_stream.json"


@dataclass(frozen=True)
class StreamDescriptor:
    """The stream replayed into a landing directory: where it comes from and its files' clock."""

    epoch: datetime  # wall-clock start of file 0's slot
    seconds_per_file: float  # wall-clock slot length (the manifest's, divided by the speedup)
    files: int
    source: Path  # the directory `iqp data generate` made (manifest.json, stream/, static/)
    profile: str

    def window_files(self, start: datetime, end: datetime) -> range:
        """Indexes of the files whose slot starts in [start, end)."""
        first = math.ceil((start - self.epoch).total_seconds() / self.seconds_per_file)
        stop = math.ceil((end - self.epoch).total_seconds() / self.seconds_per_file)
        return range(min(max(first, 0), self.files), min(max(stop, 0), self.files))


def write_descriptor(landing: Path, descriptor: StreamDescriptor) -> None:
    """Write (atomically) the landing directory's descriptor."""
    landing.mkdir(parents=True, exist_ok=True)
    write_json(
        landing / DESCRIPTOR_NAME,
        {
            "epoch": descriptor.epoch.isoformat(),
            "seconds_per_file": descriptor.seconds_per_file,
            "files": descriptor.files,
            "source": str(Path(descriptor.source).resolve()),
            "profile": descriptor.profile,
        },
    )


def load_descriptor(landing: Path) -> StreamDescriptor:
    """The landing directory's descriptor; ValueError says how to start a replay if there is none."""
    path = Path(landing) / DESCRIPTOR_NAME
    if not path.is_file():
        raise ValueError(f"{path} does not exist: no stream is being replayed into {landing} (start `iqp data replay`)")
    raw = json.loads(path.read_text())
    return StreamDescriptor(
        epoch=datetime.fromisoformat(raw["epoch"]),
        seconds_per_file=float(raw["seconds_per_file"]),
        files=int(raw["files"]),
        source=Path(raw["source"]),
        profile=raw["profile"],
    )
