"""An arrival stream watched incrementally: a look lists only the directories still receiving files.

A `window_by="arrival"` stream's files may land anywhere below its directory, so no path names a
window. What bounds a look instead is the stream's `history`: a directory none of whose entries
changed for longer than the horizon (the history, and at least the window plus its lateness) is
*settled*: listed once by this process, then never again, and its files are dropped from the
watch. Each look lists the stream's directory and every unsettled directory below it (one `ls`
each); once the old partitions have settled, that is the directories files land in now, whatever
the stream's age. A file that lands in a settled directory is not seen here; the declaration of
`history` says that does not happen (and a task's own look, which lists the whole stream, would
still find it: the watch only tells the triggers when to wake).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_iqp.streams.files import is_data
from airflow_iqp.streams.listing import _modified, list_level, listed, listing_errors, stream_root

if TYPE_CHECKING:
    from datetime import datetime

    from airflow_iqp.streams.files import StreamListing
    from airflow_iqp.streams.spec import FileStream


@dataclass
class _Directory:
    """What the last listing of one directory showed."""

    files: dict[str, dict[str, Any]] = field(default_factory=dict)  # path -> fsspec info
    settled: bool = False


class ArrivalWatch:
    """What this process has seen of one arrival stream; `look` brings it up to date."""

    def __init__(self, name: str, stream: FileStream) -> None:
        self.name = name
        self.stream = stream
        self._directories: dict[str, _Directory] = {}
        self._lock = threading.Lock()

    def look(self, horizon: datetime) -> StreamListing:
        """The stream's files in unsettled directories, after listing each of them once more;
        directories with nothing changed since before `horizon` settle.
        """
        with self._lock, listing_errors(self.name, self.stream):
            root, base = stream_root(self.stream)
            seen: dict[str, _Directory] = {}
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
        horizon since: on a local disk a directory's time moves when an entry lands in it), and
        the unsettled directories below it; whether it is settled now. The stream's own
        directory never settles: new partitions appear in it.
        """
        known = self._directories.get(directory)
        if known is not None and known.settled and (touched is None or touched < horizon):
            seen[directory] = known
            return True
        state = _Directory()
        changed = [] if touched is None else [touched]
        children: list[tuple[str, datetime | None]] = []
        try:
            entries = list_level(root, directory, base)
        except FileNotFoundError:
            return True  # removed since its parent was listed: nothing of it to watch
        for info in entries:
            path = str(info["name"]).rstrip("/")
            if info.get("type") != "directory" or path == directory:
                state.files[path] = info  # the stream's path may be a file: `listed` says so
                changed.append(_modified(info, self.name, path))
            elif is_data(path.rsplit("/", 1)[-1]):
                children.append((path, _modified(info, self.name, path) if "mtime" in info else None))
        quiet = [self._visit(root, child, base, horizon, seen, at) for child, at in children]
        state.settled = directory != base and all(quiet) and all(at < horizon for at in changed)
        if state.settled:
            state.files = {}  # older than any window still waiting: not kept
        seen[directory] = state
        return state.settled
