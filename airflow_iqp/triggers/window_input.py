"""Wait in the triggerer until a window's input holds enough units for a static batch, or is final.

Read-only: triggers may run more than once (after a triggerer restart, or twice during a
hand-over), so this one only lists the streams (and reads its batch's planned end from the
ledger); the task does the writing.

Polls fall on wall-clock multiples of the interval, so triggers waiting for the same files fire
together and the dispatcher then orders their jobs, not which trigger looked first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.triggers.base import TriggerEvent

from airflow_iqp.ledger import session_scope, store
from airflow_iqp.runtime.inputs import InputSpec
from airflow_iqp.triggers.polling import PollingTrigger

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from airflow_iqp.runtime.descriptors import StaticBatch


class WindowInputTrigger(PollingTrigger):
    """Fires once the window has at least `need` units, or its input is final (`need` None: only then).
    With `batch` (window id, batch index), `need` is that batch's planned end as the ledger holds
    it at each look, so a replan of the window (airflow_iqp.runtime.replan) moves what it waits for.
    """

    def __init__(
        self,
        input: dict[str, Any],
        need: int | None,
        poll_interval: float = 1.0,
        batch: tuple[int, int] | list[int] | None = None,
    ) -> None:
        super().__init__(poll_interval)
        self.input = input
        self.need = need
        self.batch = None if batch is None else (int(batch[0]), int(batch[1]))  # a list after a round trip

    @classmethod
    def for_batch(cls, batch: StaticBatch, poll_interval: float = 1.0) -> WindowInputTrigger:
        """Waits for a planned batch's units as far as the ledger's plan for it reaches when it
        looks (a replan may have moved it; see `runtime.replan`), or for the input to be final.
        """
        where = None if batch.upto is None else (batch.window_id, batch.index)
        return cls(batch.input, batch.upto, poll_interval, batch=where)

    def arguments(self) -> dict[str, Any]:
        """See the base class."""
        return {"input": self.input, "need": self.need, "batch": self.batch}

    def ready(self) -> dict[str, Any] | None:
        """The event to fire now, or None to keep waiting."""
        need = self.need
        if self.batch is not None:
            with session_scope(read_only=True) as session:
                need = store.planned_upto(session, *self.batch)
        selection = InputSpec.from_dict(self.input).look_window()
        if selection.final or (need is not None and len(selection.units) >= need):
            return {"units": len(selection.units), "final": selection.final}
        return None

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Poll until the batch's units are there or the input is final."""
        yield TriggerEvent(await self.news(self.ready))
