"""Live windows of TPC-H Q6 end to end through `airflow dags test`, on files a producer lands.

Real Airflow (SQLite metadata, the Task SDK running our operators in-process), every batch and
the merge on the test session's Spark Connect server, our ledger on SQLite. The TPC-H replayer lands the
files into a plain directory as any producer would; the DAG reads it as a `FileStream`. Three
windows run at once, each in an Airflow home and ledger of its own (most of a live window's time is
waiting for it to open and close, so side by side they take about the time of one):
- the declared cost model makes the deadline force two or more batches;
- one file lands corrupt: its batch fails naming the file, the producer lands it again whole, and
  the retry reads the same frozen files — the result stays exact, with no duplicated output;
- the input comes slower than declared: the dynamic mode's first batch fires by time.
"""

from __future__ import annotations

import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from sqlalchemy import select
from sqlalchemy.exc import OperationalError

from airflow_iqp.constants import BatchReason, BatchStatus, FileStatus, WindowStatus
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.ledger.models import StreamFile
from airflow_iqp.tpch.generate import generate
from tests.integration.airflow_env import AirflowEnv
from tests.integration.dispatch_dags import DYNAMIC, WINDOW, report, run_dags, write_dag
from tests.integration.windows import check_window, declaration, replay

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import SparkSession

    from airflow_iqp.spark.connect_server import ConnectServer

SPEEDUP = 2.0  # generated at one file per second, replayed at two: 40 files a window
# The window opens this long after replay starts, so Airflow has planned it (13.5-16.5 s after the
# start with the module's three runs at once, in our runs) before its first files land.
LEAD = timedelta(seconds=25)
DAG_FILE = """
from datetime import UTC, datetime, timedelta
from airflow_iqp import ArrivalRate, FileStream, intermittent_query

dag = intermittent_query(
    dag_id="{dag_id}",
    query="q6",
    window=timedelta(seconds={window}),
    deadline=timedelta(seconds=30),
    streams={{"lineitem": FileStream("{landing}/lineitem")}},
    output="{work}/results/{{dag_id}}/{{window_start}}",
    rate=ArrivalRate(files_per_second=2, rows_per_file=430),
    cost_model="{cost_model}",
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    work_dir="{work}",
    retry_delay=timedelta(seconds=3),
)
"""
# Seconds per batch grow with its files here, so a 30 s deadline needs two or more batches (far
# more than Connect takes: the plan, not the machine, is under test).
PESSIMISTIC = {"partial": {"points": [[430, 6.5], [17200, 26.0]]}, "merge": {"points": [[1, 5.0], [8, 6.0]]}}
COST_MODEL = {"query": "q6", "unit": "rows", "paths": {"spark_submit": PESSIMISTIC, "spark_connect": PESSIMISTIC}}


