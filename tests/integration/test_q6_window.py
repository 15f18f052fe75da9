"""One window of TPC-H Q6 end to end through `airflow dags test` on a replayed stream.

Real Airflow (SQLite metadata, the Task SDK running our operators in-process), real
spark-submit for every batch and the merge, our ledger on SQLite. The declared cost model makes
the deadline force two or more batches. A second run breaks one batch once and checks that the
retry leaves the result exact: no duplicated output, no skipped file.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow.parquet as pq
import pytest

from airflow_iqp.constants import BatchStatus, WindowStatus
from airflow_iqp.data.descriptor import load_descriptor
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.queries import load_query
from airflow_iqp.tpch.generate import generate
from airflow_iqp.tpch.manifest import part_name
from tests.integration.airflow_env import BIN, AirflowEnv, next_window_start

if TYPE_CHECKING:
    from pyspark.sql import Row, SparkSession

WINDOW = timedelta(seconds=20)
SPEEDUP = 2.0  # generated at one file per second, replayed at two: 40 files a window
# The window opens this long after replay starts, so Airflow is up before its first files land.
LEAD = timedelta(seconds=25)
DAG_FILE = """
from datetime import UTC, datetime, timedelta
from airflow_iqp.dag import intermittent_query
from airflow_iqp.declaration import ArrivalRate

