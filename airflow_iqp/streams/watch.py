"""What a waiting look lists: each stream as narrowly as its windowing allows, once per look, shared.

A path stream lists only the directories its template maps to the window (`list_window`); an
arrival stream with a declared `history` is watched incrementally (`ArrivalWatch`), an `ordered`
one from the anchor its caller reads in the ledger (streams/ordered.py); any other stream is
listed whole. The triggers of a DAG's waiting batches look on the same wall-clock
ticks, each in a thread of the triggerer, so a listing is shared for `LOOK_TTL` seconds from
the moment it started: a look in that time takes it (waiting while it is still being listed),
the first look after it lists again, so a file that landed since is seen then. Read-only.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from airflow_iqp.streams.arrivals import ArrivalWatch
from airflow_iqp.streams.listing import list_files, list_window
from airflow_iqp.streams.spec import WindowBy

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable
    from datetime import datetime, timedelta

    from airflow_iqp.streams.files import StreamListing
    from airflow_iqp.streams.ordered import Anchor
    from airflow_iqp.streams.spec import FileStream

# Under the triggers' 1 s poll interval: the looks of one tick share a listing, the next tick lists again.
LOOK_TTL = 0.5


@dataclass
class _Shared:
    started: float
    lock: threading.Lock = field(default_factory=threading.Lock)
    listing: StreamListing | None = None


class SharedListings:
    """Listings by key, each kept `ttl` seconds from when it started."""

    def __init__(self, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self.clock = clock
        self._shared: dict[Hashable, _Shared] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, produce: Callable[[], StreamListing]) -> StreamListing:
        """The listing under `key` if it started less than `ttl` ago, else `produce()`'s; one
        producer at a time per key, the others wait for its listing. A failed listing is not kept.
        """
        now = self.clock()
        with self._lock:
            self._shared = {k: s for k, s in self._shared.items() if now - s.started < self.ttl}
            shared = self._shared.setdefault(key, _Shared(started=now))
        with shared.lock:
            if shared.listing is None:
                shared.listing = produce()
            return shared.listing


_SHARED = SharedListings(LOOK_TTL)
_WATCHES: dict[tuple[str, FileStream], ArrivalWatch] = {}
_WATCHES_LOCK = threading.Lock()


def window_listing(
    name: str,
    stream: FileStream,
    start: datetime,
    window: timedelta,
    now: datetime,
    anchor: Callable[[FileStream, datetime], Anchor],
) -> StreamListing:
    """The listing of `stream` that a look at the window `[start, start + window)` at `now` needs:
    every file that can be the window's, and its close markers, possibly with files of other windows.
    `anchor` gives an `ordered` stream's anchor from a file that landed before a time; the
    watch, shared by the windows still waiting, takes it from before `now` less twice the
    horizon: a waiting window started at most a horizon ago (it is final by then), and its
    files land after its start.
    """
    if stream.window_by == WindowBy.PATH:
        end = start + window
        return _SHARED.get((name, stream, start, end), lambda: list_window(name, stream, start, end))
    horizon = stream.horizon(window)
    if horizon is None:
        return _SHARED.get((name, stream), lambda: list_files(name, stream))
    with _WATCHES_LOCK:
        watch = _WATCHES.setdefault((name, stream), ArrivalWatch(name, stream))
    if not stream.ordered:
        return _SHARED.get((name, stream, horizon), lambda: watch.look(now - horizon))
    return _SHARED.get((name, stream, horizon), lambda: watch.look(now - horizon, anchor(stream, now - 2 * horizon)))
