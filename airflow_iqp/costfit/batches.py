"""Where a fit's batches come from: a query over units of input in arrival order, cut into runs.

Batches are runs of consecutive units, as a planner cuts an arriving stream. A source turns a
run of units into the partial job's spec, and a list of committed partials into the merge's,
so the jobs measured are the very jobs the scheduler runs. Two sources: the TPC-H stream of
`iqp data generate` (a unit is one file index, in every stream the query reads) and a declared
DAG's own files (`costfit.dag`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from airflow_iqp.spark.jobs.spec import MergeSpec, PartialSpec, StaticInput, StreamInput
from airflow_iqp.tpch.manifest import MANIFEST_NAME, STATIC_DIR, STREAM_DIR, Manifest, load_manifest

if TYPE_CHECKING:
    from collections.abc import Sequence

    from airflow_iqp.queries import QueryDefinition


class Source(Protocol):
    """A query over `units` units of input, and the specs of its jobs."""

    @property
    def name(self) -> str:
        """The query's name, as the jobs' markers record it."""
        ...

    @property
    def units(self) -> int:
        """How many units of input there are to cut into batches."""
        ...

    def partial_spec(self, units: range, output: Path) -> PartialSpec:
        """The partial job over `units`, committing to `output`."""
        ...

    def merge_spec(self, partials: Sequence[Path], output: Path) -> MergeSpec:
        """The merge job over committed `partials`, committing to `output`."""
        ...


def split(units: int, batches: int) -> list[range]:
    """All `units` as `batches` runs of consecutive units, sizes differing by at most one."""
    if not 1 <= batches <= units:
        raise ValueError(f"cannot cut {units} units into {batches} batches")
    bounds = [units * i // batches for i in range(batches + 1)]
    return [range(lo, hi) for lo, hi in zip(bounds, bounds[1:])]


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

    def files(self, stream: str, units: range) -> list[str]:
        """The files of `stream` at file indexes `units`."""
        return [str(self.root / STREAM_DIR / stream / self.manifest.streams[stream][i].name) for i in units]

    def rows(self, streams: Sequence[str], units: range) -> int:
        """Rows of `streams` in files `units`, from the manifest: what a run would be measured at."""
        return sum(self.manifest.streams[s][i].rows for s in streams for i in units)


@dataclass(frozen=True)
class TpchSource:
    """One packaged TPC-H query over the generated stream: a unit is one file index; with
    `files`, over the stream's first `files` only (one demo window's).
    """

    data: Dataset
    query: QueryDefinition
    files: int | None = None

    @property
    def name(self) -> str:
        """The query's name."""
        return self.query.name

    @property
    def units(self) -> int:
        """File indexes in the stream (at most `files`)."""
        return self.data.manifest.files if self.files is None else min(self.files, self.data.manifest.files)

    def partial_spec(self, units: range, output: Path) -> PartialSpec:
        """Every stream's files at `units`; static tables from the generated directories."""
        return PartialSpec(
            name=self.name,
            query=str(self.query.path),
            streams={s: StreamInput(files=self.data.files(s, units)) for s in self.query.streams},
            static={t: StaticInput(path=str(self.data.root / STATIC_DIR / t)) for t in self.query.static_tables},
            output=str(output),
        )

    def merge_spec(self, partials: Sequence[Path], output: Path) -> MergeSpec:
        """The merge of `partials`."""
        return MergeSpec(
            name=self.name,
            query=str(self.query.path),
            streams=list(self.query.streams),
            partials=[str(p) for p in partials],
            output=str(output),
        )
