"""Airflow's own backfill of an IQP DAG beside live windows, under a real scheduler.

`airflow standalone` (scheduler, triggerer, DAG processor, API server; its metadata and our
ledger on the session's PostgreSQL) runs two DAGs on one ledger and one Spark resource (the
test session's Connect server): `sales_live`, whose files land while the test runs, with a
deadline after each one-minute window, and `sales_history`, whose three past one-minute windows
pyarrow wrote (no iqp command) and `airflow backfill create` processes, two runs at a time.
Checked from the ledger: every live deadline met; each backfilled window "backfilled" with the
answer pandas gives over its files; no live job waited behind more than one backfill job. Then
the backfill again with `--reprocess-behavior completed`: every result replaced, none duplicated.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from sqlalchemy import select

from airflow_iqp.constants import WindowStatus
from airflow_iqp.demo.standalone import DemoAirflow, stop_group, wait_healthy
from airflow_iqp.ledger import migrate, session_scope, store
from airflow_iqp.ledger.models import DispatchRequest, Query, Result, Window
from airflow_iqp.results.publish import read_result
from airflow_iqp.spark.connect_server import free_port
from tests.integration.test_real_inputs import (
    DEPARTMENTS,
    SALES_SQL,
    assert_rows,
    expected_sales,
    write_sales,
)
from tests.postgres import create_database

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable
    from pathlib import Path

    import pandas as pd

    from airflow_iqp.spark.connect_server import ConnectServer

H0 = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)  # sales_history's first backfilled window
MINUTE = timedelta(minutes=1)
HISTORY = 3  # backfilled windows: more than the backfill runs at a time, so its runs queue
# Not half-minute live windows: their jobs, a task start each, take the resource from the
# backfill twice as often (289 s for the test, against 218 with minutes, in our runs).
LIVE_WINDOW = timedelta(minutes=1)
LIVE_DEADLINE = timedelta(seconds=60)
LIVE_WINDOWS = 1  # live windows to see settled, at least, beside the backfill (each more: a minute)
# Pessimistic for a job on the Connect server beside a whole Airflow on two cores (8-16 s a job
# from grant to release, task start included), so each window is one batch and its merge.
COST_MODEL = {"partial": {"points": [[20, 12.0], [2000, 16.0]]}, "merge": {"points": [[1, 10.0], [8, 12.0]]}}
DAG_FILE = """
from datetime import UTC, datetime, timedelta
from airflow_iqp import ArrivalRate, FileStream, intermittent_query

