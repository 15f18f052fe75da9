"""A Spark job that runs only while it holds a lease on the shared Spark resource.

Every partial batch and merge of every IQP DAG queues in the ledger (ledger/dispatch.py). The
task registers its request and, in the same transaction, grants whatever the policy prefers.
If that is not this task, it waits in the triggerer (GrantTrigger, read-only) until it is
granted, or until a resource is free and the policy would pick it; then it comes back and
grants itself. While the job runs, a thread heartbeats the lease; if the lease is lost anyway
(the worker stalled past its expiry and the resource went on, or heartbeats kept failing until
it ran out), the job is killed and the task fails, to be retried. When the job ends the lease is
released and the next request granted.

A job's output is kept only if the lease is confirmed live (`dispatch.confirm`) after the job
wrote it and before the task records it; each attempt writes under a name with its lease's
fence, so a job that outlived its lease never replaces the output of the attempt holding it now.

The type of the Spark connection (`iqp_spark` by default) picks the execution path:
- `spark`: one `spark-submit` application per job, by a hook of its own built from this
  SparkSubmitOperator's options and the job's arguments; losing the lease kills the
  application, and an application that committed after its lease ran out has its output deleted.
- `spark_connect`: the job runs in this task against a Spark Connect server, in a session of
  its own per attempt (URL from the Spark provider's SparkConnectHook, plus a new session id),
  its operations tagged `iqp-r<request>-f<fence>`. Losing the lease interrupts the tag, and the
  job confirms its lease right before renaming its output into place, so a job that lost it
  commits nothing.

After queueing, after releasing, and at every heartbeat, the task refreshes every open
window's predicted finish (airflow_iqp.runtime.forecasts) and logs the windows that turn at risk, so a
job that overruns flags its window, and the windows queued behind it, before their deadlines.

This module is the Airflow side: register, wait, run under the lease, release. The lease keeper
is `runtime.lease`, the connection and the two paths are `spark.paths`, `spark.submit` and
`spark.connect`. The policy, resource count and lease length are Airflow config, section [iqp]
(airflow_iqp.settings).
"""

from __future__ import annotations

import abc
import shutil
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from airflow_iqp.constants import BatchReason, ExecutionPath, JobKind, RequestState
from airflow_iqp.exceptions import LeaseLostError
from airflow_iqp.ledger import dispatch, session_scope
from airflow_iqp.runtime import capacity, forecasts
from airflow_iqp.runtime.lease import LeaseKeeper, tag
from airflow_iqp.settings import DispatchSettings
from airflow_iqp.spark.connect import ConnectJob, load_client
from airflow_iqp.spark.jobs.locations import local_path
from airflow_iqp.spark.paths import connect_url, execution_path, submit_cores, submit_driver
from airflow_iqp.spark.submit import SubmitJob
from airflow_iqp.triggers.grant import GRANT_DUE, GrantTrigger, RequestEndedTrigger

