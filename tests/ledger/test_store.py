"""The ledger on SQLite and PostgreSQL: schema, idempotent planning, frozen files, attempts,
concurrent writers, and where the ledger URL comes from."""

from __future__ import annotations

import multiprocessing
import traceback
from datetime import UTC, datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from sqlalchemy import func, inspect, select, text
from sqlalchemy.exc import IntegrityError, StatementError

from airflow_iqp.cli import main
from airflow_iqp.constants import BatchStatus, ExecutionPath, JobKind, Mode, WindowStatus
from airflow_iqp.exceptions import LedgerLookupError
from airflow_iqp.ledger import engine, ledger_url, migrate, session_scope, store
from airflow_iqp.ledger.engine import MIGRATIONS
from airflow_iqp.ledger.models import Base, Batch, CostObservation, Query, Window

if TYPE_CHECKING:
    from pathlib import Path

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
HEAD = "0003"
FILES = {"orders": ["orders/0000.parquet", "orders/0001.parquet"], "lineitem": ["lineitem/0000.parquet"]}


def _batches(ranges: tuple[tuple[int, int], ...]) -> list[dict[str, Any]]:
    return [
        {
            "index": i,
            "first_tuple": first,
            "last_tuple": last,
            "release": T0 + timedelta(seconds=last),
            "latest_start": T0 + timedelta(seconds=last + 5),
            "planned_start": T0 + timedelta(seconds=last),
            "predicted_cost": 0.5 * (last - first + 1),
        }
        for i, (first, last) in enumerate(ranges)
    ]


def _planned_window(url: str, ranges: tuple[tuple[int, int], ...] = ((1, 6), (7, 10))) -> int:
    with session_scope(url) as s:
        store.register_query(s, "q1", "SELECT 1", Mode.STATIC, {"region": "ASIA"})
        return store.record_plan(
            s,
            "q1",
            T0,
            T0 + timedelta(seconds=10),
            T0 + timedelta(seconds=12),
            10,
            {"method": "greedy"},
            _batches(ranges),
            predicted_finish=T0 + timedelta(seconds=12),
        )


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
        assert store.freeze_batch_files(s, window_id, 1, FILES) == FILES
    later = {**FILES, "orders": [*FILES["orders"], "orders/0002.parquet"]}
    with session_scope(ledger_db) as s:
        assert store.freeze_batch_files(s, window_id, 1, later) == FILES
    _planned_window(ledger_db, ((1, 5), (6, 10)))
    with session_scope(ledger_db) as s:
        batch = store.window_summary(s, window_id).batches[1]
        assert (batch.first_tuple, batch.files) == (7, FILES)


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
    with pytest.raises(ValueError, match="already merged"), session_scope(ledger_db) as s:
        store.record_plan(s, "q1", T0, T0, T0, 1, {}, [])
    with pytest.raises(StatementError, match="naive datetime"), session_scope(ledger_db) as s:
        store.start_batch(s, window_id, 0, started_at=datetime(2026, 1, 1, 12, 0))
    with session_scope(ledger_db) as s:
        assert store.window_summary(s, window_id).batches[0].attempts == 0


def _write_observations(url: str, worker: int, results: Any) -> None:
    try:
        with session_scope(url) as s:
            store.register_query(s, "q1", "SELECT 1", Mode.STATIC, {})
        for i in range(15):
            with session_scope(url) as s:
                store.record_cost_observation(
                    s, "q1", ExecutionPath.IN_PROCESS, JobKind.PARTIAL, 100 * worker + i, 0.01 * i
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
        pytest.raises(LedgerLookupError, match="no registered query 'nope' in the ledger"),
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
        s.add(Query(name="q1", sql="SELECT 1", mode="partial_merge", params={}))
    for mode in Mode:
        with session_scope(ledger_db) as s:
            store.register_query(s, f"q_{mode}", "SELECT 1", mode, {})
    with session_scope(ledger_db) as s:
        assert sorted(s.scalars(select(Query.mode))) == sorted(m.value for m in Mode)


def test_the_mode_check_migrates_a_ledger_that_holds_rows(ledger_db: str) -> None:
    """0003 rebuilds `queries` on SQLite, which windows and cost observations reference."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", ledger_db.replace("%", "%%"))
    command.upgrade(config, "0002")
    with engine(ledger_db).begin() as conn:
        conn.execute(
            text(
                "INSERT INTO queries (name, sql, mode, params, created_at) "
                "VALUES ('q1', 'SELECT 1', 'static', '{}', :at)"
            ),
            {"at": "2026-01-01 12:00:00.000000"},
        )
        conn.execute(
            text(
                "INSERT INTO windows (query_id, window_start, window_end, deadline, expected_tuples, plan, status) "
                "SELECT id, :at, :at, :at, 10, '{}', 'planned' FROM queries"
            ),
            {"at": "2026-01-01 12:00:00.000000"},
        )
    assert migrate(ledger_db) == HEAD
    with session_scope(ledger_db) as s:
        assert [w.query.name for w in s.scalars(select(Window))] == ["q1"]
        with pytest.raises(IntegrityError), s.begin_nested():  # the foreign keys still hold
            s.add(Window(query_id=9, window_start=T0, window_end=T0, deadline=T0, expected_tuples=1, plan={}))
    command.downgrade(config, "0002")
    with session_scope(ledger_db) as s:  # no check: the old schema took any mode
        s.add(Query(name="q2", sql="SELECT 1", mode="partial_merge", params={}))


def test_url_from_env_converts_airflow_postgres_uris(ledger_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    airflow_uri = ledger_db.replace("postgresql+psycopg://", "postgres://")
    monkeypatch.setenv("AIRFLOW_CONN_IQP_DEFAULT", airflow_uri)
    assert ledger_url() == ledger_db
    with session_scope() as s:
        store.register_query(s, "q1", "SELECT 1", Mode.STATIC, {})
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
        store.register_query(writer, "q1", "SELECT 1", Mode.STATIC, {})
        waited = time.monotonic()
        with session_scope(url, read_only=True) as reader:  # the writer's BEGIN IMMEDIATE holds the lock
            assert reader.scalar(select(Query.name)) is None  # a snapshot before the writer commits
        assert time.monotonic() - waited < 5
    with session_scope(url, read_only=True) as reader:
        assert reader.scalar(select(Query.name)) == "q1"
