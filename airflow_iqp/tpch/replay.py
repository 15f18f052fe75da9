"""Replay a generated stream into a landing directory at the pace of a rate profile (Fig. 9).

A file is copied under a dot-prefixed name and then renamed, so a reader that ignores dot-files
never sees half a file. Orders and lineitem of one index land together, under the same name, so
a query that joins the two streams finds an order's lineitems in the same batch. The landing
directory is plain files and nothing else: any `FileStream` can read it, as it would any
producer's.
"""

from __future__ import annotations

import math
import os
import shutil
import time
from pathlib import Path

from airflow_iqp.tpch.manifest import MANIFEST_NAME, STREAM_DIR, load_manifest

PROFILES = ("FR", "VR1", "VR2", "VR3", "VR4")
# The paper's run: 4500 files at one per second. VR3 and VR4 are late by these seconds there.
PAPER_SPAN_S = 4500.0
FINAL_LATENESS_S = {"VR3": 20.0, "VR4": 7.0}
# (reading) The paper gives the profiles only as a figure; these shapes are ours:
FAST_RATE = 1.25  # VR1 and VR2 deliver 25% faster than FR on average.
BURSTS = 30  # VR2 delivers its files in this many equal bursts.
SLOW_LAG = {"VR3": 0.10, "VR4": 0.05}  # peak mid-stream lag of VR3/VR4, as a share of the span


def arrival_offset(profile: str, index: int, files: int, seconds_per_file: float = 1.0) -> float:
    """Seconds after file 0's slot at which file `index` arrives; non-decreasing in `index`.

    FR delivers one file per `seconds_per_file`. Lateness and lag scale with the stream's span,
    so a short demo stream has the same shape as the paper's 4500 files.
    """
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose one of {', '.join(PROFILES)}")
    if not 0 <= index < files:
        raise ValueError(f"file index {index} is outside 0..{files - 1}")
    span = files * seconds_per_file
    fixed = index * seconds_per_file
    x = index / (files - 1) if files > 1 else 1.0  # progress through the stream, 0..1
    if profile == "FR":
        return fixed
    if profile == "VR1":
        return fixed / FAST_RATE
    if profile == "VR2":
        burst = math.ceil(files / BURSTS)
        last_of_burst = min(files - 1, (index // burst + 1) * burst - 1)
        return last_of_burst * seconds_per_file / FAST_RATE
    # VR3/VR4 fall behind mid-stream, then catch up to end FINAL_LATENESS_S late (scaled).
    # The sine's slope is at least -pi * SLOW_LAG * span / (files - 1) > -seconds_per_file,
    # so arrivals never go backwards.
    lag = SLOW_LAG[profile] * span * math.sin(math.pi * x)
    return fixed + lag + FINAL_LATENESS_S[profile] * span / PAPER_SPAN_S * x


def landed_files(landing: Path, stream: str) -> list[Path]:
    """Complete files of `stream` in `landing`, in arrival order; dot-files are still being written."""
    directory = Path(landing) / stream
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.is_file() and not p.name.startswith("."))


def replay(
    source: Path,
    landing: Path,
    profile: str = "FR",
    speedup: float = 1.0,
    start_index: int = 0,
) -> int:
    """Land files start_index.. of `source` on the profile's schedule; returns the files landed.

    The schedule restarts at `start_index`: that file lands at once and later ones keep the
    profile's gaps, so a replay stopped at file i resumes with `start_index=i`.
    """
    if speedup <= 0:
        raise ValueError(f"--speedup must be positive, got {speedup}")
    if not (Path(source) / MANIFEST_NAME).is_file():
        raise ValueError(f"{source} holds no {MANIFEST_NAME}: make it with `iqp data generate`")
    manifest = load_manifest(Path(source) / MANIFEST_NAME)
    if not 0 <= start_index < manifest.files:
        raise ValueError(f"--start-index {start_index} is outside 0..{manifest.files - 1}")
    offsets = [arrival_offset(profile, i, manifest.files, manifest.seconds_per_file) for i in range(manifest.files)]
    t0 = time.monotonic() - offsets[start_index] / speedup
    for index in range(start_index, manifest.files):
        time.sleep(max(0.0, t0 + offsets[index] / speedup - time.monotonic()))
        for stream, entries in manifest.streams.items():
            name = entries[index].name
            land_file(Path(source) / STREAM_DIR / stream / name, Path(landing) / stream / name)
    return manifest.files - start_index


def land_file(src: Path, dest: Path) -> None:
    """Copy under a dot-name in the destination directory, then rename (atomic on one filesystem)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.tmp")
    shutil.copyfile(src, tmp)
    os.replace(tmp, dest)
