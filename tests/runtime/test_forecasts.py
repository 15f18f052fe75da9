"""Keeping forecasts in the ledger: written for every open window, logged when one turns at risk
or back on track, the same the API computes, priced by the cost model the ledger stores (never
refit here), and a failure never stops the job that asked."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import TYPE_CHECKING

from sqlalchemy import select

from airflow_iqp.constants import ExecutionPath, JobKind, Policy, WindowStatus
from airflow_iqp.learning import Observation, fit_cost
from airflow_iqp.ledger import dispatch, session_scope, store
from airflow_iqp.ledger.models import DispatchRequest, Window
from airflow_iqp.runtime import forecasts
from airflow_iqp.settings import DispatchSettings
from tests.ui.seed import (
    GRACE,
    MERGE_COST,
    PLANNED_COSTS,
    SALES_DAG,
    SECRET_BATCH_COST,
    SECRET_DAG,
    WINDOW,
    Seeded,
)

if TYPE_CHECKING:
    import pytest

LOG = logging.getLogger("tests.runtime.forecasts")


def stored(seeded: Seeded) -> dict[int, tuple[str, object]]:
    with session_scope(seeded.url, read_only=True) as s:
        return {w.id: (w.status, w.predicted_finish) for w in s.scalars(select(Window))}


def test_refresh_keeps_every_open_windows_forecast_and_logs_the_ones_turning_at_risk(
    seeded: Seeded, caplog: pytest.LogCaptureFixture
) -> None:
    before = stored(seeded)
    with caplog.at_level(logging.INFO, logger=LOG.name), session_scope(seeded.url) as s:
        predicted = forecasts.refresh(s, Policy.EDF, 1, seeded.now, LOG)
    after = stored(seeded)
    assert set(predicted) == {seeded.at_risk, seeded.secret_running, seeded.secret_waiting}
    for window_id, at in predicted.items():
        assert after[window_id] == (WindowStatus.RUNNING if window_id == seeded.at_risk else "planned", at)
    for closed in (seeded.met, seeded.late):
        assert after[closed] == before[closed]
    # iqp_secret's long batch holds the resource since now - 10 s; iqp_sales' batch 1 and merge follow
    with session_scope(seeded.url, read_only=True) as s:
        granted = s.scalar(select(DispatchRequest.granted_at).where(DispatchRequest.window_id == seeded.secret_running))
    assert granted is not None
    frees = granted + timedelta(seconds=SECRET_BATCH_COST)
    assert predicted[seeded.at_risk] == frees + timedelta(seconds=PLANNED_COSTS[1] + MERGE_COST)
    # the secret window turned at risk (it had no forecast); iqp_sales' was late already: not logged again
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    secret_deadline = seeded.now - timedelta(seconds=650) + WINDOW + GRACE
    late_by = (predicted[seeded.secret_running] - secret_deadline).total_seconds()
    assert warnings == [
        f"IQP window {seeded.secret_running} of {SECRET_DAG} is at risk: predicted to finish at "
        f"{predicted[seeded.secret_running].isoformat()}, {late_by:.0f} s after its deadline "
        f"{secret_deadline.isoformat()}"
    ]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=LOG.name), session_scope(seeded.url) as s:
        assert forecasts.refresh(s, Policy.EDF, 1, seeded.now, LOG) == predicted
    assert caplog.records == []  # nothing moved: nothing written or said again


def test_a_window_back_on_track_is_logged(seeded: Seeded, caplog: pytest.LogCaptureFixture) -> None:
    with session_scope(seeded.url) as s:
        forecasts.refresh(s, Policy.EDF, 1, seeded.now, LOG)
        # iqp_secret's batch ends early after all: the resource frees now
        lease = dispatch.status(
            s, s.scalars(select(DispatchRequest.id).where(DispatchRequest.window_id == seeded.secret_running)).one()
        ).lease
        assert lease is not None
        store.start_batch(s, seeded.secret_running, 0, started_at=seeded.now - timedelta(seconds=9))
        store.finish_batch(
            s, seeded.secret_running, 0, seeded.now - timedelta(seconds=9), seeded.now, 6000, 9.0, "/out/secret/0"
        )
        dispatch.release(s, lease, seeded.now)
    with caplog.at_level(logging.INFO, logger=LOG.name), session_scope(seeded.url) as s:
        predicted = forecasts.refresh(s, Policy.EDF, 1, seeded.now, LOG)
    # iqp_secret's batch 1 has landed and has the earlier deadline: it goes first, then iqp_sales' batch and merge
    assert predicted[seeded.at_risk] == seeded.now + timedelta(seconds=2 * PLANNED_COSTS[1] + MERGE_COST)
    back = [r.getMessage() for r in caplog.records if "iqp_sales is back on track" in r.getMessage()]
    assert back == [
        f"IQP window {seeded.at_risk} of iqp_sales is back on track: predicted to finish at "
        f"{predicted[seeded.at_risk].isoformat()}, its deadline is "
        f"{(seeded.now - timedelta(seconds=640) + WINDOW + GRACE).isoformat()}"
    ]


def test_the_api_and_the_tasks_compute_the_same_forecasts(seeded: Seeded) -> None:
    with session_scope(seeded.url, read_only=True) as s:
        shown = forecasts.forecasts(s, Policy.EDF, 1, seeded.now)
    with session_scope(seeded.url) as s:
        kept = forecasts.refresh(s, Policy.EDF, 1, seeded.now, LOG)
    assert shown == kept


def test_the_stored_model_prices_the_forecast_not_a_refit(seeded: Seeded) -> None:
    """iqp_sales' merges of two partials took MERGE_COST each: a refit of its observations would
    price the open window's merge at that. The model the ledger stores says three times as much
    (as the task that ran the last job refit and stored it), and the forecast follows it.
    """
    with session_scope(seeded.url) as s:
        granted = s.scalar(select(DispatchRequest.granted_at).where(DispatchRequest.window_id == seeded.secret_running))
        assert granted is not None
        before = forecasts.refresh(s, Policy.EDF, 1, seeded.now, LOG)
        slower = fit_cost(
            [
                Observation(JobKind.PARTIAL, 4000, 21.0, seeded.now),
                Observation(JobKind.PARTIAL, 6000, 29.0, seeded.now),
                Observation(JobKind.MERGE, 2, 3 * MERGE_COST, seeded.now),
            ],
            ExecutionPath.SPARK_SUBMIT,
        )
        store.save_cost_model(s, SALES_DAG, ExecutionPath.SPARK_SUBMIT, slower.to_dict(), slower.source)
        after = forecasts.refresh(s, Policy.EDF, 1, seeded.now, LOG)
    frees = granted + timedelta(seconds=SECRET_BATCH_COST)
    assert before[seeded.at_risk] == frees + timedelta(seconds=PLANNED_COSTS[1] + MERGE_COST)
    assert after[seeded.at_risk] == frees + timedelta(seconds=PLANNED_COSTS[1] + 3 * MERGE_COST)
    assert after[seeded.secret_running] == before[seeded.secret_running], "another DAG's model is its own"


def test_a_forecast_that_fails_never_stops_the_job(
    seeded: Seeded, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_IQP_DEFAULT", "postgresql://iqp@127.0.0.1:1/ledger")  # nothing listens there
    with caplog.at_level(logging.ERROR, logger=LOG.name):
        forecasts.keep(DispatchSettings(Policy.EDF, 1, lease_seconds=5), LOG)
    (record,) = caplog.records
    assert record.getMessage() == "could not refresh the IQP windows' forecasts; the job goes on"
    assert record.exc_info is not None
