"""The monitor's view models: outcomes, laxity, cost against one batch, chart geometry and the
dispatcher's queue, from hand-made ledger rows."""

from __future__ import annotations

import itertools
import math
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_iqp.constants import BatchStatus, ExecutionPath, JobKind, Policy, RequestState, WindowStatus
from airflow_iqp.dynamic.dispatch import Candidate, RankedEntry, best_first
from airflow_iqp.learning.cost import LearnedCost, Observation, fit_cost
from airflow_iqp.ui import views
from airflow_iqp.ui.models import Outcome
from airflow_iqp.ui.read import DispatcherRows, ResourceRow
from tests.ui.rows import DAG, T0, at, batch, done, merged, query, request, window

OTHER = "iqp_other"


def model_of(partials: list[tuple[int, float]], merge: float) -> LearnedCost:
    observations = [Observation(JobKind.PARTIAL, size, cost, at(i)) for i, (size, cost) in enumerate(partials)]
    observations.append(Observation(JobKind.MERGE, 2, merge, at(100)))
    return fit_cost(observations, ExecutionPath.SPARK_SUBMIT)


# -- axis and ticks ---------------------------------------------------------------------------


@given(st.floats(min_value=0.01, max_value=1e7), st.integers(min_value=3, max_value=12))
def test_ticks_are_round_evenly_spaced_and_within_the_span(span: float, most: int) -> None:
    ticks = views.ticks(span, most)
    step = views.tick_step(span, most)
    assert ticks[0] == 0
    assert max(2, math.floor(most / 2.5) + 1) <= len(ticks) <= most
    assert ticks[-1] <= span * (1 + 1e-9)
    assert all(math.isclose(b - a, step, rel_tol=1e-6) for a, b in zip(ticks, ticks[1:]))
    # the step is the smallest one that fits: the round step just below it would not
    smaller = list(itertools.takewhile(lambda s: s < step, views._steps()))
    if smaller:
        assert math.floor(span / smaller[-1] + 1e-9) + 1 > most


def test_tick_steps_read_like_a_clock() -> None:
    assert views.tick_step(1000) == 300  # 0, 5 min, 10 min, 15 min
    assert views.tick_step(45) == 10
    assert views.tick_step(7 * 86400) == 86400


@pytest.mark.parametrize(("span", "most"), [(0.0, 8), (-1.0, 8), (math.inf, 8), (math.nan, 8), (100.0, 2)])
def test_tick_step_refuses_what_it_cannot_label(span: float, most: int) -> None:
    with pytest.raises(ValueError, match="positive finite span and at least 3 ticks"):
        views.tick_step(span, most)


@given(st.lists(st.one_of(st.none(), st.floats(min_value=-1e4, max_value=1e6)), max_size=20))
def test_the_axis_holds_everything_drawn(values: list[float | None]) -> None:
    axis = views.axis(values)
    assert axis.span_s >= 1
    assert all(v <= axis.span_s for v in values if v is not None)


# -- a window's numbers -----------------------------------------------------------------------


MILLISECONDS = st.integers(min_value=-300_000, max_value=600_000).map(lambda ms: ms / 1000)  # the ledger keeps µs


@given(MILLISECONDS)
def test_a_merged_window_met_its_deadline_exactly_when_its_laxity_is_not_negative(late_by: float) -> None:
    finish = 900 + late_by
    summary = views.summarize(merged(finish), at(5000), None)
    assert summary.laxity_s == pytest.approx(-late_by)
    assert summary.outcome is (Outcome.MET if late_by <= 0 else Outcome.MISSED)
    assert summary.remaining_s == 0


def test_an_open_windows_laxity_is_eq_9_with_what_its_request_told_the_dispatcher() -> None:
    w = window(requests=(request(remaining_cost=70.0),))
    summary = views.summarize(w, at(700), None)
    assert summary.remaining_s == 70.0
    assert summary.laxity_s == 900 - 700 - 70.0
    assert summary.outcome is Outcome.ON_TRACK


def test_without_an_open_request_the_remaining_work_is_the_plans() -> None:
    w = window(batches=(done(0, 60, 25.0), batch(1, predicted_cost=20.0), batch(2, status=BatchStatus.SKIPPED)))
    assert views.remaining_s(w) == 20.0 + 30.0  # batch 1 and the merge


@pytest.mark.parametrize(
    ("predicted_finish", "now", "expected"),
    [
        (None, 700, Outcome.ON_TRACK),
        (899, 700, Outcome.ON_TRACK),
        (901, 700, Outcome.AT_RISK),  # the ledger predicts a finish after the deadline
        (None, 880, Outcome.AT_RISK),  # 20 s left, 70 s of work: no laxity left
        (None, 901, Outcome.MISSED),  # still open after its deadline
    ],
)
def test_open_windows_are_at_risk_before_they_miss(
    predicted_finish: float | None, now: float, expected: Outcome
) -> None:
    w = window(
        predicted_finish=None if predicted_finish is None else at(predicted_finish),
        requests=(request(remaining_cost=70.0),),
    )
    assert views.summarize(w, at(now), None).outcome is expected


