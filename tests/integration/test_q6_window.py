"""One window of TPC-H Q6 end to end through `airflow dags test`, live, on files a producer lands.

Real Airflow (SQLite metadata, the Task SDK running our operators in-process), every batch and
the merge on the test session's Spark Connect server, our ledger on SQLite. The TPC-H replayer lands the
files into a plain directory as any producer would; the DAG reads it as a `FileStream`. The
declared cost model makes the deadline force two or more batches. A second run lands one file
corrupt: its batch fails naming the file, the producer lands it again whole, and the retry reads
the same frozen files — the result stays exact, with no duplicated output.
"""

from __future__ import annotations

import json
import os
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from sqlalchemy import select
from sqlalchemy.exc import OperationalError

from airflow_iqp.constants import BatchStatus, FileStatus, WindowStatus
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.ledger.models import StreamFile
from airflow_iqp.tpch.generate import generate
from tests.integration.airflow_env import AirflowEnv
from tests.integration.windows import check_window, declaration, replay

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import SparkSession

    from airflow_iqp.spark.connect_server import ConnectServer

WINDOW = timedelta(seconds=20)
SPEEDUP = 2.0  # generated at one file per second, replayed at two: 40 files a window
# The window opens this long after replay starts, so Airflow has planned it (about 12 s) before
# its first files land.
LEAD = timedelta(seconds=20)
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


@pytest.fixture(scope="module")
def airflow_env(
    tmp_path_factory: pytest.TempPathFactory, connect_server: ConnectServer, airflow_metadata: Path
) -> AirflowEnv:
    env = AirflowEnv(tmp_path_factory.mktemp("airflow"), connect_server.connection())
    env.copy_metadata(airflow_metadata)
    return env


def run_window(
    env: AirflowEnv, stream: Path, name: str, while_running: Callable[[Path, datetime], None] | None = None
) -> tuple[int, datetime]:
    """Replay the stream, `airflow dags test` the first full window; (window id, window start)."""
    base = env.home / name
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
    with session_scope(env.ledger) as session:
        window_id = store.window_id(session, name, start)
    assert window_id is not None
    return window_id, start


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


def test_q6_window_runs_in_batches_and_equals_single_pass(
    airflow_env: AirflowEnv, stream: Path, spark: SparkSession
) -> None:
    _, start = run_window(airflow_env, stream, "iqp_q6_window")
    window = check(airflow_env, spark, "iqp_q6_window", start)
    assert all(b.attempts == 1 for b in window.batches if b.status == BatchStatus.DONE)
    log = (airflow_env.home / "iqp_q6_window" / "dags_test.log").read_text()
    assert "running trigger in line" in log, "an early batch should have waited for its files in a trigger"


def test_a_corrupt_file_fails_its_batch_and_the_retry_reads_it_landed_again(
    airflow_env: AirflowEnv, stream: Path, spark: SparkSession
) -> None:
    """The window's first file lands truncated: the job names it and the batch fails. The
    producer lands it again whole (with its original time, as `cp -p` would); the retry reads the
    same frozen file names, now whole, into the same output, and nothing is recorded as rewritten:
    the broken version never counted."""
    repaired: list[Path] = []
    truncated: list[Path] = []

    def first_batch_failed(start: datetime) -> bool:
        try:
            with session_scope(airflow_env.ledger) as session:
                window_id = store.window_id(session, "iqp_q6_retry", start)
                return (
                    window_id is not None
                    and store.window_summary(session, window_id).batches[0].status == BatchStatus.FAILED
                )
        except OperationalError:  # SQLite busy while the tasks write: look again, or this thread dies unseen
            return False

    def break_then_repair(landing: Path, start: datetime) -> None:
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
        truncated.append(target)
        give_up = time.monotonic() + 600
        while time.monotonic() < give_up:
            if first_batch_failed(start):
                target.write_bytes(good)
                os.utime(target, (landed_at, landed_at))
                repaired.append(target)
                return
            time.sleep(0.2)

    _, start = run_window(airflow_env, stream, "iqp_q6_retry", while_running=break_then_repair)
    assert truncated, f"no file landed in the window starting {start}"
    assert repaired, f"truncating {truncated[0]} never made its batch fail"
    log = (airflow_env.home / "iqp_q6_retry" / "dags_test.log").read_text()
    assert str(repaired[0]) in log, "the failed attempt names the unreadable file"
    window = check(airflow_env, spark, "iqp_q6_retry", start)
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
    with session_scope(airflow_env.ledger) as session:
        events = session.scalars(select(StreamFile).where(StreamFile.status == FileStatus.REWRITTEN)).all()
    assert events == []
