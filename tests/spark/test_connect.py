"""The jobs on a real Spark Connect server, each in a session of its own or its window's as the
operators run them: the same batches give the same outputs as in a classic session, unreadable files are
named, a failed commit check leaves nothing, and a job whose lease is lost is interrupted on the
server and commits nothing.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlalchemy import update

from airflow_iqp.constants import Mode, Policy
from airflow_iqp.exceptions import LeaseLostError
from airflow_iqp.ledger import dispatch, session_scope, store
from airflow_iqp.ledger.models import Resource
from airflow_iqp.runtime.lease import LeaseKeeper
from airflow_iqp.settings import DispatchSettings
from airflow_iqp.spark import connect
from airflow_iqp.spark.connect import ConnectJob
from airflow_iqp.spark.jobs import merge_job, partial_job
from airflow_iqp.spark.jobs.inputs import CorruptInput
from airflow_iqp.spark.jobs.output import MARKER
from airflow_iqp.spark.jobs.spec import MergeSpec, PartialSpec, StaticInput, StreamInput
from tests.operators.test_dispatched import LOG, HeldJob
from tests.runtime.test_lease import grant_one, queue_partial
from tests.spark.compare import assert_same
from tests.spark.test_jobs import (
    BATCHES,
    QUERIES,
    Format,
    Landing,
    one_pass,
    partial_spec,
    read_sales,
    stream_input,
    write_landing,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from airflow.sdk import Context
    from pyspark.sql import SparkSession

    from airflow_iqp.spark.connect_server import ConnectServer


@pytest.fixture(scope="module")
def landing(tmp_path_factory: pytest.TempPathFactory) -> Landing:
    """test_jobs' made-up stream in every format."""
    return write_landing(tmp_path_factory.mktemp("landing"))


def on_connect(server: ConnectServer, run: Callable[[SparkSession], Any]) -> Any:
    with ConnectJob(server.url_with_token, "iqp-test") as job:
        return run(job.spark)


def batched(landing: Landing, fmt: Format, query: str, root: Path, run: Callable[[Any], Any]) -> Path:
    """The query over `fmt`'s files in BATCHES, then the merge; `run(job)` runs each job."""
    files = landing.files[fmt]
    outs = [root / f"batch-{i}" for i in range(len(BATCHES))]
    for out, batch in zip(outs, BATCHES):
        run(partial_spec(landing, query, out, stream_input(fmt, [files[i] for i in batch])))
    result = root / "result"
    partials = [str(o) for o in outs]
    run(
        MergeSpec(name=query, query=str(landing.query(query)), streams=["sales"], partials=partials, output=str(result))
    )
    return result


def run_job(spec: PartialSpec | MergeSpec, spark: SparkSession | None = None) -> dict[str, Any]:
    if isinstance(spec, PartialSpec):
        return partial_job.run(spec, spark)
    return merge_job.run(spec, spark)


@pytest.mark.parametrize(("fmt", "query"), [("csv", "by_channel"), ("parquet", "by_category")])
def test_batched_jobs_on_connect_equal_the_same_jobs_in_a_classic_session(
    spark: SparkSession, connect_server: ConnectServer, tmp_path: Path, landing: Landing, fmt: Format, query: str
) -> None:
    remote = batched(
        landing, fmt, query, tmp_path / "connect", lambda spec: on_connect(connect_server, lambda s: run_job(spec, s))
    )
    classic = batched(landing, fmt, query, tmp_path / "classic", lambda spec: run_job(spec))
    markers = [json.loads((out / MARKER).read_text()) for out in (remote, classic)]
    assert markers[0]["input_rows"] == markers[1]["input_rows"] == {"sales": len(landing.rows)}
    _, expected = one_pass(spark, landing, query, read_sales(spark, fmt, landing.files[fmt]))
    ordered = "ORDER BY" in QUERIES[query]
    assert_same(spark.read.parquet(str(remote)).collect(), expected, ordered=ordered)
    assert_same(spark.read.parquet(str(classic)).collect(), expected, ordered=ordered)


def test_each_attempt_gets_a_session_of_its_own(connect_server: ConnectServer) -> None:
    """A temp view of one job is not seen by the next: nothing of an earlier attempt leaks."""
    with ConnectJob(connect_server.url_with_token, "iqp-a") as first:
        first.spark.range(3).createOrReplaceTempView("leftover")
        assert first.spark.catalog.tableExists("leftover")
        first_id = first.session_id
    with ConnectJob(connect_server.url_with_token, "iqp-b") as second:
        assert second.session_id != first_id
        assert not second.spark.catalog.tableExists("leftover")


