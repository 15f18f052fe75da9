"""The task side of the dispatcher: a task whose lease is lost while its job runs fails with
LeaseLostError, a spark-submit job's output is kept only under a live lease, a slowed job flags
its window at risk before the deadline, and a retry never runs beside the attempt holding the
lease. The lease keeper itself is tests/runtime/test_lease.py."""

from __future__ import annotations

import json
import logging
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

import pytest
from airflow.sdk.exceptions import TaskDeferred
from sqlalchemy import select

from airflow_iqp.constants import BatchReason, JobKind, Mode, Policy, RequestState, WindowStatus
from airflow_iqp.declaration import declare
from airflow_iqp.exceptions import LeaseLostError
from airflow_iqp.ledger import dispatch, session_scope, store
from airflow_iqp.ledger.models import DispatchRequest, Window
from airflow_iqp.operators.dispatched import DispatchedSparkSubmitOperator, ResourceRequest
from airflow_iqp.operators.merge import MERGE_SLOT
from airflow_iqp.operators.window import merge_spec
from airflow_iqp.planning.record import PlanRecord
from airflow_iqp.runtime import forecasts
from airflow_iqp.runtime.lease import LeaseKeeper
from airflow_iqp.settings import DispatchSettings
from airflow_iqp.spark.jobs.output import MARKER
from airflow_iqp.streams.spec import FileStream
from airflow_iqp.triggers.grant import RequestEndedTrigger
from airflow_iqp.ui import read, risk, views
from airflow_iqp.ui.models import Outcome
from tests.runtime.test_lease import grant_one, stale_lease
from tests.runtime.test_lease import url as url  # the task's ledger, as a fixture here

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_iqp.declaration import Declaration
    from airflow_iqp.spark.jobs.spec import MergeSpec, PartialSpec

LOG = logging.getLogger(__name__)


def attempt_context(try_number: int) -> Context:
    """What `_run_leased` reads of a task try's context."""
    ti = SimpleNamespace(dag_id="q6", run_id="r", task_id="job", map_index=-1, try_number=try_number)
    return cast("Context", {"ti": ti})


class HeldJob(DispatchedSparkSubmitOperator):
    """A dispatched job whose test grants its lease: it never queues, and no earlier attempt of
    it ran. Subclasses that run under `_run_leased` say what runs with the lease.
    """

    def resource_request(self, context: Context) -> ResourceRequest:
        raise AssertionError(f"{self.task_id} does not queue: its test grants the lease")

    def run_granted(self, context: Context) -> Any:
        raise AssertionError(f"{self.task_id} runs its Spark jobs from the test")

    def already_done(self, context: Context) -> str | None:
        return None


def test_a_dispatched_job_must_say_what_it_asks_for_runs_and_left_done() -> None:
    """Airflow's operator metaclass is an ABCMeta: the three abstract methods are enforced."""

    class Incomplete(DispatchedSparkSubmitOperator):
        def run_granted(self, context: Context) -> None:
            """Runs nothing."""

    with pytest.raises(TypeError, match="abstract methods already_done, resource_request"):
        Incomplete(task_id="job", application="job.py")  # type: ignore[abstract]


class _WaitsToBeKilled(HeldJob):
    """A job that runs until the lease keeper kills it."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(application="job.py", **kwargs)
        self.killed = threading.Event()

    def on_kill(self) -> None:
        self.killed.set()

    def run_granted(self, context: Context) -> str:
        assert self.killed.wait(10), "the lease keeper never killed the job"
        return "result"


def test_a_task_that_lost_its_lease_fails_with_lease_lost(url: str) -> None:
    lease = stale_lease(url)
    task = _WaitsToBeKilled(task_id="job")
    with pytest.raises(LeaseLostError, match=f"lost the lease on resource {lease.resource} while the job ran"):
        task._run_leased(attempt_context(1), lease, DispatchSettings(Policy.EDF, 1, lease_seconds=5))
    assert task.killed.is_set()
    with session_scope(url) as s:
        assert dispatch.status(s, lease.request).lease is None  # released, or expired: not held


def q6(tmp_path: Path) -> Declaration:
    """A q6 declaration whose merge a test task runs."""
    return declare(
        dag_id="iqp_q6",
        query="q6",
        window=timedelta(minutes=2),
        deadline=timedelta(minutes=1),
        streams={"lineitem": FileStream(str(tmp_path / "lineitem"))},
        output="/results/{dag_id}/{window_start}",
    )


class _CommitsAnyway(HeldJob):
    """A spark-submit application that commits its output whatever became of the lease."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(application="job.py", conn_id="iqp_spark", **kwargs)

    def _submit(self, spec: PartialSpec | MergeSpec, spec_file: Path) -> None:
        output = Path(spec.output)
        output.mkdir(parents=True)
        (output / MARKER).write_text("{}")


