"""When a partial task leaves the triggerer ahead of its batch, so its process is up when the
batch may queue.

A task process takes seconds to start: its imports and its DAG file's parse, 2-4 CPU-s on a
2-core machine, 10-25 s of wall time under Tier M's load. Started only once their batches could
queue, every query's last batch started its process at the window's close, beside the next
windows' `plan` tasks and the first Spark jobs after the close. Measured outside Airflow on an
idle Connect server (q14 over 240 files, seven rounds), three Python processes importing what a
task imports made the job beside them 10-49% slower; in the demo, whichever job ran first after a
close ran 9-28% slower than predicted. Started START_AHEAD seconds before its batch is due, a
task waits for it in its own process (operators.dispatched.SHORT_WAIT, longer than this) and its
job starts on a machine the start-ups have left. Read-only, as the triggers that call it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_iqp.ledger import store
from airflow_iqp.runtime.descriptors import DynamicSlot, StaticBatch
from airflow_iqp.runtime.slots import holds_turn

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

START_AHEAD = 15.0  # seconds; below SHORT_WAIT, so a task up early still waits in its process


def start_ahead(session: Session, handed: StaticBatch | DynamicSlot, now: float) -> bool:
    """Whether the task of a waiting batch or slot should start its process now (epoch seconds):
    a planned batch START_AHEAD before its last unit is due (as the ledger's plan says now), a
    slot in the last START_AHEAD before its window closes if the window's next batch is its to
    cut. Not a slot whose turn comes after the close: its trigger sees at once whether it has a
    batch to cut or nothing left (the last batch took it), and a process started for nothing
    costs more than it saves.
    """
    if isinstance(handed, StaticBatch):
        due = store.planned_release(session, handed.window_id, handed.index).timestamp()
        return now >= due - START_AHEAD
    closes = handed.window_input.window_end.timestamp()
    return closes - START_AHEAD <= now < closes and holds_turn(session, handed)
