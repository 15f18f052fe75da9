"""Publish a window's merged result where the DAG declared (`output=`), through Airflow's object
storage, and read it back.

A result is one Parquet file, `part-00000.parquet`, and `_IQP_RESULT.json` beside it (window,
rows, inputs, whether it is incomplete, when it was committed). Readers that skip `_` names
(Spark, pyarrow datasets) see only the data. The data file is replaced in one step: on a local
filesystem by writing a hidden temporary name and renaming it, on an object store by a single
PUT, which stores make atomic per object. The marker is written after the data, so a result
with a marker is whole.
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

from airflow.sdk import ObjectStoragePath

from airflow_iqp.exceptions import IqpError

if TYPE_CHECKING:
    from pathlib import Path

DATA_NAME = "part-00000.parquet"
MARKER_NAME = "_IQP_RESULT.json"
_LOCAL = ("file", "local", "")


class ResultError(IqpError):
    """A result cannot be published or read; the message names the location."""


def publish(committed: Path, target: str, metadata: dict[str, Any], conn_id: str | None = None) -> str:
    """Copy the committed result directory's one Parquet file to `target`; returns its URI."""
    parts = sorted(committed.glob("part-*.parquet"))
    if len(parts) != 1:
        raise ResultError(f"{committed} must hold exactly one part-*.parquet to publish, found {len(parts)}")
    destination = ObjectStoragePath(target, conn_id=conn_id)
    try:
        destination.mkdir(parents=True, exist_ok=True)
        data = destination / DATA_NAME
        if destination.protocol in _LOCAL:
            staged = destination / f".{DATA_NAME}.{uuid.uuid4().hex}"
            staged.write_bytes(parts[0].read_bytes())
            staged.rename(data)
        else:
            data.write_bytes(parts[0].read_bytes())
        (destination / MARKER_NAME).write_text(json.dumps(metadata, indent=2, default=str) + "\n")
    except OSError as err:
        raise ResultError(f"cannot publish the result to {target}: {err}") from err
    return str(destination)


def read_marker(location: str, conn_id: str | None = None) -> dict[str, Any]:
    """The metadata of a published result; ResultError if there is none (never committed)."""
    marker = ObjectStoragePath(location, conn_id=conn_id) / MARKER_NAME
    try:
        document: dict[str, Any] = json.loads(marker.read_text())
    except FileNotFoundError:
        raise ResultError(f"no result at {location}: {MARKER_NAME} is missing, so it was never committed") from None
    return document


def read_result(location: str, conn_id: str | None = None) -> list[dict[str, Any]]:
    """A published result's rows, in their order."""
    import pyarrow.parquet as pq

    read_marker(location, conn_id)
    with (ObjectStoragePath(location, conn_id=conn_id) / DATA_NAME).open("rb") as handle:
        rows: list[dict[str, Any]] = pq.read_table(handle).to_pylist()
    return rows