def test_a_spark_submit_job_that_committed_after_its_lease_went_leaves_no_output(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_IQP_SPARK", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    lease = stale_lease(url)
    task = _CommitsAnyway(task_id="merge")
    task._keeper = LeaseKeeper(lease, every=60, on_lost=task.on_kill, log=LOG)
    output = task.leased_output(tmp_path / "result")
    assert output.name == f"result-f{lease.fence}"
    declaration = q6(tmp_path)
    spec = merge_spec(declaration, [str(tmp_path / "batch-0000-f1")], output)
    with pytest.raises(LeaseLostError, match="nothing was committed"):
        task.run_spark_job(cast("Context", {}), spec, tmp_path / "result.spec.json")
    assert not output.exists()


def test_a_spark_submit_job_under_a_live_lease_keeps_its_output(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_IQP_SPARK", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    lease = grant_one(url, 30.0, datetime.now(UTC))
    task = _CommitsAnyway(task_id="merge")
    task._keeper = LeaseKeeper(lease, every=60, on_lost=task.on_kill, log=LOG)
    output = task.leased_output(tmp_path / "result")
    declaration = q6(tmp_path)
    task.run_spark_job(
        cast("Context", {}),
        merge_spec(declaration, [str(tmp_path / "batch-0000-f1")], output),
        tmp_path / "result.spec.json",
    )
    assert (output / MARKER).is_file()


# -- a batch slowed down: its window is flagged at risk before its deadline -----------------------

MERGE_S = 3.0  # longer than a heartbeat (lease_seconds / 4), so the flag comes before the deadline


class _SlowBatch(HeldJob):
    """Batch 0 of a window, planned to take 1 s, slowed down to run until the test stops it."""

    def __init__(self, *, window_id: int, deadline: datetime, **kwargs: Any) -> None:
        super().__init__(application="job.py", **kwargs)
        self.window_id = window_id
        self.deadline = deadline
        self.stop = threading.Event()

    def resource_request(self, context: Context) -> ResourceRequest:
        remaining = 1 + MERGE_S
        return ResourceRequest(
            self.window_id, "iqp_q6", JobKind.PARTIAL, 0, BatchReason.PLANNED, self.deadline, remaining
        )

    def run_granted(self, context: Context) -> str:
        with session_scope() as s:
            store.start_batch(s, self.window_id, 0)
        assert self.stop.wait(30), "the test never stopped the slowed batch"
        return "result"


def slow_window(now: datetime, deadline: datetime) -> int:
    """A closed-input window: one batch of 1 s released now, then a merge of MERGE_S s."""
    with session_scope() as s:
        store.register_query(s, dag_id="iqp_q6", name="q6", sql="SELECT 1", mode=Mode.STATIC, params={})
        return store.record_plan(
            s,
            "iqp_q6",
            now - timedelta(seconds=20),
            now - timedelta(seconds=1),
            deadline,
            10,
            PlanRecord(merge_cost=MERGE_S),
            [
                {
                    "index": 0,
                    "first_tuple": 0,
                    "last_tuple": 9,
                    "release": now,
                    "latest_start": now,
                    "planned_start": now,
                    "predicted_cost": 1.0,
                }
            ],
            predicted_finish=now + timedelta(seconds=1 + MERGE_S),
        )


def test_a_slowed_batch_flags_its_window_at_risk_before_the_deadline(
    url: str, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AIRFLOW__IQP__LEASE_SECONDS", "5")  # a heartbeat, and a forecast, every 1.25 s
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    now = datetime.now(UTC)
    deadline = now + timedelta(seconds=10)  # on time: the plan finishes at now + 4 s
    window_id = slow_window(now, deadline)
    task = _SlowBatch(window_id=window_id, deadline=deadline, task_id="partial_aggregate")
    context = attempt_context(1)
    runner = threading.Thread(target=task.queue_for_resource, args=(context, task.resource_request(context)))
    runner.start()
    flagged: tuple[datetime, datetime] | None = None
    try:
        while flagged is None and datetime.now(UTC) < deadline + timedelta(seconds=3):
            with session_scope(url, read_only=True) as s:
                predicted = s.get(Window, window_id).predicted_finish  # type: ignore[union-attr]
            if predicted is not None and predicted > deadline:
                flagged = datetime.now(UTC), predicted
            threading.Event().wait(0.1)
        # what the monitor shows meanwhile
        with session_scope(url, read_only=True) as s:
            live = forecasts.forecasts(s, Policy.EDF, 1, datetime.now(UTC))
            q6 = read.query_of_dag(s, "iqp_q6")
            assert q6 is not None
            shown = read.window(s, q6, window_id)
            assert shown is not None
        summary = views.summarize(risk.applied(shown, live), datetime.now(UTC), None)
    finally:
        task.stop.set()
        runner.join(30)
    assert flagged is not None, "the window was never flagged at risk"
    seen_at, predicted = flagged
    assert seen_at < deadline, f"flagged at {seen_at}, after the deadline {deadline}"
    assert predicted >= seen_at + timedelta(seconds=MERGE_S - 1.5)  # the overrunning batch ends now at the soonest
    assert summary.outcome is Outcome.AT_RISK
    said = capfd.readouterr()
    assert f"IQP window {window_id} of iqp_q6 is at risk" in said.out + said.err
    with session_scope(url, read_only=True) as s:
        assert s.get(Window, window_id).status == WindowStatus.RUNNING  # type: ignore[union-attr]


class _RunsOnce(HeldJob):
    """A job that counts its runs; done once it ran."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(application="job.py", **kwargs)
        self.runs = 0

    def run_granted(self, context: Context) -> str:
        self.runs += 1
        return "output"

    def already_done(self, context: Context) -> str | None:
        return "output" if self.runs else None


def test_a_retry_does_not_run_under_the_lease_its_earlier_attempt_still_holds(url: str) -> None:
    """Airflow 3.3 may fail a try that still runs (apache/airflow#71580); its retry comes back to
    the same granted request and must wait for the earlier try instead of running beside it."""
    lease = grant_one(url, 30.0, datetime.now(UTC))
    with session_scope(url) as s:
        assert dispatch.take(s, lease, "q6/r/job/-1/1", datetime.now(UTC))
    retry = _RunsOnce(task_id="job")
    with pytest.raises(TaskDeferred) as deferred:
        retry._run_leased(attempt_context(2), lease, DispatchSettings(Policy.EDF, 1, lease_seconds=30))
    assert retry.runs == 0
    trigger = deferred.value.trigger
    assert isinstance(trigger, RequestEndedTrigger)
    assert trigger.look() is None  # the earlier try still holds a live lease
    with session_scope(url) as s:
        dispatch.release(s, lease, datetime.now(UTC))
    assert trigger.look() == RequestState.RELEASED


def test_a_retry_that_finds_the_job_done_releases_the_request_its_killed_attempt_left_granted(url: str) -> None:
    """The earlier try was killed after its job committed and before it released (a fault trial
    saw it): the window's merge was refused until its retries ran out."""
    lease = grant_one(url, 1.0, datetime.now(UTC) - timedelta(seconds=5))  # ran out, nobody reclaimed it
    retry = _RunsOnce(task_id="job")
    retry.runs = 1  # the earlier try's job is done
    event = {"request_id": lease.request, "state": str(RequestState.GRANTED)}
    assert retry.resume_after_other_attempt(attempt_context(2), event) == "output"
    with session_scope(url) as s:
        assert dispatch.status(s, lease.request).state == RequestState.RELEASED
        window_id = s.scalar(select(DispatchRequest.window_id).where(DispatchRequest.id == lease.request))
        assert window_id is not None
        merge = dispatch.register(
            s,
            window_id=window_id,
            query="q6",
            kind=JobKind.MERGE,
            slot=MERGE_SLOT,
            reason=BatchReason.ALL_PROCESSED,
            deadline=datetime.now(UTC) + timedelta(seconds=60),
            remaining_cost=1.0,
            lease_seconds=30.0,
            now=datetime.now(UTC),
        )
    assert merge is not None, "the window's next job can queue"


def test_a_retry_takes_over_the_lease_of_an_earlier_attempt_once_it_ran_out(url: str) -> None:
    lease = grant_one(url, 1.0, datetime.now(UTC) - timedelta(seconds=5))  # expired, not reclaimed
    with session_scope(url) as s:
        assert dispatch.take(s, lease, "q6/r/job/-1/1", datetime.now(UTC) - timedelta(seconds=5))
        assert dispatch.take(s, lease, "q6/r/job/-1/1", datetime.now(UTC) - timedelta(seconds=5))  # the same try, again
        assert dispatch.take(s, lease, "q6/r/job/-1/2", datetime.now(UTC))  # its 1 s term ran out
