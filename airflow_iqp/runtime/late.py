"""Late and rewritten files: what one listing of a DAG's streams shows about its earlier windows.

A unit no batch froze belongs to a window that is still running (it will take it), to one whose
merge ran (late: recorded on that window; a merged window may merge it in again) or to one that
never ran (recorded with no window, for a backfill). A frozen name listed with other contents is
rewritten: its first version counted. `look` only reads the ledger, so the `late_files` task's
start trigger asks it whether the task has anything to do, and the task records what it found.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from airflow_iqp.constants import CLOSED_WINDOW_STATES, FileStatus, WindowStatus
from airflow_iqp.ledger import store

if TYPE_CHECKING:
    from datetime import datetime

    from sqlalchemy.orm import Session

    from airflow_iqp.streams.assign import InputUnit
    from airflow_iqp.streams.files import DataFile

AFTER_MERGE = "came after its window's merge started"
NEVER_RAN = "its window never ran: backfill it"
REWRITTEN = "a file of this name was frozen before with other contents; the first version counted"


@dataclass(frozen=True)
class FileEvent:
    """One file version to record: late or rewritten, on a window (None: one that never ran)."""

    window_id: int | None
    file: DataFile
    status: FileStatus
    note: str

    @property
    def key(self) -> tuple[str, str, str, int, datetime]:
        """What the ledger keeps one event per (`store.recorded_events`)."""
        return (self.file.stream, self.file.uri, self.status.value, self.file.size, self.file.modified)


@dataclass(frozen=True)
class LateLook:
    """What one listing shows: events to record, and the late units of merged windows by window start."""

    events: list[FileEvent] = field(default_factory=list)
    merged: dict[datetime, list[InputUnit]] = field(default_factory=dict)

    def new_events(self, session: Session, dag_id: str) -> list[FileEvent]:
        """The events the ledger does not hold yet."""
        held = store.recorded_events(session, dag_id, [e.file.uri for e in self.events])
        return [e for e in self.events if e.key not in held]


def look(session: Session, dag_id: str, units: list[InputUnit]) -> LateLook:
    """Sort the listed units of the DAG's windows (read-only)."""
    files = [f for unit in units for f in unit.files]
    frozen = store.frozen_identities(session, dag_id, [f.uri for f in files])
    events = [
        FileEvent(frozen[f.uri].window_id, f, FileStatus.REWRITTEN, REWRITTEN)
        for f in files
        if f.uri in frozen and frozen[f.uri].identity != f.identity
    ]
    merged: dict[datetime, list[InputUnit]] = defaultdict(list)
    windows: dict[datetime, tuple[int | None, WindowStatus | None]] = {}  # one lookup per window, not per unit
    for unit in units:
        if any(f.uri in frozen for f in unit.files):
            continue
        if unit.window_start not in windows:
            windows[unit.window_start] = _window(session, dag_id, unit.window_start)
        window_id, status = windows[unit.window_start]
        if window_id is not None and status not in CLOSED_WINDOW_STATES:
            continue  # its window is still running: it will take the unit
        note = AFTER_MERGE if window_id is not None else NEVER_RAN
        events.extend(FileEvent(window_id, f, FileStatus.LATE, note) for f in unit.files)
        if window_id is not None and status == WindowStatus.MERGED:
            merged[unit.window_start].append(unit)
    return LateLook(events, dict(merged))


def _window(session: Session, dag_id: str, start: datetime) -> tuple[int | None, WindowStatus | None]:
    """The DAG's window starting at `start` and its status (None, None: never planned)."""
    window_id = store.window_id(session, dag_id, start)
    return window_id, None if window_id is None else store.window_summary(session, window_id).status
