"""The ledger on SQLite and PostgreSQL: schema, idempotent planning, frozen files, attempts,
concurrent writers, and where the ledger URL comes from."""

from __future__ import annotations

import multiprocessing
import traceback
from datetime import UTC, datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import func, inspect, select
from sqlalchemy.exc import IntegrityError, StatementError

from airflow_iqp.cli import main
from airflow_iqp.constants import BatchStatus, ExecutionPath, JobKind, Mode, WindowStatus
from airflow_iqp.exceptions import LedgerLookupError
from airflow_iqp.ledger import engine, ledger_url, migrate, session_scope, store
from airflow_iqp.ledger.models import Base, Batch, CostObservation, Query, Result, Window
from airflow_iqp.planning.record import PlanRecord
from tests.ledger.helpers import DAG, T0, data_file, planned_window
from tests.ledger.test_migrations import HEAD

if TYPE_CHECKING:
    from pathlib import Path

FILES = {
    "orders": [data_file("0000.parquet", "orders"), data_file("0001.parquet", "orders")],
    "lineitem": [data_file("0000.parquet", "lineitem")],
}
URIS = {stream: [f.uri for f in files] for stream, files in FILES.items()}


def _planned_window(url: str, ranges: tuple[tuple[int, int], ...] = ((1, 6), (7, 10))) -> int:
    return planned_window(url, "iqp_q1", ranges=ranges)


def test_migration_creates_all_tables_and_matches_the_models(
    ledger_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["db", "migrate", "--url", ledger_db]) == 0
    assert main(["db", "migrate", "--url", ledger_db]) == 0
    assert capsys.readouterr().out.count(f"at revision {HEAD}") == 2
    assert set(inspect(engine(ledger_db)).get_table_names()) == {
        "alembic_version",
        "queries",
        "windows",
        "batches",
        "cost_observations",
        "resources",
        "dispatch_requests",
        "stream_files",
        "results",
        "cost_models",
        "executor_leases",
    }
    with engine(ledger_db).connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []


def test_cli_masks_the_password(capsys: pytest.CaptureFixture[str], postgres_server: str) -> None:
    url = postgres_server.replace("postgres@", "postgres:s3cret@") + "/postgres"
    assert main(["db", "migrate", "--url", url]) == 0
    out = capsys.readouterr().out
    assert "s3cret" not in out
    assert "postgres:***@" in out
    engine(url).dispose()


def test_replanning_a_window_replaces_only_unstarted_batches(ledger_db: str) -> None:
    window_id = _planned_window(ledger_db)
    assert _planned_window(ledger_db) == window_id
    with session_scope(ledger_db) as s:
        assert [(b.index, b.first_tuple, b.last_tuple) for b in store.window_summary(s, window_id).batches] == [
            (0, 1, 6),
            (1, 7, 10),
        ]
        store.start_batch(s, window_id, 0)
    assert _planned_window(ledger_db, ((1, 3), (4, 8), (9, 10))) == window_id
    with session_scope(ledger_db) as s:
        summary = store.window_summary(s, window_id)
        assert [(b.index, b.first_tuple, b.last_tuple, b.status) for b in summary.batches] == [
            (0, 1, 6, BatchStatus.RUNNING),
            (1, 4, 8, BatchStatus.PLANNED),
            (2, 9, 10, BatchStatus.PLANNED),
        ]
        assert summary.status is WindowStatus.RUNNING
        assert s.scalar(select(func.count()).select_from(Window)) == 1
        assert s.scalar(select(func.count()).select_from(Batch)) == 3


def test_frozen_files_survive_a_retry_and_a_replan(ledger_db: str) -> None:
    window_id = _planned_window(ledger_db)
    with session_scope(ledger_db) as s:
        assert store.freeze_files(s, window_id, 1, FILES) == URIS
    later = {**FILES, "orders": [*FILES["orders"], data_file("0002.parquet", "orders")]}
    with session_scope(ledger_db) as s:
        assert store.freeze_files(s, window_id, 1, later) == URIS
    _planned_window(ledger_db, ((1, 5), (6, 10)))
    with session_scope(ledger_db) as s:
        batch = store.window_summary(s, window_id).batches[1]
        assert (batch.first_tuple, batch.files) == (7, URIS)
        assert store.frozen_files(s, window_id) == {u for uris in URIS.values() for u in uris}