dag = intermittent_query(
    dag_id="{dag_id}",
    query="q6",
    window=timedelta(seconds={window}),
    deadline=timedelta(seconds=30),
    landing="{landing}",
    rate=ArrivalRate(files_per_second=2, rows_per_file=430),
    cost_model="{cost_model}",
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    work_dir="{work}",
    retry_delay=timedelta(seconds=3),
)
"""
# Seconds per batch grow with its files here, so a 30 s deadline needs two or more batches.
COST_MODEL = {
    "query": "q6",
    "unit": "rows",
    "paths": {
        "spark_submit": {"partial": {"points": [[430, 6.5], [17200, 26.0]]}, "merge": {"points": [[1, 5.0], [8, 6.0]]}}
    },
}


@pytest.fixture(scope="module")
def stream(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("stream") / "data"
    generate(out, scale=0.01, files=140)
    return out


@pytest.fixture(scope="module")
def airflow_env(tmp_path_factory: pytest.TempPathFactory) -> AirflowEnv:
    env = AirflowEnv(tmp_path_factory.mktemp("airflow"))
    env.migrate()
    return env


def run_window(env: AirflowEnv, stream: Path, name: str, while_running=None) -> tuple[int, Path, Path]:
    """Replay the stream, `airflow dags test` the first full window; (window id, landing, work dir)."""
    base = env.home / name
    landing, work, model = base / "landing", base / "work", base / "cost_model.json"
    base.mkdir()
    model.write_text(json.dumps(COST_MODEL))
    (env.dags / f"{name}.py").write_text(
        DAG_FILE.format(dag_id=name, window=WINDOW.total_seconds(), landing=landing, cost_model=model, work=work)
    )
    replay = subprocess.Popen(
        [
            str(BIN / "iqp"),
            "data",
            "replay",
            "--source",
            str(stream),
            "--landing",
            str(landing),
            "--speedup",
            str(SPEEDUP),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while not (landing / "_iqp_stream.json").exists():
            time.sleep(0.1)
        epoch = load_descriptor(landing).epoch
        # A window that opens after Airflow has started, so early batches wait for their files.
        start = next_window_start(WINDOW, epoch + LEAD)
        watcher = threading.Thread(target=while_running, args=(landing, start), daemon=True) if while_running else None
        if watcher:
            watcher.start()
        result = env.airflow("dags", "test", name, start.isoformat(), timeout=900)
        log = result.stdout + result.stderr
        (base / "dags_test.log").write_text(log)
        assert result.returncode == 0, log[-4000:]
        assert "state=success" in log, log[-4000:]
        assert replay.wait(timeout=120) == 0, replay.communicate()[1]
    finally:
        replay.kill()
    with session_scope(env.ledger) as session:
        window_id = store.window_id(session, "q6", start)
    assert window_id is not None
    return window_id, landing, work


def single_pass(spark: SparkSession, stream: Path, landing: Path, files: list[str]) -> list[Row]:
    spark.read.parquet(*files).createOrReplaceTempView("lineitem")
    try:
        return spark.sql(load_query("q6").sql).collect()
    finally:
        spark.catalog.dropTempView("lineitem")


def check_window(
    env: AirflowEnv, spark: SparkSession, stream: Path, window_id: int, landing: Path
) -> store.WindowSummary:
    with session_scope(env.ledger) as session:
        window = store.window_summary(session, window_id)
    descriptor = load_descriptor(landing)
    expected = [
        str(landing / "lineitem" / part_name(i))
        for i in descriptor.window_files(window.window_start, window.window_end)
    ]
    done = [b for b in window.batches if b.status == BatchStatus.DONE]
    frozen = [f for b in done for f in (b.files or {}).get("lineitem", [])]
    # Every file of the window in exactly one batch, in arrival order.
    assert frozen == expected
    assert len(done) >= 2, "the deadline was chosen to need two or more batches"
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
    # The result equals one Spark SQL pass over the same files.
    assert window.result_location is not None
    result = pq.read_table(window.result_location).to_pylist()
    expected_rows = [r.asDict() for r in single_pass(spark, stream, landing, expected)]
    assert result == expected_rows
    assert result[0]["revenue"] is not None
    return window


def test_q6_window_runs_in_batches_and_equals_single_pass(
    airflow_env: AirflowEnv, stream: Path, spark: SparkSession
) -> None:
    window_id, landing, _ = run_window(airflow_env, stream, "iqp_q6_window")
    window = check_window(airflow_env, spark, stream, window_id, landing)
    assert all(b.attempts == 1 for b in window.batches if b.status == BatchStatus.DONE)
    log = (airflow_env.home / "iqp_q6_window" / "dags_test.log").read_text()
    assert "running trigger in line" in log, "an early batch should have waited for its files in a trigger"


def test_failed_batch_is_retried_and_the_result_stays_exact(
    airflow_env: AirflowEnv, stream: Path, spark: SparkSession
) -> None:
    """The first batch's first file lands truncated: the job refuses it (its row count disagrees
    with the manifest) and the batch fails. Once the good file is back, the retry processes the
    same frozen files into the same output."""
    repaired: list[Path] = []

    def first_batch_failed(start: datetime) -> bool:
        with session_scope(airflow_env.ledger) as session:
            window_id = store.window_id(session, "q6", start)
            return (
                window_id is not None
                and store.window_summary(session, window_id).batches[0].status == BatchStatus.FAILED
            )

    def break_then_repair(landing: Path, start: datetime) -> None:
        descriptor = load_descriptor(landing)
        target = landing / "lineitem" / part_name(descriptor.window_files(start, start + WINDOW)[0])
        while not target.exists():
            time.sleep(0.05)
        good = target.read_bytes()
        table = pq.read_table(target)
        pq.write_table(table.slice(0, table.num_rows // 2), target)
        give_up = time.monotonic() + 600
        while time.monotonic() < give_up:
            if first_batch_failed(start):
                target.write_bytes(good)
                repaired.append(target)
                return
            time.sleep(0.2)

    window_id, landing, _ = run_window(airflow_env, stream, "iqp_q6_retry", while_running=break_then_repair)
    assert repaired, "the truncated file never made its batch fail"
    window = check_window(airflow_env, spark, stream, window_id, landing)
    first = window.batches[0]
    assert first.attempts == 2
    assert first.status == BatchStatus.DONE
    assert first.output_location is not None
    outputs = sorted(p.name for p in Path(first.output_location).parent.iterdir() if p.is_dir())
    done = [b.output_location for b in window.batches if b.status == BatchStatus.DONE and b.output_location]
    assert outputs == [*sorted(Path(location).name for location in done), "result"]
