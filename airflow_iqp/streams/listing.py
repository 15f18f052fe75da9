"""List a stream's directory through Airflow's object storage (`ObjectStoragePath`, fsspec).

One recursive `find` per listing, with the filesystem's directory cache dropped first: a
trigger lists the same directory again and again and must see what landed since. A stream
directory that does not exist yet is an empty listing (producers often create it with their
first file, and object stores have no empty directories), as long as what holds it exists: the
bucket on an object store, the parent directory on a local disk. Anything else that keeps the
store from being listed raises `ListingError` naming the stream and the URI.
"""

from __future__ import annotations

import posixpath
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from airflow.sdk import ObjectStoragePath

from airflow_iqp.exceptions import IqpError
from airflow_iqp.streams.files import DataFile, StreamListing, is_data

if TYPE_CHECKING:
    from collections.abc import Mapping

    from airflow_iqp.streams.spec import FileStream

# Where filesystems put a file's modification time, most specific first: local `mtime`,
# s3fs `LastModified`, adlfs `last_modified`, gcsfs `updated`, then `created` as a last resort.
MODIFIED_FIELDS = ("mtime", "LastModified", "last_modified", "updated", "created")
_LOCAL_PROTOCOLS = ("", "file", "local")


class ListingError(IqpError, OSError):
    """A stream's directory could not be listed: its store is unreachable or missing, or its
    filesystem reports no modification times.
    """


def list_files(name: str, stream: FileStream) -> StreamListing:
    """Every data file below the stream's directory, in arrival order (then by path), and its
    close markers.
    """
    try:
        root = ObjectStoragePath(stream.path, conn_id=stream.conn_id)
        base = root.path.rstrip("/")
        fs = root.fs
        fs.invalidate_cache(base)
        found: dict[str, dict[str, Any]] = fs.find(base, detail=True)
        if not found:
            _check_holder(root, base)
    except ListingError:
        raise
    except Exception as error:
        raise ListingError(f"stream {name!r}: cannot list {stream.path} ({type(error).__name__}: {error})") from error
    scheme = urlsplit(stream.path).scheme
    files: list[DataFile] = []
    markers: list[DataFile] = []
    for path, info in found.items():
        if info.get("type") != "file" or path.endswith("/"):
            continue  # directory placeholders some tools write to object stores
        if path == base:
            raise ListingError(f"stream {name!r}: {stream.path} is a file; give the directory it lands in")
        if not path.startswith(f"{base}/"):
            raise ListingError(
                f"stream {name!r}: the filesystem listed {path} outside {base}; give {stream.path} in "
                "its canonical form"
            )
        relative = path[len(base) + 1 :]
        data = is_data(relative)
        folder, _, file_name = relative.rpartition("/")
        if not data and not (file_name == stream.close_marker and (not folder or is_data(folder))):
            continue
        uri = f"file://{path}" if scheme in _LOCAL_PROTOCOLS else f"{scheme}://{path}"
        listed = DataFile(
            stream=name,
            uri=uri,
            relative=relative,
            size=int(info["size"]),
            modified=_modified(info, name, uri),
            etag=_etag(info),
        )
        (files if data else markers).append(listed)
    files.sort(key=lambda file: (file.modified, file.relative))
    return StreamListing(stream=name, files=tuple(files), markers=tuple(markers))


def _check_holder(root: ObjectStoragePath, base: str) -> None:
    """A missing stream directory lists as empty only if its bucket (object stores) or its
    parent directory (local disks) exists: a wrong bucket or mount is an error, not silence.
    """
    if root.fs.exists(base):
        return
    holder = root.bucket if root.bucket else posixpath.dirname(base)
    if not root.fs.exists(holder):
        raise FileNotFoundError(f"neither the stream directory nor {holder!r}, which would hold it, exists")


def _modified(info: Mapping[str, Any], stream: str, uri: str) -> datetime:
    for field in MODIFIED_FIELDS:
        value = info.get(field)
        if value is None:
            continue
        if isinstance(value, datetime):
            return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return datetime.fromtimestamp(value, UTC)
        if isinstance(value, str):
            try:
                parsed = datetime.fromisoformat(value)
            except ValueError:
                raise ListingError(f"stream {stream!r}: {uri} has {field}={value!r}, no ISO 8601 time") from None
            return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    raise ListingError(
        f"stream {stream!r}: the filesystem gives no modification time for {uri}: none of "
        f"{', '.join(MODIFIED_FIELDS)} among its info fields {sorted(info)}"
    )


def _etag(info: Mapping[str, Any]) -> str | None:
    etag = info.get("ETag") or info.get("etag")
    return str(etag).strip('"') if etag else None
