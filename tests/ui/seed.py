"""A ledger with what the monitor shows, written through the ledger's own operations (store and
dispatcher), around a given `now`:

- DAG `iqp_sales` (static): a window that met its deadline, one that missed it, and an open one
  whose predicted finish is past its deadline (at risk), its second batch waiting for the resource;
- DAG `iqp_secret`: an open window holding the one resource (granted over iqp_sales' batch)
  with a long batch (`SECRET_BATCH_COST`), and another open window waiting behind it: the DAG a
  test user may not read. The long batch is what puts iqp_sales' open window at risk: its
  forecast is the batch's end, then its own second batch and merge.

Each DAG records its demand per window (`demand`) and every window the run that planned it
(`Seeded.run_id`), as the plan task does; the dispatcher's requests name their DAG, as the
dispatched tasks do.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow_iqp.constants import BatchReason, ExecutionPath, JobKind, Mode, Policy
from airflow_iqp.learning.cost import NotEnoughObservations, fit_cost
from airflow_iqp.ledger import dispatch, session_scope, store
from airflow_iqp.planning.admission import RecurringQuery
from airflow_iqp.planning.record import PlanRecord
from airflow_iqp.streams.files import DataFile

SALES, SECRET = "sales", "secret"
SALES_DAG, SECRET_DAG = "iqp_sales", "iqp_secret"
WINDOW = timedelta(minutes=10)
GRACE = timedelta(minutes=5)
LEASE_SECONDS = 600.0
MERGE_SLOT = -1


def seconds(n: float) -> timedelta:
    return timedelta(seconds=n)


def partial_cost(rows: int) -> float:
    """What a partial over `rows` rows costs in this ledger: start-up plus a rate."""
    return 5.0 + rows / 250


MERGE_COST = 30.0
PLANNED_COSTS = (28.0, 20.0)  # the plan's predicted cost of batches 0 and 1
SECRET_BATCH_COST = 400.0


@dataclass(frozen=True)
class Seeded:
    url: str
    now: datetime
    met: int
    late: int
    at_risk: int
    secret_running: int
    secret_waiting: int

    def run_id(self, window_start: datetime) -> str:
        """The run that planned the window starting at `window_start`."""
        return run_id(window_start)


def run_id(window_start: datetime) -> str:
    """A run id of the window timetable for the window starting at `window_start`."""
    return f"manual__window_{window_start.isoformat()}_{(window_start + WINDOW).isoformat()}"


def demand(dag_id: str) -> RecurringQuery:
    """What each DAG's plan records it asks of the resource per window: its two planned batches
    and the merge, the last batch and the merge after the close.
    """
    costs = (SECRET_BATCH_COST, PLANNED_COSTS[1]) if dag_id == SECRET_DAG else PLANNED_COSTS
    window = WINDOW.total_seconds()
    return RecurringQuery(
        name=dag_id,
        period=window,
        deadline=window + GRACE.total_seconds(),
        work=sum(costs) + MERGE_COST,
        longest_job=max(*costs, MERGE_COST),
        final_work=costs[1] + MERGE_COST,
    )


def _plan(start: datetime, costs: tuple[float, float]) -> tuple[PlanRecord, list[dict[str, Any]]]:
    """Two planned batches (files 0-5 and 6-9) and the merge at 620 s, as the plan task records them."""
    batches = [
        {
            "index": 0,
            "first_tuple": 0,
            "last_tuple": 5,
            "release": start + seconds(240),
            "latest_start": start + seconds(250),
            "planned_start": start + seconds(250),
            "predicted_cost": costs[0],
        },
        {
            "index": 1,
            "first_tuple": 6,
            "last_tuple": 9,
            "release": start + seconds(600),
            "latest_start": start + seconds(600),
            "planned_start": start + seconds(600),
            "predicted_cost": costs[1],
        },
    ]
    plan = PlanRecord(how="seeded", expected_files=10, merge_start=620.0, merge_cost=MERGE_COST)
    return plan, batches


def file_uris(window_id: int, index: int) -> list[str]:
    """The files batch `index` of a window froze: files 0-5, then 6-9, of the window's own."""
    first, last = (0, 5) if index == 0 else (6, 9)
    return [f"file:///landing/orders/w{window_id}/{i:04d}.parquet" for i in range(first, last + 1)]


def _files(window_id: int, index: int) -> dict[str, list[DataFile]]:
    modified = datetime(2026, 1, 1, tzinfo=UTC)
    return {
        "orders": [
            DataFile("orders", uri, uri.removeprefix("file:///landing/orders/"), 1000, modified)
            for uri in file_uris(window_id, index)
        ]
    }


def _run(session: Any, window_id: int, dag_id: str, deadline: datetime, kind: JobKind, slot: int, at: datetime) -> Any:
    """Queue a job at `at`, grant it a second later; returns its lease."""
    request = dispatch.register(
        session,
        window_id=window_id,
        query=dag_id,
        kind=kind,
        slot=slot,
        reason=BatchReason.PLANNED if kind is JobKind.PARTIAL else BatchReason.ALL_PROCESSED,
        deadline=deadline,
        remaining_cost=60.0,
        lease_seconds=LEASE_SECONDS,
        now=at,
    )
    (lease,) = dispatch.grant(session, policy=Policy.EDF, resources=1, now=at + seconds(1))
    assert lease.request == request
    return lease


def _refit(session: Any, dag_id: str, at: datetime) -> None:
    """Refit and store the DAG's model after a job, as `runtime.costs.observe` does (no prior)."""
    try:
        model = fit_cost(
            store.cost_observations(session, dag_id, ExecutionPath.SPARK_SUBMIT), ExecutionPath.SPARK_SUBMIT
        )
    except NotEnoughObservations:
        return
    store.save_cost_model(session, dag_id, ExecutionPath.SPARK_SUBMIT, model.to_dict(), model.source, fitted_at=at)


