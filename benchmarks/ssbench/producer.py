"""The TPC-H stream producer (`airflow_iqp.tpch`: generate, replay, manifest), reached only
through this module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_iqp.tpch import generate, manifest, replay

if TYPE_CHECKING:
    from pathlib import Path

PROFILE = "FR"  # one file per slot, as in the paper's comparison with Structured Streaming


def ensure_stream(out: Path, scale: float, files: int) -> manifest.Manifest:
    """The stream generated at `out` with this scale and file count, generating it if needed."""
    path = out / manifest.MANIFEST_NAME
    if path.is_file():
        found = manifest.load_manifest(path)
        if found.scale == scale and found.files == files:
            return found
    return generate.generate(out, scale=scale, files=files)


def load(source: Path) -> manifest.Manifest:
    return manifest.load_manifest(source / manifest.MANIFEST_NAME)


def stream_files(source: Path, stream: str) -> list[Path]:
    """The generated files of `stream`, in arrival order."""
    return [source / manifest.STREAM_DIR / stream / f.name for f in load(source).streams[stream]]


def static_dir(source: Path, table: str) -> Path:
    return source / manifest.STATIC_DIR / table


def replay_stream(source: Path, landing: Path, speedup: float) -> int:
    """Land the whole stream into `landing` at `speedup` times its pace; returns the files landed."""
    return replay.replay(source, landing, PROFILE, speedup)


def landed_files(landing: Path, stream: str) -> list[Path]:
    return replay.landed_files(landing, stream)
