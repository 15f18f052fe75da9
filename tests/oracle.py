"""Which files belong to a window, worked out by the tests on their own: the oracle the window
checks hold the package against.

It imports nothing from `airflow_iqp`, so a window-assignment bug in the package (in listing,
`select_window`, `window_start`, `window_paths`) cannot hide in the expectations too. Windows
are `[origin + k*window, origin + (k+1)*window)`. A file's time is the modification time the
filesystem recorded when it landed (arrival), or the event time the test wrote into its path
(read back here by the test's own parser). Streams align by relative path: a unit is one
relative path present in every stream, and belongs to the window of its latest member's time.
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_HIVE_HOUR = re.compile(r"^dt=(\d{4})-(\d{2})-(\d{2})/hour=(\d{1,2})/")


def window_of(at: datetime, window: timedelta, origin: datetime) -> datetime:
    """The start of the window `at` is in: whole windows from the origin, floored."""
    return origin + (at - origin) // window * window


def landed(directory: Path) -> dict[str, datetime]:
    """The data files below `directory` (none of whose path parts starts with '.' or '_', which
    is what writers put beside data) by relative path, each with its modification time as the
    filesystem recorded it, floored to the microsecond (a window's bounds are whole microseconds,
    so the floor keeps which side of a bound the file is on).
    """
    times: dict[str, datetime] = {}
    for folder, subfolders, files in os.walk(directory):
        subfolders[:] = [d for d in subfolders if not d.startswith((".", "_"))]
        for name in files:
            if not name.startswith((".", "_")):
                path = Path(folder) / name
                times[path.relative_to(directory).as_posix()] = _EPOCH + timedelta(
                    microseconds=path.stat().st_mtime_ns // 1000
                )
    return times


def hive_hour(relative: str) -> datetime | None:
    """The hour a `dt=YYYY-MM-DD/hour=H/...` path names (UTC), or None for any other path."""
    match = _HIVE_HOUR.match(relative)
    if match is None:
        return None
    year, month, day, hour = (int(g) for g in match.groups())
    return datetime(year, month, day, hour, tzinfo=UTC)


def units_in(times: Mapping[str, Mapping[str, datetime | None]], start: datetime, end: datetime) -> list[str]:
    """The relative paths of the window `[start, end)`, sorted: each present in every stream
    (`times` maps stream -> relative path -> its time, None when it names none), and the latest
    member's time in the window.
    """
    streams = list(times.values())
    common = set(streams[0]).intersection(*streams[1:]) if streams else set()
    members = []
    for relative in common:
        known = [t for t in (stream[relative] for stream in streams) if t is not None]
        if len(known) == len(streams) and start <= max(known) < end:
            members.append(relative)
    return sorted(members)


def arrived_in(directories: Mapping[str, Path], start: datetime, end: datetime) -> dict[str, list[str]]:
    """Per stream, the absolute paths of the files that landed in `[start, end)` (streams by
    arrival, each in its directory), sorted; a stream with none is left out.
    """
    times = {stream: landed(directory) for stream, directory in directories.items()}
    relatives = units_in(times, start, end)
    return {stream: [str(directory / r) for r in relatives] for stream, directory in directories.items() if relatives}
