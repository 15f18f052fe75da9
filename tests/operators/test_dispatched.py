"""The task side of the dispatcher: the lease keeper that heartbeats while a Spark job runs and
kills the job if the lease is lost (or cannot be renewed before it runs out), the task failing
with LeaseLostError then, and a spark-submit job's output kept only under a live lease."""

from __future__ import annotations

import json
import logging
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

import pytest
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.exceptions import TaskDeferred
from sqlalchemy import select

from airflow_iqp.constants import BatchReason, JobKind, Mode, Policy, RequestState, WindowStatus
from airflow_iqp.declaration import declare
from airflow_iqp.exceptions import LeaseLostError
from airflow_iqp.ledger import dispatch, session_scope, store
from airflow_iqp.ledger.models import DispatchRequest, Window
from airflow_iqp.operators.dispatched import (
    DispatchedSparkSubmitOperator,
    ResourceRequest,
    _LeaseKeeper,
    keep_forecasts,
)
from airflow_iqp.operators.merge import MERGE_SLOT
from airflow_iqp.operators.window import merge_spec, spark_env
from airflow_iqp.planning.record import PlanRecord
from airflow_iqp.runtime import forecasts
from airflow_iqp.settings import DispatchSettings
from airflow_iqp.spark.jobs.output import MARKER
from airflow_iqp.streams.spec import FileStream
from airflow_iqp.triggers.grant import RequestEndedTrigger
from airflow_iqp.ui import read, risk, views
from airflow_iqp.ui.models import Outcome

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_iqp.declaration import Declaration
    from airflow_iqp.spark.jobs.spec import MergeSpec, PartialSpec

LOG = logging.getLogger(__name__)


def attempt_context(try_number: int) -> Context:
    """What `_run_leased` reads of a task try's context."""
    ti = SimpleNamespace(dag_id="q6", run_id="r", task_id="job", map_index=-1, try_number=try_number)
    return cast("Context", {"ti": ti})


def grant_one(url: str, lease_seconds: float, now: datetime) -> dispatch.Lease:
    with session_scope(url) as s:
        store.register_query(s, dag_id="q6", name="q6", sql="SELECT 1", mode=Mode.STATIC, params={})
        window = store.record_plan(
            s, "q6", now, now + timedelta(seconds=10), now + timedelta(seconds=60), 1, PlanRecord(), []
        )
        dispatch.register(
            s,
            window_id=window,
            query="q6",
            kind=JobKind.PARTIAL,
            slot=0,
            reason=BatchReason.PLANNED,
            deadline=now + timedelta(seconds=60),
            remaining_cost=1.0,
            lease_seconds=lease_seconds,
            now=now,
        )
        [lease] = dispatch.grant(s, policy=Policy.EDF, resources=1, now=now)
    return lease


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The task's ledger connection, as a worker would get it."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    monkeypatch.setenv("AIRFLOW_CONN_IQP_DEFAULT", url)
    return url


def test_the_keeper_extends_the_lease_while_the_job_runs(url: str) -> None:
    lease = grant_one(url, 5.0, datetime.now(UTC))
    lost = threading.Event()
    keeper = _LeaseKeeper(lease, every=0.1, on_lost=lost.set, log=LOG)
    keeper.start()
    threading.Event().wait(0.5)
    keeper.stop()
    assert not lost.is_set()
    assert not keeper.lost
    assert keeper.lease.fence == lease.fence
    assert keeper.lease.expires > lease.expires


def stale_lease(url: str) -> dispatch.Lease:
    """A lease that expired long ago (its holder stalled) and whose resource went to another request."""
    start = datetime.now(UTC) - timedelta(minutes=5)
    lease = grant_one(url, 5.0, start)
    with session_scope(url) as s:
        window = store.record_plan(
            s,
            "q6",
            start + timedelta(seconds=10),
            start + timedelta(seconds=20),
            start + timedelta(seconds=90),
            1,
            PlanRecord(),
            [],
        )
        dispatch.register(
            s,
            window_id=window,
            query="q6",
            kind=JobKind.PARTIAL,
            slot=0,
            reason=BatchReason.PLANNED,
            deadline=start + timedelta(seconds=90),
            remaining_cost=1.0,
            lease_seconds=600,
            now=datetime.now(UTC),
        )
        [taken] = dispatch.grant(s, policy=Policy.EDF, resources=1, now=datetime.now(UTC))
    assert taken.fence == lease.fence + 1
    return lease


def test_the_keeper_kills_the_job_when_the_lease_went_to_someone_else(url: str) -> None:
    lease = stale_lease(url)
    lost = threading.Event()
    keeper = _LeaseKeeper(lease, every=0.05, on_lost=lost.set, log=LOG)
    keeper.start()
    assert lost.wait(5), "the stale holder's job was not killed"
    keeper.stop()
    assert keeper.lost


class _WaitsToBeKilled(DispatchedSparkSubmitOperator):
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


