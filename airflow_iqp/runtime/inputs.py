"""One window's input as a listing of its streams shows it: what a trigger waits for and what a
task cuts batches from.

`InputSpec` holds plain values only (it travels in XCom and in trigger kwargs); `look` lists
every stream of the query once and cuts the listings into the window (streams/assign.py).
Units that a batch of the window has frozen already are *taken*; the rest are *untaken*.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow_iqp.streams.assign import ORIGIN, select_window
from airflow_iqp.streams.listing import list_files
from airflow_iqp.streams.spec import FileStream
from airflow_iqp.streams.watch import window_listing

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from airflow_iqp.streams.assign import InputUnit, WindowSelection
    from airflow_iqp.streams.files import DataFile, StreamListing


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
            name: window_listing(name, stream, self.window_start, self.window, now) for name, stream in streams.items()
        }
        return self._select(streams, listings, now)

    def _select(
        self, streams: Mapping[str, FileStream], listings: Mapping[str, StreamListing], now: datetime
    ) -> WindowSelection:
        return select_window(streams, listings, start=self.window_start, window=self.window, origin=ORIGIN, now=now)


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
