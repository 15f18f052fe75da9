"""Forecasts from hand-made ledger rows: what a window has left, priced by its plan or by the
learned model with its margin, run behind the resource's holder and the queue in policy order."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from airflow_iqp.constants import (
    BatchStatus,
    CostSource,
    ExecutionPath,
    JobKind,
    Mode,
    Policy,
    RequestState,
    WindowStatus,
)
from airflow_iqp.dynamic.estimate import expected_time_of
from airflow_iqp.learning.cost import LearnedCost, Observation, fit_cost
from airflow_iqp.planning.record import MinBatchPlan, PlanRecord
from airflow_iqp.ui import risk, views
from airflow_iqp.ui.models import Outcome
from airflow_iqp.ui.read import ResourceRow, WindowRow
from tests.ui.rows import DAG, T0, at, batch, done, merged, request, window

OTHER = "iqp_other"
BACKFILLED = "iqp_backfilled"
ROWS_PER_FILE = 100


def forecast(
    windows: list[WindowRow],
    now: datetime,
    *,
    holder: int | None = None,
    resources: int = 1,
    policy: Policy = Policy.EDF,
    models: dict[str, LearnedCost | None] | None = None,
    lease_expires: datetime | None = None,
) -> dict[int, datetime]:
    held = [ResourceRow(0, holder, lease_expires or now + timedelta(minutes=5), 1)] if holder else []
    return risk.forecasts(windows, held, resources, models or {}, policy, {}, now)


def refit_model() -> LearnedCost:
    """5 s + rows / 250 per partial and 30 s per merge, with +-10% noise: a refit with a spread."""
    noise = [1.1, 0.9, 1.05, 0.95, 1.0, 1.1, 0.9, 1.0]
    partials = [
        Observation(JobKind.PARTIAL, size, (5 + size / 250) * noise[i], at(i))
        for i, size in enumerate([1000, 2000, 3000, 4000, 5000, 6000, 1000, 3000])
    ]
    merges = [Observation(JobKind.MERGE, 2, 30 * f, at(20 + i)) for i, f in enumerate([1.1, 0.9, 1.0])]
    model = fit_cost([*partials, *merges], ExecutionPath.SPARK_SUBMIT)
    assert model.source is CostSource.REFIT
    assert model.partial_spread.p90 > 0
    return model


def test_a_window_alone_runs_its_plan_after_each_release() -> None:
    # batch 0 done; batch 1 (20 s) released at 150 s; then the merge (30 s)
    w = window(batches=(done(0, 60, 25.0), batch(1)))
    assert forecast([w], at(100)) == {1: at(150 + 20 + 30)}
    assert forecast([w], at(400)) == {1: at(400 + 20 + 30)}  # released long ago: from now


def test_the_learned_model_prices_with_its_residual_margin() -> None:
    model = refit_model()
    w = window(plan=PlanRecord(rows_per_file=ROWS_PER_FILE, merge_cost=30.0))
    w = replace(w, batches=(done(0, 60, 25.0), batch(1)))  # batch 1: files 10..19, 1000 rows
    careful = risk.pessimistic(model)
    assert careful is not None
    expected = 150 + careful.partial_seconds(1000) + careful.merge_seconds(2)
    assert forecast([w], at(100), models={DAG: model}) == {1: at(expected)}
    assert expected > 150 + model.partial_seconds(1000) + model.merge_seconds(2)  # the margin adds time
    # a calibration's spread means nothing yet: used as it is
    calibration = replace(model, source=CostSource.CALIBRATION)
    assert risk.pessimistic(calibration) is calibration


def test_without_rows_per_file_the_plan_prices_even_with_a_model() -> None:
    w = window(batches=(done(0, 60, 25.0), batch(1)))  # the plan counts files but says no rows_per_file
    model = refit_model()
    careful = risk.pessimistic(model)
    assert careful is not None
    # the batch by its plan (20 s); the merge, sized in partials, by the model
    assert forecast([w], at(100), models={DAG: model}) == {1: at(150 + 20 + careful.merge_seconds(2))}


def test_a_batch_that_overruns_moves_the_forecast_with_the_clock() -> None:
    running = batch(1, status=BatchStatus.RUNNING, actual_start=at(150), attempts=1)  # predicted 20 s
    w = window(batches=(done(0, 60, 25.0), running))
    assert forecast([w], at(160)) == {1: at(150 + 20 + 30)}  # on time so far
    assert forecast([w], at(800)) == {1: at(800 + 30)}  # 650 s over: it ends now at the soonest
    assert forecast([w], at(880)) == {1: at(880 + 30)}  # past the deadline (900) while still running


def test_a_granted_merge_runs_from_its_grant() -> None:
    merge = request(5, JobKind.MERGE, -1, RequestState.GRANTED, granted_at=at(700), resource_id=0)
    w = window(batches=(done(0, 60, 25.0), done(1, 600, 20.0)), requests=(merge,))
    assert forecast([w], at(710), holder=5) == {1: at(730)}


def test_a_granted_batch_not_started_yet_runs_from_its_grant() -> None:
    granted = request(5, slot=1, state=RequestState.GRANTED, granted_at=at(200), resource_id=0)
    w = window(batches=(done(0, 60, 25.0), batch(1)), requests=(granted,))
    assert forecast([w], at(205), holder=5) == {1: at(200 + 20 + 30)}


def holding_other(deadline: float, batch_cost: float, granted: float) -> WindowRow:
    """Another DAG's window whose batch holds the one resource since `granted` s."""
    holder = request(
        50, slot=0, state=RequestState.GRANTED, granted_at=at(granted), resource_id=0, dag_id=OTHER, window_id=2
    )
    return window(
        id=2,
        dag_id=OTHER,
        deadline=at(deadline),
        batches=(batch(0, predicted_cost=batch_cost, release=at(0)), batch(1)),
        requests=(holder,),
    )