def test_attempts_count_starts_and_the_merge_judges_the_deadline(ledger_db: str) -> None:
    window_id = _planned_window(ledger_db)
    with session_scope(ledger_db) as s:
        assert store.start_batch(s, window_id, 0) == 1
        store.fail_batch(s, window_id, 0)
    with session_scope(ledger_db) as s:
        assert store.start_batch(s, window_id, 0) == 2
        store.finish_batch(
            s,
            window_id,
            0,
            actual_start=T0 + timedelta(seconds=6),
            actual_end=T0 + timedelta(seconds=9),
            actual_tuples=6,
            actual_cost=3.0,
            output_location="/out/w/0",
        )
    later_tz = timezone(timedelta(hours=2))
    with session_scope(ledger_db) as s:
        assert store.start_batch(s, window_id, 1) == 1
        store.finish_batch(
            s,
            window_id,
            1,
            actual_start=T0 + timedelta(seconds=10),
            actual_end=T0 + timedelta(seconds=11),
            actual_tuples=4,
            actual_cost=1.0,
            output_location="/out/w/1",
        )
        finish = (T0 + timedelta(seconds=12)).astimezone(later_tz)
        assert store.record_merge(s, window_id, finish, 10, "/out/w/result") is True
    with session_scope(ledger_db) as s:
        summary = store.window_summary(s, window_id)
    assert [(b.status, b.attempts) for b in summary.batches] == [(BatchStatus.DONE, 2), (BatchStatus.DONE, 1)]
    assert summary.batches[0].actual_end == T0 + timedelta(seconds=9)
    assert summary.actual_finish == T0 + timedelta(seconds=12)
    assert summary.actual_finish.tzinfo == UTC
    assert summary.deadline.tzinfo == UTC
    assert (summary.status, summary.deadline_met, summary.actual_tuples) == (WindowStatus.MERGED, True, 10)


def test_late_or_failed_merges_miss_the_deadline_and_naive_times_are_refused(ledger_db: str) -> None:
    window_id = _planned_window(ledger_db)
    with session_scope(ledger_db) as s:
        assert store.record_merge(s, window_id, T0 + timedelta(seconds=13), 10, "/out") is False
    with pytest.raises(StatementError, match="naive datetime"), session_scope(ledger_db) as s:
        store.start_batch(s, window_id, 0, started_at=datetime(2026, 1, 1, 12, 0))
    with session_scope(ledger_db) as s:
        assert store.window_summary(s, window_id).batches[0].attempts == 0


def _merged(url: str, window_id: int, finish: datetime) -> None:
    with session_scope(url) as s:
        for b in store.window_summary(s, window_id).batches:
            store.start_batch(s, window_id, b.index)
            store.finish_batch(s, window_id, b.index, finish, finish, 1, 0.1, f"/out/{b.index}")
        store.record_merge(s, window_id, finish, 10, "/out/result")
        store.record_result(s, window_id, f"/results/{finish.isoformat()}", 10, finish)


def test_a_closed_window_planned_again_runs_again_and_keeps_its_published_results(ledger_db: str) -> None:
    """A backfill with --reprocess-behavior (or a cleared run) plans a merged window again."""
    window_id = _planned_window(ledger_db)
    with session_scope(ledger_db) as s:
        store.freeze_files(s, window_id, 1, FILES)
    _merged(ledger_db, window_id, T0 + timedelta(seconds=11))
    again = planned_window(ledger_db, "iqp_q1", ranges=((1, 10),), run_id="backfill__1")
    assert again == window_id
    with session_scope(ledger_db) as s:
        summary = store.window_summary(s, window_id)
        assert (summary.status, summary.deadline_met, summary.actual_finish) == (WindowStatus.PLANNED, None, None)
        assert [(b.index, b.status, b.files) for b in summary.batches] == [(0, BatchStatus.PLANNED, None)]
        assert store.frozen_files(s, window_id) == set()  # the files are free for the new batches
        assert store.freeze_files(s, window_id, 0, FILES) == URIS
        assert summary.result_uri == f"/results/{(T0 + timedelta(seconds=11)).isoformat()}"  # until replaced
    _merged(ledger_db, window_id, T0 + timedelta(days=1))
    with session_scope(ledger_db) as s:
        uris = list(s.scalars(select(Result.uri).where(Result.window_id == window_id).order_by(Result.id)))
        assert store.window_summary(s, window_id).result_uri == uris[-1]
    assert len(uris) == 2


