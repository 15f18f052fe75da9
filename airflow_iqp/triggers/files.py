"""Wait in the triggerer until every file of a batch has landed.

Read-only: triggers may run more than once (after a triggerer restart, or twice during a
hand-over), so this one only looks at the landing directory; the task does the writing.

Polls fall on wall-clock multiples of the interval, so triggers waiting for the same file fire
together and the scheduler then orders their tasks by priority, not by which trigger looked first.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence


class FilesLandedTrigger(BaseTrigger):
    """Fires once every path exists."""

    def __init__(self, paths: Sequence[str], poll_interval: float = 1.0) -> None:
        super().__init__()  # BaseTrigger.__init__ has no annotations
        self.paths = list(paths)
        self.poll_interval = poll_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """Class path and kwargs, as the triggerer rebuilds the trigger from them."""
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {"paths": self.paths, "poll_interval": self.poll_interval},
        )

    def missing(self) -> list[str]:
        """The paths that have not landed yet."""
        return [p for p in self.paths if not os.path.exists(p)]

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Poll until nothing is missing."""
        while missing := self.missing():
            self.log.debug("%d of %d files not landed yet, e.g. %s", len(missing), len(self.paths), missing[0])
            await asyncio.sleep(self.poll_interval - time.time() % self.poll_interval)
        yield TriggerEvent({"landed": len(self.paths)})  # TriggerEvent has none
