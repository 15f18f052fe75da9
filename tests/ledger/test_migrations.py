"""Ledgers written by earlier revisions upgrade in place, rows and all, on SQLite and PostgreSQL
(batch mode rebuilds tables on SQLite that others reference), and the store works on them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import bindparam, func, select, text
from sqlalchemy.exc import IntegrityError

from airflow_iqp.constants import ExecutionPath, FileStatus, JobKind, Mode, RequestState
from airflow_iqp.exceptions import AlreadyFrozen
from airflow_iqp.learning import WindowInput
from airflow_iqp.ledger import engine, migrate, session_scope, store
from airflow_iqp.ledger.models import Base, DispatchRequest, Query, StreamFile, UTCDateTime, Window
from airflow_iqp.planning.record import PlanRecord
from tests.ledger.helpers import T0, alembic_config, data_file

HEAD = "0010"
LONG_DAG_ID = "d" * 250


def _populate(url: str) -> None:
    """What a ledger at 0002 or 0003 holds after a few runs: two queries, a merged window and a
    running one with frozen files, cost observations, a resource and an open request."""
    times = {"at": T0, "later": T0 + timedelta(minutes=1)}
    statements = [
        "INSERT INTO queries (name, sql, mode, params, created_at) VALUES "
        "('q1', 'SELECT 1', 'static', '{}', :at), ('q6', 'SELECT 6', 'dynamic', '{}', :at)",
        "INSERT INTO windows (query_id, window_start, window_end, deadline, expected_tuples, plan, status, "
        "deadline_met, actual_tuples) SELECT id, :at, :later, :later, 10, '{}', 'merged', true, 10 "
        "FROM queries WHERE name = 'q1'",
        "INSERT INTO windows (query_id, window_start, window_end, deadline, expected_tuples, plan, status) "
        "SELECT id, :later, :later, :later, 10, '{}', 'running' FROM queries WHERE name = 'q1'",
        "INSERT INTO batches (window_id, batch_index, first_tuple, last_tuple, files, release, latest_start, "
        "planned_start, predicted_cost, attempts, status) SELECT id, 0, 1, 10, "
        """'{"lineitem": ["lineitem/0000.parquet"]}', :at, :at, :at, 1.0, 1, 'running' FROM windows""",
        "INSERT INTO cost_observations (query_id, path, kind, size, seconds, observed_at) "
        "SELECT id, 'spark_submit', 'partial', 10, 1.5, :at FROM queries",
        "INSERT INTO resources (id, holder_id, lease_expires, fence) VALUES (1, NULL, NULL, 3)",
        "INSERT INTO dispatch_requests (window_id, query, kind, slot, reason, deadline, remaining_cost, "
        "lease_seconds, state, registered_at) SELECT id, 'q1', 'partial', 0, 'planned', :later, 1.0, 30, "
        "'waiting', :at FROM windows WHERE status = 'running'",
    ]
    with engine(url).begin() as conn:
        for statement in statements:
            typed = [bindparam(name, type_=UTCDateTime()) for name in times if f":{name}" in statement]
            conn.execute(text(statement).bindparams(*typed), times)


@pytest.mark.parametrize("revision", ["0002", "0003"])
def test_a_populated_ledger_upgrades_and_the_store_works_on_it(ledger_db: str, revision: str) -> None:
    command.upgrade(alembic_config(ledger_db), revision)
    _populate(ledger_db)
    assert migrate(ledger_db) == HEAD
    with engine(ledger_db).connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
    later = T0 + timedelta(minutes=1)
    with session_scope(ledger_db) as s:
        assert sorted(s.execute(select(Query.dag_id, Query.name)).all()) == [("q1", "q1"), ("q6", "q6")]
        windows = s.scalars(select(Window).order_by(Window.window_start)).all()
        assert [(w.status, w.incomplete, w.late_files, w.run_id, w.result_uri) for w in windows] == [
            ("merged", False, 0, None, None),
            ("running", False, 0, None, None),
        ]
        # The store finds the old rows by dag_id (= the old name) and keeps working on them.
        q1 = store.register_query(s, dag_id="q1", name="q1", sql="SELECT 1", mode=Mode.STATIC, params={})
        assert q1 == windows[0].query_id
        assert store.window_id(s, "q1", later) == windows[1].id
        assert store.window_summary(s, windows[1].id).batches[0].files == {"lineitem": ["lineitem/0000.parquet"]}
        store.record_cost_observation(s, "q1", ExecutionPath.SPARK_CONNECT, JobKind.MERGE, 1, 0.5)
        assert [o.size for o in store.cost_observations(s, "q1", ExecutionPath.SPARK_SUBMIT)] == [10]
        store.record_result(s, windows[0].id, "s3://out/q1/0", 10, later)
        assert store.window_inputs(s, "q1") == [WindowInput(T0, later, 1, 10)]  # its old batch's file list counts
        start = later + timedelta(minutes=1)
        new = store.record_plan(s, "q1", start, start + timedelta(minutes=1), start, 1, PlanRecord(), [], run_id="r")
        store.add_dynamic_batch(s, new, 0, None, {"lineitem": [data_file("0000.parquet", "lineitem")]}, 1, 1, 1.0, T0)
    # What 0004 adds is enforced on the old rows too.
    with pytest.raises(IntegrityError), session_scope(ledger_db) as s:
        s.add(Query(dag_id="q1", name="again", sql="SELECT 1", mode="static", params={}))
    with session_scope(ledger_db) as s:
        waiting = s.scalars(select(DispatchRequest)).one().window_id
    with pytest.raises(IntegrityError, match="uq_dispatch_requests_open_window|UNIQUE constraint failed"):
        with session_scope(ledger_db) as s:
            s.add(
                DispatchRequest(
                    window_id=waiting,
                    query=LONG_DAG_ID,
                    kind=JobKind.PARTIAL,
                    slot=1,
                    reason="planned",
                    deadline=later,
                    remaining_cost=1.0,
                    lease_seconds=30.0,
                    state=RequestState.GRANTED,
                    registered_at=later,
                )
            )
    with pytest.raises(AlreadyFrozen), session_scope(ledger_db) as s:
        store.add_dynamic_batch(s, new, 1, None, {"lineitem": [data_file("0000.parquet", "lineitem")]}, 1, 1, 1.0, T0)
    with session_scope(ledger_db) as s:
        assert s.scalar(select(func.count()).where(StreamFile.status == FileStatus.FROZEN)) == 1


def test_the_mode_check_migrates_a_ledger_that_holds_rows(ledger_db: str) -> None:
    """0003 rebuilds `queries` on SQLite, which windows and cost observations reference."""
    config = alembic_config(ledger_db)
    command.upgrade(config, "0002")
    _populate(ledger_db)
    assert migrate(ledger_db) == HEAD
    with session_scope(ledger_db) as s:
        assert sorted(w.query.name for w in s.scalars(select(Window))) == ["q1", "q1"]
        with pytest.raises(IntegrityError), s.begin_nested():  # the foreign keys still hold
            s.add(Window(query_id=9, window_start=T0, window_end=T0, deadline=T0, expected_tuples=1, plan={}))
    command.downgrade(config, "0002")
    with engine(ledger_db).begin() as conn:  # no check: the old schema took any mode
        conn.execute(
            text("INSERT INTO queries (name, sql, mode, params, created_at) VALUES ('q2', 'x', 'other', '{}', :at)"),
            {"at": "2026-01-01 12:00:00.000000"},
        )


def test_0004_goes_down_and_up_again_with_its_rows(ledger_db: str) -> None:
    config = alembic_config(ledger_db)
    command.upgrade(config, "0003")
    _populate(ledger_db)
    migrate(ledger_db)
    with session_scope(ledger_db) as s:
        store.record_cost_observation(s, "q6", ExecutionPath.SPARK_CONNECT, JobKind.MERGE, 1, 0.5)
        window_id = store.record_plan(s, "q6", T0, T0, T0, 1, PlanRecord(), [])
        store.record_file_event(s, "q6", window_id, data_file("late.parquet"), FileStatus.LATE)
    command.downgrade(config, "0003")
    with engine(ledger_db).connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM cost_observations")).scalar() == 2  # spark_connect's went
        assert conn.execute(text("SELECT count(*) FROM windows")).scalar() == 3
    assert migrate(ledger_db) == HEAD
    with session_scope(ledger_db) as s:
        assert sorted(s.scalars(select(Query.dag_id))) == ["q1", "q6"]
        assert s.scalar(select(func.count()).select_from(StreamFile)) == 0
