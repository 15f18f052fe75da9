"""The capacity model: the fewest cores for which admission holds, per phase, at a confidence."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_iqp.planning.admission import RecurringQuery, admit
from airflow_iqp.planning.capacity import (
    DEFAULT_SPEEDUP,
    CoreRun,
    QueryDemand,
    Speedup,
    at_cores,
    capacity,
    closed_tasks,
    fit_speedup,
    held_out,
    intervals,
    open_tasks,
    residual_spread,
    smallest,
)
from airflow_iqp.planning.cost import LinearCost

LINEARISH = Speedup(((1, 1.0), (2, 2.0), (4, 4.0), (8, 8.0)), "test: linear up to 8 cores")


def test_the_speedup_interpolates_between_measured_points_and_is_flat_past_the_last() -> None:
    speedup = Speedup(((1, 1.0), (3, 2.0), (5, 2.5)), "measured")
    assert speedup.at(2) == 1.5
    assert speedup.at(5) == speedup.at(40) == 2.5
    assert DEFAULT_SPEEDUP.source.startswith("default until measured")
    assert DEFAULT_SPEEDUP.at(2) == pytest.approx(1 / (0.1 + 0.9 / 2))


@pytest.mark.parametrize(
    ("points", "message"),
    [
        (((2, 1.0),), "start at"),
        (((1, 1.0), (2, 2.5)), "more than linear"),
        (((1, 1.0), (4, 2.0), (3, 2.5)), "cores must be >= 5"),
        (((1, 1.0), (2, 0.5)), "speedup must be >= 1"),
    ],
)
def test_a_speedup_that_is_not_one_at_one_core_superlinear_or_unordered_is_refused(
    points: tuple[tuple[int, float], ...], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        Speedup(points, "bad")


@given(st.integers(1, 100), st.integers(1, 100), st.floats(0, 1))
def test_the_amdahl_default_never_slows_down_and_is_never_superlinear(a: int, b: int, serial: float) -> None:
    speedup = Speedup.amdahl(serial, range(1, 65))
    low, high = sorted((a, b))
    assert 1 <= speedup.at(low) <= speedup.at(high) <= min(high, 64) + 1e-9


def window(name: str, work: float, final: float, deadline: float, longest: float | None = None) -> RecurringQuery:
    return RecurringQuery(name, 100.0, deadline, work, final if longest is None else longest, final)


def test_the_closed_phase_needs_the_cores_that_make_the_final_work_fit_its_deadline() -> None:
    # 38 s of final work due 10 s after the close, behind a 2 s job of the next window: 4 cores.
    tasks = [window("a", 58.0, 38.0, 110.0, 2.0)]
    assert smallest(closed_tasks(tasks), LINEARISH) == 4
    assert smallest(open_tasks(tasks), LINEARISH) == 1
    result = capacity([QueryDemand(t) for t in tasks], speedup=LINEARISH)
    assert (result.open.cores, result.closed.cores) == (1, 4)
    assert result.peak == result.closed
    assert result.closed.needed_by == "a (after close)"
    assert [(i.start, i.end, i.cores) for i in intervals(tasks, result)] == [(0.0, 100.0, 1), (100.0, 110.0, 4)]


def test_more_cores_than_the_speedup_covers_do_not_help_and_no_count_is_reported() -> None:
    tasks = [window("a", 100.0, 100.0, 110.0)]
    result = capacity([QueryDemand(t) for t in tasks], speedup=LINEARISH)
    assert result.closed.cores is None
    assert result.closed.needed_by == "a (after close)"


tasks_strategy = st.lists(
    st.builds(
        lambda i, period, early, final, after: RecurringQuery(
            f"q{i}", period, period + after, early + final, max(final, 1.0), final
        ),
        st.integers(0, 10**6),
        st.sampled_from([50.0, 100.0, 200.0]),
        st.integers(0, 40).map(float),
        st.integers(1, 40).map(float),
        st.integers(5, 60).map(float),
    ),
    min_size=1,
    max_size=4,
    unique_by=lambda t: t.name,
)


@settings(max_examples=40, deadline=None)
@given(tasks_strategy)
def test_the_smallest_capacity_passes_admission_and_one_core_fewer_does_not(tasks: list[RecurringQuery]) -> None:
    cores = smallest(tasks, LINEARISH)
    if cores is None:
        assert not admit(at_cores(tasks, LINEARISH.max_cores, LINEARISH)).feasible
        return
    assert admit(at_cores(tasks, cores, LINEARISH)).feasible
    if cores > 1:
        assert not admit(at_cores(tasks, cores - 1, LINEARISH)).feasible
    for hint in (1, 3, 8):
        assert smallest(tasks, LINEARISH, hint) == cores


@settings(max_examples=8, deadline=None)
@given(tasks_strategy, st.sampled_from([0.1, 0.3]))
def test_a_higher_confidence_or_a_wider_spread_never_needs_fewer_cores(
    tasks: list[RecurringQuery], spread: float
) -> None:
    def cores(confidence: float, s: float) -> tuple[float, ...]:
        result = capacity(
            [QueryDemand(t, s, s / 2) for t in tasks], confidence=confidence, speedup=LINEARISH, samples=40
        )
        return tuple(99.0 if p.cores is None else p.cores for p in (result.open, result.closed))

    exact = cores(0.5, 0.0)
    low, high = cores(0.5, spread), cores(0.95, spread)
    assert all(a <= b for a, b in zip(low, high))
    assert exact == tuple(
        99.0 if p.cores is None else p.cores
        for p in (lambda r: (r.open, r.closed))(
            capacity([QueryDemand(t) for t in tasks], confidence=0.99, speedup=LINEARISH)
        )
    ), "without a spread the confidence does not matter"


def test_final_works_released_at_one_close_are_not_blocked_by_each_other() -> None:
    # No early work: with both windows closing together nothing can hold the resource when the
    # final works are released (20 s due in 10 s: 2 cores); with different windows, b's 8 s job
    # may have started just before a's close ((20 + 8) / 3 <= 10: 3 cores).
    together = [window("a", 20.0, 20.0, 110.0, 8.0), window("b", 20.0, 20.0, 140.0, 8.0)]
    assert smallest(closed_tasks(together), LINEARISH) == 2
    apart = [together[0], RecurringQuery("b", 120.0, 170.0, 20.0, 8.0, 20.0)]
    assert smallest(closed_tasks(apart), LINEARISH) == 3


def test_the_residual_spread_of_a_fitted_file_is_the_std_of_its_relative_errors() -> None:
    model = LinearCost(1.0)
    assert residual_spread([(10, 11.0), (10, 9.0)], model) == pytest.approx(0.1414, abs=1e-4)
    assert residual_spread([(10, 11.0)], model) == 0.0


def test_bad_settings_are_refused() -> None:
    demand = QueryDemand(window("a", 10.0, 5.0, 110.0))
    with pytest.raises(ValueError, match="confidence must be below 1"):
        capacity([demand], confidence=1.0)
    with pytest.raises(ValueError, match="at least one query"):
        capacity([])
    with pytest.raises(ValueError, match="cost_spread must be >= 0"):
        QueryDemand(demand.task, cost_spread=-0.1)


def amdahl_runs(serial: float, sizes: tuple[float, ...], cores: tuple[int, ...]) -> list[CoreRun]:
    """Two runs per size and core count of a job of `size` seconds on one core, Amdahl-shaped."""
    return [CoreRun(c, n, n * (serial + (1 - serial) / c)) for n in sizes for c in cores for _ in range(2)]


def test_the_fitted_speedup_is_the_measured_one_core_time_over_each_counts_time() -> None:
    speedup = fit_speedup(amdahl_runs(0.25, (2.0, 5.0, 9.0), (1, 2, 4)), "measured")
    assert [c for c, _ in speedup.points] == [1, 2, 4]
    assert [s for _, s in speedup.points] == pytest.approx([1.0, 1 / 0.625, 1 / 0.4375])
    assert all(abs(h.error) < 1e-12 for h in held_out(amdahl_runs(0.25, (2.0, 5.0, 9.0), (1, 2, 4))))


def test_the_fitted_speedup_ends_where_more_cores_stopped_helping() -> None:
    runs = [CoreRun(1, 10.0, 10.0), CoreRun(2, 10.0, 6.0), CoreRun(4, 10.0, 6.5), CoreRun(8, 10.0, 3.0)]
    [one, two] = fit_speedup(runs, "measured").points
    assert one == (1, 1.0)
    assert two[0] == 2
    assert two[1] == pytest.approx(10 / 6)
    with pytest.raises(ValueError, match="one-core runs"):
        fit_speedup([CoreRun(2, 10.0, 6.0)], "no one-core run")


def test_a_speedup_that_grows_with_size_shows_in_the_held_out_error() -> None:
    # Small jobs gain nothing from a second core, large ones double: one speedup fits neither.
    runs = [CoreRun(1, 1.0, 1.0), CoreRun(2, 1.0, 1.0), CoreRun(1, 4.0, 4.0), CoreRun(2, 4.0, 2.0)]
    errors = {h.size: h.error for h in held_out(runs)}
    assert errors == pytest.approx({1.0: -0.5, 4.0: 1.0})


@given(
    st.lists(
        st.tuples(st.sampled_from((1, 2, 3, 4, 8)), st.sampled_from((1.0, 2.0, 3.0)), st.floats(0.1, 100)), min_size=1
    )
)
def test_a_fitted_speedup_is_always_a_valid_one(runs: list[tuple[int, float, float]]) -> None:
    measured = [CoreRun(*run) for run in runs] + [CoreRun(1, 1.0, 5.0), CoreRun(2, 1.0, 4.0)]
    speedup = fit_speedup(measured, "drawn")  # Speedup's own checks: (1, 1.0) first, rising, at most linear
    assert speedup.points[0] == (1, 1.0)
    assert {c for c, _ in speedup.points} <= {c for c, _, _ in runs} | {1, 2}
