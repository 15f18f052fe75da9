"""Wait in the triggerer until the dispatcher grants this request the shared Spark resource.

Read-only, like every trigger here (a trigger may run twice): it fires when its request is no
longer waiting (granted, or lost), or when a resource is free and the policy would pick this
request now, so the task comes back and runs the grant itself. A release by another task
usually grants directly, so the second case covers expired leases and gaps.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, Literal

from airflow.triggers.base import TriggerEvent

from airflow_iqp.constants import Policy, RequestState
from airflow_iqp.ledger import dispatch, session_scope
from airflow_iqp.triggers.polling import PollingTrigger

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

GRANT_DUE: Final = "dispatch"  # the event's state when the task should come back and run the grant


class GrantTrigger(PollingTrigger):
    """Polls the request's state and whether the policy would grant it now."""

    def __init__(self, request_id: int, policy: Policy | str, resources: int, poll_interval: float = 1.0) -> None:
        super().__init__(poll_interval)
        self.request_id = request_id
        self.policy = Policy(policy)  # a plain string after a round trip through the trigger's kwargs
        self.resources = resources

    def arguments(self) -> dict[str, Any]:
        """See the base class."""
        return {"request_id": self.request_id, "policy": self.policy.value, "resources": self.resources}

    def look(self) -> RequestState | Literal["dispatch"] | None:
        """The request's state once decided, GRANT_DUE when a grant is due, else None."""
        now = datetime.now(UTC)
        with session_scope(read_only=True) as session:
            state = RequestState(dispatch.status(session, self.request_id).state)
            if state != RequestState.WAITING:
                return state
            due = dispatch.would_grant(session, policy=self.policy, resources=self.resources, now=now)
        return GRANT_DUE if self.request_id in due else None

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Poll on wall-clock multiples of the interval until `look` has news."""
        seen = await self.news(self.look)
        event = {"request_id": self.request_id, "state": str(seen)}
        yield TriggerEvent(event)  # TriggerEvent.__init__ has no annotations


class RequestEndedTrigger(PollingTrigger):
    """Waits until a granted request is released, expires, or its lease runs out: a retry waits
    so for the attempt before it, which still runs the job (read-only, like GrantTrigger).
    """

    def __init__(self, request_id: int, poll_interval: float = 1.0) -> None:
        super().__init__(poll_interval)
        self.request_id = request_id

    def arguments(self) -> dict[str, Any]:
        """See the base class."""
        return {"request_id": self.request_id}

    def look(self) -> RequestState | None:
        """The request's state once its job has ended (or its lease ran out), else None."""
        with session_scope(read_only=True) as session:
            status = dispatch.status(session, self.request_id)
        if status.lease is not None and status.lease.expires >= datetime.now(UTC):
            return None
        return status.state

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Poll until `look` has news."""
        while (seen := await asyncio.to_thread(self.look)) is None:
            await asyncio.sleep(self.poll_interval)
        yield TriggerEvent({"request_id": self.request_id, "state": str(seen)})  # TriggerEvent.__init__: no annotations