def test_a_failed_window_missed_and_has_no_laxity_without_a_finish() -> None:
    summary = views.summarize(window(status=WindowStatus.FAILED, deadline_met=False), at(1000), None)
    assert summary.outcome is Outcome.MISSED
    assert summary.laxity_s is None


@pytest.mark.parametrize("status", [WindowStatus.RUNNING, WindowStatus.MERGED])
def test_a_backfills_window_is_neither_met_nor_missed(status: WindowStatus) -> None:
    """Its deadline had passed before it was planned: long past `now`, and not a miss."""
    summary = views.summarize(window(status=status, deadline_met=None, backfill=True), at(10**6), None)
    assert summary.outcome is Outcome.BACKFILL


@given(
    st.floats(min_value=1, max_value=100),
    st.floats(min_value=1, max_value=100),
    st.floats(min_value=650, max_value=1000),
)
def test_cost_ratio_is_the_windows_jobs_against_one_batch_over_its_rows(a: float, b: float, finish: float) -> None:
    model = model_of([(1000, 9.0), (3000, 17.0)], merge=30.0)  # 5 s + rows / 250, merge 30 s
    w = merged(finish, batches=(done(0, 60, a), done(1, 600, b)), actual_tuples=4000)
    summary = views.summarize(w, at(2000), model)
    single = model.partial_seconds(4000) + model.merge_seconds(1)
    assert single == pytest.approx(5 + 4000 / 250 + 30)
    assert summary.cost_s == pytest.approx(a + b + (finish - 640))
    assert summary.single_batch_cost_s == pytest.approx(single)
    assert summary.cost_ratio == pytest.approx((a + b + finish - 640) / single)


def test_the_merge_costs_what_its_job_took_as_the_ledger_observed_it() -> None:
    """A merge granted as the last batch ended waits for its task to start: in a demo, 3.3 s from
    the grant to the finish for a 1.8 s job. The one batch it is compared with prices the job."""
    model = model_of([(1000, 9.0), (3000, 17.0)], merge=30.0)
    w = merged(700.0, merge_seconds=30.0, actual_tuples=4000)  # granted at 640 s: 60 s to the finish
    summary = views.summarize(w, at(2000), model)
    assert summary.cost_s == pytest.approx(25.0 + 20.0 + 30.0)
    assert summary.cost_ratio == pytest.approx(75.0 / (5 + 4000 / 250 + 30))


def test_no_cost_ratio_before_the_merge_or_without_a_learned_model() -> None:
    model = model_of([(1000, 9.0), (3000, 17.0)], merge=30.0)
    open_window = views.summarize(window(batches=(done(0, 60, 25.0), batch(1))), at(700), model)
    assert open_window.cost_s == 25.0
    assert open_window.cost_ratio is None
    unpriced = views.summarize(merged(700), at(2000), None)
    assert unpriced.cost_ratio is None
    assert (unpriced.single_batch_cost_s, unpriced.single_batch_low_s, unpriced.cost_model) == (None, None, None)


def test_one_batch_is_shown_with_the_stored_models_interval() -> None:
    """Noisy refit timings: the interval straddles the prediction, as wide as the spreads say;
    a calibration's (no spare timing) is the prediction itself.
    """
    noisy = [(1000 * (1 + i % 3), (5 + 1000 * (1 + i % 3) / 250) * (1.1 if i % 2 else 0.9)) for i in range(9)]
    observations = [Observation(JobKind.PARTIAL, size, cost, at(i)) for i, (size, cost) in enumerate(noisy)]
    observations += [Observation(JobKind.MERGE, 2, merge, at(100 + i)) for i, merge in enumerate((27.0, 33.0, 30.0))]
    refit = fit_cost(observations, ExecutionPath.SPARK_SUBMIT)
    summary = views.summarize(merged(700, actual_tuples=4000), at(2000), refit)
    assert summary.cost_model == "refit"
    low, predicted, high = summary.single_batch_low_s, summary.single_batch_cost_s, summary.single_batch_high_s
    assert low is not None
    assert predicted is not None
    assert high is not None
    assert low < predicted < high
    partial, merge = refit.interval(JobKind.PARTIAL, 4000), refit.interval(JobKind.MERGE, 1)
    assert (low, high) == pytest.approx((partial[0] + merge[0], partial[1] + merge[1]))
    calibration = model_of([(1000, 9.0), (3000, 17.0)], merge=30.0)
    exact = views.summarize(merged(700, actual_tuples=4000), at(2000), calibration)
    assert exact.cost_model == "calibration"
    assert exact.single_batch_low_s == exact.single_batch_cost_s == pytest.approx(exact.single_batch_high_s)


