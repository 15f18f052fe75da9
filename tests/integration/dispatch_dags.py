"""IQP DAGs over the TPC-H replayer's lineitem files, as the live-window tests declare them
(tests/integration/test_q6_window.py, test_celery.py): a declared cost model pessimistic enough
that the dispatcher's ranking and MinBatch's cuts show, and `airflow dags test` of several at once.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from airflow_iqp.constants import Policy
from airflow_iqp.demo.summary import batches_table, grant_rows, grants_table, window_row, windows_table
from airflow_iqp.ledger import session_scope

if TYPE_CHECKING:
    from pathlib import Path

    from tests.integration.airflow_env import AirflowEnv


WINDOW = timedelta(seconds=20)  # every live-window test's: each second of it a test waits
POLICY = Policy.EDF
DAG_FILE = """
from datetime import UTC, datetime, timedelta
from airflow_iqp import ArrivalRate, FileStream, intermittent_query

dag = intermittent_query(
    dag_id="{dag_id}",
    query="{query}",
    window=timedelta(seconds={window}),
    deadline=timedelta(seconds={deadline}),
    streams={{"lineitem": FileStream("{landing}/lineitem")}},
    static={static},
    output="{work}/results/{{dag_id}}/{{window_start}}",
    rate=ArrivalRate(files_per_second=2, rows_per_file=430),
    cost_model="{cost_model}",
    {dates}
    work_dir="{work}",
    retry_delay=timedelta(seconds=3),
    {mode}
)
"""
# Pessimistic for this machine under three Airflow processes, and far more so on Connect: a job
# costs 6.5 s and up.
COST_MODEL = {"partial": {"points": [[430, 6.5], [17200, 26.0]]}, "merge": {"points": [[1, 5.0], [8, 6.0]]}}
DYNAMIC = 'mode="dynamic", alpha={alpha}, tau_max=timedelta(seconds=40),'
EVERY_WINDOW = "start_date=datetime(2026, 1, 1, tzinfo=UTC),"


def one_window(start: datetime) -> str:
    """The DAG's dates for only the window that opens at `start`."""
    at = f'datetime.fromisoformat("{start.isoformat()}")'
    return f"start_date={at}, end_date={at},"


def write_dag(
    home: Path,
    dags: Path,
    dag_id: str,
    query: str,
    deadline: int,
    landing: Path,
    mode: str,
    static: dict[str, str],
    dates: str = EVERY_WINDOW,
    window: timedelta = WINDOW,
) -> None:
    """The DAG file in `dags`, its cost model and work directory in `home`."""
    model = home / f"{query}.json"
    paths = {"spark_submit": COST_MODEL, "spark_connect": COST_MODEL}
    model.write_text(json.dumps({"query": query, "unit": "rows", "paths": paths}))
    (dags / f"{dag_id}.py").write_text(
        DAG_FILE.format(
            dag_id=dag_id,
            query=query,
            window=window.total_seconds(),
            deadline=deadline,
            landing=landing,
            cost_model=model,
            work=home / "work",
            mode=mode,
            static=static,
            dates=dates,
        )
    )


def run_dags(envs: dict[str, AirflowEnv], start: datetime) -> None:
    """`airflow dags test` every DAG for the window at once; all must succeed."""
    logs = {dag_id: env.home / "dags_test.log" for dag_id, env in envs.items()}
    running = {
        dag_id: env.start_airflow(
            "dags", "test", dag_id, start.isoformat(), log=logs[dag_id], AIRFLOW__IQP__POLICY=POLICY.value
        )
        for dag_id, env in envs.items()
    }
    for dag_id, process in running.items():
        code = process.wait(timeout=900)
        log = logs[dag_id].read_text()
        assert code == 0, f"{dag_id}:\n{log[-4000:]}"
        assert "state=success" in log, f"{dag_id}:\n{log[-4000:]}"


def report(ledger: str, start: datetime, dag_ids: list[str]) -> None:
    """The demo's tables, shown by `pytest -s`: what ran when, and who waited for whom."""
    with session_scope(ledger) as session:
        rows = [row for dag_id in dag_ids if (row := window_row(session, dag_id, start)) is not None]
        granted = grant_rows(session, start - WINDOW)
    print(f"\n{windows_table(rows)}\n\n{batches_table(rows)}\n\n{grants_table(granted, start)}")
