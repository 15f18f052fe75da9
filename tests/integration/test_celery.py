"""The three example queries' live windows on several workers and schedulers (issue 23).

tests/topology.py runs Airflow as a multi-host deployment would, on this machine: the
CeleryExecutor (Redis), two Celery workers, two schedulers, DAG processor, triggerer and API
server, metadata and ledger on the session's PostgreSQL; every job on the session's Spark Connect
server (one resource). TPC-H Q6, Q14 and Q1 (the packaged queries, two dynamic, one static) each
run one 20 s window while the replayer lands lineitem files. Checked: the tasks of one window ran
on both workers (each worker's log names the task attempts it executed) and every Spark job on one of them,
every file of every window in exactly one committed batch, every result equal to one Spark SQL
pass, at most one job on the resource at any time and each grant to the request the policy ranked
first (the ledger's grants), every deadline met.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest
from sqlalchemy import select

from airflow_iqp.constants import BatchReason, BatchStatus, Policy, WindowStatus
from airflow_iqp.dynamic.dispatch import RankedEntry
from airflow_iqp.ledger import migrate, session_scope, store
from airflow_iqp.ledger.models import DispatchRequest
from airflow_iqp.tpch.generate import generate
from tests.integration.airflow_env import AirflowEnv
from tests.integration.dispatch_dags import DYNAMIC, one_window, write_dag
from tests.integration.windows import check_window, declaration, replay
from tests.postgres import create_database
from tests.topology import WORKERS, Topology

if TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

    from airflow_iqp.spark.connect_server import ConnectServer

# The DAG processor finds the files within its 5 s refresh and parses them (4 s in our runs) before the
# window opens; were it later, the run would start late inside its window, not be skipped.
LEAD = timedelta(seconds=10)
# Longer than the other live-window tests' 20 s: on this topology `plan` and the slots' triggers
# start 13-14 s into the window, and a slot's worker process 4-5 s after it leaves the triggerer,
# so in 20 s q6's first cut came after the close, every file in one batch (2026-11-28, twice).
WINDOW = timedelta(seconds=30)
POLICY = Policy.EDF
# dag_id: (query, deadline in s, mode): two dynamic queries (one cut in two or more batches), one static.
QUERIES = {
    "iqp_c_q6": ("q6", 150, DYNAMIC.format(alpha=0.3)),
    "iqp_c_q14": ("q14", 210, DYNAMIC.format(alpha=0.1)),
    "iqp_c_q1": ("q1", 270, ""),
}


def write_dags(topology: Topology, stream: Path, landing: Path, start: datetime) -> None:
    """The three DAG files, each limited to the one window that opens at `start`."""
    static = {"part": str(stream / "static" / "part")}
    for dag_id, (query, deadline, mode) in QUERIES.items():
        write_dag(
            topology.home,
            topology.dags,
            dag_id,
            query,
            deadline,
            landing,
            mode,
            static if query == "q14" else {},
            one_window(start),
            WINDOW,
        )


def merged(ledger: str, start: datetime) -> bool:
    with session_scope(ledger) as session:
        ids = [store.window_id(session, dag_id, start) for dag_id in QUERIES]
        return all(i is not None and store.window_summary(session, i).status == WindowStatus.MERGED for i in ids)


def grants(ledger: str) -> list[DispatchRequest]:
    with session_scope(ledger) as session:
        granted = select(DispatchRequest).where(DispatchRequest.granted_at.is_not(None))
        return list(session.scalars(granted.order_by(DispatchRequest.fence)))


WORKLOAD = re.compile(
    r"Executing workload in Celery: .*?task_id='([^']*)', dag_id='([^']*)', run_id='([^']*)', try_number=(\d+),"
    r".*?map_index=(-?\d+),"
)


def executed_by(topology: Topology) -> dict[str, set[str]]:
    """Task attempt (the ledger's `taken_by`) -> the workers that executed it, from the workers' own
    logs (a deferred task may resume on the other worker; Airflow's task instance keeps only the
    last host, and not always by the time the run ends)."""
    found: dict[str, set[str]] = {}
    for worker in WORKERS:
        for task, dag, run, attempt, index in WORKLOAD.findall(topology.log(worker).read_text()):
            found.setdefault(f"{dag}/{run}/{task}/{index}/{attempt}", set()).add(worker)
    return found


@pytest.fixture(scope="module")
def stream(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("stream") / "data"
    generate(out, scale=0.01, files=200)  # at 2 files/s: past the end of a window opening up to 60 s in
    return out


def test_three_queries_on_two_celery_workers_and_two_schedulers(
    tmp_path_factory: pytest.TempPathFactory,
    stream: Path,
    spark: SparkSession,
    connect_server: ConnectServer,
    postgres_server: str,
) -> None:
    began = time.monotonic()
    home = tmp_path_factory.mktemp("celery")
    ledger = create_database(postgres_server, "celery_ledger")
    migrate(ledger)
    metadata = create_database(postgres_server, "celery_airflow")
    topology = Topology(
        home,
        metadata,
        ledger,
        connect_server.connection(),
        extra_env={"AIRFLOW__IQP__POLICY": POLICY.value, "AIRFLOW__IQP__RESOURCES": "1"},
    )
    landing = home / "landing"
    producer = None
    try:
        up = topology.start()
        producer, start = replay(stream, landing, 2.0, WINDOW, LEAD)
        write_dags(topology, stream, landing, start)
        give_up = start + WINDOW + timedelta(seconds=max(d for _, d, _ in QUERIES.values()))
        while not merged(ledger, start):
            dead = {name: p.returncode for name, p in topology.running.items() if p.poll() is not None}
            assert not dead, f"services exited: {dead}"
            assert datetime.now(UTC) < give_up, f"windows not merged by their last deadline; see {home / 'logs'}"
            time.sleep(2)
    finally:
        if producer is not None:
            producer.kill()
        topology.stop()

    env = AirflowEnv(home, {})  # only where declaration() finds the DAG files
    windows = {dag_id: check_window(ledger, spark, declaration(env, dag_id), start) for dag_id in QUERIES}
    for window in windows.values():
        assert window.deadline_met, f"{window.dag_id}: finished {window.actual_finish}, due {window.deadline}"
    assert len([b for b in windows["iqp_c_q6"].batches if b.status == BatchStatus.DONE]) >= 2, (
        "MinBatch should cut q6 in two or more"
    )
    assert {b.reason for b in windows["iqp_c_q6"].batches} <= {
        BatchReason.MIN_BATCH,
        BatchReason.ALL_IN,
        BatchReason.WINDOW_CLOSED,
        BatchReason.SLOW_INPUT,
    }

    # Which worker ran each job: every grant was taken by a task attempt that ran on one of the two,
    # except a follow-up's. A window's merge is queued by its last batch before Celery has started
    # the merge task, and waits no resume (`dispatch.register`): granted before its task runs and
    # not taken within a lease, the resource goes back and the merge task queues again, as a later
    # request of the same window and kind that is taken. That grant ran no job.
    granted = grants(ledger)
    lapsed = {
        r.id
        for r in granted
        if r.taken_by is None
        and r.resume_seconds == 0
        and any(o.window_id == r.window_id and o.kind == r.kind and o.taken_by and o.id > r.id for o in granted)
    }
    hosts = executed_by(topology)
    ran_on = {r.id: hosts.get(r.taken_by or "", set()) for r in granted if r.id not in lapsed}
    assert all(ran_on.values()), f"a job's task attempt ran on neither worker: {ran_on}"
    jobs = {
        w.dag_id: Counter(h for r in granted if r.window_id == w.id for h in ran_on.get(r.id, ()))
        for w in windows.values()
    }
    # Celery hands each of a window's tasks (plan, batches, merge, ...; about six) to either
    # worker. On its two or three Spark jobs alone, all on one worker in every window would be
    # about one run in sixteen; on its tasks, about one in thirty thousand.
    tasks = {q: Counter(h for key, on in hosts.items() if key.startswith(f"{q}/") for h in on) for q in QUERIES}
    print(f"\nup in {up:.0f} s; by window, task instances per worker {tasks}, jobs per worker {jobs}")
    print(f"test {time.monotonic() - began:.0f} s")
    assert set().union(*tasks.values()) <= set(WORKERS), tasks
    assert any(len(count) == len(WORKERS) for count in tasks.values()), f"no window's tasks ran on both: {tasks}"
    # A partial task starts in the triggerer and takes a worker only with a batch to run: an
    # unused dynamic slot never ran on one.
    for window in windows.values():
        mapped = {b.index if b.slot is None else b.slot for b in window.batches}
        ran = {
            int(key.split("/")[3])
            for key in hosts
            if key.startswith(f"{window.dag_id}/") and "/partial_aggregate/" in key
        }
        assert ran <= mapped, f"{window.dag_id}: partial tasks {sorted(ran - mapped)} cut no batch but ran on a worker"

    # One job at a time on the one resource: the leases never overlap.
    assert all(r.resource_id == 0 for r in granted)
    held = [(r.granted_at, r.released_at) for r in granted if r.granted_at is not None and r.released_at is not None]
    assert len(held) == len(granted), "a granted request was never released"
    for (_, released), (next_granted, _) in zip(held, held[1:]):
        assert next_granted >= released, "two jobs held the one resource at once"
    for (
        window
    ) in windows.values():  # a lease for each batch and the merge (a lapsed one aside), each batch inside its own
        leases = [lease for lease, r in zip(held, granted) if r.window_id == window.id and r.id not in lapsed]
        assert len(leases) == sum(b.status == BatchStatus.DONE for b in window.batches) + 1
        for b in window.batches:
            assert b.actual_start is not None
            assert b.actual_end is not None
            assert any(g <= b.actual_start and b.actual_end <= r for g, r in leases), f"{window.dag_id} batch {b.index}"

    # Each grant went to the request the policy ranked first (EDF: the earliest deadline).
    contested = 0
    for request in granted:
        assert request.ranking is not None
        ranking = [RankedEntry.read(entry) for entry in request.ranking]
        assert ranking[0].request == request.id
        assert ranking[0].key == pytest.approx(request.deadline.timestamp())
        keys = [entry.key for entry in ranking if entry.key is not None]
        assert keys == sorted(keys), f"grant {request.fence} did not go to the best-ranked request: {ranking}"
        contested += len(ranking) > 1 and keys[0] < keys[1]
    assert contested >= 2, "the queries never competed for the resource: the test shows no ordering"
