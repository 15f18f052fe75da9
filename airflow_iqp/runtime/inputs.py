"""One window's input as a listing of its streams shows it: what a trigger waits for and what a
task cuts batches from.

`InputSpec` holds plain values only (it travels in XCom and in trigger kwargs); each look lists
every stream of the query once and cuts the listings into the window (streams/assign.py): `look`
the whole streams, `look_own` (a task's) and `recent_units` (late files') only the partitions
they need when that is exact, `look_window` (a trigger's) as narrowly as each stream allows.
Units that a batch of the window has frozen already are *taken*; the rest are *untaken*.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow_iqp.ledger import session_scope, store
from airflow_iqp.ledger.prune import Retention
from airflow_iqp.streams.assign import ORIGIN, select_window, window_start
from airflow_iqp.streams.listing import list_files, list_since, list_window, stream_uri
from airflow_iqp.streams.ordered import anchor_of
from airflow_iqp.streams.spec import FileStream, WindowBy
from airflow_iqp.streams.watch import window_listing

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from airflow_iqp.declaration import Declaration
    from airflow_iqp.streams.assign import InputUnit, WindowSelection
    from airflow_iqp.streams.files import DataFile, StreamListing
    from airflow_iqp.streams.ordered import Anchor


@dataclass(frozen=True)
class InputSpec:
    """Where a window's input lands and which window it is: enough to look at it from anywhere."""

    streams: dict[str, dict[str, Any]]  # stream table -> FileStream.to_dict()
    window_start: datetime
    window: timedelta

    @classmethod
    def of(cls, streams: Mapping[str, FileStream], window_start: datetime, window: timedelta) -> InputSpec:
        """The spec of one window of a declaration's streams."""
        return cls({name: s.to_dict() for name, s in streams.items()}, window_start.astimezone(UTC), window)

    @property
    def window_end(self) -> datetime:
        """The window's end (exclusive)."""
        return self.window_start + self.window

    def file_streams(self) -> dict[str, FileStream]:
        """The streams as FileStream objects again."""
        return {name: FileStream.from_dict(data) for name, data in self.streams.items()}

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values."""
        return {
            "streams": self.streams,
            "window_start": self.window_start.isoformat(),
            "window_seconds": self.window.total_seconds(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> InputSpec:
        """The spec `to_dict` gave."""
        return cls(
            dict(data["streams"]),
            datetime.fromisoformat(data["window_start"]),
            timedelta(seconds=data["window_seconds"]),
        )

    def look(self, now: datetime | None = None) -> WindowSelection:
        """List every stream whole once and cut the listings into this window: what a task
        freezes batches from, and what sees other windows' files (late ones, for backfills).
        """
        streams = self.file_streams()
        listings = {name: list_files(name, stream) for name, stream in streams.items()}
        return self._select(streams, listings, now or datetime.now(UTC))

    def look_own(self, now: datetime | None = None) -> WindowSelection:
        """A task's look at this window: its `units` and `final` exactly as `look` shows them.

        When every stream is windowed by the same path pattern, a unit's files all name the
        window's time, so only the partitions the pattern maps to the window are listed
        (`list_window`; a late file still names its window, and a close marker sits in its
        partition). A query of one `ordered` arrival stream lists the directories that can hold
        files landed since the window's start (`list_since`, from the ledger's anchor).
        Otherwise every stream is listed whole. `earlier`, `later`, `unmatched` and
        `unassigned` hold only what was listed.
        """
        streams = self.file_streams()
        return self._select(streams, self._listings(streams, self.window_start), now or datetime.now(UTC))

    @property
    def horizon(self) -> timedelta | None:
        """How long after a window's end a file of it may still land in any of the streams (the
        longest `FileStream.horizon`); None when one of them declares no `history` (any time).
        """
        horizons = [stream.horizon(self.window) for stream in self.file_streams().values()]
        return None if None in horizons else max(h for h in horizons if h is not None)

    def recent_units(self, now: datetime | None = None) -> list[InputUnit]:
        """This window's units and those of the earlier windows that ended within the horizon
        before `now` (every earlier one without a horizon): where late files are looked for.
        Older windows are not listed when the streams share a path pattern or are one `ordered`
        arrival stream (as `look_own`), and their units are left out in any case: no file lands
        for them, and the ledger may have dropped their files (`iqp db prune`), so none of them
        is new.
        """
        now = now or datetime.now(UTC)
        streams = self.file_streams()
        horizon = self.horizon
        if horizon is None:
            selection = self.look(now)
            return [*selection.earlier, *selection.units]
        since = now - horizon
        first = min(window_start(since, self.window, ORIGIN), self.window_start)
        selection = self._select(streams, self._listings(streams, first), now)
        return [unit for unit in (*selection.earlier, *selection.units) if unit.window_start + self.window > since]

    def _listings(self, streams: Mapping[str, FileStream], since: datetime) -> dict[str, StreamListing]:
        """Each stream's files of the windows from `since` to this one's end, and possibly
        others: only those partitions when every stream is windowed by the same path pattern
        (a unit's files then name one time), only the directories files landed in since `since`
        for one `ordered` arrival stream, else the whole streams. A join of arrival streams is
        listed whole: the files of one unit may have landed far apart.
        """
        patterns = {stream.pattern if stream.window_by == WindowBy.PATH else None for stream in streams.values()}
        if None not in patterns and len(patterns) == 1:
            return {name: list_window(name, stream, since, self.window_end) for name, stream in streams.items()}
        if self._ordered(streams):
            return self._since(streams, since)
        return {name: list_files(name, stream) for name, stream in streams.items()}

    @staticmethod
    def _ordered(streams: Mapping[str, FileStream]) -> bool:
        """Whether the query reads one stream, an `ordered` arrival one: listed from its anchor."""
        return len(streams) == 1 and all(stream.ordered for stream in streams.values())

    def _since(self, streams: Mapping[str, FileStream], since: datetime) -> dict[str, StreamListing]:
        """The one ordered stream's directories that can hold a file landed since `since`: its
        anchor is a file the ledger had frozen a horizon before (streams/ordered.py).
        """
        [(name, stream)] = streams.items()
        horizon = stream.horizon(self.window) or timedelta(0)  # never None: `ordered` needs a history
        return {name: list_since(name, stream, ledger_anchor(stream, since - horizon))}

    def look_back(self, now: datetime | None = None) -> WindowSelection:
        """What a plan checks a past window's input against: its units, and units of earlier
        windows beside them. One `ordered` arrival stream is listed from its anchor before the
        window (the anchor's own files are earlier ones); others whole, as `look`.
        """
        streams = self.file_streams()
        if not self._ordered(streams):
            return self.look(now)
        return self._select(streams, self._since(streams, self.window_start), now or datetime.now(UTC))

    def schema_samples(self, selection: WindowSelection) -> dict[str, str | None]:
        """A data file per stream to read an empty batch's schema from, from any window: from
        `selection` first, from `look_back` then a whole listing for the streams it has none of.
        """
        found: dict[str, str | None] = {}
        _samples(selection, found)
        looks = (self.look_back, self.look) if self._ordered(self.file_streams()) else (self.look,)
        for look in looks:  # look_back is look itself unless the stream is ordered: never listed twice
            if any(name not in found for name in self.streams):
                _samples(look(), found)
        return found

    def look_window(self, now: datetime | None = None) -> WindowSelection:
        """A waiting look: list each stream only as far as this window needs, sharing the listing
        with the looks of the same moment (streams/watch.py), and cut it into this window.

        Its `units` and `final` are the window's as `look` would show them, as long as the
        streams keep to what they declare (a template's layout, an arrival stream's `history`)
        and a join's files of one unit land within the narrower listings; `earlier`, `later`,
        `unmatched` and `unassigned` hold only what those saw. For triggers: what they miss only
        delays a wake-up, since the task that wakes looks whole again before it freezes.
        """
        now = now or datetime.now(UTC)
        streams = self.file_streams()
        listings = {
            name: window_listing(name, stream, self.window_start, self.window, now, ledger_anchor)
            for name, stream in streams.items()
        }
        return self._select(streams, listings, now)

    def _select(
        self, streams: Mapping[str, FileStream], listings: Mapping[str, StreamListing], now: datetime
    ) -> WindowSelection:
        return select_window(streams, listings, start=self.window_start, window=self.window, origin=ORIGIN, now=now)


def ledger_anchor(stream: FileStream, before: datetime) -> Anchor:
    """The directory of the newest file below `stream` the ledger had frozen before `before`
    (streams/ordered.py); empty when it has none. Read-only: triggers call it too.
    """
    base = stream_uri(stream)
    with session_scope(read_only=True) as session:
        uri = store.settled_anchor(session, base, before)
    return () if uri is None else anchor_of(uri, base)


def retention(declaration: Declaration) -> Retention:
    """How long after a window's end the DAG's files may still land (`InputSpec.horizon`, how far
    back `late_files` looks), and which streams' declarations say so: what `iqp db prune` keeps.
    """
    streams = declaration.streams
    spec = InputSpec.of(streams, ORIGIN, declaration.window)
    if unbounded := [name for name, stream in sorted(streams.items()) if stream.history is None]:
        declared_by = f"stream(s) {', '.join(map(repr, unbounded))} declare no history="
    else:
        declared_by = ", ".join(
            f"stream {name!r} history={stream.history} lateness={stream.lateness}"
            for name, stream in sorted(streams.items())
        )
    return Retention(declaration.dag_id, spec.horizon, declared_by)


def _samples(selection: WindowSelection, found: dict[str, str | None]) -> None:
    """Add the first file of each stream in `selection` that `found` has none of."""
    for unit in (*selection.units, *selection.earlier, *selection.later):
        for file in unit.files:
            found.setdefault(file.stream, file.uri)
    for file in (*selection.unmatched, *selection.unassigned):
        found.setdefault(file.stream, file.uri)


def untaken(units: Iterable[InputUnit], taken: set[str]) -> list[InputUnit]:
    """The units none of whose files a batch has frozen yet, in arrival order."""
    return [unit for unit in units if not any(f.uri in taken for f in unit.files)]


def files_by_stream(units: Iterable[InputUnit]) -> dict[str, list[DataFile]]:
    """The units' files grouped by stream, in unit order."""
    grouped: dict[str, list[DataFile]] = {}
    for unit in units:
        for file in unit.files:
            grouped.setdefault(file.stream, []).append(file)
    return grouped
