"""One fault trial: a live window of TPC-H Q6, one component killed at a random moment, and the checks.

The trial rewrites one DAG file (`fault_q6`) so that its only run is the trial's window, lands the
window's files (copies of a generated TPC-H stream under names of the trial's own), kills its
target at a random moment of the window, lets Airflow and the supervisor recover, and checks the
window from the ledger: merged, every file of the window in exactly one committed (done) batch and
none frozen twice by the DAG, and the published result equal to one Spark SQL pass over the files.
The window's files are the tests' oracle's (modification times read from the landing directory),
not the package's listing; a trial records whether its kill reached a running target at all.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from sqlalchemy import select

from airflow_iqp.constants import BatchStatus, WindowStatus
from airflow_iqp.demo.examples import Example, load_examples
from airflow_iqp.demo.verify import verify_window, window_paths
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.ledger.models import Batch, DispatchRequest, Query, Window
from airflow_iqp.tpch.manifest import MANIFEST_NAME, STREAM_DIR, load_manifest
from airflow_iqp.tpch.replay import land_file
from benchmarks.faults.services import SUBMIT_CONN_ID, kill_running, running
from tests.oracle import arrived_in
from tests.topology import SCHEDULERS

if TYPE_CHECKING:
    import random
    from pathlib import Path

    from pyspark.sql import SparkSession

    from airflow_iqp.declaration import Declaration
    from benchmarks.faults.services import Services

KINDS = ("worker", "celery-worker", "scheduler", "triggerer", "driver", "connect-server", "postgres-restart")
JOB_TASKS = ("partial_aggregate", "final_merge")  # the tasks that run a Spark job
DAG_ID = "fault_q6"
WINDOW = timedelta(seconds=20)
# Per path: a spark-submit job costs ~12 s more (JVM and session), so its deadline is longer.
DEADLINES = {"spark_connect": timedelta(seconds=30), "spark_submit": timedelta(seconds=60)}
FILES_PER_SECOND = 2.0
LEAD = timedelta(seconds=18)  # the DAG file parsed again (every 10 s here), the run created, before the window
TIMEOUT = timedelta(minutes=5)  # after the window's deadline: not recovered
ORIGIN = datetime(2000, 1, 1, tzinfo=UTC)  # windows count from here, as the timetable does
# Pessimistic, so the deadline cuts a window into two batches or more; per path, as `plan` reads them.
MODELS = {
    "spark_connect": {"partial": {"points": [[430, 6.5], [17200, 26.0]]}, "merge": {"points": [[1, 5.0], [8, 6.0]]}},
    "spark_submit": {"partial": {"points": [[430, 16.0], [17200, 45.0]]}, "merge": {"points": [[1, 14.0], [8, 15.0]]}},
}
DAG_FILE = """
from datetime import datetime, timedelta
from airflow_iqp import ArrivalRate, FileStream, intermittent_query

