"""Which window each listed file belongs to, and what one window's input is.

Windows are the timetable's `[origin + k*window, origin + (k+1)*window)`. A file's time is its
modification time (`window_by="arrival"`) or the event time its path names (`"path"`). Files
of several streams (a stream-stream join) are aligned by relative path, so a batch holds
matching rows together: a unit of input is one relative path present in every stream, in the
window of its latest member. Every listed data file comes back somewhere: in this window, an
earlier or later one, waiting for its partners (`unmatched`), or `unassigned` (its path does not
match the pattern). Nothing is dropped silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from airflow_iqp.streams.spec import WindowBy

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from airflow_iqp.streams.files import DataFile, StreamListing
    from airflow_iqp.streams.spec import FileStream

# Where windows are counted from unless a timetable names another origin.
ORIGIN = datetime(2000, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def window_start(at: datetime, window: timedelta, origin: datetime) -> datetime:
    """The start of the window `at` falls in: a window includes its start, not its end.

    Exact integer microseconds, so a time on a boundary never rounds into the neighbouring
    window; the timetable calls this too, with pendulum times.
    """
    step = window // _MICROSECOND
    if step <= 0:
        raise ValueError(f"window must be positive, got {window}")
    since_origin = _micros(_aware(at, "at")) - _micros(_aware(origin, "origin"))
    return origin.astimezone(UTC) + _MICROSECOND * (step * (since_origin // step))


def _micros(at: datetime) -> int:
    """Microseconds since the epoch, exactly: float timestamps would round. The plain datetime
    difference, as pendulum's are Intervals that do not divide by a timedelta; a trigger works
    this out for every listed file at every look.
    """
    return datetime.__sub__(at, _EPOCH) // _MICROSECOND


def file_time(file: DataFile, stream: FileStream) -> datetime | None:
    """The time that puts `file` in a window by the stream's rule; None when its path does not
    match the stream's pattern (or names no valid time).
    """
    if stream.window_by == WindowBy.ARRIVAL:
        return file.modified
    return stream.event_pattern.event_time(file.relative)


def window_start_for(file: DataFile, stream: FileStream, window: timedelta, origin: datetime) -> datetime | None:
    """The start of the window `file` belongs to, or None when it cannot be assigned."""
    at = file_time(file, stream)
    return None if at is None else window_start(at, window, origin)


@dataclass(frozen=True)
class InputUnit:
    """One relative path present in every stream: `files` holds one file per stream (in stream
    name order), `arrived` is its latest member's modification time, `window_start` the window
    of its latest member by each stream's rule.
    """

    relative: str
    files: tuple[DataFile, ...]
    arrived: datetime
    window_start: datetime


@dataclass(frozen=True)
class WindowSelection:
    """The input of the window `[start, end)` as one listing of every stream saw it.

    `units` are the window's, ordered by arrival then path (the order batches take them in).
    The input is `final` once no more files may come: `now >= final_at` (the end plus the
    largest lateness), or every stream whose lateness has not passed yet has shown its close
    marker for the window. `earlier` and `later` hold the units of other windows (`earlier`
    ones found after their window was processed are late); `unmatched` holds files whose
    relative path is missing from another stream; `unassigned` files whose path the pattern
    does not match.
    """

    start: datetime
    end: datetime
    units: tuple[InputUnit, ...]
    final: bool
    final_at: datetime
    earlier: tuple[InputUnit, ...]
    later: tuple[InputUnit, ...]
    unmatched: tuple[DataFile, ...]
    unassigned: tuple[DataFile, ...]


def select_window(
    streams: Mapping[str, FileStream],
    listings: Mapping[str, StreamListing],
    *,
    start: datetime,
    window: timedelta,
    origin: datetime,
    now: datetime,
) -> WindowSelection:
    """Cut the listings of all streams of a query into the window starting at `start`."""
    if not streams or set(streams) != set(listings):
        raise ValueError(f"need one listing per stream: streams {sorted(streams)}, listings {sorted(listings)}")
    if window_start(start, window, origin) != start:
        raise ValueError(f"{start.isoformat()} is no window start for windows of {window} from {origin.isoformat()}")
    start = start.astimezone(UTC)
    end = start + window
    now = _aware(now, "now")
    members: dict[str, dict[str, tuple[DataFile, datetime]]] = {}
    unassigned: list[DataFile] = []
    for name in sorted(streams):
        for file in listings[name].files:
            assigned = window_start_for(file, streams[name], window, origin)
            if assigned is None:
                unassigned.append(file)
            else:
                members.setdefault(file.relative, {})[name] = (file, assigned)
    units: list[InputUnit] = []
    unmatched: list[DataFile] = []
    for relative, by_stream in members.items():
        if len(by_stream) < len(streams):
            unmatched.extend(file for file, _ in by_stream.values())
            continue
        files = tuple(by_stream[name][0] for name in sorted(by_stream))
        units.append(
            InputUnit(
                relative=relative,
                files=files,
                arrived=max(file.modified for file in files),
                window_start=max(assigned for _, assigned in by_stream.values()),
            )
        )
    units.sort(key=lambda unit: (unit.arrived, unit.relative))
    final_at = end + max(stream.lateness for stream in streams.values())
    final = all(
        now >= end + stream.lateness or _closed(listings[name].markers, stream, start, window, origin)
        for name, stream in streams.items()
    )
    return WindowSelection(
        start=start,
        end=end,
        units=tuple(unit for unit in units if unit.window_start == start),
        final=final,
        final_at=final_at,
        earlier=tuple(unit for unit in units if unit.window_start < start),
        later=tuple(unit for unit in units if unit.window_start > start),
        unmatched=_in_arrival_order(unmatched),
        unassigned=_in_arrival_order(unassigned),
    )


def _closed(
    markers: Iterable[DataFile], stream: FileStream, start: datetime, window: timedelta, origin: datetime
) -> bool:
    """Whether a close marker of `stream` closes the window: by path, one in the window's
    partition; by arrival, one modified inside the window.
    """
    if stream.close_marker is None:
        return False
    return any(
        marker.relative.rsplit("/", 1)[-1] == stream.close_marker
        and window_start_for(marker, stream, window, origin) == start
        for marker in markers
    )


def _in_arrival_order(files: Iterable[DataFile]) -> tuple[DataFile, ...]:
    return tuple(sorted(files, key=lambda file: (file.modified, file.stream, file.relative)))


def _aware(at: datetime, name: str) -> datetime:
    if at.tzinfo is None:
        raise ValueError(f"{name} must be timezone-aware, got {at!r}")
    return at
