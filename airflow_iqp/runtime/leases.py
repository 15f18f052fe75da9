"""The lease controller: a cluster's executors acquired as the capacity plan needs them and
released at the end of their billing unit (issue 25's BTU-aware controller, live).

Each step reads the plan from the ledger (`runtime.capacity.needed`: the phase the windows are
in, `LEAD` seconds ahead, never fewer than the granted jobs hold; while the server runs any
job, every executor it has and at least one: work outside the plan, a warm-up or a check, is
never left without one, and an idle executor may still hold the shuffle output of a running
job's next stage, which a kill loses: the stage fails to fetch it and runs again) and applies
the BTU rule to the
executors that run (`planning.elastic.enact`): the shortfall is asked for at once; a surplus
executor is kept until its paid unit is about to end and released then, unless the plan needs
it again. Spark's own dynamic allocation, which scales on the backlog of tasks and releases
after an idle time, is off: this is the allocation manager. A plan that cannot be read holds
what runs (releasing then could cost a deadline); the step says so in the log. Every executor
that comes or goes is recorded in the ledger (`ledger.leases`): what the capacity view draws as
leased and a provider would bill.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol

from sqlalchemy.exc import SQLAlchemyError

from airflow_iqp.ledger import leases, session_scope
from airflow_iqp.planning.elastic import enact
from airflow_iqp.runtime.capacity import needed

if TYPE_CHECKING:
    from airflow_iqp.settings import DispatchSettings

log = logging.getLogger(__name__)

LEAD = 10.0  # seconds: an executor on a standalone worker registers 3-6 s after it is asked for
NOTICE = 10.0  # seconds before a paid unit's end that a surplus executor is released (at most a quarter unit)


class Executors(Protocol):
    """A cluster's executors as the controller sees them (one core each)."""

    application: str  # the Spark application they belong to

    def started(self) -> dict[str, float]:
        """Each running executor's registration time (epoch seconds)."""
        ...

    def busy(self) -> bool:
        """Whether the application has a Spark job running or waiting for executors."""
        ...

    def request(self, total: int) -> None:
        """Ask the cluster for `total` executors in all."""
        ...

    def release(self, ids: tuple[str, ...]) -> list[str]:
        """Kill these executors unless busy; the ones killed."""
        ...


@dataclass
class LeaseController:
    """Follows the plan in the ledger at `url` with `executors`, billed by `settings.billing_unit_seconds`."""

    executors: Executors
    settings: DispatchSettings
    url: str | None = None
    total: int | None = field(default=None, init=False)  # what the cluster was last asked for
    recorded: set[str] = field(default_factory=set, init=False)  # the executors the ledger has as held

    def _record(self, started: dict[str, float], now: datetime) -> None:
        """The executors that came and went since the last step, in the ledger (`ledger.leases`);
        a failed write is tried again at the next step.
        """
        stamps = {executor: datetime.fromtimestamp(at, UTC) for executor, at in started.items()}
        try:
            with session_scope(self.url) as session:
                leases.record(session, self.executors.application, stamps, now)
        except SQLAlchemyError as err:
            log.warning("lease: the executors cannot be recorded (%s); trying again", err)
            return
        self.recorded = set(started)

    def step(self, now: datetime | None = None) -> None:
        """One look at the plan and the executors, and what it takes to follow the plan."""
        now = now or datetime.now(UTC)
        started = self.executors.started()
        try:
            with session_scope(self.url, read_only=True) as session:
                planned = needed(session, self.settings, now, LEAD)
        except SQLAlchemyError as err:
            log.warning("lease: the plan cannot be read (%s); holding %d executors", err, len(started))
            return
        need = max(planned, len(started), 1) if self.executors.busy() else planned
        if set(started) != self.recorded:
            self._record(started, now)
        btu = self.settings.billing_unit_seconds
        action = enact(started, need, now.timestamp(), btu, min(NOTICE, btu / 4))
        if action.total != self.total:
            self.executors.request(action.total)
            log.info("lease: plan needs %d, %d running: asked for %d", need, len(started), action.total)
            self.total = action.total
        if action.release:
            killed = self.executors.release(action.release)
            if killed:
                log.info("lease: released %s at the end of their paid unit", killed)
