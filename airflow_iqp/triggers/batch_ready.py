"""Dynamic mode: wait in the triggerer until this slot may cut a batch, or has nothing left.

Read-only: it only lists the window's streams and reads the ledger (airflow_iqp.runtime.slots); the
task registers with the dispatcher when it comes back. A slot left with nothing to do is ended
here as skipped (`TaskSkippedEvent`): its skip writes nothing, and a window has more slots than
batches, so resuming each unused one in a new task process only to skip it cost about a
CPU-second apiece, at the window's end, beside its last batch and merge.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import TaskSkippedEvent, TriggerEvent

from airflow_iqp.ledger import session_scope
from airflow_iqp.runtime.descriptors import DynamicSlot, descriptor
from airflow_iqp.runtime.slots import SlotAction, decide
from airflow_iqp.triggers.polling import PollingTrigger

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


class BatchReadyTrigger(PollingTrigger):
    """Fires when `slots.decide` tells the slot to run or to skip."""

    def __init__(
        self, spec: dict[str, Any], poll_interval: float = 1.0, patience: float = 0.0
    ) -> None:  # spec: DynamicSlot.to_dict(); patience: see `slots.decide`
        super().__init__(poll_interval)
        self.spec = spec
        self.patience = patience

    def arguments(self) -> dict[str, Any]:
        """See the base class."""
        return {"spec": self.spec, "patience": self.patience}

    def look(self) -> SlotAction:
        """What the slot may do now."""
        spec = descriptor(self.spec)
        if not isinstance(spec, DynamicSlot):
            raise TypeError(f"a static batch waits in WindowInputTrigger, not here: {spec}")
        selection = spec.window_input.look_window()
        with session_scope(read_only=True) as session:
            return decide(session, spec, selection, time.time(), self.patience).action

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Poll on wall-clock multiples of the interval while the slot must wait."""
        while (action := await asyncio.to_thread(self.look)) is SlotAction.WAIT:
            await asyncio.sleep(self.poll_interval - time.time() % self.poll_interval)
        if action is SlotAction.SKIP:
            yield TaskSkippedEvent()  # ends the task without resuming it on a worker
            return
        yield TriggerEvent({"action": action.value})