def test_a_windows_jobs_share_one_session_which_its_last_job_releases(connect_server: ConnectServer) -> None:
    """A window's jobs run in its session, left open between them; after its last job released
    it, a job of the window (cleared and run again) runs in a session of its own.
    """
    shared = connect.window_session("iqp_test_dag", 7)
    assert shared == connect.window_session("iqp_test_dag", 7) != connect.window_session("iqp_test_dag", 8)
    with ConnectJob(connect_server.url_with_token, "iqp-a", shared) as first:
        assert (first.session_id, first.shared) == (shared, True)
        first.spark.range(3).createOrReplaceTempView("kept")
    with ConnectJob(connect_server.url_with_token, "iqp-b", shared, last=True) as merge:
        assert (merge.session_id, merge.shared) == (shared, True)
        assert merge.spark.catalog.tableExists("kept")  # the same session on the server
    with ConnectJob(connect_server.url_with_token, "iqp-c", shared) as again:
        assert again.session_id != shared
        assert not again.shared
        assert not again.spark.catalog.tableExists("kept")
        assert again.spark.range(2).count() == 2


def test_a_corrupt_csv_file_is_named_on_connect(
    connect_server: ConnectServer, tmp_path: Path, landing: Landing
) -> None:
    good = landing.files["csv"]
    bad = tmp_path / "bad.csv"
    bad.write_text(good[1].read_text() + "7,3,2,oops,2026-01-01 01:00:00,web\n")
    spec = partial_spec(landing, "total", tmp_path / "batch-0", stream_input("csv", [good[0], bad]))
    with pytest.raises(CorruptInput) as caught:
        on_connect(connect_server, lambda s: partial_job.run(spec, s))
    assert [(c.stream, c.file) for c in caught.value.files] == [("sales", str(bad))]
    assert "NumberFormatException" in caught.value.files[0].error
    assert not (tmp_path / "batch-0").exists()


def test_a_failed_check_before_the_commit_leaves_no_output(
    connect_server: ConnectServer, tmp_path: Path, landing: Landing
) -> None:
    out = tmp_path / "batch-0"
    spec = partial_spec(landing, "by_channel", out, stream_input("parquet", landing.files["parquet"][:2]))

    def lost() -> None:
        assert [p for p in tmp_path.iterdir() if p.name.startswith(".batch-0.tmp-")], "checked after the write"
        raise LeaseLostError("lost")

    with pytest.raises(LeaseLostError):
        on_connect(connect_server, lambda s: partial_job.run(spec, s, before_commit=lost))
    assert list(tmp_path.iterdir()) == []