def waiting_other(deadline: float) -> WindowRow:
    """Another DAG's window whose batch (40 s) waits for the resource."""
    waiting = request(60, slot=0, deadline=at(deadline), registered_at=at(150), dag_id=OTHER, window_id=3)
    return window(
        id=3,
        dag_id=OTHER,
        deadline=at(deadline),
        batches=(batch(0, predicted_cost=40.0, release=at(0)), batch(1)),
        requests=(waiting,),
    )


def test_the_holder_and_the_queue_ahead_delay_the_window() -> None:
    mine = window(
        batches=(done(0, 60, 25.0), batch(1)),
        requests=(request(7, slot=1, registered_at=at(160), deadline=at(900)),),
    )
    holder = holding_other(950, batch_cost=300.0, granted=100)  # frees at 400 s
    earlier, later = waiting_other(800), waiting_other(1000)
    # EDF: a waiting batch with an earlier deadline goes first (40 s), one with a later deadline after
    assert forecast([mine, holder, earlier], at(200), holder=50)[1] == at(400 + 40 + 20 + 30)
    assert forecast([mine, holder, later], at(200), holder=50)[1] == at(400 + 20 + 30)
    # SJF: the shorter remaining work first; ours reported 50 s, theirs 50 s too: the earlier registration
    assert forecast([mine, holder, later], at(200), holder=50, policy=Policy.SJF)[1] == at(400 + 40 + 20 + 30)
    # a second resource: the batch ahead runs there at once, then ours, not after the holder
    assert forecast([mine, holder, earlier], at(200), holder=50, resources=2)[1] == at(200 + 40 + 20 + 30)


def test_a_window_with_nothing_queued_is_ranked_as_if_it_queued_now() -> None:
    mine = window(batches=(done(0, 60, 25.0), batch(1, release=at(250))))  # its batch lands at 250 s
    holder = holding_other(950, batch_cost=300.0, granted=100)
    assert forecast([mine, holder, waiting_other(800)], at(200), holder=50)[1] == at(400 + 40 + 20 + 30)
    assert forecast([mine, holder, waiting_other(1000)], at(200), holder=50)[1] == at(400 + 20 + 30)


def test_another_windows_landed_batch_counts_as_queued() -> None:
    mine = window(batches=(done(0, 60, 25.0), batch(1)), requests=(request(7, slot=1, registered_at=at(160)),))
    landed = window(id=2, dag_id=OTHER, deadline=at(850), batches=(batch(0, predicted_cost=40.0, release=at(100)),))
    assert forecast([mine, landed], at(200))[1] == at(200 + 40 + 20 + 30)  # its task queues it any moment
    coming = replace(landed, batches=(batch(0, predicted_cost=40.0, release=at(300)),))
    assert forecast([mine, coming], at(200))[1] == at(200 + 20 + 30)  # not foreseen before it lands


def test_another_windows_merge_all_partials_done_counts_as_queued_now() -> None:
    # its partials are done and no request is open: its merge (released at -inf) queues now
    mine = window(batches=(done(0, 60, 25.0), batch(1)), requests=(request(7, slot=1, registered_at=at(160)),))
    merging = window(id=2, dag_id=OTHER, deadline=at(210), batches=(done(0, 60, 25.0),))
    assert forecast([mine, merging], at(200))[1] == at(200 + 30 + 20 + 30)  # its merge ranks first (EDF)


def test_an_expired_lease_frees_its_resource() -> None:
    mine = window(batches=(done(0, 60, 25.0), batch(1)))
    holder = holding_other(950, batch_cost=300.0, granted=100)
    assert forecast([mine, holder], at(200), holder=50, lease_expires=at(190))[1] == at(200 + 20 + 30)


def dynamic(**changes: object) -> WindowRow:
    plan = PlanRecord(
        mode=Mode.DYNAMIC,
        rows_per_file=ROWS_PER_FILE,
        expected_files=10,
        merge_cost=30.0,
        dynamic=MinBatchPlan(alpha=0.5, tau_max=20.0, min_batch=4, max_batch=8, cost_ratio=1.2, slots=6),
    )
    return window(**({"plan": plan, "batches": ()} | changes))


