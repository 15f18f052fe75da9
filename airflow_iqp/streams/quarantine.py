"""Move an unreadable input file aside, so the stream's listing no longer offers it as data.

The file goes to `_quarantine/<its path below the stream's directory>` inside the stream's
directory: a hidden name (Spark's convention, and our listing's), on the same store, so the
move is a rename where the store has one and nothing is lost.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow.sdk import ObjectStoragePath

if TYPE_CHECKING:
    from airflow_iqp.streams.spec import FileStream

QUARANTINE = "_quarantine"


def quarantine(stream: FileStream, uri: str) -> str:
    """Move the file at `uri` of `stream` aside; returns where it went."""
    root = ObjectStoragePath(stream.path, conn_id=stream.conn_id)
    source = ObjectStoragePath(uri, conn_id=stream.conn_id)
    relative = source.path.removeprefix(root.path.rstrip("/") + "/")
    if relative == source.path:
        raise ValueError(f"{uri} is not below the stream directory {stream.path}")
    target = root / QUARANTINE / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    source.rename(target)
    return str(target)