# -- a window's chart -------------------------------------------------------------------------


def test_bars_pair_each_batch_with_its_requests_and_end_with_the_merge() -> None:
    retry = request(2, slot=1, state=RequestState.WAITING, registered_at=at(650))
    first = request(1, slot=1, state=RequestState.EXPIRED, registered_at=at(600), granted_at=at(610))
    w = window(
        batches=(done(0, 60, 25.0, files={"orders": ["a", "b"]}), batch(1, status=BatchStatus.FAILED)),
        requests=(first, retry, request(3, slot=4, registered_at=at(660))),
    )
    bars = views.bars(w, at(700))
    assert [b.label for b in bars] == ["batch 0", "batch 1", "slot 4", "merge"]
    zero, one, slot, merge = bars
    assert zero.waits == []
    assert zero.file_count == 2
    assert zero.files == {"orders": ["a", "b"]}
    assert [(x.request, x.registered_s, x.granted_s, x.waited_s) for x in one.waits] == [
        (1, 600.0, 610.0, 10.0),
        (2, 650.0, None, 50.0),  # still waiting: until now
    ]
    assert slot.status == BatchStatus.WAITING
    assert slot.index is None
    assert (merge.planned_start_s, merge.planned_end_s, merge.predicted_cost_s) == (620.0, 650.0, 30.0)
    assert merge.status == BatchStatus.PLANNED


def test_a_batch_bar_is_its_plan_and_its_run_in_seconds_from_the_window_start() -> None:
    b = done(1, start=170, cost=25.0)
    (bar, *_) = views.bars(window(batches=(b,)), at(700))
    assert (bar.release_s, bar.latest_start_s, bar.planned_start_s, bar.planned_end_s) == (150, 160, 160, 180)
    assert (bar.actual_start_s, bar.actual_end_s, bar.actual_cost_s, bar.planned_size) == (170, 195, 25.0, 10)


def test_the_merge_bar_runs_from_its_grant_to_the_windows_finish() -> None:
    merge = views.bars(merged(690), at(2000))[-1]
    assert (merge.actual_start_s, merge.actual_end_s, merge.actual_cost_s) == (640, 690, 50)
    assert merge.status == BatchStatus.DONE
    assert [x.waited_s for x in merge.waits] == [1.0]


@given(
    st.lists(st.tuples(st.floats(0, 2000), st.floats(0, 300)), max_size=6),
    MILLISECONDS,
    st.booleans(),
)
def test_every_mark_and_bar_of_a_detail_lies_on_its_axis(
    runs: list[tuple[float, float]], now: float, closed: bool
) -> None:
    batches = tuple(done(i, start, cost) for i, (start, cost) in enumerate(runs))
    w = merged(950, batches=batches) if closed else window(batches=batches)
    detail = views.detail(w, at(now), None)
    span = detail.axis.span_s
    drawn = [detail.marks.window_end_s, detail.marks.deadline_s, detail.marks.actual_finish_s]
    drawn += [v for bar in detail.bars for v in (bar.planned_end_s, bar.actual_end_s, bar.release_s)]
    assert all(v <= span for v in drawn if v is not None)
    if detail.marks.now_s is not None:
        assert 0 <= detail.marks.now_s <= span
    if not closed and 0 <= now:
        assert detail.marks.now_s == pytest.approx(now)  # an open window always shows now


# -- lists ------------------------------------------------------------------------------------


def test_overview_counts_outcomes_and_takes_medians_over_merged_windows() -> None:
    windows = [
        merged(800, id=1),
        merged(950, id=2),
        merged(700, id=3),
        window(id=4, predicted_finish=at(1000), requests=(request(),)),
    ]
    overview = views.overview(query(), windows, at(700), None)
    assert (overview.met, overview.missed, overview.at_risk, overview.open) == (2, 1, 1, 1)
    assert overview.median_laxity_s == 100  # laxities 100, -50, 200
    assert (overview.window_s, overview.deadline_s) == (600.0, 300.0)


def test_misses_lists_recent_misses_and_windows_at_risk() -> None:
    windows = [
        merged(950, id=1),
        merged(950, id=2, deadline=at(-10_000), window_start=at(-11_000)),  # missed long ago
        merged(700, id=3),
        window(id=4, predicted_finish=at(1000), requests=(request(),)),
        window(id=5, deadline=at(650), requests=(request(),)),  # open past its deadline
    ]
    view = views.misses(windows, since=at(-100), now=at(700), models={})
    assert [w.id for w in view.missed] == [1, 5]
    assert [w.id for w in view.at_risk] == [4]


