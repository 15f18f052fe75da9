"""The cost model and rate a window is planned with: a fitted file's or a declared one as given,
or learned from the DAG's own jobs and windows in a real SQLite ledger, from the packaged model
of a packaged query as its prior."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
from sqlalchemy import delete, func, select

from airflow_iqp.constants import CostSource, ExecutionPath, JobKind, Mode
from airflow_iqp.declaration import EXAMPLE_COST_MODELS, LEARN, ArrivalRate, declare
from airflow_iqp.learning import LearnedCost
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.ledger.models import CostModel, CostObservation
from airflow_iqp.planning.cost_model_file import FittedCostModel, load_cost_model
from airflow_iqp.planning.record import PlanRecord
from airflow_iqp.queries import EXAMPLE_QUERIES
from airflow_iqp.runtime.costs import (
    MARGIN_K,
    expected_model,
    measures_intercept,
    observe,
    planning_margin,
    planning_model,
    planning_rate,
    prior_model,
)
from airflow_iqp.streams.files import DataFile
from airflow_iqp.streams.spec import FileStream

if TYPE_CHECKING:
    from pathlib import Path

    from sqlalchemy.orm import Session

    from airflow_iqp.declaration import Declaration

PATH = ExecutionPath.SPARK_SUBMIT
DAG_ID = "iqp_q6"
WINDOW = timedelta(minutes=10)
T0 = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
MODEL = {
    "query": "q6",
    "paths": {
        "spark_submit": {"partial": {"points": [[430, 6.5], [17200, 26.0]]}, "merge": {"points": [[1, 5.0], [8, 6.0]]}}
    },
}


def declaration(tmp_path: Path, **overrides: Any) -> Declaration:
    model = tmp_path / "q6.json"
    model.write_text(json.dumps(MODEL))
    arguments: dict[str, Any] = {
        "dag_id": DAG_ID,
        "query": "q6",
        "window": WINDOW,
        "deadline": WINDOW,
        "streams": {"lineitem": FileStream("/data/lineitem")},
        "output": "/results/{dag_id}/{window_start}",
        "rate": LEARN,
        "cost_model": LEARN,
        "base_dir": tmp_path,
    }
    return declare(**(arguments | overrides))


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with session_scope(url) as s:
        store.register_query(s, dag_id=DAG_ID, name="q6", sql="SELECT 1", mode=Mode.STATIC, params={})
    return url


def own_query(tmp_path: Path) -> str:
    """Q6 as a user's own query file: no packaged model is its prior."""
    (tmp_path / "q6.sql").write_text((EXAMPLE_QUERIES / "q6.sql").read_text())
    return "q6.sql"


def test_a_packaged_query_plans_with_its_prior_until_its_first_jobs_refit_it(tmp_path: Path, url: str) -> None:
    learning = declaration(tmp_path)
    with session_scope(url) as s:
        before = planning_model(s, learning, PATH)
        assert isinstance(before, FittedCostModel)
        assert before.partial.points == prior_model(learning, PATH).partial.points  # type: ignore[union-attr]
        observe(s, learning, PATH, JobKind.PARTIAL, 4300, 13.0)
        observe(s, learning, PATH, JobKind.MERGE, 1, 2.0)
        assert isinstance(planning_model(s, learning, PATH), LearnedCost)


def test_a_dynamic_window_measures_the_intercept_while_the_partials_have_one_size(tmp_path: Path, url: str) -> None:
    learning, fitted = declaration(tmp_path), declaration(tmp_path, cost_model=str(tmp_path / "q6.json"))
    with session_scope(url) as s:
        assert measures_intercept(s, learning, PATH)  # no job yet: the intercept is the prior's
        assert not measures_intercept(s, fitted, PATH)  # a fitted file learns nothing
        for rows in (40_000, 41_000, 39_500):
            observe(s, learning, PATH, JobKind.PARTIAL, rows, 20.0)
        assert measures_intercept(s, learning, PATH)  # same-size batches: still the prior's
        observe(s, learning, PATH, JobKind.PARTIAL, 4_300, 8.0)
        assert not measures_intercept(s, learning, PATH)  # two sizes: the fit learns its own