def test_dynamic_files_not_cut_yet_come_in_min_batches_as_they_land() -> None:
    model = refit_model()
    careful = risk.pessimistic(model)
    assert careful is not None
    b = risk.backlog(dynamic(), careful, at(10).timestamp())
    assert b is not None
    start, end = T0.timestamp(), at(600).timestamp()
    assert [j.release for j in b.jobs[:-1]] == [
        expected_time_of(4, 10, start, end),
        expected_time_of(8, 10, start, end),
        end,
    ]
    assert [j.seconds for j in b.jobs] == [
        careful.partial_seconds(400),
        careful.partial_seconds(400),
        careful.partial_seconds(200),
        careful.merge_seconds(3),
    ]


def test_dynamic_without_a_model_splits_the_work_its_request_reported() -> None:
    assert risk.backlog(dynamic(), None, at(10).timestamp()) is None  # nothing to price it by
    cut = batch(0, status=BatchStatus.DONE, first_tuple=1, last_tuple=4, slot=0, actual_cost=20.0)
    asking = request(3, slot=1, remaining_cost=90.0)  # 60 s of batches and the 30 s merge
    b = risk.backlog(dynamic(batches=(cut,), requests=(asking,)), None, at(300).timestamp())
    assert b is not None
    assert [j.seconds for j in b.jobs] == [40.0, 20.0, 30.0]  # 6 files left: 4 and 2


def test_a_dynamic_window_that_ended_has_only_what_a_slot_asks_for() -> None:
    cut = batch(0, status=BatchStatus.DONE, first_tuple=1, last_tuple=4, slot=0, actual_cost=20.0)
    ended = risk.backlog(dynamic(batches=(cut,)), refit_model(), at(700).timestamp())
    assert ended is not None
    assert [j.seconds for j in ended.jobs] == [refit_model().merge_seconds(1)]  # fewer files came: the merge


def test_applied_replaces_the_predicted_finish_of_open_windows_only() -> None:
    w = window(predicted_finish=at(700))
    assert risk.applied(w, {1: at(950)}).predicted_finish == at(950)
    assert risk.applied(w, {}).predicted_finish == at(700)
    closed = merged(700)
    assert risk.applied(closed, {1: at(950)}) is closed


@pytest.mark.parametrize(("holder_cost", "outcome"), [(100.0, Outcome.ON_TRACK), (800.0, Outcome.AT_RISK)])
def test_a_long_job_ahead_puts_the_window_at_risk_before_its_deadline(holder_cost: float, outcome: Outcome) -> None:
    now = at(200)
    mine = window(batches=(done(0, 60, 25.0), batch(1)), requests=(request(7, slot=1, registered_at=at(160)),))
    holder = holding_other(950, batch_cost=holder_cost, granted=100)
    live = forecast([mine, holder], now, holder=50)
    summary = views.summarize(risk.applied(mine, live), now, None)
    assert summary.outcome is outcome
    assert now < mine.deadline
    assert summary.predicted_finish == at(100 + holder_cost + 20 + 30)
    assert summary.predicted_late_s == 100 + holder_cost + 20 + 30 - 900  # the deadline is at 900 s


def test_closed_windows_get_no_forecast() -> None:
    assert forecast([merged(700), window(id=4, status=WindowStatus.FAILED)], at(800)) == {}


def backfilling(asking: bool) -> WindowRow:
    """A backfill's window of three days ago (its deadline long past) whose 40 s batch has
    landed: waiting for the resource with 1 s of work reported, or about to ask.
    """
    start = T0 - timedelta(days=3)
    deadline = start + timedelta(seconds=900)
    waiting = request(
        70, deadline=deadline, remaining_cost=1.0, registered_at=at(0), dag_id=BACKFILLED, backfill_window=start
    )
    return window(
        id=4,
        dag_id=BACKFILLED,
        backfill=True,
        window_start=start,
        window_end=start + timedelta(seconds=600),
        deadline=deadline,
        batches=(batch(0, predicted_cost=40.0, release=at(0)),),
        requests=(waiting,) if asking else (),
    )


@pytest.mark.parametrize("asking", [True, False], ids=["waiting", "landed"])
@pytest.mark.parametrize("policy", list(Policy))
def test_a_live_window_is_never_forecast_behind_a_backfill(policy: Policy, asking: bool) -> None:
    """As the dispatcher ranks them: a backfill's job waits for every live one, whatever the policy."""
    mine = window(batches=(done(0, 60, 25.0), batch(1)), requests=(request(7, slot=1, registered_at=at(160)),))
    found = forecast([mine, backfilling(asking)], at(200), policy=policy)
    assert found[1] == at(200 + 20 + 30)  # batch 1 and the merge, nothing of the backfill's before them
    assert found[4] == at(200 + 20 + 40 + 30)  # the backfill's batch after that live batch
