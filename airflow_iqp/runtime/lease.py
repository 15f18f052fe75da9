"""Holding the dispatcher's lease while a job runs: a thread heartbeats it, and the job
confirms it right before it commits.

A lease expires `lease_seconds` after its last heartbeat (ledger/dispatch.py), so a dead
worker's resource comes back. A live worker's heartbeat may still fail, or come too late (it
stalled past the expiry and the resource went on); then the lease is lost and `on_lost` kills
the job, since another job now owns the resource. Airflow-free: the operators start a keeper
per job (operators/dispatched.py) and pass its `confirm` to the job.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol

from airflow_iqp.exceptions import LeaseLostError
from airflow_iqp.ledger import dispatch, session_scope

if TYPE_CHECKING:
    from collections.abc import Callable

    from airflow_iqp.ledger.dispatch import Lease


class Log(Protocol):
    """Where the keeper tells of failed heartbeats and a lost lease: a `logging.Logger`, or a task's log."""

    def error(self, msg: str, /, *args: object) -> object:
        """Say something went wrong."""

    def exception(self, msg: str, /, *args: object) -> object:
        """Say what failed, with its traceback."""


def tag(lease: Lease) -> str:
    """The name a job's Spark operations carry under `lease`: its request and fence."""
    return f"iqp-r{lease.request}-f{lease.fence}"


class LeaseKeeper(threading.Thread):
    """Heartbeats the lease every `every` seconds, then calls `on_beat`; on loss, calls
    `on_lost` (which kills the job) and stops.
    """

    def __init__(
        self,
        lease: Lease,
        every: float,
        on_lost: Callable[[], None],
        log: Log,
        on_beat: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(name=f"iqp-lease-{lease.request}", daemon=True)
        self.lease = lease
        self.every = every
        self.on_lost = on_lost
        self.log = log
        self.on_beat = on_beat
        self.lost = False
        self._stop_event = threading.Event()

    def run(self) -> None:
        """Heartbeat until stopped or the lease is lost."""
        while not self._stop_event.wait(self.every):
            try:
                with session_scope() as session:
                    extended = dispatch.heartbeat(session, self.lease, datetime.now(UTC))
            except Exception:  # a failed heartbeat is retried while the lease lasts
                if datetime.now(UTC) < self.lease.expires:
                    self.log.exception("lease heartbeat failed; retrying until the lease runs out")
                    continue
                self.log.exception("the lease could not be renewed before it ran out")
                extended = None
            if extended is None:
                self.lost = True
                self.log.error(
                    "lease of request %d on resource %d was lost; killing the job",
                    self.lease.request,
                    self.lease.resource,
                )
                self.on_lost()
                return
            self.lease = extended
            if self.on_beat is not None:
                self.on_beat()

    def confirm(self) -> None:
        """LeaseLostError unless the lease is still live; a job calls it right before committing."""
        with session_scope() as session:
            confirmed = dispatch.confirm(session, self.lease, datetime.now(UTC))
        if confirmed is None or self.lost:
            raise LeaseLostError(
                f"the lease of request {self.lease.request} on resource {self.lease.resource} ran out before the "
                "job committed its output; nothing was committed"
            )
        self.lease = confirmed

    def stop(self) -> None:
        """Stop heartbeating (the job ended) and wait for the thread."""
        self._stop_event.set()
        self.join()