dag = intermittent_query(
    dag_id="{dag_id}",
    query="sales.sql",
    window=timedelta(seconds={window}),
    deadline=timedelta(seconds={deadline}),
    streams={{"sales": FileStream("{path}")}},
    static={{"products": "{products}"}},
    output="{results}/{{dag_id}}/{{window_start}}",
    cost_model="{model}",
    rate=ArrivalRate(files_per_second=1 / 3, rows_per_file=20),
    start_date=datetime.fromisoformat("{start}"),
    {end}
    work_dir="{work}",
    retry_delay=timedelta(seconds=2),
)
"""


def _write_dag(
    airflow: DemoAirflow, data: Path, dag_id: str, window: timedelta, deadline: timedelta, **at: str
) -> None:
    model = airflow.dags / "sales.json"
    model.write_text(json.dumps({"query": "sales", "unit": "rows", "paths": {"spark_connect": COST_MODEL}}))
    (airflow.dags / f"{dag_id}.py").write_text(
        DAG_FILE.format(
            dag_id=dag_id,
            window=window.total_seconds(),
            deadline=deadline.total_seconds(),
            path=data / dag_id,
            products=data / "products",
            results=data / "results",
            work=data / "work",
            model=model,
            start=at["start"],
            end=at.get("end", ""),
        )
    )


def _wait(what: str, done: Callable[[], bool], timeout: float, standalone: object) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if getattr(standalone, "returncode", None) is not None:
            raise RuntimeError(f"airflow standalone exited while waiting for {what}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout:g} s")
        time.sleep(2)


def _complete_backfill(airflow: DemoAirflow, dag_id: str, standalone: object) -> None:
    """Once every run of the DAG's backfill has ended, mark the backfill complete: the scheduler
    does so only at its next 30 s tick (`_mark_backfills_complete`), and refuses another backfill
    of the DAG until then. A run still going (its window merged, its last task not done) would be
    left out of the next backfill, hence the wait; cancelling then fails no run (queued ones only).
    """
    credentials = airflow.password()
    assert credentials is not None, "the simple auth manager wrote no password"
    user, password = credentials
    token = httpx.post(f"{airflow.api}/auth/token", json={"username": user, "password": password}, timeout=30)
    token.raise_for_status()
    headers = {"Authorization": f"Bearer {token.json()['access_token']}"}

    def get(path: str, **params: str) -> Any:
        response = httpx.get(f"{airflow.api}/api/v2/{path}", params=params, headers=headers, timeout=30)
        response.raise_for_status()
        return response.json()

    def ended() -> bool:
        runs = get(f"dags/{dag_id}/dagRuns", run_type="backfill")["dag_runs"]
        return len(runs) == HISTORY and all(r["state"] in ("success", "failed") for r in runs)

    _wait(f"every run of {dag_id}'s backfill ended", ended, 120, standalone)
    for running in [b for b in get("backfills", dag_id=dag_id)["backfills"] if b["completed_at"] is None]:
        cancelled = httpx.put(f"{airflow.api}/api/v2/backfills/{running['id']}/cancel", headers=headers, timeout=30)
        assert cancelled.status_code in (200, 409), cancelled.text  # 409: the scheduler's tick came first


def _settled(windows: list[store.WindowRow], at: datetime) -> list[store.WindowRow]:
    """The live windows that must have met their deadlines by `at`: those finished (merged or
    failed), and those past their deadlines (an open one there missed it). Waiting for the first
    merged one, not for its deadline, saves up to a minute and checks the same window."""
    return [w for w in windows if w.finished or w.deadline <= at]


def _output(result: subprocess.CompletedProcess[str]) -> str:
    return f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"


def _windows(ledger: str, dag_id: str) -> list[store.WindowRow]:
    with session_scope(ledger) as session:
        ids = session.scalars(select(Window.id).join(Query).where(Query.dag_id == dag_id).order_by(Window.window_start))
        return [store.window_summary(session, i) for i in ids]


def _merged(ledger: str, dag_id: str) -> list[store.WindowRow]:
    return [w for w in _windows(ledger, dag_id) if w.status == WindowStatus.MERGED]


def _results(ledger: str, window_id: int) -> list[str]:
    with session_scope(ledger) as session:
        return list(session.scalars(select(Result.uri).where(Result.window_id == window_id).order_by(Result.id)))


class LiveStream:
    """A file of made-up sales every 3 s into sales_live's folder, until stopped."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        seed = 1000
        while not self.stopped.wait(3.0):
            write_sales(self.directory, datetime.now(UTC), 20, seed=seed)
            seed += 1


@pytest.fixture(scope="module")
def airflow(
    tmp_path_factory: pytest.TempPathFactory, connect_server: ConnectServer, postgres_server: str
) -> DemoAirflow:
    """Airflow's metadata and our ledger on PostgreSQL, as in production: on SQLite, a backfill
    created while the scheduler runs can crash the scheduler (a FOREIGN KEY failure creating
    the runs' task instances, seen here).
    """
    home = tmp_path_factory.mktemp("airflow")
    (home / "dags").mkdir()
    ledger = create_database(postgres_server, "backfill_ledger")
    migrate(ledger)
    metadata = create_database(postgres_server, "backfill_airflow")
    return DemoAirflow(
        home=home,
        dags=home / "dags",
        ledger=home / "unused.db",
        extra_env={
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": metadata,
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC": metadata,  # psycopg 3 is async too: no asyncpg
            "AIRFLOW_CONN_IQP_DEFAULT": json.dumps({"conn_type": "iqp", "host": ledger}),
            "AIRFLOW_CONN_IQP_SPARK": json.dumps(connect_server.connection()),
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__IQP__RESOURCES": "1",
        },
        port=free_port(),
    )


