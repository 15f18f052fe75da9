"""Where the jobs read and write: local paths given as plain absolute paths or `file:` URIs.

Spark gets every local path as an explicit file URI, so a cluster whose default filesystem is
HDFS still reads the local file, with Hadoop's glob characters escaped, so `a[1].csv` names
that file rather than a pattern.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlparse

_GLOB = re.compile(r"([\\\[\]{}*?])")


def is_remote(location: str) -> bool:
    """Whether `location` is a URI of another filesystem than the local one (e.g. s3a://)."""
    return "://" in location and not location.startswith("file:")


def local_path(location: str) -> Path:
    """The absolute local path of a plain path or a `file:` URI; ValueError for anything else."""
    if location.startswith("file:"):
        parsed = urlparse(location)
        if parsed.netloc not in ("", "localhost") or parsed.query or parsed.fragment:
            raise ValueError(f"{location!r} is not a local file URI (expected file:///absolute/path)")
        location = unquote(parsed.path)
    elif is_remote(location):
        raise ValueError(f"{location!r} is not local: the jobs read local paths or file:// URIs")
    path = Path(location)
    if not path.is_absolute():
        raise ValueError(f"{location!r} is not absolute: the job's working directory is not the caller's")
    return path


def spark_location(path: Path) -> str:
    """The local `path` as Spark must be given it (see the module doc)."""
    return "file://" + _GLOB.sub(r"\\\1", str(path))