def test_a_learning_dag_has_no_model_until_its_calibration_ran(tmp_path: Path, url: str) -> None:
    learning = declaration(tmp_path, query=own_query(tmp_path))
    with session_scope(url) as s:
        assert planning_model(s, learning, PATH) is None
        assert observe(s, learning, PATH, JobKind.PARTIAL, 4300, 13.0) is None  # one partial size
        assert planning_model(s, learning, PATH) is None
        assert observe(s, learning, PATH, JobKind.PARTIAL, 43000, 31.0) is None  # two sizes, no merge yet
        assert planning_model(s, learning, PATH) is None
        fitted = observe(s, learning, PATH, JobKind.MERGE, 2, 9.0)
    assert isinstance(fitted, LearnedCost)
    assert fitted.source is CostSource.CALIBRATION
    assert fitted.partial.cost(4300) == pytest.approx(13.0)
    assert fitted.partial.cost(43000) == pytest.approx(31.0)
    assert fitted.merge.cost(2) == pytest.approx(9.0)
    with session_scope(url) as s:
        planned = planning_model(s, learning, PATH)
    assert isinstance(planned, LearnedCost)
    assert planned.partial.points == fitted.partial.points
    assert planned.merge.points == fitted.merge.points


def test_every_job_refits_and_the_next_plan_uses_the_newest_model(tmp_path: Path, url: str) -> None:
    learning = declaration(tmp_path)
    with session_scope(url) as s:
        for rows, seconds in ((4300, 13.0), (43000, 31.0)):
            observe(s, learning, PATH, JobKind.PARTIAL, rows, seconds)
        observe(s, learning, PATH, JobKind.MERGE, 2, 9.0)
        first = planning_model(s, learning, PATH)
        observe(s, learning, PATH, JobKind.PARTIAL, 43000, 41.0)  # the machine got slower
        second = planning_model(s, learning, PATH)
    assert first is not None
    assert second is not None
    assert second.partial.cost(43000) > first.partial.cost(43000)


def test_a_refit_follows_once_there_are_enough_observations(tmp_path: Path, url: str) -> None:
    learning = declaration(tmp_path)
    with session_scope(url) as s:
        for i in range(6):
            observe(s, learning, PATH, JobKind.PARTIAL, 1000 * (i + 1), 5.0 + i)
        for _ in range(2):
            observe(s, learning, PATH, JobKind.MERGE, 2, 9.0)
        calibration = planning_model(s, learning, PATH)
        refit = observe(s, learning, PATH, JobKind.MERGE, 3, 9.5)
    assert isinstance(calibration, LearnedCost)
    assert calibration.source is CostSource.CALIBRATION
    assert refit is not None
    assert refit.source is CostSource.REFIT


def test_each_execution_path_learns_its_own_model(tmp_path: Path, url: str) -> None:
    learning = declaration(tmp_path, query=own_query(tmp_path))
    with session_scope(url) as s:
        for rows, seconds in ((4300, 2.0), (43000, 5.0)):
            observe(s, learning, ExecutionPath.IN_PROCESS, JobKind.PARTIAL, rows, seconds)
        observe(s, learning, ExecutionPath.IN_PROCESS, JobKind.MERGE, 2, 1.0)
        assert planning_model(s, learning, ExecutionPath.IN_PROCESS) is not None
        assert planning_model(s, learning, PATH) is None


