"""A spark-submit that runs only while it holds a lease on the shared Spark resource.

Every partial batch and merge of every IQP DAG queues in the ledger (ledger/dispatch.py). The
task registers its request and, in the same transaction, grants whatever the policy prefers.
If that is not this task, it waits in the triggerer (GrantTrigger, read-only) until it is
granted, or until a resource is free and the policy would pick it; then it comes back and
grants itself. While the job runs, a thread heartbeats the lease; if the lease is lost anyway
(the worker stalled past its expiry and the resource went on), the job is killed and the task
fails, to be retried. When the job ends the lease is released and the next request granted.

The policy, resource count and lease length are Airflow config, section [iqp] (airflow_iqp.settings).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from airflow_iqp.constants import BatchReason, JobKind, RequestState
from airflow_iqp.exceptions import LeaseLostError
from airflow_iqp.ledger import dispatch, session_scope
from airflow_iqp.operators.window import JOBS_DIR
from airflow_iqp.settings import DispatchSettings
from airflow_iqp.triggers.grant import GRANT_DUE, GrantTrigger

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from airflow.sdk import Context
    from sqlalchemy.orm import Session

    from airflow_iqp.ledger.dispatch import Lease


@dataclass(frozen=True)
class ResourceRequest:
    """What the dispatcher ranks a job by: its window's deadline and the work the window still needs."""

    window_id: int
    query: str
    kind: JobKind
    slot: int
    reason: BatchReason
    deadline: datetime
    remaining_cost: float


class DispatchedSparkSubmitOperator(SparkSubmitOperator):
    """Subclasses say what to ask for (`resource_request`) and what to run with the lease
    (`run_granted`); this class does the queueing, waiting, heartbeating and releasing.
    """

    def resource_request(self, context: Context) -> ResourceRequest:
        """What this job asks the dispatcher for, ranked by its window."""
        raise NotImplementedError

    def run_granted(self, context: Context) -> Any:
        """Run the job; called only while this task holds the lease."""
        raise NotImplementedError

    def run_spark_job(self, context: Context, job: str, spec_json: str, spec_file: Path, *args: str) -> None:
        """Run one Spark job (`partial_job.py` or `merge_job.py`) on its spec; call it only while
        holding the lease (from `run_granted`).
        """
        spec_file.write_text(spec_json)
        self.application = str(JOBS_DIR / job)
        self.application_args = ["--spec", str(spec_file), *args]
        self._hook = None  # the hook is built from the application and its arguments
        SparkSubmitOperator.execute(self, context)

    def follow_up(self, session: Session, context: Context) -> ResourceRequest | None:
        """A request to queue in the transaction that releases the resource after a successful
        job: a window's last batch queues its merge, so the merge is ranked at once instead of
        after Airflow schedules its task (by then a later deadline may hold the resource).
        """
        return None

    def registration_refused(self, context: Context) -> Any:
        """Another task of the window has the window's one open request."""
        raise RuntimeError(f"{self.task_id}: another task of this window is queued or running; this one cannot queue")

    def queue_for_resource(self, context: Context, request: ResourceRequest) -> Any:
        """Register the request and grant in one transaction, then run with the lease or wait for it."""
        settings = DispatchSettings.load()
        now = datetime.now(UTC)
        with session_scope() as session:
            request_id = _register(session, request, settings, now)
            if request_id is not None:
                dispatch.grant(session, policy=settings.policy, resources=settings.resources, now=now)
        if request_id is None:
            return self.registration_refused(context)
        self.log.info(
            "%s %s of window %d queued as request %d (%s)",
            request.query,
            request.kind,
            request.window_id,
            request_id,
            request.reason,
        )
        return self._await_grant(context, request_id, settings)

    def resume_granted(self, context: Context, event: dict[str, Any], **_: Any) -> Any:
        """Back from GrantTrigger: grant if the trigger saw a grant due, then run or wait again."""
        settings = DispatchSettings.load()
        if event["state"] == GRANT_DUE:
            with session_scope() as session:
                dispatch.grant(session, policy=settings.policy, resources=settings.resources, now=datetime.now(UTC))
        return self._await_grant(context, event["request_id"], settings)

    def _await_grant(self, context: Context, request_id: int, settings: DispatchSettings) -> Any:
        with session_scope() as session:
            status = dispatch.status(session, request_id)
        if status.lease is not None:  # granted
            return self._run_leased(context, status.lease, settings)
        if status.state != RequestState.WAITING:  # granted, but the lease ran out before this task came back
            self.log.warning("request %d was %s before its job started; queueing again", request_id, status.state)
            return self.queue_for_resource(context, self.resource_request(context))
        self.defer(
            trigger=GrantTrigger(request_id, settings.policy, settings.resources),
            method_name="resume_granted",
        )

    def _run_leased(self, context: Context, lease: Lease, settings: DispatchSettings) -> Any:
        self.log.info("request %d holds resource %d (fence %d)", lease.request, lease.resource, lease.fence)
        keeper = _LeaseKeeper(lease, settings.lease_seconds / 4, on_lost=self.on_kill, log=self.log)
        keeper.start()
        succeeded = False
        try:
            result = self.run_granted(context)
            succeeded = True
        finally:
            keeper.stop()
            now = datetime.now(UTC)
            with session_scope() as session:
                dispatch.release(session, keeper.lease, now)
                if succeeded and not keeper.lost and (follow := self.follow_up(session, context)) is not None:
                    _register(session, follow, settings, now)
                dispatch.grant(session, policy=settings.policy, resources=settings.resources, now=now)
        if keeper.lost:
            raise LeaseLostError(
                f"lost the lease on resource {lease.resource} while the job ran; the result is not trusted"
            )
        return result


def _register(session: Session, request: ResourceRequest, settings: DispatchSettings, now: datetime) -> int | None:
    return dispatch.register(
        session,
        window_id=request.window_id,
        query=request.query,
        kind=request.kind,
        slot=request.slot,
        reason=request.reason,
        deadline=request.deadline,
        remaining_cost=request.remaining_cost,
        lease_seconds=settings.lease_seconds,
        now=now,
    )


class _LeaseKeeper(threading.Thread):
    """Heartbeats the lease; on loss, kills the job (another batch now owns the resource)."""

    def __init__(self, lease: Lease, every: float, on_lost: Callable[[], None], log: Any) -> None:
        super().__init__(name=f"iqp-lease-{lease.request}", daemon=True)
        self.lease = lease
        self.every = every
        self.on_lost = on_lost
        self.log = log
        self.lost = False
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(self.every):
            try:
                with session_scope() as session:
                    extended = dispatch.heartbeat(session, self.lease, datetime.now(UTC))
            except Exception:  # a failed heartbeat is retried; the lease outlives a few
                self.log.exception("lease heartbeat failed; retrying")
                continue
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

    def stop(self) -> None:
        self._stop_event.set()
        self.join()