def test_a_backfilled_window_has_no_deadline_to_miss(ledger_db: str) -> None:
    with session_scope(ledger_db) as s:
        store.register_query(s, dag_id="iqp_q1", name="q1", sql="SELECT 1", mode=Mode.STATIC, params={})
        window_id = store.record_plan(
            s, "iqp_q1", T0, T0 + timedelta(seconds=10), T0 + timedelta(seconds=12), 1, PlanRecord(), [], backfill=True
        )
    late = T0 + timedelta(days=30)
    with session_scope(ledger_db) as s:
        assert store.record_merge(s, window_id, late, 1, "/out/result") is None
        store.record_result(s, window_id, "/results/w", 1, late)
        summary = store.window_summary(s, window_id)
        assert (summary.backfill, summary.deadline_met, summary.outcome) == (True, None, "backfilled")
        assert s.scalar(select(Result.deadline_met).where(Result.window_id == window_id)) is None
    live = planned_window(ledger_db, "iqp_q1", start=T0 + timedelta(seconds=10))
    with session_scope(ledger_db) as s:
        store.record_merge(s, live, late, 1, "/out/result")
        assert store.window_summary(s, live).outcome == "missed"


def _write_observations(url: str, worker: int, results: Any) -> None:
    try:
        with session_scope(url) as s:
            store.register_query(s, dag_id="iqp_q1", name="q1", sql="SELECT 1", mode=Mode.STATIC, params={})
        for i in range(15):
            with session_scope(url) as s:
                store.record_cost_observation(
                    s, "iqp_q1", ExecutionPath.IN_PROCESS, JobKind.PARTIAL, 100 * worker + i, 0.01 * i
                )
        results.put(None)
    except Exception:  # the parent shows it
        results.put(traceback.format_exc())


def test_concurrent_writers_migrate_once_and_never_see_a_locked_database(ledger_db: str) -> None:
    """Forked like Airflow's task runners, all starting on a database nobody migrated yet."""
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    workers = [ctx.Process(target=_write_observations, args=(ledger_db, w, results)) for w in range(4)]
    for p in workers:
        p.start()
    errors = [results.get(timeout=60) for _ in workers]
    for p in workers:
        p.join(timeout=30)
    assert errors == [None] * 4
    with session_scope(ledger_db) as s:
        assert s.scalar(select(func.count()).select_from(CostObservation)) == 60


def test_missing_rows_are_lookup_errors_that_name_the_row(ledger_db: str) -> None:
    window_id = _planned_window(ledger_db)
    with (
        pytest.raises(LedgerLookupError, match="no query of DAG 'nope' in the ledger"),
        session_scope(ledger_db) as s,
    ):
        store.record_cost_observation(s, "nope", ExecutionPath.SPARK_SUBMIT, JobKind.MERGE, 3, 1.0)
    with pytest.raises(LedgerLookupError, match=f"no window {window_id + 1} in the ledger") as info:
        with session_scope(ledger_db) as s:
            store.window_summary(s, window_id + 1)
    assert (info.value.what, info.value.key) == ("window", window_id + 1)
    with pytest.raises(LedgerLookupError, match=f"no window {window_id} batch 7 in the ledger"):
        with session_scope(ledger_db) as s:
            store.start_batch(s, window_id, 7)
    assert not issubclass(LedgerLookupError, ValueError)  # a missing row is no bad user input