if TYPE_CHECKING:
    from pathlib import Path

    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
    from airflow.sdk import Context
    from sqlalchemy.orm import Session

    from airflow_iqp.ledger.dispatch import Lease
    from airflow_iqp.spark.jobs.spec import MergeSpec, PartialSpec


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
    """Subclasses say what to ask for (`resource_request`), what to run with the lease
    (`run_granted`) and what an earlier attempt left done (`already_done`); this class does the
    queueing, waiting, heartbeating and releasing, and runs each Spark job on the path the
    connection picks (`run_spark_job`). Airflow's operator metaclass is an `ABCMeta`, so a
    subclass that misses one of the three cannot be built.
    """

    _keeper: LeaseKeeper | None = None  # while the lease is held
    _running: ConnectJob | SparkSubmitHook | None = None  # while a Spark job runs, to kill it

    def execution_path(self) -> ExecutionPath:
        """spark-submit or Spark Connect, by the type of this task's Spark connection."""
        return execution_path(self._conn_id)

    @abc.abstractmethod
    def resource_request(self, context: Context) -> ResourceRequest:
        """What this job asks the dispatcher for, ranked by its window."""

    @abc.abstractmethod
    def run_granted(self, context: Context) -> Any:
        """Run the job; called only while this task holds the lease."""

    @abc.abstractmethod
    def already_done(self, context: Context) -> str | None:
        """This task's output if the ledger holds its job done by an earlier attempt (pushed as
        the `output_location` XCom), else None: Airflow 3.3 can fail an attempt that finished,
        when a deferred task resumes before the scheduler reads its deferral's exit
        (apache/airflow#71580), and the retry must not run the job again.
        """

    def run_spark_job(self, context: Context, spec: PartialSpec | MergeSpec, spec_file: Path) -> float:
        """Run the partial or merge job of `spec`; call it only while holding the lease (from
        `run_granted`). The spec is written to `spec_file` on either path, as the record of what
        ran. Input files the job cannot read are raised as the jobs' `CorruptInput`.

        Returns the job's seconds, its cost: a spark-submit application from submit to exit (its
        JVM start-up is every such job's own cost), a Connect job from its session's first operation
        to its commit (the client import and the session opening are this task's, not the query's).
        """
        keeper = self._keeper
        if keeper is None:
            raise RuntimeError(f"{self.task_id}: a Spark job may run only under the dispatcher's lease")
        spec_file.write_text(spec.to_json())
        if self.execution_path() is ExecutionPath.SPARK_CONNECT:
            return self._run_on_connect(spec, keeper)
        began = time.perf_counter()
        self._submit(spec, spec_file)
        seconds = time.perf_counter() - began
        try:  # the application committed on its own: keep its output only under a live lease
            keeper.confirm()
        except LeaseLostError:
            shutil.rmtree(local_path(spec.output), ignore_errors=True)
            raise
        return seconds

    def leased_output(self, base: Path) -> Path:
        """Where this attempt's job writes: `base` with the lease's fence, so a job that outlived its
        lease never replaces the output of the attempt that holds it now.
        """
        if self._keeper is None:
            raise RuntimeError(f"{self.task_id}: a Spark job's output is named only under the dispatcher's lease")
        return base.with_name(f"{base.name}-f{self._keeper.lease.fence}")

    def _submit(self, spec: PartialSpec | MergeSpec, spec_file: Path) -> None:
        """spark-submit the job's script with a hook of its own; this operator's fields stay as given."""
        job = SubmitJob.of(spec, spec_file)
        granted = self._keeper.lease.cores if self._keeper is not None else None
        hook = job.hook(self, submit_driver(self._conn_id), submit_cores(self._conn_id, granted))
        self._running = hook
        try:
            job.run(hook)
        finally:
            self._running = None

    def _run_on_connect(self, spec: PartialSpec | MergeSpec, keeper: LeaseKeeper) -> float:
        """The job in this thread, in its window's Connect session or one of its own
        (`connect_session`), tagged with its lease; the seconds it ran once its session was open.
        """
        opening = time.perf_counter()
        shared, last = self.connect_session() or (None, True)
        with ConnectJob(connect_url(self._conn_id), tag(keeper.lease), shared, last) as job:
            began = time.perf_counter()
            opened = began - opening
            whose = "the window's" if job.shared else "its own"
            self.log.info(
                "Spark Connect session %s (%s) opened in %.2f s, tagged %s", job.session_id, whose, opened, job.tag
            )
            self._running = job
            try:
                job.run(spec, before_commit=keeper.confirm)
            finally:
                self._running = None
            return time.perf_counter() - began

    def connect_session(self) -> tuple[str, bool] | None:
        """On Spark Connect, the window's session this task's job runs in (`connect.window_session`)
        and whether the job is the window's last, which releases it; None: a session of its own.
        """
        return None

    def _load_client(self) -> None:
        """On Spark Connect, import the client before this task can be granted: about a second in
        a fresh task process, which the lease would otherwise hold the resource through.
        """
        if self.execution_path() is ExecutionPath.SPARK_CONNECT:
            load_client()

    def on_kill(self) -> None:
        """Interrupt the running Connect job's operations, or kill its spark-submit application."""
        running = self._running
        if isinstance(running, ConnectJob):
            interrupted = running.interrupt()
            self.log.warning("interrupted %d Spark Connect operation(s) tagged %s", len(interrupted), running.tag)
        elif running is not None:
            running.on_kill()

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
        self._load_client()
        settings = DispatchSettings.load()
        now = datetime.now(UTC)
        with session_scope() as session:
            request_id = _register(session, request, settings, now)
            if request_id is not None:
                _grant(session, settings, now)
        if request_id is None:  # another task of the window has it: that task may need this process
            return self.registration_refused(context)
        forecasts.keep(settings, self.log)
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
        self._load_client()
        settings = DispatchSettings.load()
        if event["state"] == GRANT_DUE:
            with session_scope() as session:
                _grant(session, settings, datetime.now(UTC))
        return self._await_grant(context, event["request_id"], settings)

    def _await_grant(self, context: Context, request_id: int, settings: DispatchSettings) -> Any:
        """Run once granted; wait here for up to SHORT_WAIT, then in GrantTrigger."""
        waited = time.monotonic() + SHORT_WAIT
        while True:
            with session_scope() as session:
                status = dispatch.status(session, request_id)
                if status.state == RequestState.WAITING:
                    now = datetime.now(UTC)
                    due = dispatch.would_grant(session, policy=settings.policy, resources=settings.resources, now=now)
                    if request_id in due:
                        _grant(session, settings, now)
                        status = dispatch.status(session, request_id)
            if status.lease is not None:  # granted
                return self._run_leased(context, status.lease, settings)
            if status.state != RequestState.WAITING:  # granted, but the lease ran out before this task came back
                self.log.warning("request %d was %s before its job started; queueing again", request_id, status.state)
                return self.queue_for_resource(context, self.resource_request(context))
            if time.monotonic() > waited:
                break
            time.sleep(1.0)
        self.defer(
            trigger=GrantTrigger(request_id, settings.policy, settings.resources),
            method_name="resume_granted",
        )

    def resume_after_other_attempt(self, context: Context, event: dict[str, Any], **_: Any) -> Any:
        """Back from RequestEndedTrigger: the earlier attempt's job ended; done, or queue again.
        Done, its request is released here: an attempt killed after its job committed leaves it
        granted, and as the window's one open request it would refuse the window's next job.
        """
        if (output := self.already_done(context)) is not None:
            with session_scope() as session:
                if (lease := dispatch.status(session, event["request_id"]).lease) is not None:
                    dispatch.release(session, lease, datetime.now(UTC))
            return output
        return self.queue_for_resource(context, self.resource_request(context))

    def _run_leased(self, context: Context, lease: Lease, settings: DispatchSettings) -> Any:
        attempt = _attempt(context)
        with session_scope() as session:
            taken = dispatch.take(session, lease, attempt, datetime.now(UTC))
        if taken is None:
            self.log.warning("request %d runs in an earlier attempt of this task; waiting until it ends", lease.request)
            self.defer(trigger=RequestEndedTrigger(lease.request), method_name="resume_after_other_attempt")
        lease = taken
        self.log.info("request %d holds resource %d (fence %d)", lease.request, lease.resource, lease.fence)
        keeper = LeaseKeeper(
            lease,
            settings.heartbeat_seconds,
            on_lost=self.on_kill,
            log=self.log,
            on_beat=lambda: forecasts.keep(settings, self.log),
        )
        keeper.start()
        self._keeper = keeper
        succeeded = False
        try:
            result = self.run_granted(context)
            succeeded = True
        except Exception as err:
            if keeper.lost and not isinstance(err, LeaseLostError):  # the job failed because it was killed
                raise LeaseLostError(
                    f"lost the lease on resource {lease.resource} while the job ran; the job was stopped"
                ) from err
            raise
        finally:
            self._keeper = None
            keeper.stop()
            now = datetime.now(UTC)
            with session_scope() as session:
                if not dispatch.release(session, keeper.lease, now) and succeeded:
                    # Accepted under a confirmed lease (`confirm` before the commit or the record):
                    # what ran out was the time after it.
                    self.log.warning("request %d: the lease ran out after its output was confirmed", lease.request)
                if succeeded and not keeper.lost and (follow := self.follow_up(session, context)) is not None:
                    # Its task is not running yet: its grant waits no resume (a task may take long
                    # to get a slot), and its task, registering, sets it (`dispatch.register`).
                    _register(session, follow, settings, now, resume_seconds=0.0)
                _grant(session, settings, now)
            forecasts.keep(settings, self.log)
        if keeper.lost:
            raise LeaseLostError(
                f"lost the lease on resource {lease.resource} while the job ran; the result is not trusted"
            )
        return result


# How long a task waits for the resource in its own process before it defers. A short wait in
# the triggerer costs more than it saves: resuming takes a new task process, and Airflow 3.3
# can fail a try whose deferral ends within seconds, before the scheduler has read the
# deferral's exit (apache/airflow#71580).
SHORT_WAIT = 20.0


def _attempt(context: Context) -> str:
    """The task try that runs a job: DAG, run, task, map index and try number."""
    ti = context["ti"]
    return f"{ti.dag_id}/{ti.run_id}/{ti.task_id}/{ti.map_index}/{ti.try_number}"


def _grant(session: Session, settings: DispatchSettings, now: datetime) -> None:
    """Grant every free resource, each with the cores `[iqp] cores` gives (the plan's, with `plan`)."""
    cores = capacity.grant_cores(session, settings, now)
    dispatch.grant(session, policy=settings.policy, resources=settings.resources, now=now, cores=cores)


def _register(
    session: Session,
    request: ResourceRequest,
    settings: DispatchSettings,
    now: datetime,
    resume_seconds: float | None = None,
) -> int | None:
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
        resume_seconds=settings.resume_seconds if resume_seconds is None else resume_seconds,
        now=now,
    )