def test_a_fitted_file_is_planned_with_never_refit_and_stored_once_as_it_is(tmp_path: Path, url: str) -> None:
    fitted = declaration(tmp_path, cost_model="q6.json")
    with session_scope(url) as s:
        model = planning_model(s, fitted, PATH)
        assert isinstance(model, FittedCostModel)
        assert model.partial.points == ((430.0, 6.5), (17200.0, 26.0))
        for rows, seconds in ((4300, 13.0), (43000, 31.0)):
            assert observe(s, fitted, PATH, JobKind.PARTIAL, rows, seconds) is None
        assert observe(s, fitted, PATH, JobKind.MERGE, 2, 9.0) is None
        stored = store.latest_cost_model(s, DAG_ID, PATH)
        assert len(store.cost_observations(s, DAG_ID, PATH)) == 3  # observed all the same: predicted vs actual
        assert isinstance(planning_model(s, fitted, PATH), FittedCostModel)
        assert s.scalar(select(func.count()).select_from(CostModel)) == 1  # stored once, not per job
    # what the monitor and the forecasts read: the file's model, with no spread of its own
    assert stored is not None
    as_stored = LearnedCost.from_dict(stored)
    assert as_stored.source is CostSource.FILE
    assert as_stored.partial.points == model.partial.points
    assert as_stored.merge.points == model.merge.points
    assert as_stored.interval(JobKind.PARTIAL, 4300) == (model.partial.cost(4300),) * 2


def merged_window(session: Session, start: datetime, files: int, rows: int) -> None:
    """A window of the DAG whose one batch froze `files` files and whose merge read `rows` rows."""
    batch = {
        "index": 0,
        "first_tuple": 1,
        "last_tuple": files,
        "release": start,
        "latest_start": start,
        "planned_start": start,
        "predicted_cost": 1.0,
    }
    window_id = store.record_plan(
        session, DAG_ID, start, start + WINDOW, start + 2 * WINDOW, rows, PlanRecord(), [batch]
    )
    listed = [
        DataFile("lineitem", f"file:///data/lineitem/{start:%H%M}-{i}.parquet", f"{start:%H%M}-{i}.parquet", 1, start)
        for i in range(files)
    ]
    store.freeze_files(session, window_id, 0, {"lineitem": listed})
    store.start_batch(session, window_id, 0)
    store.finish_batch(session, window_id, 0, start, start, rows, 1.0, "/data/iqp/batch")
    store.record_merge(session, window_id, start + WINDOW, rows, "/data/iqp/result")


def test_a_learned_rate_comes_from_the_last_merged_windows(tmp_path: Path, url: str) -> None:
    learning = declaration(tmp_path)
    with session_scope(url) as s:
        assert planning_rate(s, learning) is None  # no history: one batch once the input is final
        merged_window(s, T0, files=60, rows=60_000)
        merged_window(s, T0 + WINDOW, files=120, rows=60_000)
        rate = planning_rate(s, learning)
    assert rate == ArrivalRate(files_per_second=180 / 1200, rows_per_file=120_000 / 180)


def test_a_declared_rate_is_used_as_given(tmp_path: Path, url: str) -> None:
    declared = ArrivalRate(files_per_second=2, rows_per_file=430)
    with session_scope(url) as s:
        merged_window(s, T0, files=60, rows=60_000)
        assert planning_rate(s, declaration(tmp_path, rate=declared)) == declared


