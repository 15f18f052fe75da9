"""`airflow dags test`, the first thing a user runs on a new DAG, exits 0 after a successful run
with the default `[iqp]` settings, though every IQP DAG declares a Deadline Alert (Airflow 3.3
fails the command on one, apache/airflow#73428; airflow_iqp.deadlines.DeadlineDAG works around it).

Two DAGs: the example `dags/iqp_q6.py` as shipped, over generated TPC-H lineitem files, and a
user's own DAG file over CSV files the test writes, with its SQL file beside it. Each window is
in the past, so its input is final at once: the run plans it, merges and publishes. Afterwards
the DAG as the scheduler reads it from Airflow's metadata DB still holds its alert, and the test
run left no deadline behind.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import time
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq
import pytest
from sqlalchemy import create_engine, text

from airflow_iqp.constants import WindowStatus
from airflow_iqp.deadlines import ALERT_NAME
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.results.publish import read_result
from airflow_iqp.tpch.generate import generate
from tests.integration.airflow_env import BIN, AirflowEnv

if TYPE_CHECKING:
    from airflow_iqp.spark.connect_server import ConnectServer

DAGS = Path(__file__).resolve().parents[2] / "dags"
W0 = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)  # a window start of both DAGs (2 and 1 minute windows)

EVENTS_SQL = "SELECT kind, count(*) AS events, sum(value) AS total FROM events GROUP BY kind ORDER BY kind"
EVENTS_DAG = """
from datetime import UTC, datetime, timedelta
from airflow_iqp import FileStream, intermittent_query

dag = intermittent_query(
    dag_id="events_by_kind",
    query="events_by_kind.sql",
    window=timedelta(minutes=1),
    deadline=timedelta(minutes=1),
    streams={{"events": FileStream(
        "{events}", format="csv", schema="kind STRING, value DOUBLE", options={{"header": "true"}}
    )}},
    output="{results}/{{dag_id}}/{{window_start}}",
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
)
"""

# A scheduled run of DAG for the window START..END, created as the scheduler creates one (on the
# DAG serialized in the metadata DB): its deadlines, [alert name, due], as JSON.
SCHEDULED_RUN = """
import json, sys
from datetime import datetime
from sqlalchemy import select
from airflow.models.dagbag import DBDagBag
from airflow.models.dagrun import DagRun
from airflow.models.deadline import Deadline
from airflow.models.deadline_alert import DeadlineAlert
from airflow.utils.session import create_session
from airflow.utils.state import DagRunState
from airflow.utils.types import DagRunTriggeredByType, DagRunType

dag_id, start, end = sys.argv[1], datetime.fromisoformat(sys.argv[2]), datetime.fromisoformat(sys.argv[3])
with create_session() as session:
    dag = DBDagBag().get_latest_version_of_dag(dag_id, session=session)
    run = dag.create_dagrun(
        run_id=DagRun.generate_run_id(run_type=DagRunType.SCHEDULED, logical_date=start, run_after=start),
        logical_date=start,
        data_interval=(start, end),
        run_after=start,
        run_type=DagRunType.SCHEDULED,
        triggered_by=DagRunTriggeredByType.TIMETABLE,
        state=DagRunState.QUEUED,
        session=session,
    )
    session.flush()
    due = session.execute(
        select(DeadlineAlert.name, Deadline.deadline_time)
        .join(DeadlineAlert, DeadlineAlert.id == Deadline.deadline_alert_id)
        .where(Deadline.dagrun_id == run.id)
    )
    print(json.dumps([[name, at.isoformat()] for name, at in due]))
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, connect_server: ConnectServer, airflow_metadata: Path) -> AirflowEnv:
    env = AirflowEnv(tmp_path_factory.mktemp("airflow"), connect_server.connection())
    env.copy_metadata(airflow_metadata)
    return env


def dags_test(env: AirflowEnv, dag_id: str, **extra: str) -> tuple[int, float, str]:
    """`airflow dags test DAG W0` with no `[iqp]` option set: exit code, seconds, output."""
    environ = {k: v for k, v in env.environ().items() if not k.startswith("AIRFLOW__IQP__")} | extra
    started = time.monotonic()
    done = subprocess.run(
        [str(BIN / "airflow"), "dags", "test", dag_id, W0.isoformat()],
        env=environ,
        capture_output=True,
        text=True,
        timeout=900,
    )
    seconds = time.monotonic() - started
    log = done.stdout + done.stderr
    (env.home / f"{dag_id}.log").write_text(log)
    print(f"airflow dags test {dag_id} {W0.isoformat()}: exit {done.returncode} in {seconds:.1f} s")
    return done.returncode, seconds, log


def land(path: Path, at: datetime) -> None:
    os.utime(path, (at.timestamp(), at.timestamp()))


