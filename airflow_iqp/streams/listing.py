"""List a stream's directory through Airflow's object storage (`ObjectStoragePath`, fsspec).

`list_files` is one recursive `find` of the whole directory, with the filesystem's directory
cache dropped first: a trigger lists the same directory again and again and must see what
landed since. `list_window` lists only what a `window_by="path"` stream's template maps to one
window, so a look costs what the window holds, not what the history holds; `list_since` only
the directories of an `ordered` arrival stream that can still receive files. A stream
directory that does not exist yet is an empty listing (producers often create it with their
first file, and object stores have no empty directories), as long as what holds it exists: the
bucket on an object store, the parent directory on a local disk. Anything else that keeps the
store from being listed raises `ListingError` naming the stream and the URI.
"""

from __future__ import annotations

import os
import posixpath
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from airflow.sdk import ObjectStoragePath

from airflow_iqp.exceptions import IqpError
from airflow_iqp.streams import ordered
from airflow_iqp.streams.files import DataFile, StreamListing, is_data
from airflow_iqp.streams.prefixes import Verdict, layout_of

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

    from airflow_iqp.streams.ordered import Anchor
    from airflow_iqp.streams.spec import FileStream

    Step = Callable[[tuple[str, ...], str], tuple[Verdict, tuple[str, ...]]]

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
    with listing_errors(name, stream):
        root, base = stream_root(stream)
        root.fs.invalidate_cache(base)
        found: dict[str, dict[str, Any]] = root.fs.find(base, detail=True)
        if not found:
            _check_holder(root, base)
    return listed(name, stream, base, found)


def list_window(name: str, stream: FileStream, start: datetime, end: datetime) -> StreamListing:
    """The data files and close markers of a `window_by="path"` stream that can belong to the
    window `[start, end)`: only the directories its template maps to the window are listed
    (streams/prefixes.py), level by level, then everything below them. Lateness does not widen
    this: a late file still names its window's time in its path. A regex pattern names no
    directories, so such a stream is listed whole.
    """
    layout = layout_of(stream.event_pattern.source)
    if layout is None:
        return list_files(name, stream)
    return _walk(name, stream, lambda chain, child: layout.step(chain, child, start, end))


def list_since(name: str, stream: FileStream, anchor: Anchor) -> StreamListing:
    """The data files and close markers of an `ordered` arrival stream in the directories the
    anchor leaves unsettled (streams/ordered.py): its chain level by level, and everything
    named from it on. An empty anchor lists the stream whole.
    """
    if not anchor:
        return list_files(name, stream)
    return _walk(name, stream, lambda chain, child: ordered.step(anchor, chain, child))


def _walk(name: str, stream: FileStream, step: Step) -> StreamListing:
    """List the stream's directory and, level by level, the data directories `step` sends the
    walk down; everything below those it takes.
    """
    with listing_errors(name, stream):
        root, base = stream_root(stream)
        fs = root.fs
        found: dict[str, dict[str, Any]] = {}
        pending: list[tuple[str, tuple[str, ...]]] = [(base, ())]
        while pending:
            directory, chain = pending.pop()
            for info in list_level(root, directory, base, directory_times=False):
                path = str(info["name"]).rstrip("/")
                child = path.rsplit("/", 1)[-1]
                if info.get("type") != "directory":
                    found[str(info["name"])] = info  # as named: `listed` knows a placeholder by its '/'
                    continue
                if not is_data(child):
                    continue  # nothing below a hidden directory is data or a marker of data
                verdict, reached = step(chain, child)
                if verdict is Verdict.TAKE:
                    fs.invalidate_cache(path)
                    found.update(fs.find(path, detail=True))
                elif verdict is Verdict.DESCEND:
                    pending.append((path, reached))
    return listed(name, stream, base, found)


def list_level(
    root: ObjectStoragePath, directory: str, base: str, *, directory_times: bool = True
) -> list[dict[str, Any]]:
    """One level of a directory, fresh from the store; the stream's own directory may be
    missing (an empty listing) as long as what would hold it exists. Without `directory_times`
    a local directory's subdirectories come with their name and type only: its listing reads
    no inode of theirs, so a partition level costs the same however many partitions it holds.
    """
    root.fs.invalidate_cache(directory)
    try:
        entries: list[dict[str, Any]]
        if root.protocol in _LOCAL_PROTOCOLS and not directory_times:
            entries = _local_level(root.fs, directory)
        else:
            entries = root.fs.ls(directory, detail=True)
    except FileNotFoundError:
        if directory != base:
            raise
        _check_holder(root, base)
        return []
    if not entries and directory == base:
        _check_holder(root, base)
    return entries


def _local_level(fs: Any, directory: str) -> list[dict[str, Any]]:
    """`fs.ls(directory, detail=True)`, but a subdirectory's info is its name and type: the
    type is in the directory entry itself, its times and size would each cost a `stat`.
    """
    if not os.path.isdir(directory):
        return [fs.info(directory)]  # a file (`listed` says it is no stream directory), or FileNotFoundError
    with os.scandir(directory) as entries:
        return [
            {"name": entry.path, "type": "directory"} if entry.is_dir(follow_symlinks=False) else fs.info(entry)
            for entry in entries
        ]


def stream_root(stream: FileStream) -> tuple[ObjectStoragePath, str]:
    """The stream's directory, and its path as its filesystem names it (no trailing '/')."""
    root = ObjectStoragePath(stream.path, conn_id=stream.conn_id)
    return root, root.path.rstrip("/")


@contextmanager
def listing_errors(name: str, stream: FileStream) -> Iterator[None]:
    """Anything that keeps the store from being listed becomes a ListingError naming the stream."""
    try:
        yield
    except ListingError:
        raise
    except Exception as error:
        raise ListingError(f"stream {name!r}: cannot list {stream.path} ({type(error).__name__}: {error})") from error


def listed(name: str, stream: FileStream, base: str, found: Mapping[str, Mapping[str, Any]]) -> StreamListing:
    """The data files and close markers among what a filesystem listed below `base` (path ->
    fsspec info), in arrival order (then by path).
    """
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
        uri = _uri(scheme, path)
        file = DataFile(
            stream=name,
            uri=uri,
            relative=relative,
            size=int(info["size"]),
            modified=_modified(info, name, uri),
            etag=_etag(info),
        )
        (files if data else markers).append(file)
    files.sort(key=lambda file: (file.modified, file.relative))
    return StreamListing(stream=name, files=tuple(files), markers=tuple(markers))


def stream_uri(stream: FileStream) -> str:
    """The stream's directory as its files' uris begin (`file:///...`, `s3://bucket/...`)."""
    return _uri(urlsplit(stream.path).scheme, stream_root(stream)[1])


def _uri(scheme: str, path: str) -> str:
    return f"file://{path}" if scheme in _LOCAL_PROTOCOLS else f"{scheme}://{path}"


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
