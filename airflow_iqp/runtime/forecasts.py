"""Keeps every open window's predicted finish current in the ledger, and logs the windows that
turn at risk (predicted to finish after their deadline) and the ones back on track.

The tasks around the dispatcher run it (operators/dispatched.py): after a job queues, after
it releases its resource, and at every heartbeat while it runs, so a job that overruns moves
the forecast of its own window and of every window queued behind it while it still runs. The
API computes the same forecasts for what it shows. The forecast itself is `ui.risk`.

A DAG's work is priced by the cost model stored in the ledger for the path its newest job ran on
(`ui.read.cost_model`: `runtime.costs.observe` refits and stores it once per job, in the task
that ran the job, or stores a declared file's model once), never refit here: a refresh runs on
every heartbeat of every running task, over every open window of every DAG. A DAG with no
stored model (too few jobs yet) is priced by the costs its plan recorded.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol

from airflow_iqp.ledger import session_scope, store
from airflow_iqp.ui import read, risk

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from airflow_iqp.constants import Policy
    from airflow_iqp.settings import DispatchSettings

SIGNIFICANT_S = 1.0  # a forecast that moved less than this is not written again


class Log(Protocol):
    """Where forecasts are told: a `logging.Logger`, or an Airflow task's log."""

    def info(self, msg: str, /, *args: object) -> object:
        """Say something worth knowing."""

    def warning(self, msg: str, /, *args: object) -> object:
        """Say something that needs attention."""

    def exception(self, msg: str, /, *args: object) -> object:
        """Say what failed, with its traceback."""


def forecasts(session: Session, policy: Policy, resources: int, now: datetime) -> dict[int, datetime]:
    """The predicted finish of every open window that can be priced, by window id."""
    return _forecast(read.open_work(session), policy, resources, now)


def refresh(session: Session, policy: Policy, resources: int, now: datetime, log: Log) -> dict[int, datetime]:
    """Write the open windows' forecasts to the ledger and log each window whose forecast
    crossed its deadline either way; returns the forecasts.
    """
    work = read.open_work(session)
    predicted = _forecast(work, policy, resources, now)
    for w in work.windows:
        new, old = predicted.get(w.id), w.predicted_finish
        if new is None or (old is not None and abs((new - old).total_seconds()) < SIGNIFICANT_S):
            continue
        store.record_forecast(session, w.id, new)
        late, was_late = new > w.deadline, old is not None and old > w.deadline
        if late and not was_late:
            log.warning(
                "IQP window %d of %s is at risk: predicted to finish at %s, %.0f s after its deadline %s",
                w.id,
                w.dag_id,
                new.isoformat(),
                (new - w.deadline).total_seconds(),
                w.deadline.isoformat(),
            )
        elif was_late and not late:
            log.info(
                "IQP window %d of %s is back on track: predicted to finish at %s, its deadline is %s",
                w.id,
                w.dag_id,
                new.isoformat(),
                w.deadline.isoformat(),
            )
    return predicted


def keep(settings: DispatchSettings, log: Log) -> None:
    """`refresh` now in a transaction of its own; a failure is logged and the caller goes on
    (a forecast must never cost a job or its lease).
    """
    try:
        with session_scope() as session:
            refresh(session, settings.policy, settings.resources, datetime.now(UTC), log)
    except Exception:
        log.exception("could not refresh the IQP windows' forecasts; the job goes on")


def _forecast(work: read.OpenWork, policy: Policy, resources: int, now: datetime) -> dict[int, datetime]:
    return risk.forecasts(work.windows, work.resources, resources, work.models, policy, work.last_served, now)