def published(env: AirflowEnv, dag_id: str, results: Path) -> list[dict[str, Any]]:
    """The window's result, merged in the ledger and published under `results`."""
    with session_scope(env.ledger) as session:
        window_id = store.window_id(session, dag_id, W0)
        assert window_id is not None, f"{dag_id}: no window at {W0}"
        window = store.window_summary(session, window_id)
    assert window.status == WindowStatus.MERGED
    assert window.result_uri is not None
    assert window.result_uri.removeprefix("file://").startswith(str(results / dag_id))
    return read_result(window.result_uri)


def assert_scheduled_runs_keep_the_alert(env: AirflowEnv, dag_id: str, window: timedelta, deadline: timedelta) -> None:
    """The test run made no deadline; the DAG as the scheduler reads it (its latest serialized
    version in the metadata DB) holds the window deadline alert, and a run created from it as the
    scheduler creates one is due at its window's deadline."""
    engine = create_engine(f"sqlite:///{env.home / 'airflow.db'}")
    with engine.connect() as db:
        deadlines = db.execute(
            text("SELECT count(*) FROM deadline d JOIN dag_run r ON r.id = d.dagrun_id WHERE r.dag_id = :dag_id"),
            {"dag_id": dag_id},
        ).scalar_one()
    engine.dispose()
    assert deadlines == 0
    start = W0 + window  # the next window: its own run
    done = subprocess.run(
        [str(BIN / "python"), "-c", SCHEDULED_RUN, dag_id, start.isoformat(), (start + window).isoformat()],
        env=env.environ(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == [[ALERT_NAME, (start + window + deadline).isoformat()]]


def q6_revenue(files: list[Path]) -> Decimal:
    """TPC-H Q6 over `files`, in plain Python (its prices are decimals: the sum is exact)."""
    revenue = Decimal(0)
    for f in files:
        for row in pq.read_table(f).to_pylist():
            if (
                date(1994, 1, 1) <= row["l_shipdate"] < date(1995, 1, 1)
                and Decimal("0.05") <= row["l_discount"] <= Decimal("0.07")
                and row["l_quantity"] < 24
            ):
                revenue += row["l_extendedprice"] * row["l_discount"]
    return revenue


def test_the_example_q6_dag_exits_0_and_publishes(env: AirflowEnv, tmp_path_factory: pytest.TempPathFactory) -> None:
    data = tmp_path_factory.mktemp("q6")
    generate(data / "tpch", scale=0.01, files=8)
    landing, results = data / "landing", data / "results"
    (landing / "lineitem").mkdir(parents=True)
    files = []
    for i, part in enumerate(sorted((data / "tpch").glob("**/lineitem/*.parquet"))):
        files.append(Path(shutil.copy(part, landing / "lineitem" / part.name)))
        land(files[-1], W0 + timedelta(seconds=5 + 10 * i))
    shutil.copy(DAGS / "iqp_q6.py", env.dags / "iqp_q6.py")

    code, _, log = dags_test(env, "iqp_q6", IQP_LANDING=str(landing), IQP_RESULTS=str(results))

    assert code == 0, log[-5000:]
    assert "state=success" in log, log[-5000:]
    ((column, revenue),) = published(env, "iqp_q6", results)[0].items()
    assert column == "revenue"
    assert revenue == q6_revenue(files) > 0
    # the example's window is 2 minutes, its result due 45 s after
    assert_scheduled_runs_keep_the_alert(env, "iqp_q6", timedelta(minutes=2), timedelta(seconds=45))


def test_a_dag_over_the_users_own_csv_files_exits_0_and_publishes(
    env: AirflowEnv, tmp_path_factory: pytest.TempPathFactory
) -> None:
    data = tmp_path_factory.mktemp("own")
    events, results = data / "events", data / "results"
    events.mkdir()
    expected: dict[str, tuple[int, float]] = {}
    for i in range(4):
        lines = [("click" if j % 3 else "view", float(i * 10 + j)) for j in range(5 + i)]
        written = events / f"events-{i}.csv"
        with written.open("w", newline="") as out:
            csv.writer(out).writerows([("kind", "value"), *lines])
        land(written, W0 + timedelta(seconds=10 + 12 * i))
        for kind, value in lines:
            n, total = expected.get(kind, (0, 0.0))
            expected[kind] = (n + 1, total + value)
    next_window = events / "events-next.csv"  # the next window's: not in this result
    next_window.write_text("kind,value\nview,1000\n")
    land(next_window, W0 + timedelta(minutes=1, seconds=5))
    (env.dags / "events_by_kind.sql").write_text(EVENTS_SQL)
    (env.dags / "events_by_kind.py").write_text(EVENTS_DAG.format(events=events, results=results))

    code, _, log = dags_test(env, "events_by_kind")

    assert code == 0, log[-5000:]
    assert "state=success" in log, log[-5000:]
    rows = published(env, "events_by_kind", results)
    assert [(r["kind"], r["events"], r["total"]) for r in rows] == [
        (kind, n, pytest.approx(total)) for kind, (n, total) in sorted(expected.items())
    ]
    assert_scheduled_runs_keep_the_alert(env, "events_by_kind", timedelta(minutes=1), timedelta(minutes=1))