# -- the dispatcher ---------------------------------------------------------------------------

requests_strategy = st.lists(
    st.tuples(
        st.floats(0, 3000),  # deadline
        st.floats(0, 500),  # remaining
        st.floats(0, 600),  # registered
        st.sampled_from(["q", "r", "s"]),
        st.one_of(st.none(), st.floats(-9000, -1000)),  # the start of the window a backfill backfills
    ),
    max_size=8,
)


@given(requests_strategy, st.sampled_from(list(Policy)))
def test_the_queue_is_in_best_first_order(
    specs: list[tuple[float, float, float, str, float | None]], policy: Policy
) -> None:
    waiting = tuple(
        request(
            i,
            deadline=at(d),
            remaining_cost=r,
            registered_at=at(reg),
            query=q,
            backfill_window=None if b is None else at(b),
        )
        for i, (d, r, reg, q, b) in enumerate(specs, start=1)
    )
    last_served = {"q": at(-50), "r": at(-10)}
    rows = DispatcherRows(resources=(), open=waiting, grants=(), ranked_dags={}, last_served=last_served)
    now = at(700)
    expected = best_first(
        policy,
        [
            Candidate(
                r.id,
                r.query,
                r.deadline.timestamp(),
                r.remaining_cost,
                r.registered_at.timestamp(),
                last_served[r.query].timestamp() if r.query in last_served else -math.inf,
                None if r.backfill_window is None else r.backfill_window.timestamp(),
            )
            for r in waiting
        ],
        now.timestamp(),
    )
    view = views.dispatcher(rows, policy, now, readable={DAG})
    assert [q.request for q in view.queue] == [c.request for c in expected]
    backfills = [r.backfill_window is not None for r in waiting]
    assert [backfills[q.request - 1] for q in view.queue] == sorted(backfills)  # live ones first
    assert [q.position for q in view.queue] == list(range(1, len(waiting) + 1))


def test_requests_of_dags_the_user_cannot_read_are_redacted() -> None:
    now = at(700)
    holder = request(
        1,
        state=RequestState.GRANTED,
        granted_at=at(650),
        resource_id=0,
        dag_id=OTHER,
        ranking=(
            RankedEntry(1, "q1", at(800).timestamp()),
            RankedEntry(2, "q2", at(900).timestamp()),
        ),
    )
    mine = request(2, registered_at=at(640), deadline=at(900))
    theirs = request(3, registered_at=at(660), dag_id=OTHER, deadline=at(950))
    rows = DispatcherRows(
        resources=(ResourceRow(0, 1, at(1200), 5),),
        open=(holder, mine, theirs),
        grants=(holder,),
        ranked_dags={1: OTHER, 2: DAG},
        last_served={},
    )
    view = views.dispatcher(rows, Policy.EDF, now, readable={DAG})
    (resource,) = view.resources
    assert resource.holder is not None
    assert (resource.holder.redacted, resource.holder.dag_id, resource.holder.held_s) == (True, None, 50.0)
    assert not resource.expired
    shown, hidden = view.queue
    assert (shown.dag_id, shown.deadline, shown.laxity_s) == (DAG, at(900), 900 - 700 - 50.0)
    assert (hidden.redacted, hidden.dag_id, hidden.kind, hidden.deadline, hidden.waited_s) == (
        True,
        None,
        None,
        None,
        40,
    )
    (grant,) = view.grants
    assert (grant.redacted, grant.dag_id, grant.waited_s) == (True, None, 550.0)
    assert [(o.request, o.dag_id, o.key_at) for o in grant.others] == [(2, DAG, at(900))]
    everything = views.dispatcher(rows, Policy.EDF, now, readable={DAG, OTHER})
    assert everything.grants[0].dag_id == OTHER
    assert not everything.queue[1].redacted


def test_an_expired_lease_shows_as_expired() -> None:
    rows = DispatcherRows((ResourceRow(0, 7, at(600), 3),), (), (), {}, {})
    (resource,) = views.dispatcher(rows, Policy.SJF, at(700), readable=set()).resources
    assert resource.expired
    assert resource.holder is not None
    assert resource.holder.redacted


def test_key_times_only_for_policies_that_rank_by_a_time() -> None:
    key = (T0 + timedelta(seconds=5)).timestamp()
    assert views._key_time(Policy.EDF, key, backfill=False) == at(5)
    assert views._key_time(Policy.RR, None, backfill=False) is None
    assert views._key_time(Policy.LLF, 12.0, backfill=False) is None
    # a backfill's request ranks by the start of the window it backfills, whatever the policy
    assert views._key_time(Policy.LLF, key, backfill=True) == at(5)
    assert views._key_time(Policy.SJF, key, backfill=True) == at(5)
