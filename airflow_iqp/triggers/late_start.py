"""Start a `late_files` task in the triggerer (Airflow's `start_from_trigger`).

Most runs find no late or rewritten file, and a task process only to find that out cost about a
CPU-second per window of every DAG. Here the run's window's streams are listed as the task would
list them and the ledger is read (`runtime.late.look`): with nothing new to record and nothing to
merge again, the task ends here, skipped, as it would have on a worker; otherwise it resumes on a
worker, which lists again and records what it finds. Read-only.

The window and its streams come from the ledger (the run's window, and the input the run's `plan`
handed out), since the scheduler starts the task with the same keyword arguments in every run. A
run with no window or nothing handed out resumes on a worker, which finds out for itself.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, cast

from airflow.triggers.base import TaskSkippedEvent, TriggerEvent

from airflow_iqp.exceptions import LedgerLookupError
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.runtime import late
from airflow_iqp.runtime.descriptors import descriptor
from airflow_iqp.triggers.polling import PollingTrigger

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

RESUME = {"late": True}  # the event of a task with something to record or merge again


class LateFilesStartTrigger(PollingTrigger):
    """Fires `RESUME` if the run's listing shows anything new, else ends the task skipped."""

    def __init__(self, remerge: bool, poll_interval: float = 1.0) -> None:  # remerge: on_late="remerge"
        super().__init__(poll_interval)
        self.remerge = remerge

    def arguments(self) -> dict[str, Any]:
        """See the base class."""
        return {"remerge": self.remerge}

    def has_work(self, dag_id: str, run_id: str) -> bool:
        """Whether the task would record a file, or merge a window again."""
        with session_scope(read_only=True) as session:
            try:
                handed = descriptor(store.handed(session, dag_id, run_id, 0))
            except LedgerLookupError:
                return True
        units = handed.window_input.recent_units()
        with session_scope(read_only=True) as session:
            found = late.look(session, dag_id, units)
            return bool(found.new_events(session, dag_id)) or (self.remerge and bool(found.merged))

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """One look; the task either resumes or ends here."""
        ti = cast("RuntimeTaskInstance | None", self.task_instance)
        if ti is None:
            raise RuntimeError("LateFilesStartTrigger starts a task from the triggerer (start_from_trigger) only")
        if await asyncio.to_thread(self.has_work, ti.dag_id, ti.run_id):
            yield TriggerEvent(RESUME)
        else:
            yield TaskSkippedEvent()  # ends the task without resuming it on a worker