dag = intermittent_query(
    dag_id="{dag_id}",
    query="q6",
    window=timedelta(seconds={window}),
    deadline=timedelta(seconds={deadline}),
    streams={{"lineitem": FileStream("{landing}")}},
    output="{work}/results/{{dag_id}}/{{window_start}}",
    rate=ArrivalRate(files_per_second={rate}, rows_per_file={rows_per_file}),
    cost_model="{model}",
    start_date=datetime.fromisoformat("{start}"),
    end_date=datetime.fromisoformat("{end}"),
    spark_conn_id="{conn_id}",
    work_dir="{work}",
    retry_delay=timedelta(seconds=3),
)
"""


@dataclass(frozen=True)
class TrialResult:
    """What one trial shows; times in seconds after the kill."""

    index: int
    kind: str
    target: str  # what the kill was aimed at, or why there was none
    killed: bool  # the signal reached the target while it ran, and it is gone: else the trial tests nothing
    at: float | None  # seconds into the window
    batches: int
    next_grant: float | None  # the window's first job granted the resource after the kill
    restarted: float | None  # the supervisor had the killed component back
    merged: float | None  # the window's result published
    outcome: str  # met / missed by N s / not merged
    exact: bool
    no_duplicates: bool
    problems: tuple[str, ...] = ()


def next_window_start(after: datetime) -> datetime:
    steps = -(-(after - ORIGIN) // WINDOW)
    return ORIGIN + steps * WINDOW


class Trial:
    """One trial's window, fault and checks, on the shared services."""

    def __init__(self, services: Services, stream: Path, index: int, kind: str, rng: random.Random) -> None:
        self.services = services
        self.stream = stream
        self.index = index
        self.kind = kind
        self.rng = rng
        self.base = services.root / "data"
        self.landing = self.base / "landing" / "lineitem"
        self.start = next_window_start(datetime.now(UTC) + LEAD)
        self.end = self.start + WINDOW
        manifest = load_manifest(stream / MANIFEST_NAME)
        self.sources = sorted((stream / STREAM_DIR / "lineitem").glob("*.parquet"))
        self.rows_per_file = sum(f.rows for f in manifest.streams["lineitem"]) / manifest.files
        self.pg_back: datetime | None = None
        self.component = kind  # the supervised component the kill takes down, if any
        self.path = "spark_submit" if kind == "driver" else "spark_connect"
        self.deadline = DEADLINES[self.path]

    # -- set up ---------------------------------------------------------------------------------

    def write_dag(self) -> None:
        model = self.services.airflow.dags / "fault_q6.json"
        model.write_text(json.dumps({"query": "q6", "unit": "rows", "paths": MODELS}))
        self.landing.mkdir(parents=True, exist_ok=True)
        text = DAG_FILE.format(
            dag_id=DAG_ID,
            window=WINDOW.total_seconds(),
            deadline=self.deadline.total_seconds(),
            landing=self.landing,
            work=self.base / "work",
            rate=FILES_PER_SECOND,
            rows_per_file=round(self.rows_per_file),
            model=model,
            start=self.start.isoformat(),
            end=(self.start + WINDOW / 2).isoformat(),  # one run: this window's
            conn_id=SUBMIT_CONN_ID if self.path == "spark_submit" else "iqp_spark",
        )
        target = self.services.airflow.dags / f"{DAG_ID}.py"
        tmp = target.with_name(".fault_q6.py.tmp")
        tmp.write_text(text)
        os.replace(tmp, target)

    def land(self, stop: threading.Event) -> None:
        """The window's files: from a second before it opens to two after it closes, two a second."""
        first = self.start - timedelta(seconds=1)
        count = int((WINDOW.total_seconds() + 3) * FILES_PER_SECOND)
        for i in range(count):
            due = first + timedelta(seconds=i / FILES_PER_SECOND)
            if stop.wait(max(0.0, (due - datetime.now(UTC)).total_seconds())):
                return
            source = self.sources[(self.index * count + i) % len(self.sources)]
            land_file(source, self.landing / f"t{self.index:03d}-{i:03d}-{source.name}")

    # -- the fault -----------------------------------------------------------------------------

    def inject(self) -> tuple[str, datetime | None, bool]:
        """Wait for a random moment of the window, kill the target; (what was aimed at, when, whether
        the kill happened: a running target that is gone after it).
        """
        window_s = WINDOW.total_seconds()
        moment = self.start + timedelta(seconds=self.rng.uniform(0.2, 1.0) * window_s)
        _sleep_until(moment)
        if self.kind == "postgres-restart":
            before = self._postmaster()
            killed_at = datetime.now(UTC)
            self.services.ledger_pg.restart()
            self.pg_back = datetime.now(UTC)
            after = self._postmaster()
            restarted = before is not None and after is not None and after != before and not running(before)
            return f"ledger PostgreSQL {before} (pg_ctl restart -m immediate)", killed_at, restarted
        if self.kind == "scheduler":
            self.component = f"scheduler-{self.rng.randint(1, SCHEDULERS)}"
        if self.kind in ("triggerer", "scheduler", "connect-server"):
            pid = self.services.components[self.component].pid
            killed_at = datetime.now(UTC)
            return f"{self.component} group {pid}", killed_at, kill_running(pid, group=True)
        # worker, celery-worker or driver: the first job that runs from the moment on
        give_up = self.end + self.deadline
        while datetime.now(UTC) < give_up:
            target = self._job_process()
            if target is not None:
                pid, worker, what = target
                killed_at = datetime.now(UTC)
                if self.kind == "celery-worker":
                    self.component = worker
                    if self.services.kill_worker(worker):
                        return f"{worker} group {self.services.components[worker].pid} ({what})", killed_at, True
                elif kill_running(pid):
                    return f"{what} {pid} on {worker}", killed_at, True
                continue  # it ended before the signal: look for the next one
            time.sleep(0.2)
        return "no job ran after the moment", None, False

    def _postmaster(self) -> int | None:
        """The pid of the ledger's PostgreSQL server (first line of its postmaster.pid)."""
        try:
            return int((self.services.ledger_pg.data / "postmaster.pid").read_text().split()[0])
        except (OSError, IndexError, ValueError):
            return None

    def _job_process(self) -> tuple[int, str, str] | None:
        """(pid, Celery worker, what) of the process to kill: a partial's spark-submit JVM (driver),
        a partial's task process (worker), or a partial's or the merge's (celery-worker).
        """
        under = self.services.under_workers()
        if self.kind == "driver":
            for pid, (worker, line) in under.items():
                if "org.apache.spark.deploy.SparkSubmit" in line and "partial_job.py" in line:
                    return pid, worker, "spark-submit JVM"
            return None
        tasks = JOB_TASKS if self.kind == "celery-worker" else JOB_TASKS[:1]
        running = set(self.services.running_task_ids(DAG_ID, tasks))
        for pid, (worker, line) in under.items():
            words = line.split()
            if line.startswith("airflow worker -- ") and len(words) > 3 and words[3] in running:
                return pid, worker, "task process"
        return None

    # -- run and check ---------------------------------------------------------------------------

    def run(self, spark: SparkSession) -> TrialResult:
        self.write_dag()
        stop = threading.Event()
        lander = threading.Thread(target=self.land, args=(stop,), daemon=True)
        lander.start()
        try:
            target, killed_at, killed = self.inject()
            window = self._wait_merged()
            self._wait_run_ended()
        finally:
            stop.set()
            lander.join(timeout=10)
        return self._check(spark, target, killed, killed_at, window)

    def _wait_merged(self) -> store.WindowRow | None:
        give_up = self.end + self.deadline + TIMEOUT
        while datetime.now(UTC) < give_up:
            window = self._window()
            if window is not None and window.status == WindowStatus.MERGED:
                return window
            time.sleep(2)
        return self._window()

    def _wait_run_ended(self, timeout: float = 90) -> None:
        """The run's last task (late_files) done too, so the next trial's DAG file lands on no running run."""
        give_up = time.monotonic() + timeout
        while time.monotonic() < give_up and self.services.run_active(DAG_ID):
            time.sleep(2)

    def _window(self) -> store.WindowRow | None:
        try:
            with session_scope(self.services.ledger) as session:
                window_id = store.window_id(session, DAG_ID, self.start)
                return None if window_id is None else store.window_summary(session, window_id)
        except Exception:  # the ledger's server may be restarting
            return None

    def _check(
        self,
        spark: SparkSession,
        target: str,
        killed: bool,
        killed_at: datetime | None,
        window: store.WindowRow | None,
    ) -> TrialResult:
        at = None if killed_at is None else (killed_at - self.start).total_seconds()
        restarted = self._restarted(killed_at)
        if window is None or window.status != WindowStatus.MERGED or window.result_uri is None:
            status = "no window" if window is None else str(window.status)
            return TrialResult(
                self.index,
                self.kind,
                target,
                killed,
                at,
                0,
                None,
                restarted,
                None,
                f"not merged ({status})",
                False,
                False,
            )
        declared = self.declaration()
        problems: list[str] = []
        expected = arrived_in({"lineitem": self.landing}, window.window_start, window.window_end).get("lineitem", [])
        done = [b for b in window.batches if b.status == BatchStatus.DONE]
        frozen = [f.removeprefix("file://") for b in done for f in (b.files or {}).get("lineitem", [])]
        twice = [f for f, n in Counter(frozen).items() if n > 1] + self._frozen_twice_by_dag()
        if twice:
            problems.append(f"in two committed batches: {twice[:3]}")
        if sorted(frozen) != expected:
            problems.append(f"{len(frozen)} files in done batches, the window has {len(expected)}")
        read, _ = window_paths(declared, window.window_start, window.window_end)
        if sorted(read.get("lineitem", [])) != expected:
            problems.append(
                f"the single pass reads {len(read.get('lineitem', []))} files, the window has {len(expected)}"
            )
        _, differences = verify_window(spark, declared, window.window_start, window.window_end, window.result_uri)
        problems += differences
        late = (window.actual_finish - window.deadline).total_seconds() if window.actual_finish else None
        outcome = "met" if window.deadline_met else f"missed by {late:.0f} s" if late is not None else "?"
        return TrialResult(
            index=self.index,
            kind=self.kind,
            target=target,
            killed=killed,
            at=at,
            batches=len(done),
            next_grant=self._next_grant(window.id, killed_at),
            restarted=restarted,
            merged=None
            if killed_at is None or window.actual_finish is None
            else _between(killed_at, window.actual_finish),
            outcome=outcome,
            exact=not differences and not problems,
            no_duplicates=not twice,
            problems=tuple(problems),
        )

    def declaration(self) -> Declaration:
        found = load_examples(self.services.airflow.dags, {}, pattern=f"{DAG_ID}.py")
        examples = [e for e in found.values() if isinstance(e, Example)]
        if len(examples) != 1:
            raise RuntimeError(f"{DAG_ID}.py does not declare one query: {found}")
        return examples[0].declaration

    def _frozen_twice_by_dag(self) -> list[str]:
        """Files in two done batches of any window of the DAG."""
        with session_scope(self.services.ledger) as session:
            rows = session.scalars(
                select(Batch.files)
                .join(Window, Window.id == Batch.window_id)
                .join(Query, Query.id == Window.query_id)
                .where(Query.dag_id == DAG_ID, Batch.status == BatchStatus.DONE)
            )
            counts = Counter(f for files in rows for f in (files or {}).get("lineitem", []))
        return [f for f, n in counts.items() if n > 1]

    def _next_grant(self, window_id: int, killed_at: datetime | None) -> float | None:
        if killed_at is None:
            return None
        with session_scope(self.services.ledger) as session:
            granted = session.scalars(
                select(DispatchRequest.granted_at).where(
                    DispatchRequest.window_id == window_id, DispatchRequest.granted_at > killed_at
                )
            ).all()
        return min((_between(killed_at, g) for g in granted if g is not None), default=None)

    def _restarted(self, killed_at: datetime | None) -> float | None:
        if killed_at is not None and self.pg_back is not None:  # the ledger's server
            return _between(killed_at, self.pg_back)
        component = self.services.components.get(self.component)
        if killed_at is None or component is None:
            return None
        return min((_between(killed_at, r) for r in component.restarts if r >= killed_at), default=None)


def _between(earlier: datetime, later: datetime) -> float:
    if later.tzinfo is None:
        later = later.replace(tzinfo=UTC)
    return (later - earlier).total_seconds()


def _sleep_until(moment: datetime) -> None:
    time.sleep(max(0.0, (moment - datetime.now(UTC)).total_seconds()))