def test_the_database_refuses_a_mode_outside_the_enum(ledger_db: str) -> None:
    migrate(ledger_db)
    with pytest.raises(IntegrityError, match="ck_queries_mode"), session_scope(ledger_db) as s:
        s.add(Query(dag_id="iqp_q1", name="q1", sql="SELECT 1", mode="partial_merge", params={}))
    for mode in Mode:
        with session_scope(ledger_db) as s:
            store.register_query(s, dag_id=f"iqp_{mode}", name="q1", sql="SELECT 1", mode=mode, params={})
    with session_scope(ledger_db) as s:
        assert sorted(s.scalars(select(Query.mode))) == sorted(m.value for m in Mode)


def test_url_from_env_converts_airflow_postgres_uris(ledger_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    airflow_uri = ledger_db.replace("postgresql+psycopg://", "postgres://")
    monkeypatch.setenv("AIRFLOW_CONN_IQP_DEFAULT", airflow_uri)
    assert ledger_url() == ledger_db
    with session_scope() as s:
        store.register_query(s, dag_id="iqp_q1", name="q1", sql="SELECT 1", mode=Mode.STATIC, params={})
    assert migrate(ledger_db) == HEAD


def test_explicit_url_wins_and_is_converted_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_IQP_DEFAULT", "sqlite:////elsewhere.db")
    assert ledger_url("postgresql://u:p@h:5432/d") == "postgresql+psycopg://u:p@h:5432/d"
    assert ledger_url("sqlite:////abs/x.db") == "sqlite:////abs/x.db"


def test_default_is_sqlite_under_airflow_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRFLOW_CONN_IQP_DEFAULT", raising=False)
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    assert ledger_url() == f"sqlite:///{tmp_path}/iqp_ledger.db"
    monkeypatch.delenv("AIRFLOW_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert ledger_url() == f"sqlite:///{tmp_path}/airflow/iqp_ledger.db"


def test_airflow_connection_is_used_when_the_task_sdk_has_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.sdk import BaseHook, Connection

    monkeypatch.delenv("AIRFLOW_CONN_IQP_DEFAULT", raising=False)
    conn = Connection(
        conn_id="iqp_default", conn_type="postgres", host="db", login="iqp", password="p@ss", port=5432, schema="ledger"
    )
    monkeypatch.setattr(BaseHook, "get_connection", classmethod(lambda cls, conn_id: conn))
    assert ledger_url() == "postgresql+psycopg://iqp:p%40ss@db:5432/ledger"


def test_read_only_sessions_do_not_queue_behind_the_sqlite_writer(tmp_path: Path) -> None:
    """Triggers poll with read-only sessions; a writer holding the lock must not stall them."""
    import time

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with session_scope(url) as writer:
        store.register_query(writer, dag_id="iqp_q1", name="q1", sql="SELECT 1", mode=Mode.STATIC, params={})
        waited = time.monotonic()
        with session_scope(url, read_only=True) as reader:  # the writer's BEGIN IMMEDIATE holds the lock
            assert reader.scalar(select(Query.name)) is None  # a snapshot before the writer commits
        assert time.monotonic() - waited < 5
    with session_scope(url, read_only=True) as reader:
        assert reader.scalar(select(Query.name)) == "q1"


def test_the_dag_is_the_unit_two_dags_may_run_queries_of_one_name(ledger_db: str) -> None:
    first = planned_window(ledger_db, "iqp_sales_eu")
    second = planned_window(ledger_db, "iqp_sales_us")
    assert first != second
    with session_scope(ledger_db) as s:
        assert store.window_id(s, "iqp_sales_eu", T0) == first
        assert store.window_id(s, "iqp_sales_us", T0) == second
        assert store.window_id(s, "sales", T0) is None  # a query's name finds nothing: the DAG does
        eu = store.window_summary(s, first)
        assert (eu.dag_id, eu.query) == ("iqp_sales_eu", "sales")
        store.register_query(
            s, dag_id="iqp_sales_eu", name="sales_v2", sql="SELECT 2", mode=Mode.DYNAMIC, params={"x": 1}
        )
    with session_scope(ledger_db) as s:
        rows = s.execute(select(Query.dag_id, Query.name, Query.sql, Query.mode).order_by(Query.dag_id)).all()
    assert [tuple(r) for r in rows] == [
        ("iqp_sales_eu", "sales_v2", "SELECT 2", "dynamic"),
        ("iqp_sales_us", "sales", "SELECT 1", "static"),
    ]
    with pytest.raises(TypeError), session_scope(ledger_db) as s:  # the old positional call cannot misbind
        store.register_query(s, "q1", "SELECT 1", Mode.STATIC, {})  # type: ignore[call-arg, arg-type]


def test_a_window_remembers_the_run_that_planned_it_last(ledger_db: str) -> None:
    window_id = planned_window(ledger_db, run_id="scheduled__2026-01-01T12:00:00+00:00")
    with session_scope(ledger_db) as s:
        assert store.window_summary(s, window_id).run_id == "scheduled__2026-01-01T12:00:00+00:00"
    planned_window(ledger_db)  # no run id given: the recorded one stays
    planned_window(ledger_db, run_id="manual__2026-01-02")
    with session_scope(ledger_db) as s:
        summary = store.window_summary(s, window_id)
        assert (summary.run_id, summary.incomplete, summary.late_files, summary.result_uri) == (
            "manual__2026-01-02",
            False,
            0,
            None,
        )


def test_results_replace_the_current_one_and_keep_the_history(ledger_db: str) -> None:
    window_id = planned_window(ledger_db)
    deadline = T0 + timedelta(seconds=12)
    with session_scope(ledger_db) as s:
        with pytest.raises(ValueError, match="is planned: only a merged window has a result"):
            store.record_result(s, window_id, "s3://out/w/1", 10, deadline)
        store.record_merge(s, window_id, deadline, 10, "/data/iqp/w/result")
        store.record_result(s, window_id, "s3://out/w/1", 10, deadline)
    with session_scope(ledger_db) as s:
        window = s.get(Window, window_id)
        assert window is not None
        window.late_files = 2  # what record_file_event counts; see test_files
        store.record_result(s, window_id, "s3://out/w/2", 13, deadline + timedelta(minutes=5))
    with session_scope(ledger_db) as s:
        summary = store.window_summary(s, window_id)
        history = s.execute(
            select(Result.uri, Result.rows, Result.finished_at, Result.deadline_met, Result.late_files)
            .where(Result.window_id == window_id)
            .order_by(Result.id)
        ).all()
    assert (summary.result_uri, summary.actual_tuples, summary.result_location) == (
        "s3://out/w/2",
        13,
        "/data/iqp/w/result",
    )
    assert (summary.actual_finish, summary.deadline_met) == (deadline, True)  # the first merge answered the deadline
    assert [tuple(r) for r in history] == [
        ("s3://out/w/1", 10, deadline, True, 0),
        ("s3://out/w/2", 13, deadline + timedelta(minutes=5), False, 2),
    ]


def test_a_partial_task_finds_what_the_runs_plan_handed_it_by_map_index(ledger_db: str) -> None:
    window_id = planned_window(ledger_db, run_id="scheduled__1")
    handed = [{"kind": "slot", "window_id": window_id, "slot": slot} for slot in range(3)]
    with session_scope(ledger_db) as s:
        planned = PlanRecord.read(s.get_one(Window, window_id).plan)
        store.hand_out(s, window_id, handed)
    with session_scope(ledger_db, read_only=True) as s:
        assert [store.handed(s, DAG, "scheduled__1", i) for i in range(3)] == handed
        kept = PlanRecord.read(s.get_one(Window, window_id).plan)
        assert kept == planned.model_copy(update={"handed": tuple(handed)})  # the rest of the plan as it was
        for dag_id, run_id, index in (
            (DAG, "scheduled__1", 3),
            (DAG, "manual__2", 0),
            ("iqp_other", "scheduled__1", 0),
        ):
            with pytest.raises(LedgerLookupError, match=f"{dag_id} / {run_id} / partial_aggregate {index}"):
                store.handed(s, dag_id, run_id, index)
