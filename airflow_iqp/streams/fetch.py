"""Give Spark a local path for every input file: local files as they are, files on an object
store copied into the window's work directory first.

The Spark jobs read local paths, so a stream on `s3://` (or any fsspec scheme a provider brings)
works with a local Spark and no Hadoop filesystem for the scheme. A copy is kept only if it is
whole: it is written under a hidden name and renamed, and reused by a retry when its size matches.
"""

from __future__ import annotations

import shutil
import uuid
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from airflow.sdk import ObjectStoragePath

if TYPE_CHECKING:
    from pathlib import Path

LOCAL_SCHEMES = ("", "file", "local")


def local_path(uri: str, conn_id: str | None, cache: Path) -> str:
    """The local path of `uri`, copying it under `cache` first when it is not on this machine."""
    parts = urlsplit(uri)
    if parts.scheme in LOCAL_SCHEMES:
        return parts.path
    source = ObjectStoragePath(uri, conn_id=conn_id)
    target = cache / parts.scheme / parts.netloc / parts.path.lstrip("/")
    size = source.stat().st_size
    if target.is_file() and target.stat().st_size == size:
        return str(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staged = target.with_name(f".{target.name}.{uuid.uuid4().hex}")
    with source.open("rb") as remote, staged.open("wb") as local:
        shutil.copyfileobj(remote, local)
    staged.replace(target)
    return str(target)
