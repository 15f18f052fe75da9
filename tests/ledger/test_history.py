"""What the ledger gives the learner, on SQLite and PostgreSQL: observations newest first and
limited per kind, fitted cost models per path, and the input of finished windows."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from airflow_iqp.constants import BatchReason, CostSource, ExecutionPath, JobKind
from airflow_iqp.exceptions import LedgerLookupError
from airflow_iqp.learning import LearnedCost, Observation, WindowInput, fit_cost, learned_rate
from airflow_iqp.learning.cost import RECENT
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.ledger.models import CostModel
from tests.ledger.helpers import DAG, T0, data_file, planned_window

CONNECT = ExecutionPath.SPARK_CONNECT


def _observe(url: str, jobs: list[tuple[JobKind, int, float]], path: ExecutionPath = CONNECT, dag: str = DAG) -> None:
    with session_scope(url) as s:
        for i, (kind, size, seconds) in enumerate(jobs):
            store.record_cost_observation(s, dag, path, kind, size, seconds, observed_at=T0 + timedelta(seconds=i))


def test_observations_come_newest_first_limited_per_kind(ledger_db: str) -> None:
    planned_window(ledger_db)
    planned_window(ledger_db, "iqp_other")
    jobs = [(JobKind.PARTIAL, 1000 * (i % 4 + 1), 1.0 + i) for i in range(12)] + [(JobKind.MERGE, 3, 2.0)] * 3
    _observe(ledger_db, jobs)
    _observe(ledger_db, [(JobKind.PARTIAL, 5, 9.0)], path=ExecutionPath.SPARK_SUBMIT)
    _observe(ledger_db, [(JobKind.MERGE, 1, 9.0)], dag="iqp_other")
    with session_scope(ledger_db, read_only=True) as s:
        limited = store.cost_observations(s, DAG, CONNECT, limit=5)
        everything = store.cost_observations(s, DAG, CONNECT)
    assert [(o.kind, o.seconds) for o in limited] == [(JobKind.MERGE, 2.0)] * 3 + [
        (JobKind.PARTIAL, 12.0 - i) for i in range(5)
    ]
    assert [o.observed_at for o in limited] == sorted((o.observed_at for o in limited), reverse=True)
    assert len(everything) == 15 <= 2 * RECENT
    assert all(isinstance(o, Observation) for o in everything)
    model = fit_cost(everything, CONNECT)
    assert (model.path, model.partial_spread.count, model.merge_spread.count) == (CONNECT, 12, 3)


def test_cost_models_are_stored_per_path_and_the_newest_one_counts(ledger_db: str) -> None:
    planned_window(ledger_db)
    _observe(ledger_db, [(JobKind.PARTIAL, 100, 1.0), (JobKind.PARTIAL, 1000, 3.0), (JobKind.MERGE, 2, 1.5)])
    with session_scope(ledger_db) as s:
        assert store.latest_cost_model(s, DAG, CONNECT) is None
        first = fit_cost(store.cost_observations(s, DAG, CONNECT), CONNECT)
        store.save_cost_model(s, DAG, CONNECT, first.to_dict(), first.source, fitted_at=T0)
        later = first.with_margin(k=1)
        store.save_cost_model(s, DAG, CONNECT, later.to_dict(), CostSource.REFIT, fitted_at=T0 + timedelta(hours=1))
        store.save_cost_model(
            s, DAG, ExecutionPath.SPARK_SUBMIT, {"partial": [[1, 1.0]]}, "file", fitted_at=T0 + timedelta(hours=2)
        )
    with session_scope(ledger_db, read_only=True) as s:
        document = store.latest_cost_model(s, DAG, CONNECT)
        assert document is not None
        assert LearnedCost.from_dict(document) == later
        assert store.latest_cost_model(s, DAG, ExecutionPath.IN_PROCESS) is None
        stored = {(m.path, m.source, m.observations) for m in s.scalars(select(CostModel))}
    assert stored == {
        (CONNECT, "calibration", 3),
        (CONNECT, "refit", 3),
        (ExecutionPath.SPARK_SUBMIT, "file", 0),  # a model file's document need not count observations
    }
    with pytest.raises(ValueError, match="'fitted' is not a valid CostSource"), session_scope(ledger_db) as s:
        store.save_cost_model(s, DAG, CONNECT, first.to_dict(), "fitted")
    with pytest.raises(IntegrityError, match="ck_cost_models_path"), session_scope(ledger_db) as s:
        s.add(CostModel(query_id=1, path="yarn", observations=0, source="file", document={}))
    with pytest.raises(LedgerLookupError, match="no query of DAG 'nope'"), session_scope(ledger_db) as s:
        store.latest_cost_model(s, "nope", CONNECT)


def _merged_window(url: str, minute: int, files: dict[str, list[str]], rows: int | None) -> int:
    """A window of the DAG whose one batch froze `files` (stream -> names) and then merged."""
    start = T0 + timedelta(minutes=minute)
    window_id = planned_window(url, start=start, ranges=((1, 1),))
    listed = {stream: [data_file(f"{minute}-{n}", stream) for n in names] for stream, names in files.items()}
    with session_scope(url) as s:
        store.freeze_files(s, window_id, 0, listed)
        store.record_merge(s, window_id, start + timedelta(seconds=11), rows, "/data/iqp/result")
    return window_id


def test_window_inputs_count_processed_units_and_rows_of_merged_windows(ledger_db: str) -> None:
    old = _merged_window(ledger_db, 0, {"orders": ["a"]}, 100)
    joined = _merged_window(ledger_db, 1, {"orders": ["a", "b", "c"], "lineitem": ["a", "b", "c"]}, 900)
    _merged_window(ledger_db, 2, {"orders": []}, 0)  # an empty window
    _merged_window(ledger_db, 3, {"orders": ["a"]}, None)  # merged without a row count: left out
    planned_window(ledger_db, start=T0 + timedelta(minutes=4))  # still running: left out
    with session_scope(ledger_db) as s:
        store.quarantine_file(s, joined, 0, "lineitem", data_file("1-c", "lineitem").uri)
        store.quarantine_file(s, joined, 0, "orders", data_file("1-c", "orders").uri)
        late = store.add_dynamic_batch(
            s, old, 5, BatchReason.MIN_BATCH, {"orders": [data_file("0-late", "orders")]}, 0, 0, 0.0, T0
        )
        store.record_result(s, old, "s3://out/0/v2", 150, T0 + timedelta(minutes=9))
    assert late == 1
    with session_scope(ledger_db, read_only=True) as s:
        inputs = store.window_inputs(s, DAG)
        newest_two = store.window_inputs(s, DAG, limit=2)
    end = timedelta(seconds=10)
    assert inputs == [
        WindowInput(T0 + timedelta(minutes=2), T0 + timedelta(minutes=2) + end, 0, 0),
        WindowInput(T0 + timedelta(minutes=1), T0 + timedelta(minutes=1) + end, 2, 900),
        WindowInput(T0, T0 + end, 2, 150),  # the late file re-merged counts, as do its rows
    ]
    assert newest_two == inputs[:2]
    rate = learned_rate(inputs)
    assert rate is not None
    assert rate.files_per_second == pytest.approx(4 / 30)


def test_every_source_the_learner_gives_may_be_stored() -> None:
    assert {s.value for s in CostSource} | {"file"} == {s.value for s in CostSource}