def test_heartbeats_that_keep_failing_until_the_lease_runs_out_lose_it(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    lease = grant_one(url, 1.0, datetime.now(UTC))
    monkeypatch.setenv("AIRFLOW_CONN_IQP_DEFAULT", "postgresql://iqp@127.0.0.1:1/ledger")  # nothing listens there
    lost = threading.Event()
    keeper = _LeaseKeeper(lease, every=0.05, on_lost=lost.set, log=LOG)
    keeper.start()
    assert lost.wait(10), "the job outlived a lease nobody could renew"
    keeper.stop()
    assert keeper.lost
    assert datetime.now(UTC) >= lease.expires


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


class _CommitsAnyway(DispatchedSparkSubmitOperator):
    """A spark-submit application that commits its output whatever became of the lease."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(application="job.py", conn_id="iqp_spark", **kwargs)

    def _submit(self, context: Context, spec: PartialSpec | MergeSpec, spec_file: Path) -> None:
        output = Path(spec.output)
        output.mkdir(parents=True)
        (output / MARKER).write_text("{}")


def test_a_spark_submit_job_that_committed_after_its_lease_went_leaves_no_output(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_IQP_SPARK", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    lease = stale_lease(url)
    task = _CommitsAnyway(task_id="merge")
    task._keeper = _LeaseKeeper(lease, every=60, on_lost=task.on_kill, log=LOG)
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
    task._keeper = _LeaseKeeper(lease, every=60, on_lost=task.on_kill, log=LOG)
    output = task.leased_output(tmp_path / "result")
    declaration = q6(tmp_path)
    task.run_spark_job(
        cast("Context", {}),
        merge_spec(declaration, [str(tmp_path / "batch-0000-f1")], output),
        tmp_path / "result.spec.json",
    )
    assert (output / MARKER).is_file()


@pytest.mark.parametrize(
    ("connection", "driver_conf", "driver_env"),
    [
        ({"conn_type": "spark", "host": "local[2]"}, {}, {"SPARK_LOCAL_IP": "127.0.0.1"}),
        (
            {
                "conn_type": "spark",
                "host": "spark://spark-master",
                "port": 7077,
                "extra": {"driver-host": "airflow-w1"},
            },
            {"spark.driver.host": "airflow-w1"},
            {},
        ),
    ],
)
def test_a_spark_submit_job_listens_where_its_connection_says(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    connection: dict[str, Any],
    driver_conf: dict[str, str],
    driver_env: dict[str, str],
) -> None:
    """Read when the job runs, not when the DAG is parsed: a local master keeps its driver on
    loopback, a cluster's driver gets the address its executors call back (never loopback by us).
    """
    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    monkeypatch.delenv("SPARK_DRIVER_HOST", raising=False)
    monkeypatch.setenv("AIRFLOW_CONN_IQP_SPARK", json.dumps(connection))
    submitted: dict[str, Any] = {}

    def submit(task: SparkSubmitOperator, context: Context) -> None:
        hook = task._get_hook()
        submitted["command"] = hook._build_spark_submit_command(task.application)
        submitted["env"] = hook._env

    monkeypatch.setattr(SparkSubmitOperator, "execute", submit)
    task = DispatchedSparkSubmitOperator(
        task_id="merge", application="job.py", conn_id="iqp_spark", env_vars=spark_env()
    )
    spec = merge_spec(q6(tmp_path), [str(tmp_path / "batch-0000-f1")], tmp_path / "result-f1")
    task._submit(cast("Context", {}), spec, tmp_path / "result-f1.spec.json")
    command = submitted["command"]
    port = f":{connection['port']}" if "port" in connection else ""
    assert command[command.index("--master") + 1] == connection["host"] + port
    confs = dict(command[i + 1].split("=", 1) for i, arg in enumerate(command) if arg == "--conf")
    assert {k: v for k, v in confs.items() if k.startswith("spark.driver.")} == driver_conf
    assert submitted["env"] == spark_env() | driver_env


# -- a batch slowed down: its window is flagged at risk before its deadline -----------------------

MERGE_S = 3.0  # longer than a heartbeat (lease_seconds / 4), so the flag comes before the deadline


class _SlowBatch(DispatchedSparkSubmitOperator):
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


def test_a_forecast_that_fails_never_stops_the_job(
    url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: object) -> dict[int, datetime]:
        raise RuntimeError("no forecast today")

    monkeypatch.setattr(forecasts, "refresh", broken)
    with caplog.at_level(logging.ERROR, logger=LOG.name):
        keep_forecasts(DispatchSettings(Policy.EDF, 1, lease_seconds=5), LOG)
    (record,) = caplog.records
    assert record.getMessage() == "could not refresh the IQP windows' forecasts; the job goes on"
    assert record.exc_info is not None


class _RunsOnce(DispatchedSparkSubmitOperator):
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
        assert dispatch.take(s, lease, "q6/r/job/-1/1", datetime.now(UTC))  # the same try, again
        assert dispatch.take(s, lease, "q6/r/job/-1/2", datetime.now(UTC))
