"""Start a `partial_aggregate` task in the triggerer (Airflow's `start_from_trigger`).

Every batch and slot waits for its input before it can queue for the Spark resource, and a
dynamic window maps more slots than it cuts batches. Started on a worker, each of them paid a
task process (and its worker's supervision, about a CPU-second together on these machines) only
to defer, and an unused slot paid it for nothing. Started here, a task costs a process only
when it has a job to queue.

The scheduler starts every mapped task with the same keyword arguments, so this trigger finds
its batch or slot from its task instance: what the run's `plan` handed out at its map index,
which `plan` keeps in the ledger (`store.handed`). Not from the plan's XCom: the triggerer's
first XCom request starts its in-process execution API, about 4 CPU-seconds (10 s of a loaded
2-core machine) that held back the first window's batches after every triggerer start. Then
it waits as the task would have: in `BatchReadyTrigger` (a slot, out of its turn patient for
`slots.YIELD_AFTER`) or `WindowInputTrigger` (a planned batch). Read-only, as those are.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, cast

from airflow_iqp.ledger import session_scope, store
from airflow_iqp.runtime.descriptors import DynamicSlot, descriptor
from airflow_iqp.runtime.slots import YIELD_AFTER
from airflow_iqp.triggers.batch_ready import BatchReadyTrigger
from airflow_iqp.triggers.polling import PollingTrigger
from airflow_iqp.triggers.window_input import WindowInputTrigger

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance
    from airflow.triggers.base import TriggerEvent


class PartialStartTrigger(PollingTrigger):
    """Waits as its mapped task's batch or slot would, found from the task instance it starts."""

    def arguments(self) -> dict[str, Any]:
        """See the base class: nothing besides the interval (the task instance says the rest)."""
        return {}

    async def waiting(self) -> PollingTrigger:
        """The trigger the task would defer to first, for the batch or slot `plan` handed it."""
        ti = cast("RuntimeTaskInstance | None", self.task_instance)
        if ti is None:
            raise RuntimeError("PartialStartTrigger starts a task from the triggerer (start_from_trigger) only")
        index = -1 if ti.map_index is None else ti.map_index  # -1: not mapped, which `look_up` reports
        found = descriptor(await asyncio.to_thread(self.look_up, ti.dag_id, ti.run_id, index))
        if isinstance(found, DynamicSlot):
            return BatchReadyTrigger(found.to_dict(), self.poll_interval, patience=YIELD_AFTER)
        return WindowInputTrigger.for_batch(found, self.poll_interval)

    @staticmethod
    def look_up(dag_id: str, run_id: str, map_index: int) -> dict[str, Any]:
        """What the run's `plan` handed the task at `map_index`, from the ledger."""
        with session_scope(read_only=True) as session:
            return store.handed(session, dag_id, run_id, map_index)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """The waiting trigger's events."""
        async for event in (await self.waiting()).run():
            yield event