def test_a_connect_jobs_cost_leaves_out_its_sessions_opening(
    connect_server: ConnectServer, landing: Landing, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The seconds a task records as its job's cost start once its Connect session is open: the
    client import and the session are the task's overhead (1.1-1.7 s of every demo job before),
    not the query's, and would otherwise be learned as its cost.
    """
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    monkeypatch.setenv("AIRFLOW_CONN_IQP_DEFAULT", url)
    monkeypatch.setenv("AIRFLOW_CONN_IQP_SPARK", json.dumps(connect_server.connection()))
    opening = 1.0
    reachable = connect.probe

    def slow_probe(where: str) -> None:  # an opening as slow as a loaded machine's
        time.sleep(opening)
        reachable(where)

    monkeypatch.setattr(connect, "probe", slow_probe)
    task = HeldJob(application="unused.py", task_id="partial", conn_id="iqp_spark")
    task._keeper = LeaseKeeper(grant_one(url, 30.0, datetime.now(UTC)), every=60, on_lost=task.on_kill, log=LOG)
    out = tmp_path / "batch-0"
    spec = partial_spec(landing, "by_channel", out, stream_input("parquet", landing.files["parquet"][:2]))
    began = time.perf_counter()
    seconds = task.run_spark_job(cast("Context", {}), spec, tmp_path / "batch-0.spec.json")
    wall = time.perf_counter() - began
    assert (out / MARKER).is_file()
    assert 0 < seconds <= wall - opening, f"recorded {seconds:.2f} s of a {wall:.2f} s run, {opening} s of it opening"


# -- a lost lease ----------------------------------------------------------------------------

ROWS = 150_000  # events x numbers: 2.25e10 pairs in a nested-loop join, minutes on two cores
SLOW_SQL = "SELECT count(*) AS n FROM events e JOIN numbers s ON (e.v * 31 + s.k) % 1000003 = 7"
LEASE_SECONDS = 6.0


def slow_spec(root: Path) -> PartialSpec:
    """A partial that would run for minutes: a non-equi join of the batch with a static table."""
    for name, column in (("events", "v"), ("numbers", "k")):
        (root / name).mkdir(parents=True)
        pq.write_table(pa.table({column: pa.array(range(ROWS), pa.int64())}), root / name / "part-0.parquet")
    (root / "slow.sql").write_text(SLOW_SQL)
    return PartialSpec(
        name="slow",
        query=str(root / "slow.sql"),
        streams={"events": StreamInput(files=[str(root / "events" / "part-0.parquet")])},
        static={"numbers": StaticInput(path=str(root / "numbers"))},
        output=str(root / "work" / "batch-0000"),
    )


class SlowPartial(HeldJob):
    """Runs the slow partial on the connection's path under its lease."""

    def __init__(self, *, spec: PartialSpec, **kwargs: Any) -> None:
        super().__init__(application="unused.py", **kwargs)
        self.spec = spec
        self.started = threading.Event()

    def run_granted(self, context: Context) -> None:
        self.started.set()
        output = Path(self.spec.output)
        output.parent.mkdir(parents=True, exist_ok=True)
        self.run_spark_job(context, self.spec, output.with_suffix(".spec.json"))


def granted(url: str, now: datetime) -> dispatch.Lease:
    with session_scope(url) as s:
        store.register_query(s, dag_id="slow", name="slow", sql=SLOW_SQL, mode=Mode.STATIC, params={})
        queue_partial(s, "slow", now, now + timedelta(minutes=5), LEASE_SECONDS, now)
        [lease] = dispatch.grant(s, policy=Policy.EDF, resources=1, now=now)
    return lease


def take_over(url: str, lease: dispatch.Lease) -> None:
    """Another worker's grant of the resource, as if this holder had stalled past its lease: in
    one transaction the lease runs out and the next request is granted.
    """
    now = datetime.now(UTC)
    with session_scope(url) as s:
        queue_partial(s, "slow", now + timedelta(minutes=1), now + timedelta(minutes=9), 600, now)
        expired = now - timedelta(seconds=1)
        s.execute(update(Resource).where(Resource.id == lease.resource).values(lease_expires=expired))
        [taken] = dispatch.grant(s, policy=Policy.EDF, resources=1, now=now)
    assert taken.fence == lease.fence + 1


def test_a_connect_job_whose_lease_is_lost_is_interrupted_and_commits_nothing(
    connect_server: ConnectServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    monkeypatch.setenv("AIRFLOW_CONN_IQP_DEFAULT", url)
    monkeypatch.setenv("AIRFLOW_CONN_IQP_SPARK", json.dumps(connect_server.connection()))
    spec = slow_spec(tmp_path)
    task = SlowPartial(spec=spec, task_id="slow", conn_id="iqp_spark")
    assert task.execution_path() == "spark_connect"
    lease = granted(url, datetime.now(UTC))
    lost_at: list[float] = []

    def steal() -> None:
        task.started.wait(30)
        time.sleep(4)  # the join is running on the server by now
        take_over(url, lease)
        lost_at.append(time.monotonic())

    thief = threading.Thread(target=steal)
    thief.start()
    ti = SimpleNamespace(dag_id="sales", run_id="r", task_id="partial", map_index=0, try_number=1)
    with pytest.raises(LeaseLostError, match="lost the lease"):
        task._run_leased(
            cast("Context", {"ti": ti}), lease, DispatchSettings(Policy.EDF, 1, lease_seconds=LEASE_SECONDS)
        )
    stopped = time.monotonic() - lost_at[0]
    thief.join()
    assert stopped < 20, f"the job went on for {stopped:.0f} s after its lease was lost"
    work = tmp_path / "work"
    assert sorted(p.name for p in work.iterdir()) == ["batch-0000.spec.json"], "no output, not even a temporary one"
    # The server's two cores are free again: a small job runs at once, not behind the join.
    began = time.monotonic()
    assert on_connect(connect_server, lambda s: s.range(1000).selectExpr("sum(id)").collect()[0][0]) == 499500
    assert time.monotonic() - began < 10
