"""An arrival stream watched incrementally: a look lists only the directories still receiving files.

A `window_by="arrival"` stream's files may land anywhere below its directory, so no path names a
window. What bounds a look instead is the stream's `history`: a directory none of whose entries
changed for longer than the horizon (the history, and at least the window plus its lateness) is
*settled*: listed once by this process, then never again, and its files are dropped from the
watch. Each look lists the stream's directory and every unsettled directory below it (one `ls`
each); once the old partitions have settled, that is the directories files land in now, whatever
the stream's age. On a local disk a directory's time moves when an entry lands in it or leaves
it, so an unsettled directory whose time has not moved is not listed again (its time is read, a
`stat`), and a settled one whose time moves is listed again: a look then lists the directories
that received files since the last one. A file that lands in a settled directory whose parent
is settled too is not seen here, nor one rewritten in place; the declaration of `history` says
the first does not happen, and a task's own look finds both (the watch only tells the triggers
when to wake). An `ordered` stream's look is given an anchor (streams/ordered.py): the
directories it settles are not listed at all, so a fresh process's first look lists what can
still receive files, not every partition once.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_iqp.streams.files import is_data
from airflow_iqp.streams.listing import _modified, list_level, listed, listing_errors, stream_root
from airflow_iqp.streams.ordered import settled

if TYPE_CHECKING:
    from datetime import datetime

    from airflow_iqp.streams.files import StreamListing
    from airflow_iqp.streams.ordered import Anchor
    from airflow_iqp.streams.spec import FileStream


@dataclass
class _Directory:
    """What the last listing of one directory showed."""

    files: dict[str, dict[str, Any]] = field(default_factory=dict)  # path -> fsspec info
    children: list[str] = field(default_factory=list)  # its data subdirectories
    touched: datetime | None = None  # its own time then (local disks)
    settled: bool = False


class ArrivalWatch:
    """What this process has seen of one arrival stream; `look` brings it up to date."""

    def __init__(self, name: str, stream: FileStream) -> None:
        self.name = name
        self.stream = stream
        self._directories: dict[str, _Directory] = {}
        self._anchor: Anchor = ()
        self._lock = threading.Lock()

    def look(self, horizon: datetime, anchor: Anchor = ()) -> StreamListing:
        """The stream's files in unsettled directories, after listing each of them once more;
        directories with nothing changed since before `horizon` settle, and those the anchor
        settles are passed over.
        """
        with self._lock, listing_errors(self.name, self.stream):
            root, base = stream_root(self.stream)
            seen: dict[str, _Directory] = {}
            self._anchor = anchor
            self._visit(root, base, base, horizon, seen)
            self._directories = seen  # a directory removed since is forgotten with its files
            found = {path: info for d in seen.values() for path, info in d.files.items()}
        return listed(self.name, self.stream, base, found)

    def _visit(
        self,
        root: Any,
        directory: str,
        base: str,
        horizon: datetime,
        seen: dict[str, _Directory],
        touched: datetime | None = None,
    ) -> bool:
        """List `directory` unless it settled (and its time, `touched`, has not moved past the
        horizon since: on a local disk a directory's time moves when an entry lands in it or
        leaves it) or, on a local disk, its time has not moved since its last listing; then the
        unsettled directories below it. Whether it is settled now. The stream's own directory
        never settles: new partitions appear in it.
        """
        known = self._directories.get(directory)
        if known is not None and known.settled and (touched is None or touched < horizon):
            seen[directory] = known
            return True
        if known is not None and touched is not None and known.touched == touched:
            # No entry added or removed since its last listing: only its subdirectories' times are read.
            state = _Directory(known.files, known.children, touched)
            children = [(child, _time_of(root, child)) for child in known.children]
        else:
            try:
                entries = list_level(root, directory, base)
            except FileNotFoundError:
                return True  # removed since its parent was listed: nothing of it to watch
            state, children = _Directory(touched=touched), []
            for info in entries:
                path = str(info["name"]).rstrip("/")
                if info.get("type") != "directory":
                    state.files[str(info["name"])] = info  # as named: `listed` knows a placeholder by its '/'
                elif path != directory and is_data(path.rsplit("/", 1)[-1]):
                    children.append((path, _modified(info, self.name, path) if "mtime" in info else None))
        children = [(child, at) for child, at in children if not settled(_names(child, base), self._anchor)]
        state.children = [child for child, _ in children]
        changed = [_modified(info, self.name, path) for path, info in state.files.items()]
        changed += [] if touched is None else [touched]
        quiet = [self._visit(root, child, base, horizon, seen, at) for child, at in children]
        state.settled = directory != base and all(quiet) and all(at < horizon for at in changed)
        if state.settled:
            state.files = {}  # older than any window still waiting: not kept
        seen[directory] = state
        return state.settled


def _time_of(root: Any, directory: str) -> datetime | None:
    """A directory's time as its filesystem gives it now; None if it gives none or the
    directory is gone (its listing then says so).
    """
    try:
        info = root.fs.info(directory)
    except FileNotFoundError:
        return None
    return _modified(info, directory, directory) if "mtime" in info else None


def _names(path: str, base: str) -> tuple[str, ...]:
    """The names of `path` below the stream's directory `base`."""
    return tuple(path[len(base) + 1 :].split("/"))