@pytest.fixture(scope="module")
def stream(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("stream") / "data"
    generate(out, scale=0.01, files=140)
    return out


def own_home(root: Path, name: str, connect_server: ConnectServer, airflow_metadata: Path) -> AirflowEnv:
    """An Airflow home, metadata (copied) and ledger of its own, for one run."""
    env = AirflowEnv(root / name, connect_server.connection())
    env.copy_metadata(airflow_metadata)
    return env


class Corruption:
    """Truncates the window's first file as it lands, and lands it again whole once its batch failed."""

    def __init__(self, ledger: str, dag_id: str) -> None:
        self.ledger = ledger
        self.dag_id = dag_id
        self.truncated: list[Path] = []
        self.repaired: list[Path] = []

    def first_batch_failed(self, start: datetime) -> bool:
        try:
            with session_scope(self.ledger) as session:
                window_id = store.window_id(session, self.dag_id, start)
                return (
                    window_id is not None
                    and store.window_summary(session, window_id).batches[0].status == BatchStatus.FAILED
                )
        except OperationalError:  # SQLite busy while the tasks write: look again, or this thread dies unseen
            return False

    def break_then_repair(self, landing: Path, start: datetime) -> None:
        directory = landing / "lineitem"
        target = None
        while target is None:
            landed = [p for p in directory.glob("part-*.parquet")] if directory.is_dir() else []
            inside = [p for p in landed if p.stat().st_mtime >= start.timestamp()]
            target = min(inside, key=lambda p: p.stat().st_mtime) if inside else None
            time.sleep(0.02)
        landed_at = target.stat().st_mtime
        good = target.read_bytes()
        target.write_bytes(good[: len(good) // 2])
        os.utime(target, (landed_at, landed_at))
        self.truncated.append(target)
        give_up = time.monotonic() + 600
        while time.monotonic() < give_up:
            if self.first_batch_failed(start):
                target.write_bytes(good)
                os.utime(target, (landed_at, landed_at))
                self.repaired.append(target)
                return
            time.sleep(0.2)


@dataclass(frozen=True)
class Run:
    env: AirflowEnv
    dag_id: str
    start: datetime


@dataclass(frozen=True)
class Runs:
    exact: Run
    retried: Run
    corruption: Corruption
    slow: Run


def slow_run(env: AirflowEnv, stream: Path) -> Run:
    """Declared at 2 files/s, replayed at 0.5."""
    landing = env.home / "landing"
    write_dag(env.home, env.dags, "iqp_slow_q6", "q6", 120, landing, DYNAMIC.format(alpha=0.3), {})
    process, start = replay(stream, landing, 0.5, WINDOW, LEAD)
    try:
        run_dags({"iqp_slow_q6": env}, start)
    finally:
        process.kill()
    report(env.ledger, start, ["iqp_slow_q6"])
    return Run(env, "iqp_slow_q6", start)


@pytest.fixture(scope="module")
def runs(
    tmp_path_factory: pytest.TempPathFactory, stream: Path, connect_server: ConnectServer, airflow_metadata: Path
) -> Runs:
    """The module's three windows, side by side."""
    root = tmp_path_factory.mktemp("q6")
    envs = {
        name: own_home(root, name, connect_server, airflow_metadata)
        for name in ("iqp_q6_window", "iqp_q6_retry", "iqp_slow_q6")
    }
    corruption = Corruption(envs["iqp_q6_retry"].ledger, "iqp_q6_retry")
    with ThreadPoolExecutor(max_workers=len(envs)) as pool:
        exact = pool.submit(run_window, envs["iqp_q6_window"], stream, "iqp_q6_window")
        retried = pool.submit(run_window, envs["iqp_q6_retry"], stream, "iqp_q6_retry", corruption.break_then_repair)
        slow = pool.submit(slow_run, envs["iqp_slow_q6"], stream)
        return Runs(exact.result(), retried.result(), corruption, slow.result())


def run_window(
    env: AirflowEnv, stream: Path, name: str, while_running: Callable[[Path, datetime], None] | None = None
) -> Run:
    """Replay the stream, `airflow dags test` the first full window."""
    base = env.home / "window"
    landing, work, model = base / "landing", base / "work", base / "cost_model.json"
    base.mkdir()
    model.write_text(json.dumps(COST_MODEL))
    (env.dags / f"{name}.py").write_text(
        DAG_FILE.format(dag_id=name, window=WINDOW.total_seconds(), landing=landing, cost_model=model, work=work)
    )
    process, start = replay(stream, landing, SPEEDUP, WINDOW, LEAD)
    try:
        watcher = threading.Thread(target=while_running, args=(landing, start), daemon=True) if while_running else None
        if watcher:
            watcher.start()
        result = env.airflow("dags", "test", name, start.isoformat(), timeout=900)
        log = result.stdout + result.stderr
        (base / "dags_test.log").write_text(log)
        assert result.returncode == 0, log[-4000:]
        assert "state=success" in log, log[-4000:]
        assert process.wait(timeout=120) == 0, process.communicate()[1]
    finally:
        process.kill()
    return Run(env, name, start)


def check(env: AirflowEnv, spark: SparkSession, name: str, start: datetime) -> store.WindowRow:
    window = check_window(env.ledger, spark, declaration(env, name), start)
    done = [b for b in window.batches if b.status == BatchStatus.DONE]
    # `airflow dags test` runs one deferred task's trigger at a time, in an order it picks: a later
    # batch leaves the units an earlier one has not taken yet, so every planned batch runs
    assert len(done) == len(window.batches) >= 2, "the deadline was chosen to need two or more batches"
    for b in done:
        assert b.actual_start is not None
        assert b.actual_cost is not None
        assert b.actual_cost > 0
    assert sum(b.actual_tuples or 0 for b in done) == window.actual_tuples
    # The ledger holds the plan and the outcome.
    assert window.status == WindowStatus.MERGED
    assert window.predicted_finish is not None
    assert window.actual_finish is not None
    assert window.deadline_met == (window.actual_finish <= window.deadline)
    return window


def test_q6_window_runs_in_batches_and_equals_single_pass(runs: Runs, spark: SparkSession) -> None:
    run = runs.exact
    window = check(run.env, spark, run.dag_id, run.start)
    assert all(b.attempts == 1 for b in window.batches if b.status == BatchStatus.DONE)
    log = (run.env.home / "window" / "dags_test.log").read_text()
    assert "running trigger in line" in log, "an early batch should have waited for its files in a trigger"


def test_a_corrupt_file_fails_its_batch_and_the_retry_reads_it_landed_again(runs: Runs, spark: SparkSession) -> None:
    """The window's first file lands truncated: the job names it and the batch fails. The
    producer lands it again whole (with its original time, as `cp -p` would); the retry reads the
    same frozen file names, now whole, into the same output, and nothing is recorded as rewritten:
    the broken version never counted."""
    run, corruption = runs.retried, runs.corruption
    assert corruption.truncated, f"no file landed in the window starting {run.start}"
    assert corruption.repaired, f"truncating {corruption.truncated[0]} never made its batch fail"
    log = (run.env.home / "window" / "dags_test.log").read_text()
    assert str(corruption.repaired[0]) in log, "the failed attempt names the unreadable file"
    window = check(run.env, spark, run.dag_id, run.start)
    first = window.batches[0]
    assert first.attempts == 2
    assert first.status == BatchStatus.DONE
    assert first.output_location is not None
    outputs = sorted(p.name for p in Path(first.output_location).parent.iterdir() if p.is_dir() and p.name != "inputs")
    done = [b.output_location for b in window.batches if b.status == BatchStatus.DONE and b.output_location]
    assert window.result_location is not None
    merged = Path(window.result_location).name
    assert merged.startswith("result-f")  # named with the merge's lease fence
    # the failed attempt left no output of its own: only the done batches' and the merge's
    assert outputs == [*sorted(Path(location).name for location in done), merged]
    with session_scope(run.env.ledger) as session:
        events = session.scalars(select(StreamFile).where(StreamFile.status == FileStatus.REWRITTEN)).all()
    assert events == []


def test_slow_input_fires_a_batch_by_time_and_holds_the_deadline(runs: Runs, spark: SparkSession) -> None:
    """MinBatch (20 of the 40 declared files) never lands in time, so the first batch fires
    when MinBatch should have arrived, with fewer files."""
    run = runs.slow
    window = check_window(run.env.ledger, spark, declaration(run.env, run.dag_id), run.start)
    assert window.plan.dynamic is not None
    min_batch = window.plan.dynamic.min_batch
    first = window.batches[0]
    assert first.reason == BatchReason.SLOW_INPUT, [(b.index, b.reason) for b in window.batches]
    assert first.files is not None
    assert len(first.files["lineitem"]) < min_batch
    assert first.actual_start is not None
    assert first.actual_start < window.window_end, "the time-triggered batch fired inside the window"
    assert window.deadline_met
