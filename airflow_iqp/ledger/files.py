"""Every input file exactly once: what batches froze, and what else the ledger saw of a stream.

A batch freezes its files once, with their identity (size, modification time, ETag). The
database refuses a second freeze of a path by any batch of the same DAG (a partial unique
index), so a file is never counted twice, even when two workers race for it: the loser gets
`AlreadyFrozen` naming the paths. Events (a file late for its window, a frozen name rewritten,
an unreadable file quarantined) are kept once per file version, however often listings see
them. The callers are `ledger.store`'s, which re-exports these functions.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import insert, literal, select, text, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError

from airflow_iqp.constants import BatchStatus, FileStatus
from airflow_iqp.exceptions import AlreadyFrozen, LedgerLookupError
from airflow_iqp.ledger import lookup
from airflow_iqp.ledger.models import Batch, Query, StreamFile, Window, utcnow
from airflow_iqp.validation import whole_number

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping, Sequence
    from datetime import datetime

    from sqlalchemy.orm import Session

    from airflow_iqp.streams.files import DataFile

CHUNK = 500  # uris per IN list: far below SQLite's and PostgreSQL's limits on bound parameters
TAKEN = (FileStatus.FROZEN, FileStatus.QUARANTINED)
_EVENT_INDEX = ["query_id", "stream", "uri", "status", "size", "modified"]
_IS_EVENT = text(f"NOT (status = '{FileStatus.FROZEN.value}')")


@dataclass(frozen=True)
class FrozenFile:
    """A file some batch of the DAG froze: the version that counts, and where it counted."""

    stream: str
    uri: str
    size: int
    modified: datetime
    etag: str | None
    rows: int | None
    window_id: int
    batch_index: int

    @property
    def identity(self) -> tuple[int, datetime, str | None]:
        """What tells a rewritten file from this one (as `DataFile.identity`)."""
        return (self.size, self.modified, self.etag)


def freeze_files(
    session: Session, window_id: int, index: int, files: Mapping[str, Sequence[DataFile]]
) -> dict[str, list[str]]:
    """Fix a batch's input files (stream -> files) once; returns its uris by stream.

    A retry gets the first freeze back, not the listing at retry time. A path that any batch of
    the DAG froze before is refused with `AlreadyFrozen` (nothing of this batch is frozen then).
    """
    batch = lookup.batch(session, window_id, index)
    if batch.files is None:
        freeze(session, batch, files)
    return {stream: list(uris) for stream, uris in (batch.files or {}).items()}


def freeze(session: Session, batch: Batch, files: Mapping[str, Sequence[DataFile]]) -> None:
    """Record `files` as frozen by `batch` and set its file list, all or nothing."""
    window = batch.window
    rows = sorted(_frozen_rows(window.query_id, window.id, batch.id, files), key=lambda r: (r["stream"], r["uri"]))
    counts = Counter((r["stream"], r["uri"]) for r in rows)
    if twice := sorted(f"{stream}:{uri}" for (stream, uri), n in counts.items() if n > 1):
        raise ValueError(f"a batch takes each file once, got these more than once: {', '.join(twice)}")
    wanted = set(counts)
    if taken := _frozen_elsewhere(session, window.query_id, wanted):
        raise AlreadyFrozen(window.query.dag_id, taken)
    try:
        # Inserted in (stream, uri) order: concurrent freezes take the unique index's entries in
        # the same order, so on PostgreSQL one waits for the other instead of deadlocking.
        with session.begin_nested():
            if rows:
                session.execute(insert(StreamFile), rows)
    except IntegrityError:
        if taken := _frozen_elsewhere(session, window.query_id, wanted):  # a concurrent freeze won
            raise AlreadyFrozen(window.query.dag_id, taken) from None
        raise
    batch.files = {stream: [f.uri for f in listed] for stream, listed in files.items()}
    session.flush()


def refresh_frozen(session: Session, window_id: int, index: int, listed: Iterable[DataFile]) -> list[str]:
    """A batch that has not committed takes its files' current versions: a file replaced between a
    failed attempt and its retry (a corrupt file landed again, fixed) is what the retry reads, and
    nothing counted the old version. Returns the uris whose identity changed. A committed batch's
    files are never refreshed: a later rewrite of one of them is refused (`record_file_event`).
    """
    batch = lookup.batch(session, window_id, index)
    if batch.status == BatchStatus.DONE:
        raise ValueError(f"batch {index} of window {window_id} has committed: its files' versions are final")
    current = {f.uri: f for f in listed}
    changed = []
    frozen = session.scalars(
        select(StreamFile).where(StreamFile.batch_id == batch.id, StreamFile.status == FileStatus.FROZEN)
    )
    for row in frozen:
        found = current.get(row.uri)
        if found is not None and (row.size, row.modified, row.etag) != (found.size, found.modified, found.etag):
            row.size, row.modified, row.etag = found.size, found.modified, found.etag
            changed.append(row.uri)
    session.flush()
    return sorted(changed)


def _frozen_rows(
    query_id: int, window_id: int, batch_id: int, files: Mapping[str, Sequence[DataFile]]
) -> Iterator[dict[str, Any]]:
    now = utcnow()
    for stream, listed in files.items():
        for f in listed:
            if f.stream != stream:
                raise ValueError(f"{f.uri} is a file of stream {f.stream!r}, listed under {stream!r}")
            rows = getattr(f, "rows", None)
            yield {
                **_identity(query_id, f),
                "window_id": window_id,
                "batch_id": batch_id,
                "rows": None if rows is None else whole_number(rows, f"{f.uri} rows"),
                "status": FileStatus.FROZEN.value,
                "recorded_at": now,
                "note": None,
            }


def _identity(query_id: int, f: DataFile) -> dict[str, Any]:
    return {
        "query_id": query_id,
        "stream": f.stream,
        "uri": f.uri,
        "size": whole_number(f.size, f"{f.uri} size"),
        "modified": f.modified,
        "etag": f.etag,
    }


def _frozen_elsewhere(session: Session, query_id: int, wanted: set[tuple[str, str]]) -> dict[str, str]:
    """Of the (stream, uri) pairs, those some batch froze: uri -> which window and batch."""
    taken = {}
    for row, _, start, index in _frozen(session, query_id, sorted({u for _, u in wanted})):
        if (row.stream, row.uri) in wanted:
            taken[row.uri] = f"window {start.isoformat()} batch {index}"
    return taken


def _frozen(session: Session, query_id: int, uris: Sequence[str]) -> Iterator[tuple[StreamFile, int, datetime, int]]:
    """(file row, its window's id and start, its batch's index) of the DAG's frozen files among `uris`."""
    for chunk in _chunks(uris):
        yield from session.execute(
            select(StreamFile, Window.id, Window.window_start, Batch.batch_index)
            .join(Batch, StreamFile.batch_id == Batch.id)
            .join(Window, Batch.window_id == Window.id)
            .where(
                StreamFile.query_id == query_id,
                # A literal, so PostgreSQL sees that the partial unique index covers the query.
                StreamFile.status == literal(FileStatus.FROZEN.value, literal_execute=True),
                StreamFile.uri.in_(chunk),
            )
        )


