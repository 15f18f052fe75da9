"""Wait in the triggerer until the dispatcher grants this request the shared Spark resource.

Read-only, like every trigger here (a trigger may run twice): it fires when its request is no
longer waiting (granted, or lost), or when a resource is free and the policy would pick this
request now, so the task comes back and runs the grant itself. A release by another task
usually grants directly, so the second case covers expired leases and gaps.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_iqp.ledger import dispatch, session_scope

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


class GrantTrigger(BaseTrigger):
    def __init__(self, request_id: int, policy: str, resources: int, poll_interval: float = 1.0) -> None:
        super().__init__()
        self.request_id = request_id
        self.policy = policy
        self.resources = resources
        self.poll_interval = poll_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "request_id": self.request_id,
                "policy": self.policy,
                "resources": self.resources,
                "poll_interval": self.poll_interval,
            },
        )

    def look(self) -> str | None:
        """'granted', 'released' or 'expired' once decided, 'dispatch' when a grant is due, else None."""
        now = datetime.now(UTC)
        with session_scope(read_only=True) as session:
            state = dispatch.status(session, self.request_id).state
            if state != "waiting":
                return state
            due = dispatch.would_grant(session, policy=self.policy, resources=self.resources, now=now)
        return "dispatch" if self.request_id in due else None

    async def run(self) -> AsyncIterator[TriggerEvent]:
        while (seen := await asyncio.to_thread(self.look)) is None:
            await asyncio.sleep(self.poll_interval - time.time() % self.poll_interval)
        yield TriggerEvent({"request_id": self.request_id, "state": seen})
