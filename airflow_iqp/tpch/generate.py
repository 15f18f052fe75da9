"""Generate the TPC-H input stream: tpchgen-cli, then orders and lineitem cut into arrival files.

File i holds the orders of the i-th order-key range and all of their lineitems, so a join of
orders and lineitem within one batch of files is complete (the paper's setup, Section 7).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from airflow_iqp.atomic import replace_dir, temp_sibling
from airflow_iqp.tpch.manifest import (
    MANIFEST_NAME,
    STATIC_DIR,
    STREAM_DIR,
    Manifest,
    StreamFile,
    part_name,
    write_manifest,
)

STATIC_TABLES = ("region", "nation", "supplier", "customer", "part", "partsupp")
EVENT_TIME_COLUMNS = {"orders": "o_event_time", "lineitem": "l_event_time"}
# Fixed so that generating twice with the same arguments gives the same files.
BASE_TIME = datetime(2024, 1, 1, tzinfo=UTC)
TIMESTAMP = pa.timestamp("us", tz="UTC")


def tpchgen_executable() -> str:
    """tpchgen-cli next to this Python (a venv not on PATH) or else on PATH."""
    beside = Path(sys.executable).parent / "tpchgen-cli"
    found = str(beside) if beside.exists() else shutil.which("tpchgen-cli")
    if found is None:
        raise ValueError("tpchgen-cli not found beside this Python or on PATH (pip install tpchgen-cli)")
    return found


def generate(out: Path, scale: float = 0.01, files: int = 60, seconds_per_file: float = 1.0) -> Manifest:
    """Write the stream and static tables under `out`, replacing an earlier generation atomically."""
    out = Path(out).absolute()
    if files < 1:
        raise ValueError(f"--files must be at least 1, got {files}")
    if scale <= 0 or seconds_per_file <= 0:
        raise ValueError(f"--scale and --seconds-per-file must be positive, got {scale} and {seconds_per_file}")
    if out.exists() and not (out.is_dir() and (not any(out.iterdir()) or (out / MANIFEST_NAME).exists())):
        raise ValueError(
            f"{out} exists and is no output of `iqp data generate` (no {MANIFEST_NAME}): refusing to replace it"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_sibling(out, "tmp")
    try:
        raw = tmp / "_tpchgen"
        _run_tpchgen(scale, raw)
        manifest = _split(raw, tmp, scale, files, seconds_per_file)
        shutil.rmtree(raw)
        write_manifest(tmp / MANIFEST_NAME, manifest)
        replace_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest


def _run_tpchgen(scale: float, raw: Path) -> None:
    cmd = [tpchgen_executable(), "parquet", "-s", str(scale), "-o", str(raw), "-q"]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise ValueError(f"{' '.join(cmd)} failed ({result.returncode}): {result.stderr.strip()}")


def _read(raw: Path, table: str) -> pa.Table:
    """Tpchgen writes string_view columns; plain strings are what every Parquet reader handles."""
    t = pq.read_table(raw / f"{table}.parquet")
    fields = [pa.field(f.name, pa.string(), f.nullable) if f.type == pa.string_view() else f for f in t.schema]
    return t.cast(pa.schema(fields))


def _sorted_by(table: pa.Table, *keys: str) -> pa.Table:
    """The table in ascending key order. Tpchgen writes it so already, and checking costs a
    tenth of sorting (whose `take` copies every column: 7 s of lineitem at scale 3).
    """
    pairs = max(table.num_rows - 1, 0)
    ahead, tied = np.zeros(pairs, dtype=bool), np.ones(pairs, dtype=bool)  # row i+1 against row i
    for key in keys:
        step = np.diff(table[key].to_numpy())
        ahead |= tied & (step > 0)
        tied &= step == 0
    return table if ahead.all() else table.sort_by([(key, "ascending") for key in keys])


def _split(raw: Path, dest: Path, scale: float, files: int, seconds_per_file: float) -> Manifest:
    orders = _sorted_by(_read(raw, "orders"), "o_orderkey")
    lineitem = _sorted_by(_read(raw, "lineitem"), "l_orderkey", "l_linenumber")
    n = orders.num_rows
    if files > n:
        raise ValueError(f"--files {files} exceeds the {n} orders at scale {scale}")

    # Equal-count order-key ranges; an order's rows are stamped evenly within its file's second.
    order_bounds = np.array([n * i // files for i in range(files + 1)])
    counts = np.diff(order_bounds)
    file_of_order = np.repeat(np.arange(files), counts)
    within = (np.arange(n) - order_bounds[file_of_order]) / counts[file_of_order]
    base_us = int(BASE_TIME.timestamp() * 1_000_000)
    order_time = base_us + np.round((file_of_order + within) * seconds_per_file * 1e6).astype(np.int64)

    order_keys = orders["o_orderkey"].to_numpy()
    line_keys = lineitem["l_orderkey"].to_numpy()
    pos = np.searchsorted(order_keys, line_keys)
    if np.any(pos >= n) or np.any(order_keys[np.minimum(pos, n - 1)] != line_keys):
        raise ValueError("tpchgen lineitem holds order keys that orders lacks")
    line_bounds = np.searchsorted(file_of_order[pos], np.arange(files + 1))  # lineitems are key-sorted

    orders = orders.append_column(EVENT_TIME_COLUMNS["orders"], pa.array(order_time, TIMESTAMP))
    lineitem = lineitem.append_column(EVENT_TIME_COLUMNS["lineitem"], pa.array(order_time[pos], TIMESTAMP))
    streams = {
        "orders": _write_parts(orders, order_bounds, dest / STREAM_DIR / "orders"),
        "lineitem": _write_parts(lineitem, line_bounds, dest / STREAM_DIR / "lineitem"),
    }
    static = {}
    for table in STATIC_TABLES:
        t = _read(raw, table)
        (dest / STATIC_DIR / table).mkdir(parents=True)
        pq.write_table(t, dest / STATIC_DIR / table / part_name(0))
        static[table] = t.num_rows
    return Manifest(
        scale=scale,
        files=files,
        seconds_per_file=seconds_per_file,
        base_time=BASE_TIME.isoformat(),
        event_time_columns=dict(EVENT_TIME_COLUMNS),
        streams=streams,
        static=static,
    )


def _write_parts(table: pa.Table, bounds: np.ndarray, directory: Path) -> list[StreamFile]:
    directory.mkdir(parents=True)
    entries = []
    for i in range(len(bounds) - 1):
        part = table.slice(int(bounds[i]), int(bounds[i + 1] - bounds[i]))
        pq.write_table(part, directory / part_name(i))
        entries.append(StreamFile(index=i, name=part_name(i), rows=part.num_rows))
    return entries