def _chunks(items: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), CHUNK):
        yield items[start : start + CHUNK]


def frozen_files(session: Session, window_id: int) -> set[str]:
    """Every input uri a batch of the window has taken (a quarantined file counts as taken)."""
    return set(
        session.scalars(select(StreamFile.uri).where(StreamFile.window_id == window_id, StreamFile.status.in_(TAKEN)))
    )


def settled_anchor(session: Session, stream_uri: str, before: datetime) -> str | None:
    """The greatest uri below the stream directory `stream_uri` that a batch of any DAG froze
    and the ledger recorded before `before`: a file that had landed by then, so its directory
    had held files since (for an `ordered` stream's listing, streams/ordered.py); None if none.
    Read backwards along each DAG's frozen-file index, past the rows recorded since `before` only.
    """
    prefix = f"{stream_uri.rstrip('/')}/"
    best: str | None = None
    for query_id in session.scalars(select(Query.id)):
        uri = session.scalar(
            select(StreamFile.uri)
            .where(
                StreamFile.query_id == query_id,
                StreamFile.status == literal(FileStatus.FROZEN.value, literal_execute=True),
                StreamFile.uri >= prefix,
                StreamFile.uri < f"{prefix[:-1]}0",  # '0' follows '/': the range of the prefix, for the index
                StreamFile.uri.startswith(prefix, autoescape=True),  # the range may hold others under a collation
                StreamFile.recorded_at < before,
            )
            .order_by(StreamFile.uri.desc())
            .limit(1)
        )
        if uri is not None and (best is None or uri > best):
            best = uri
    return best


