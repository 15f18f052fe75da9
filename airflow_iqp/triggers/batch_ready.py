"""Dynamic mode: wait in the triggerer until this slot may cut a batch, or has nothing left.

Read-only: it only lists the window's streams and reads the ledger (airflow_iqp.runtime.slots); the
task registers with the dispatcher when it comes back. A slot left with nothing to do is ended
here as skipped (`TaskSkippedEvent`): its skip writes nothing, and a window has more slots than
batches, so resuming each unused one in a new task process only to skip it cost about a
CPU-second apiece, at the window's end, beside its last batch and merge.

While its window is open, a slot looks every window / OPEN_LOOKS seconds (at most
OPEN_POLL_MAX), not every poll interval, and once more at the close: a batch eligible while
the window is open has the rest of the window and the deadline after it, so finding it a few
seconds late costs nothing, while each look lists the window's streams and reads the ledger.
In Tier M's 20-minute run, 451 slots looking every second took a whole core of the triggerer's
two; with only the two slots nearest their turn (26 of 83) looking every second, still most of
one. Once the window has closed every slot looks each interval, so the last batch is cut, and
the unused slots skip, soon after the close, and the merge is not held up.
"""

from __future__ import annotations

import asyncio
import time
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import TaskSkippedEvent, TriggerEvent

from airflow_iqp.ledger import session_scope
from airflow_iqp.runtime.descriptors import DynamicSlot, descriptor
from airflow_iqp.runtime.slots import SlotAction, SlotDecision, decide
from airflow_iqp.triggers.polling import PollingTrigger

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

OPEN_LOOKS = 120  # looks per window of a slot while the window is open
OPEN_POLL_MAX = 10.0  # seconds


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

    @cached_property
    def slot(self) -> DynamicSlot:
        """The slot this trigger waits for (parsed once, not at every look)."""
        spec = descriptor(self.spec)
        if not isinstance(spec, DynamicSlot):
            raise TypeError(f"a static batch waits in WindowInputTrigger, not here: {spec}")
        return spec

    def look(self) -> SlotDecision:
        """What the slot may do now."""
        spec = self.slot
        selection = spec.window_input.look_window()
        with session_scope(read_only=True) as session:
            return decide(session, spec, selection, time.time(), self.patience)

    def pause(self, now: float) -> float:
        """Seconds until the next look, on wall-clock multiples of its interval, and never past
        the window's close (see the module doc).
        """
        interval = self.poll_interval
        window = self.slot.window_input
        close = window.window_end.timestamp()
        if now >= close:
            return interval - now % interval
        interval = max(interval, min(OPEN_POLL_MAX, window.window.total_seconds() / OPEN_LOOKS))
        return min(interval - now % interval, close - now)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Look on wall-clock multiples of the interval while the slot must wait."""
        while (decision := await asyncio.to_thread(self.look)).action is SlotAction.WAIT:
            await asyncio.sleep(self.pause(time.time()))
        action = decision.action
        if action is SlotAction.SKIP:
            yield TaskSkippedEvent()  # ends the task without resuming it on a worker
            return
        yield TriggerEvent({"action": action.value})
