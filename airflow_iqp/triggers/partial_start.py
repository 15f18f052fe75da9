"""Start a `partial_aggregate` task in the triggerer (Airflow's `start_from_trigger`).

Every batch and slot waits for its input before it can queue for the Spark resource, and a
dynamic window maps more slots than it cuts batches. Started on a worker, each of them paid a
task process (and its worker's supervision, about a CPU-second together on these machines) only
to defer, and an unused slot paid it for nothing. Started here, a task costs a process only
when it has a job to queue.

The scheduler starts every mapped task with the same keyword arguments, so this trigger finds
its batch or slot from its task instance (the `plan` task's XCom at its map index), then waits
as the task would have: in `BatchReadyTrigger` (a slot) or `WindowInputTrigger` (a planned
batch). Read-only, as those are.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, cast

from airflow_iqp.runtime.descriptors import DynamicSlot, descriptor
from airflow_iqp.triggers.batch_ready import BatchReadyTrigger
from airflow_iqp.triggers.polling import PollingTrigger
from airflow_iqp.triggers.window_input import WindowInputTrigger

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance
    from airflow.triggers.base import TriggerEvent

PLAN_TASK = "plan"
XCOM_TIMEOUT = 60.0  # a request the triggerer cannot decode is never answered: fail, do not hang


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
        # One XCom by its map index: the triggerer's supervisor answers GetXCom, and leaves the
        # request for a task's XComs of every map index (what a pull without one sends) unanswered.
        try:
            handed = await asyncio.wait_for(ti.axcom_pull(task_ids=PLAN_TASK, map_indexes=-1), XCOM_TIMEOUT)
        except TimeoutError:
            raise RuntimeError(
                f"no answer in {XCOM_TIMEOUT:.0f} s from the triggerer for the {PLAN_TASK!r} task's XCom; see its log"
            ) from None
        found = descriptor(handed[ti.map_index])
        if isinstance(found, DynamicSlot):
            return BatchReadyTrigger(found.to_dict(), self.poll_interval)
        return WindowInputTrigger.for_batch(found, self.poll_interval)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """The waiting trigger's events."""
        async for event in (await self.waiting()).run():
            yield event
