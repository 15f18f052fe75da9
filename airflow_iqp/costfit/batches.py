"""Cutting a generated stream into batches, and counting a batch's tuples from the manifest.

Batches are runs of consecutive file indexes, as a planner would cut an arriving stream; the
tuple count is taken from the manifest so that measuring never has to read a file twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from airflow_iqp.tpch.manifest import MANIFEST_NAME, STATIC_DIR, STREAM_DIR, Manifest, load_manifest

if TYPE_CHECKING:
    from collections.abc import Sequence

Batch = dict[str, list[Path]]  # stream -> the batch's files of that stream


@dataclass(frozen=True)
class Dataset:
    """A directory written by `iqp data generate`."""

    root: Path
    manifest: Manifest

    @classmethod
    def open(cls, root: Path) -> Dataset:
        """The generated data at `root`; ValueError says how to make it if it is not there."""
        root = Path(root).absolute()
        if not (root / MANIFEST_NAME).is_file():
            raise ValueError(f"{root} holds no {MANIFEST_NAME}; make it with `iqp data generate --out {root}`")
        return cls(root, load_manifest(root / MANIFEST_NAME))

    @property
    def manifest_path(self) -> Path:
        """The manifest the jobs check their input files against."""
        return self.root / MANIFEST_NAME

    @property
    def static_dir(self) -> Path:
        """The static tables the queries join with."""
        return self.root / STATIC_DIR

    def batch(self, streams: Sequence[str], indexes: range) -> Batch:
        """The files of `streams` at file `indexes`, per stream."""
        return {s: [self.root / STREAM_DIR / s / self.manifest.streams[s][i].name for i in indexes] for s in streams}

    def tuples(self, streams: Sequence[str], indexes: range) -> int:
        """Rows of the streams the query reads in files `indexes`: the cost models' unit."""
        return sum(self.manifest.streams[s][i].rows for s in streams for i in indexes)

    def split(self, batches: int) -> list[range]:
        """The whole stream as `batches` runs of consecutive files, sizes differing by at most one."""
        files = self.manifest.files
        if not 1 <= batches <= files:
            raise ValueError(f"cannot cut {files} files into {batches} batches")
        bounds = [files * i // batches for i in range(batches + 1)]
        return [range(lo, hi) for lo, hi in zip(bounds, bounds[1:])]