def frozen_identities(session: Session, dag_id: str, uris: Iterable[str]) -> dict[str, FrozenFile]:
    """The frozen version of each of `uris` the DAG froze (others are left out), to tell a
    rewritten file from the one that counted. Thousands of uris are fine: they go in chunks.
    """
    found = {}
    for row, window_id, _, index in _frozen(session, lookup.query_id(session, dag_id), sorted(set(uris))):
        found[row.uri] = FrozenFile(
            stream=row.stream,
            uri=row.uri,
            size=row.size,
            modified=row.modified,
            etag=row.etag,
            rows=row.rows,
            window_id=window_id,
            batch_index=index,
        )
    return found


def recorded_events(session: Session, dag_id: str, uris: Iterable[str]) -> set[tuple[str, str, str, int, datetime]]:
    """The DAG's recorded events among `uris`, each as (stream, uri, status, size, modified): a
    file version `record_file_event` would not record again.
    """
    query_id = lookup.query_id(session, dag_id)
    found: set[tuple[str, str, str, int, datetime]] = set()
    for chunk in _chunks(sorted(set(uris))):
        rows = session.execute(
            select(StreamFile.stream, StreamFile.uri, StreamFile.status, StreamFile.size, StreamFile.modified).where(
                StreamFile.query_id == query_id,
                StreamFile.status != literal(FileStatus.FROZEN.value, literal_execute=True),
                StreamFile.uri.in_(chunk),
            )
        )
        found.update((s, uri, FileStatus(status).value, size, modified) for s, uri, status, size, modified in rows)
    return found


def record_file_event(
    session: Session,
    dag_id: str,
    window_id: int | None,
    file: DataFile,
    status: FileStatus,
    note: str | None = None,
) -> bool:
    """Record that a listing saw `file` late, rewritten or unreadable, once per file version
    (size and modification time); returns whether this call recorded it. `window_id` is the
    window the event is reported on (None: a window that never ran). A late file counts in its
    window's `late_files`.
    """
    status = FileStatus(status)
    if status is FileStatus.FROZEN:
        raise ValueError("files are frozen by a batch (freeze_files), not recorded as an event")
    values = {
        **_identity(lookup.query_id(session, dag_id), file),
        "window_id": window_id,
        "status": status.value,
        "recorded_at": utcnow(),
        "note": note,
    }
    dialect = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
    recorded = session.scalar(
        dialect.insert(StreamFile)
        .values(values)
        .on_conflict_do_nothing(index_elements=_EVENT_INDEX, index_where=_IS_EVENT)
        .returning(StreamFile.id)
    )
    if recorded is not None and status is FileStatus.LATE and window_id is not None:
        session.execute(update(Window).where(Window.id == window_id).values(late_files=Window.late_files + 1))
    session.flush()
    return recorded is not None


def quarantine_file(
    session: Session, window_id: int, index: int, stream: str, uri: str, note: str | None = None
) -> dict[str, list[str]]:
    """Take an unreadable file out of the batch that froze it: the batch's file list shrinks,
    the file is recorded as quarantined (no longer frozen, so a fixed file of that name may be
    taken again), and the window's result is flagged incomplete. Returns the batch's files left.
    Quarantining the same file of the batch again changes nothing.
    """
    batch = lookup.batch(session, window_id, index)
    row = session.scalar(
        select(StreamFile).where(
            StreamFile.batch_id == batch.id,
            StreamFile.stream == stream,
            StreamFile.uri == uri,
            StreamFile.status.in_(TAKEN),
        )
    )
    if row is None:
        raise LedgerLookupError(f"file frozen by window {window_id} batch {index} in stream {stream!r}", uri)
    if row.status == FileStatus.FROZEN:
        _quarantine(session, row, note)
        files = batch.files or {}
        batch.files = {s: [u for u in uris if (s, u) != (stream, uri)] for s, uris in files.items()}
        batch.window.incomplete = True
        session.flush()
    return {s: list(uris) for s, uris in (batch.files or {}).items()}


def _quarantine(session: Session, row: StreamFile, note: str | None) -> None:
    """The frozen row becomes the quarantine record; the same version quarantined before (moved
    back unchanged and frozen again) keeps its one record, which now points here.
    """
    before = session.scalar(
        select(StreamFile).where(
            StreamFile.query_id == row.query_id,
            StreamFile.stream == row.stream,
            StreamFile.uri == row.uri,
            StreamFile.status == FileStatus.QUARANTINED,
            StreamFile.size == row.size,
            StreamFile.modified == row.modified,
        )
    )
    if before is None:
        row.status, row.note, row.recorded_at = FileStatus.QUARANTINED, note, utcnow()
        return
    before.window_id, before.batch_id, before.note, before.recorded_at = row.window_id, row.batch_id, note, utcnow()
    session.delete(row)