def _batch(session: Any, window_id: int, dag_id: str, deadline: datetime, index: int, at: datetime, rows: int) -> None:
    """Batch `index` queues at `at`, runs under a lease and records its cost."""
    lease = _run(session, window_id, dag_id, deadline, JobKind.PARTIAL, index, at)
    started = at + seconds(1)
    cost = partial_cost(rows)
    store.freeze_files(session, window_id, index, _files(window_id, index))
    store.start_batch(session, window_id, index, started_at=started)
    store.finish_batch(
        session, window_id, index, started, started + seconds(cost), rows, cost, f"/out/{window_id}/{index}"
    )
    store.record_cost_observation(
        session, dag_id, ExecutionPath.SPARK_SUBMIT, JobKind.PARTIAL, rows, cost, observed_at=started + seconds(cost)
    )
    _refit(session, dag_id, started + seconds(cost))
    dispatch.release(session, lease, started + seconds(cost))


def _window(
    session: Any,
    dag_id: str,
    start: datetime,
    predicted_finish: datetime | None = None,
    costs: tuple[float, float] = PLANNED_COSTS,
) -> int:
    plan, batches = _plan(start, costs)
    end = start + WINDOW
    return store.record_plan(
        session,
        dag_id,
        start,
        end,
        end + GRACE,
        10_000,
        plan,
        batches,
        predicted_finish=predicted_finish,
        run_id=run_id(start),
    )


def _closed(session: Any, dag_id: str, start: datetime, merge_at: float) -> int:
    """A window whose two batches ran as planned and whose merge was granted at `merge_at` s."""
    window_id = _window(session, dag_id, start)
    deadline = start + WINDOW + GRACE
    _batch(session, window_id, dag_id, deadline, 0, start + seconds(250), 6000)
    _batch(session, window_id, dag_id, deadline, 1, start + seconds(600), 4000)
    lease = _run(session, window_id, dag_id, deadline, JobKind.MERGE, MERGE_SLOT, start + seconds(merge_at - 1))
    finished = start + seconds(merge_at + MERGE_COST)
    store.record_merge(session, window_id, finished, 10_000, f"/out/{window_id}/result")
    store.record_cost_observation(
        session, dag_id, ExecutionPath.SPARK_SUBMIT, JobKind.MERGE, 2, MERGE_COST, observed_at=finished
    )
    _refit(session, dag_id, finished)
    dispatch.release(session, lease, finished)
    return window_id


def seed(url: str, now: datetime) -> Seeded:
    """Write the ledger described above; `now` is when the open windows are looked at."""
    with session_scope(url) as s:
        for dag_id, name in ((SALES_DAG, SALES), (SECRET_DAG, SECRET)):
            store.register_query(
                s,
                dag_id=dag_id,
                name=name,
                sql=f"SELECT count(*) FROM orders -- {name}",
                mode=Mode.STATIC,
                params={"window_s": WINDOW.total_seconds(), "deadline_s": GRACE.total_seconds()},
            )
            store.record_demand(s, demand(dag_id))
        met = _closed(s, SALES_DAG, now - seconds(3600), merge_at=642)
        late = _closed(s, SALES_DAG, now - seconds(2400), merge_at=880)  # finishes at 910 s: 10 s late
        # Open: its first batch done, its second waiting behind iqp_secret's job.
        open_start = now - seconds(640)  # batch 1 released 40 s ago
        deadline = open_start + WINDOW + GRACE
        at_risk = _window(s, SALES_DAG, open_start, predicted_finish=deadline + seconds(60))
        _batch(s, at_risk, SALES_DAG, deadline, 0, open_start + seconds(250), 6000)
        waiting = dispatch.register(
            s,
            window_id=at_risk,
            query=SALES_DAG,
            kind=JobKind.PARTIAL,
            slot=1,
            reason=BatchReason.PLANNED,
            deadline=deadline,
            remaining_cost=50.0,
            lease_seconds=LEASE_SECONDS,
            now=now - seconds(15),
        )
        # iqp_secret: an earlier deadline, so EDF grants it the resource over iqp_sales' batch.
        secret_start = open_start - seconds(10)
        secret_running = _window(s, SECRET_DAG, secret_start, costs=(SECRET_BATCH_COST, PLANNED_COSTS[1]))
        dispatch.register(
            s,
            window_id=secret_running,
            query=SECRET_DAG,
            kind=JobKind.PARTIAL,
            slot=0,
            reason=BatchReason.PLANNED,
            deadline=secret_start + WINDOW + GRACE,
            remaining_cost=40.0,
            lease_seconds=LEASE_SECONDS,
            now=now - seconds(12),
        )
        (lease,) = dispatch.grant(s, policy=Policy.EDF, resources=1, now=now - seconds(10))
        secret_waiting = _window(s, SECRET_DAG, now - seconds(100))
        dispatch.register(
            s,
            window_id=secret_waiting,
            query=SECRET_DAG,
            kind=JobKind.PARTIAL,
            slot=0,
            reason=BatchReason.PLANNED,
            deadline=now - seconds(100) + WINDOW + GRACE,
            remaining_cost=45.0,
            lease_seconds=LEASE_SECONDS,
            now=now - seconds(5),
        )
    assert lease.request != waiting, "EDF grants iqp_secret's earlier deadline first"
    return Seeded(url, now, met, late, at_risk, secret_running, secret_waiting)