def test_a_backfill_runs_behind_live_windows_and_again_replaces_its_results(
    airflow: DemoAirflow, tmp_path_factory: pytest.TempPathFactory
) -> None:
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = tmp_path_factory.mktemp("data")
    products: pd.DataFrame = pd.DataFrame({"category": list(DEPARTMENTS), "department": list(DEPARTMENTS.values())})
    (data / "products").mkdir()
    pq.write_table(pa.Table.from_pandas(products, preserve_index=False), data / "products" / "dim.parquet")
    (airflow.dags / "sales.sql").write_text(SALES_SQL)
    history = {
        H0 + i * MINUTE: [
            write_sales(
                data / "sales_history", H0 + i * MINUTE + timedelta(seconds=7 + 17 * k), 25 + k, seed=50 * i + k
            )
            for k in range(3)
        ]
        for i in range(HISTORY)
    }
    _write_dag(
        airflow,
        data,
        "sales_history",
        MINUTE,
        MINUTE,
        start=H0.isoformat(),
        end=f'end_date=datetime.fromisoformat("{(H0 + HISTORY * MINUTE).isoformat()}"),',
    )
    now = datetime.now(UTC)
    _write_dag(airflow, data, "sales_live", LIVE_WINDOW, LIVE_DEADLINE, start=(now - timedelta(hours=1)).isoformat())
    ledger = json.loads(airflow.extra_env["AIRFLOW_CONN_IQP_DEFAULT"])["host"]
    live = LiveStream(data / "sales_live")
    log = airflow.home / "standalone.log"
    standalone = airflow.start(log)
    try:
        wait_healthy(standalone, 240, log, airflow.api)
        live.thread.start()
        _wait("a live window planned", lambda: bool(_windows(ledger, "sales_live")), 180, standalone)

        def backfill(*extra: str) -> None:
            """`airflow backfill create`, again while the DAG's last backfill is still marked running
            (the scheduler marks it complete a moment after its runs; one at a time per DAG) or
            the metadata database is busy (SQLite, shared with the scheduler).
            """
            arguments = ["--dag-id", "sales_history", "--from-date", H0.isoformat()]
            arguments += ["--to-date", (H0 + (HISTORY - 1) * MINUTE).isoformat(), "--max-active-runs", "2"]
            give_up = time.monotonic() + 120
            while True:
                out = _output(airflow.airflow("backfill", "create", *arguments, *extra))
                if not any(busy in out for busy in ("AlreadyRunningBackfill", "database is locked")):
                    break
                assert time.monotonic() < give_up, out[-3000:]
                time.sleep(3)
            assert out.startswith("exit 0"), out[-3000:]

        backfill()
        _wait(
            f"{HISTORY} backfilled windows merged",
            lambda: len(_merged(ledger, "sales_history")) == HISTORY,
            600,
            standalone,
        )
        first = {w.window_start: w.result_uri for w in _merged(ledger, "sales_history")}
        _complete_backfill(airflow, "sales_history", standalone)
        backfill("--reprocess-behavior", "completed")
        _wait(
            "every backfilled window merged again",
            lambda: all(
                len(_results(ledger, w.id)) == 2 and w.status == WindowStatus.MERGED
                for w in _windows(ledger, "sales_history")
            ),
            600,
            standalone,
        )
        _wait(
            f"{LIVE_WINDOWS} live windows settled",
            lambda: len(_settled(_windows(ledger, "sales_live"), datetime.now(UTC))) >= LIVE_WINDOWS,
            300,
            standalone,
        )
        stopped = datetime.now(UTC)
    finally:
        live.stopped.set()
        stop_group(standalone)

    backfilled = _windows(ledger, "sales_history")
    assert [w.window_start for w in backfilled] == sorted(history)
    for w in backfilled:
        assert (w.status, w.outcome) == (WindowStatus.MERGED, "backfilled"), w
        assert_rows(read_result(str(w.result_uri)), expected_sales(history[w.window_start], products))
        uris = _results(ledger, w.id)
        assert len(uris) == 2
        assert uris[-1] == w.result_uri
        assert first[w.window_start] == uris[0]
        with session_scope(ledger) as session:
            frozen = store.frozen_files(session, w.id)
        assert frozen == {p.resolve().as_uri() for p in history[w.window_start]}

    due = _settled(_windows(ledger, "sales_live"), stopped)
    missed = [(w.window_start, w.status, w.actual_finish, w.deadline) for w in due if w.outcome != "met"]
    assert len(due) >= LIVE_WINDOWS
    assert not missed, f"live windows missed their deadlines: {missed}"

    with session_scope(ledger) as session:
        requests = list(
            session.execute(
                select(DispatchRequest, Window.backfill)
                .join(Window, Window.id == DispatchRequest.window_id)
                .where(DispatchRequest.granted_at.is_not(None))
            ).tuples()
        )
    backfill_jobs = [r for r, is_backfill in requests if is_backfill]
    waits = []
    for request, is_backfill in requests:
        if is_backfill:
            continue
        assert request.granted_at is not None
        behind = [
            b
            for b in backfill_jobs
            if b.granted_at is not None
            and b.granted_at < request.granted_at
            and (b.released_at is None or b.released_at > request.registered_at)
        ]
        assert len(behind) <= 1, f"live request {request.id} waited behind backfill jobs {[b.id for b in behind]}"
        waits.append((request.granted_at - request.registered_at).total_seconds())
    assert backfill_jobs
    assert waits
    print(
        f"\nlongest live wait for the resource: {max(waits):.1f} s over {len(waits)} live jobs, "
        f"{len(backfill_jobs)} backfill jobs"
    )
