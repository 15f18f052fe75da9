"""The dispatcher in Airflow: three DAGs share one Spark resource.

Each DAG runs in its own `airflow dags test` process (its own Airflow home), as three
deployments of DAGs would; all three reach the same ledger, so one dispatcher decides. Every
batch and merge runs on the test session's Spark Connect server. Checked from the ledger: one job at a time, each grant
went to the request the policy ranked first (with a real contest among them), every file of
every window in exactly one batch, every deadline met, every result equal to one Spark SQL pass.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import pytest
from sqlalchemy import select

from airflow_iqp.constants import BatchReason, BatchStatus, Policy, RequestState
from airflow_iqp.demo.summary import batches_table, grant_rows, grants_table, window_row, windows_table
from airflow_iqp.dynamic.dispatch import RankedEntry
from airflow_iqp.ledger import session_scope
from airflow_iqp.ledger.models import DispatchRequest
from airflow_iqp.tpch.generate import generate
from tests.integration.airflow_env import AirflowEnv
from tests.integration.windows import check_window, declaration, replay

if TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

    from airflow_iqp.spark.connect_server import ConnectServer

WINDOW = timedelta(seconds=30)
LEAD = timedelta(seconds=30)  # three Airflow processes plan their windows (about 20 s) before they open
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
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    work_dir="{work}",
    retry_delay=timedelta(seconds=3),
    {mode}
)
"""
# Pessimistic for this machine under three Airflow processes, and far more so on Connect: a job
# costs 6.5 s and up.
COST_MODEL = {"partial": {"points": [[430, 6.5], [17200, 26.0]]}, "merge": {"points": [[1, 5.0], [8, 6.0]]}}
DYNAMIC = 'mode="dynamic", alpha={alpha}, tau_max=timedelta(seconds=40),'


@pytest.fixture(scope="module")
def stream(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("stream") / "data"
    generate(out, scale=0.01, files=240)  # replayed at 2 files/s: past the end of the first full window
    return out


def make_env(root: Path, name: str, ledger: str, server: ConnectServer) -> AirflowEnv:
    return AirflowEnv(root / name, server.connection(), shared_ledger=ledger)


def write_dag(
    env: AirflowEnv, dag_id: str, query: str, deadline: int, landing: Path, mode: str, static: dict[str, str]
) -> None:
    model = env.home / f"{query}.json"
    paths = {"spark_submit": COST_MODEL, "spark_connect": COST_MODEL}
    model.write_text(json.dumps({"query": query, "unit": "rows", "paths": paths}))
    (env.dags / f"{dag_id}.py").write_text(
        DAG_FILE.format(
            dag_id=dag_id,
            query=query,
            window=WINDOW.total_seconds(),
            deadline=deadline,
            landing=landing,
            cost_model=model,
            work=env.home / "work",
            mode=mode,
            static=static,
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


def grants(ledger: str) -> list[DispatchRequest]:
    with session_scope(ledger) as session:
        return list(
            session.scalars(
                select(DispatchRequest).where(DispatchRequest.granted_at.is_not(None)).order_by(DispatchRequest.fence)
            )
        )


def test_three_queries_share_one_resource_in_policy_order(
    tmp_path_factory: pytest.TempPathFactory,
    stream: Path,
    spark: SparkSession,
    connect_server: ConnectServer,
    airflow_metadata: Path,
) -> None:
    root = tmp_path_factory.mktemp("dispatch")
    ledger = f"sqlite:///{root / 'ledger.db'}"
    landing = root / "landing"
    # Different deadlines; two dynamic queries (one cut in two or more batches) and a static one.
    queries = {
        "iqp_d_q6": ("q6", 150, DYNAMIC.format(alpha=0.3)),
        "iqp_d_q14": ("q14", 210, DYNAMIC.format(alpha=0.1)),
        "iqp_d_q1": ("q1", 270, ""),
    }
    envs = {dag_id: make_env(root, dag_id, ledger, connect_server) for dag_id in queries}
    for env in envs.values():
        env.copy_metadata(airflow_metadata)
    static = {"part": str(stream / "static" / "part")}
    for dag_id, (query, deadline, mode) in queries.items():
        write_dag(envs[dag_id], dag_id, query, deadline, landing, mode, static if query == "q14" else {})
    process, start = replay(stream, landing, 2.0, WINDOW, LEAD)
    try:
        run_dags(envs, start)
        assert process.wait(timeout=120) == 0, process.communicate()[1]
    finally:
        process.kill()

    report(ledger, start, list(queries))
    windows = {
        query: check_window(ledger, spark, declaration(envs[dag_id], dag_id), start)
        for dag_id, (query, _, _) in queries.items()
    }
    for window in windows.values():
        assert window.deadline_met, f"{window.dag_id}: finished {window.actual_finish}, due {window.deadline}"
    assert len([b for b in windows["q6"].batches if b.status == BatchStatus.DONE]) >= 2, (
        "MinBatch should cut q6 in two or more"
    )
    assert {b.reason for b in windows["q6"].batches} <= {
        BatchReason.MIN_BATCH,
        BatchReason.ALL_IN,
        BatchReason.WINDOW_CLOSED,
        BatchReason.SLOW_INPUT,
    }

    # One job at a time: the leases never overlap, and every Spark batch ran inside its lease.
    granted = grants(ledger)
    assert all(r.state == RequestState.RELEASED and r.resource_id == 0 for r in granted)
    held = [(r.granted_at, r.released_at) for r in granted if r.granted_at is not None and r.released_at is not None]
    assert len(held) == len(granted), "a granted request was never released"
    for (_, released), (next_granted, _) in zip(held, held[1:]):
        assert next_granted >= released, "two jobs held the one resource at once"
    for window in windows.values():
        leases = [lease for lease, r in zip(held, granted) if r.window_id == window.id]
        assert len(leases) == sum(b.status == BatchStatus.DONE for b in window.batches) + 1  # and the merge
        for b in window.batches:
            began, ended = b.actual_start, b.actual_end
            assert began is not None
            assert ended is not None
            assert any(g <= began and ended <= r for g, r in leases), f"{window.dag_id} batch {b.index}"

    # Each grant went to the request the policy ranked first among those waiting; under EDF
    # the rank is the deadline.
    contested = 0
    for request in granted:
        assert request.ranking is not None
        ranking = [RankedEntry.read(entry) for entry in request.ranking]
        assert ranking[0].request == request.id
        assert ranking[0].key == pytest.approx(request.deadline.timestamp())
        keys = [entry.key for entry in ranking if entry.key is not None]  # EDF keys are deadlines: all finite
        assert len(keys) == len(ranking)
        assert keys == sorted(keys), f"grant {request.fence} did not go to the best-ranked request: {ranking}"
        contested += len(ranking) > 1 and keys[0] < keys[1]
    assert contested >= 2, "the queries never competed for the resource: the test shows no ordering"
