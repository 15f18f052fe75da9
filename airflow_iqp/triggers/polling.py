"""What the triggers here share: the triggerer rebuilds each from its class path and keyword
arguments, and each polls a read-only look every `poll_interval` seconds.
"""

from __future__ import annotations

import asyncio
import time
from abc import abstractmethod
from typing import TYPE_CHECKING, Any, TypeVar

from airflow.triggers.base import BaseTrigger

if TYPE_CHECKING:
    from collections.abc import Callable

News = TypeVar("News")


class PollingTrigger(BaseTrigger):
    """A trigger serialized as its class path, `arguments()` and `poll_interval`."""

    def __init__(self, poll_interval: float) -> None:
        super().__init__()  # BaseTrigger.__init__ has no annotations
        self.poll_interval = poll_interval

    @abstractmethod
    def arguments(self) -> dict[str, Any]:
        """The keyword arguments besides `poll_interval` that rebuild this trigger, as plain values."""

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """Class path and kwargs, as the triggerer rebuilds the trigger from them."""
        kwargs = {**self.arguments(), "poll_interval": self.poll_interval}
        return f"{type(self).__module__}.{type(self).__qualname__}", kwargs

    async def news(self, look: Callable[[], News | None]) -> News:
        """The first answer of `look` (run in a thread) that is not None, polled on wall-clock
        multiples of the interval, so triggers waiting for the same thing fire together.
        """
        while (seen := await asyncio.to_thread(look)) is None:
            await asyncio.sleep(self.poll_interval - time.time() % self.poll_interval)
        return seen