def test_a_refit_model_is_planned_with_its_margin_and_a_calibration_without(tmp_path: Path, url: str) -> None:
    """Noisy timings: the plan's model is the stored one times 1 + mean + 2 std of its own
    relative residuals, per kind, so it is slower than the fit everywhere; what it costs shows
    as the ratio of the two.
    """
    learning = declaration(tmp_path)
    with session_scope(url) as s:
        for rows, seconds in ((4300, 13.0), (43000, 31.0)):
            observe(s, learning, PATH, JobKind.PARTIAL, rows, seconds)
        observe(s, learning, PATH, JobKind.MERGE, 2, 9.0)
        calibration = planning_model(s, learning, PATH)
        stored = LearnedCost.from_dict(store.latest_cost_model(s, DAG_ID, PATH) or {})
        assert stored.source is CostSource.CALIBRATION
        assert calibration == stored  # two timings on a line: no spread to trust yet
        assert planning_margin(s, learning, PATH) is None
        for i, seconds in enumerate((14.0, 16.5, 12.0, 30.0, 35.0, 27.0)):
            observe(s, learning, PATH, JobKind.PARTIAL, 4300 * (1 + 3 * (i % 3)), seconds)
        for partials, seconds in ((2, 9.5), (3, 8.0), (4, 11.0)):
            observe(s, learning, PATH, JobKind.MERGE, partials, seconds)
        planned = planning_model(s, learning, PATH)
        margin = planning_margin(s, learning, PATH)
        fitted = LearnedCost.from_dict(store.latest_cost_model(s, DAG_ID, PATH) or {})
        expected = expected_model(s, learning, PATH)
    assert fitted.source is CostSource.REFIT
    assert expected == fitted  # what a job is expected to take: the margin is the plan's alone
    assert isinstance(planned, LearnedCost)
    partial = 1 + fitted.partial_spread.margin(k=MARGIN_K)
    merge = 1 + fitted.merge_spread.margin(k=MARGIN_K)
    assert partial > 1
    assert merge > 1
    assert margin == {"k": MARGIN_K, "partial": pytest.approx(partial - 1), "merge": pytest.approx(merge - 1)}
    for rows in (4300, 17200, 43000):
        assert planned.partial.cost(rows) == pytest.approx(fitted.partial.cost(rows) * partial)
    assert planned.merge.cost(3) == pytest.approx(fitted.merge.cost(3) * merge)


def test_a_packaged_query_learns_from_its_packaged_model(tmp_path: Path) -> None:
    prior = prior_model(declaration(tmp_path), ExecutionPath.SPARK_CONNECT)
    packaged = load_cost_model(EXAMPLE_COST_MODELS / "q6.json", ExecutionPath.SPARK_CONNECT)
    assert prior is not None
    assert (prior.partial, prior.merge) == (packaged.partial, packaged.merge)


def test_a_query_file_of_the_users_has_no_prior(tmp_path: Path) -> None:
    (tmp_path / "q6.sql").write_text((EXAMPLE_QUERIES / "q6.sql").read_text())
    assert prior_model(declaration(tmp_path, query="q6.sql"), PATH) is None


def test_the_plan_keeps_the_prior_slope_from_same_size_batches(tmp_path: Path, url: str) -> None:
    """Issue 22 through the ledger: after the calibration, six batches of about 40k rows at 0.8 x
    the packaged model. The plan's model at 200k rows follows the packaged model's slope; the
    same timings of a query file with no prior extrapolate at most proportionally."""
    packaged = load_cost_model(EXAMPLE_COST_MODELS / "q6.json", PATH)
    user = tmp_path / "mine"
    user.mkdir()
    (user / "q6.sql").write_text((EXAMPLE_QUERIES / "q6.sql").read_text())
    learning = declaration(tmp_path)
    models = {}
    for name, decl in (("packaged", learning), ("user", declaration(user, query="q6.sql"))):
        with session_scope(url) as s:
            s.execute(delete(CostObservation))
            for rows in (4_000, 40_000, 40_500, 39_600, 40_900, 39_800, 40_200, 40_700):
                observe(s, decl, PATH, JobKind.PARTIAL, rows, 0.8 * packaged.partial.cost(rows))
            for partials in (2, 3, 3):
                observe(s, decl, PATH, JobKind.MERGE, partials, 0.8 * packaged.merge.cost(partials))
            models[name] = planning_model(s, decl, PATH)
    learned = models["packaged"]
    assert isinstance(learned, LearnedCost)
    assert learned.source is CostSource.REFIT
    assert learned.partial.cost(200_000) == pytest.approx(0.8 * packaged.partial.cost(200_000), rel=0.05)
    assert models["user"] is not None
    assert models["user"].partial.cost(200_000) <= 5 * models["user"].partial.cost(40_900) * 1.001
