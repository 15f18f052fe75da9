"""The read model against a ledger written by the ledger's own operations."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_iqp.constants import BatchStatus, ExecutionPath, JobKind, Mode, RequestState, WindowStatus
from airflow_iqp.learning.cost import fit_cost
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.ui import read
from tests.ui.seed import MERGE_COST, SALES, SALES_DAG, SECRET_DAG, Seeded, file_uris, partial_cost


def test_queries_name_their_dags(seeded: Seeded) -> None:
    with session_scope(seeded.url, read_only=True) as s:
        found = read.queries(s)
        assert [(q.dag_id, q.name, q.mode) for q in found] == [
            (SALES_DAG, SALES, Mode.STATIC),
            (SECRET_DAG, "secret", Mode.STATIC),
        ]
        assert read.query_of_dag(s, "iqp_nothing") is None


def test_windows_come_newest_first_with_batches_and_requests(seeded: Seeded) -> None:
    with session_scope(seeded.url, read_only=True) as s:
        sales = read.query_of_dag(s, SALES_DAG)
        assert sales is not None
        rows = read.windows(s, sales, limit=10)
        assert [w.id for w in rows] == [seeded.at_risk, seeded.late, seeded.met]
        assert [w.id for w in read.windows(s, sales, limit=1)] == [seeded.at_risk]
        assert [w.id for w in read.windows(s, sales, 10, before=rows[0].window_start)] == [seeded.late, seeded.met]
    met = rows[2]
    assert (met.status, met.deadline_met, met.dag_id, met.late_files, met.incomplete) == (
        WindowStatus.MERGED,
        True,
        SALES_DAG,
        0,
        False,
    )
    assert met.result == f"/out/{seeded.met}/result"
    assert [(b.index, b.status, b.actual_tuples, b.actual_cost) for b in met.batches] == [
        (0, BatchStatus.DONE, 6000, partial_cost(6000)),
        (1, BatchStatus.DONE, 4000, partial_cost(4000)),
    ]
    assert met.batches[0].files == {"orders": file_uris(seeded.met, 0)}
    assert [(r.kind, r.slot, r.state) for r in met.requests] == [
        (JobKind.PARTIAL, 0, RequestState.RELEASED),
        (JobKind.PARTIAL, 1, RequestState.RELEASED),
        (JobKind.MERGE, -1, RequestState.RELEASED),
    ]


def test_a_run_finds_the_window_it_planned_or_the_one_its_run_id_names(seeded: Seeded) -> None:
    with session_scope(seeded.url, read_only=True) as s:
        sales = read.query_of_dag(s, SALES_DAG)
        assert sales is not None
        open_window = read.windows(s, sales, 1)[0]
        planned_by = seeded.run_id(open_window.window_start)
        assert open_window.run_id == planned_by
        found = read.window_of_run(s, sales, planned_by)
        assert found is not None
        assert found.id == seeded.at_risk
        # a scheduled run of the same window that has not planned yet: found by the start it names
        scheduled = read.window_of_run(s, sales, planned_by.replace("manual__", "scheduled__"))
        assert scheduled is not None
        assert scheduled.id == seeded.at_risk
        assert read.window_of_run(s, sales, "manual__2026-01-01T00:00:00+00:00") is None
        assert read.window(s, sales, seeded.met) is not None
        assert read.window(s, sales, seeded.secret_running) is None  # another DAG's window


@pytest.mark.parametrize(
    ("run_id", "start"),
    [
        (
            "scheduled__window_2026-01-01T10:00:00+00:00_2026-01-01T10:10:00+00:00",
            datetime(2026, 1, 1, 10, tzinfo=UTC),
        ),
        (
            "manual__window_2026-01-01T10:00:00.250000+00:00_2026-01-01T10:10:00+00:00_at_2026-01-02T00:00:00+00:00",
            datetime(2026, 1, 1, 10, 0, 0, 250000, tzinfo=UTC),
        ),
        ("manual__2026-01-01T10:00:00+00:00", None),  # not the window timetable's
        ("scheduled__window_yesterday_today", None),
        ("scheduled__window_2026-01-01T10:00:00_2026-01-01T10:10:00", None),  # no offset: not ours
    ],
)
def test_run_window_start(run_id: str, start: datetime | None) -> None:
    assert read.run_window_start(run_id) == start


def test_the_cost_model_is_the_newest_stored_one(seeded: Seeded) -> None:
    """What the seed's jobs refit after each (as `runtime.costs.observe` does): the monitor
    reads that model, never a fit of its own.
    """
    with session_scope(seeded.url, read_only=True) as s:
        model = read.cost_model(s, SALES_DAG)
        assert read.cost_model(s, "iqp_nothing") is None
        observed = store.cost_observations(s, SALES_DAG, ExecutionPath.SPARK_SUBMIT)
    assert model == fit_cost(observed, ExecutionPath.SPARK_SUBMIT)
    assert model.partial_seconds(6000) == pytest.approx(partial_cost(6000))
    assert model.merge_seconds(2) == pytest.approx(MERGE_COST)


def test_dispatcher_rows(seeded: Seeded) -> None:
    with session_scope(seeded.url, read_only=True) as s:
        rows = read.dispatcher(s, seeded.now - timedelta(hours=6))
        recent = read.dispatcher(s, seeded.now - timedelta(seconds=30))
    (resource,) = rows.resources
    holder = next(r for r in rows.open if r.state == RequestState.GRANTED)
    assert (resource.holder, holder.dag_id, holder.window_id) == (holder.id, SECRET_DAG, seeded.secret_running)
    waiting = [(r.dag_id, r.window_id) for r in rows.open if r.state == RequestState.WAITING]
    assert waiting == [(SALES_DAG, seeded.at_risk), (SECRET_DAG, seeded.secret_waiting)]
    granted = [g.granted_at.timestamp() for g in rows.grants if g.granted_at is not None]
    assert granted == sorted(granted, reverse=True)
    assert len(rows.grants) == 2 * 3 + 1 + 1  # two closed windows' 3 jobs, the open one's batch, the holder
    assert [g.id for g in recent.grants] == [holder.id]
    # the holder's grant ranked it over iqp_sales' waiting batch, and the rows know both DAGs
    assert [e.request for e in holder.ranking][0] == holder.id
    assert {rows.ranked_dags[e.request] for e in holder.ranking} == {SECRET_DAG, SALES_DAG}
    assert set(rows.last_served) == {SALES_DAG, SECRET_DAG}  # the dispatcher's requests name their DAG


def test_a_merged_windows_merge_seconds_are_its_dags_merge_observation_at_its_finish(seeded: Seeded) -> None:
    with session_scope(seeded.url) as s:
        sales = read.query_of_dag(s, SALES_DAG)
        assert sales is not None
        met = next(w for w in read.windows(s, sales, 10) if w.id == seeded.met)
        assert met.actual_finish is not None
        # Another DAG's merge at the same time is not its.
        store.record_cost_observation(
            s, SECRET_DAG, ExecutionPath.SPARK_SUBMIT, JobKind.MERGE, 2, 99.0, observed_at=met.actual_finish
        )
    with session_scope(seeded.url, read_only=True) as s:
        rows = {w.id: w for w in read.windows(s, sales, 10)}
    assert rows[seeded.met].merge_seconds == MERGE_COST
    assert rows[seeded.late].merge_seconds == MERGE_COST
    assert rows[seeded.at_risk].merge_seconds is None  # open: not merged yet
