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
`slots.YIELD_AFTER`) or `WindowInputTrigger` (a planned batch), and fires with that trigger's
event, or with `AHEAD` once the task should start ahead of its batch (`runtime.ahead`), so the
task waits for it in its process. Read-only, as those are.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, cast

from airflow.triggers.base import TriggerEvent

from airflow_iqp.ledger import session_scope, store
from airflow_iqp.runtime.ahead import start_ahead
from airflow_iqp.runtime.descriptors import DynamicSlot, StaticBatch, descriptor
from airflow_iqp.runtime.slots import YIELD_AFTER
from airflow_iqp.triggers.batch_ready import BatchReadyTrigger
from airflow_iqp.triggers.polling import PollingTrigger
from airflow_iqp.triggers.window_input import WindowInputTrigger

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, AsyncIterator

    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

AHEAD = {"ahead": True}  # the event of a task started ahead of its batch


class PartialStartTrigger(PollingTrigger):
    """Waits as its mapped task's batch or slot would, found from the task instance it starts."""

    def arguments(self) -> dict[str, Any]:
        """See the base class: nothing besides the interval (the task instance says the rest)."""
        return {}

    async def handed(self) -> StaticBatch | DynamicSlot:
        """The batch or slot `plan` handed the task this trigger starts."""
        ti = cast("RuntimeTaskInstance | None", self.task_instance)
        if ti is None:
            raise RuntimeError("PartialStartTrigger starts a task from the triggerer (start_from_trigger) only")
        index = -1 if ti.map_index is None else ti.map_index  # -1: not mapped, which `look_up` reports
        return descriptor(await asyncio.to_thread(self.look_up, ti.dag_id, ti.run_id, index))

    def waiting(self, handed: StaticBatch | DynamicSlot) -> PollingTrigger:
        """The trigger the task would defer to first."""
        if isinstance(handed, DynamicSlot):
            return BatchReadyTrigger(handed.to_dict(), self.poll_interval, patience=YIELD_AFTER)
        return WindowInputTrigger.for_batch(handed, self.poll_interval)

    @staticmethod
    def look_up(dag_id: str, run_id: str, map_index: int) -> dict[str, Any]:
        """What the run's `plan` handed the task at `map_index`, from the ledger."""
        with session_scope(read_only=True) as session:
            return store.handed(session, dag_id, run_id, map_index)

    @staticmethod
    def ahead(handed: StaticBatch | DynamicSlot) -> bool:
        """Whether the task should start now, ahead of its batch (`runtime.ahead`)."""
        with session_scope(read_only=True) as session:
            return start_ahead(session, handed, time.time())

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """The waiting trigger's first event, or `AHEAD` if the task should start before it."""
        handed = await self.handed()
        events = cast("AsyncGenerator[TriggerEvent, None]", self.waiting(handed).run())  # an async def with yield
        first = asyncio.ensure_future(anext(events))
        try:
            while not await asyncio.to_thread(self.ahead, handed):
                done, _ = await asyncio.wait({first}, timeout=self.poll_interval - time.time() % self.poll_interval)
                if done:
                    yield first.result()
                    return
            yield TriggerEvent(AHEAD)
        finally:
            first.cancel()
            await asyncio.gather(first, return_exceptions=True)  # the generator stops before it is closed
            await events.aclose()
