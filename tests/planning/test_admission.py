"""The non-preemptive EDF demand test against a direct check, its properties, and worked cases."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from airflow_iqp.planning.admission import MAX_DEADLINES, RecurringQuery, admit, blocking


@st.composite
def query_sets(draw: st.DrawFn, most: int = 4) -> list[RecurringQuery]:
    """Small integer windows and deadlines (so the check below can scan a long stretch)."""
    count = draw(st.integers(1, most))
    queries = []
    for i in range(count):
        period = draw(st.integers(2, 12))
        deadline = period + draw(st.integers(0, 12))
        work = draw(st.integers(0, 4 * period)) / 4
        longest = draw(st.integers(0, 4 * period)) / 4
        final = draw(st.sampled_from([0.0, 0.5, 1.0])) * work
        queries.append(RecurringQuery(f"q{i}", period, deadline, work, longest, final))
    return queries


def direct_misses(queries: list[RecurringQuery], until: int) -> list[tuple[Fraction, str]]:
    """Every (deadline, query) up to `until` where demand plus blocking exceeds the time: each
    query's work before its final work due at D + kT, its final work at D - T + kT, and blocking
    by the longest job of another query whose deadline is later.
    """

    def due(at: Fraction, deadline: float, period: float) -> int:
        return max(0, math.floor((at - Fraction(deadline)) / Fraction(period)) + 1)

    def demand(at: Fraction) -> Fraction:
        return sum(
            (
                due(at, o.deadline, o.period) * (Fraction(o.work) - Fraction(o.final_work))
                + due(at, o.deadline - o.period, o.period) * Fraction(o.final_work)
                for o in queries
            ),
            Fraction(0),
        )

    misses = set()
    for q in queries:
        firsts = [q.deadline] if q.final_work == 0 else [q.deadline - q.period]
        if 0 < q.final_work < q.work:
            firsts.append(q.deadline)
        for first in firsts:
            k = 0
            while (at := Fraction(first) + k * Fraction(q.period)) <= until:
                others = (Fraction(o.longest_job) for o in queries if o is not q and o.deadline > at)
                if demand(at) + max(others, default=Fraction(0)) > at:
                    misses.add((at, q.name))
                k += 1
    return sorted(misses, key=lambda m: (m[0], [q.name for q in queries].index(m[1])))


@settings(max_examples=200, deadline=None)
@given(queries=query_sets())
@example(  # q0 and q1 first miss at 370, q2 only at 425
    queries=[
        RecurringQuery("q0", 6.0, 16.0, 2.0, 0.0, 0.0),
        RecurringQuery("q1", 4.0, 14.0, 1.75, 0.0, 0.0),
        RecurringQuery("q2", 8.0, 9.0, 2.0, 0.0, 1.0),
    ]
)
def test_admission_agrees_with_a_direct_check_over_a_long_stretch(queries: list[RecurringQuery]) -> None:
    """Past the test interval no first miss hides: the direct check scans well beyond it, and at
    least as far as the latest deadline a query's verdict names (a query's own first miss may
    come after another query's).
    """
    result = admit(queries)
    assume(result.first_miss is None or result.first_miss.at <= 400)
    horizon = max([400, *(math.ceil(v.at) for v in result.queries if not v.met)])
    assume(horizon <= 1200)
    misses = direct_misses(queries, horizon)
    assert result.feasible == (not misses)
    if misses:
        assert result.first_miss is not None
        assert (Fraction(result.first_miss.at), result.first_miss.name) == misses[0]
        assert result.first_miss.slack < 0
    for q, verdict in zip(queries, result.queries):
        assert verdict.name == q.name
        assert verdict.met == (q.name not in {name for _, name in misses})


@settings(max_examples=200, deadline=None)
@given(queries=query_sets(), scale=st.sampled_from([0.0, 0.25, 0.5, 0.9]))
def test_less_work_never_turns_a_feasible_set_infeasible(queries: list[RecurringQuery], scale: float) -> None:
    assume(admit(queries).feasible)
    lighter = [
        RecurringQuery(q.name, q.period, q.deadline, q.work * scale, q.longest_job * scale, q.final_work * scale)
        for q in queries
    ]
    assert admit(lighter).feasible


@settings(max_examples=200, deadline=None)
@given(queries=query_sets(most=3), extra=query_sets(most=1))
def test_one_more_query_never_turns_an_infeasible_set_feasible(
    queries: list[RecurringQuery], extra: list[RecurringQuery]
) -> None:
    assume(not admit(queries).feasible)
    e = extra[0]
    added = RecurringQuery("extra", e.period, e.deadline, e.work, e.longest_job, e.final_work)
    assert not admit([*queries, added]).feasible


@settings(max_examples=200, deadline=None)
@given(
    period=st.floats(1, 1000),
    after=st.floats(0, 1000),
    share=st.one_of(st.floats(0, 0.999), st.just(1.0)),
    longest=st.floats(0, 1),
)
def test_one_query_whose_work_fits_its_window_is_feasible(
    period: float, after: float, share: float, longest: float
) -> None:
    """Alone, its own jobs never block it: work up to one window per window always fits."""
    # The test interval grows as longest / (1 - share): kept to a thousand windows.
    result = admit([RecurringQuery("q", period, period + after, period * share, period * longest)])
    assert result.feasible
    assert result.queries[0].slack >= 0


def test_a_long_job_of_a_later_deadline_makes_an_earlier_one_miss() -> None:
    """The demo's case: q6's last batch and merge (20 s) wait for its window to close and are
    due 45 s later; q14's 30 s job, due much later, may hold the resource when q6's window
    closes. Alone q6 holds (25 s to spare); behind q14's job it fails by 5 s.
    """
    q6 = RecurringQuery("q6", 120, 165, 25, 20, final_work=20)
    q14 = RecurringQuery("q14", 120, 270, 60, 30)
    alone = admit([q6])
    assert alone.feasible
    assert (alone.queries[0].slack, alone.queries[0].at, alone.queries[0].final) == (25, 45, True)
    result = admit([q6, q14])
    assert not result.feasible
    assert result.first_miss == result.queries[0]
    assert (result.first_miss.name, result.first_miss.at, result.first_miss.final) == ("q6", 45, True)
    assert result.first_miss.slack == -5
    assert result.first_miss.blocked_by == "q14"
    assert result.queries[1].met
    # Planned so that only 10 s wait for the close, q6 holds behind q14's job.
    assert admit([RecurringQuery("q6", 120, 165, 25, 20, final_work=10), q14]).feasible


def test_utilization_over_one_fails_even_with_loose_deadlines() -> None:
    """11 s of work every 10 s: by the (k+1)-th deadline, 100 + 10k, 11(k+1) s are due, which
    first exceeds the time at k = 90, by 1 s. Both deadlines fall there; the first listed is named.
    """
    result = admit([RecurringQuery("a", 10, 100, 6, 1), RecurringQuery("b", 10, 100, 5, 1)])
    assert result.utilization == pytest.approx(1.1)
    assert result.first_miss is not None
    assert (result.first_miss.name, result.first_miss.at, result.first_miss.slack) == ("a", 1000, -1)
    assert [(q.met, q.at) for q in result.queries] == [(False, 1000), (False, 1000)]


def test_bad_input_is_refused_with_what_to_fix() -> None:
    with pytest.raises(ValueError, match="at least one query"):
        admit([])
    with pytest.raises(ValueError, match="'a' is listed twice"):
        admit([RecurringQuery("a", 1, 1, 0, 0), RecurringQuery("a", 2, 2, 0, 0)])
    with pytest.raises(ValueError, match="period must be > 0"):
        RecurringQuery("a", 0, 1, 0, 0)
    with pytest.raises(ValueError, match="work must be >= 0"):
        RecurringQuery("a", 1, 1, -1, 0)
    with pytest.raises(ValueError, match="final_work .* is more than its work"):
        RecurringQuery("a", 1, 1, 1, 0, final_work=2)
    with pytest.raises(ValueError, match="before its window ends"):
        RecurringQuery("a", 10, 5, 1, 0, final_work=1)


def test_a_utilization_within_a_hair_of_one_is_refused_not_looped_over() -> None:
    period = 1.0
    queries = [RecurringQuery("a", period, period, period * (1 - 1e-9), period)]
    queries.append(RecurringQuery("b", 1000, 2000, 1e-7, 0))
    with pytest.raises(ValueError, match=f"more than {MAX_DEADLINES}"):
        admit(queries)


def test_blocking_is_the_longest_job_of_another_query() -> None:
    jobs = {"q6": 40.0, "q14": 22.0, "q1": 19.0, "idle": 0.0}
    assert blocking("q6", jobs) == (22.0, "q14")
    assert blocking("q14", jobs) == (40.0, "q6")
    assert blocking("q6", {"q6": 40.0, "idle": 0.0}) == (0.0, None)
    assert blocking("q6", {}) == (0.0, None)
    assert blocking("x", {"b": 5.0, "a": 5.0}) == (5.0, "b")  # ties: the later name, so the answer is stable
