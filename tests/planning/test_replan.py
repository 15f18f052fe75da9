"""Replanning a static window's remaining batches: every unit once, at most the tasks left, none
before now, and feasible from any moment the original plan could still be kept."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_iqp.planning import Batch, LinearCost
from airflow_iqp.planning.arrival import ArrivalCurve
from airflow_iqp.planning.replan import Remaining, Replan, replan
from tests.planning.strategies import arrivals, linear_costs

if TYPE_CHECKING:
    from airflow_iqp.planning.cost import CostModel

MERGE = LinearCost(per_tuple=0.5, overhead=1.0)


@dataclass(frozen=True)
class Case:
    arrival: ArrivalCurve
    window_end: float
    deadline: float
    cost: CostModel
    merge: CostModel = MERGE

    def replan(self, state: Remaining, now: float) -> Replan:
        return replan(
            state,
            arrival=self.arrival,
            window_end=self.window_end,
            deadline=self.deadline,
            now=now,
            cost=self.cost,
            merge=self.merge,
        )


def covers(batches: list[Batch], first: int, total: int) -> bool:
    """The batches take first..total in order, each unit once."""
    expected = first
    for b in batches:
        if b.first != expected or b.size < 1:
            return False
        expected = b.last + 1
    return expected == total + 1


# 20 units at 1/s, 1 s per unit plus 1 s per batch, merge 1 s plus 0.5 s per partial: three batches.
TWENTY = Case(ArrivalCurve.fixed_rate(0.0, 19.0, 20), 20.0, 32.0, LinearCost(per_tuple=1.0, overhead=1.0))


def cuts(result: Replan) -> list[tuple[int, int]]:
    return [(b.first, b.last) for b in result.batches]


def test_from_the_start_it_is_the_plan_of_the_window() -> None:
    original = TWENTY.replan(Remaining(0, 0, 20, tasks=20), now=0.0)
    assert cuts(original) == [(1, 4), (5, 12), (13, 20)]
    assert original.feasible
    assert original.finish == 32.0


def test_on_time_the_rest_of_the_plan_stands() -> None:
    original = TWENTY.replan(Remaining(0, 0, 20, tasks=20), now=0.0)
    again = TWENTY.replan(Remaining(4, 1, 20, tasks=2), now=original.batches[0].end)
    assert cuts(again) == cuts(original)[1:]
    assert [b.start for b in again.batches] == [b.start for b in original.batches[1:]]
    assert again.feasible


def test_late_the_next_batch_takes_fewer_units_and_none_starts_before_now() -> None:
    """Two seconds late, no cut meets the deadline: the earliest finish, 2 s after it, with the
    next batch shorter so the last starts as the window closes."""
    late = TWENTY.replan(Remaining(4, 1, 20, tasks=2), now=13.5)
    assert cuts(late) == [(5, 10), (11, 20)]
    assert all(b.start >= 13.5 for b in late.batches)
    assert late.batches[-1].start >= 20.0
    assert not late.feasible
    assert late.finish == 34.0


def test_more_batches_than_tasks_join_the_earliest() -> None:
    """A tight deadline wants several batches; with one task left they become one, which misses."""
    case = Case(ArrivalCurve.fixed_rate(0.0, 19.0, 20), 20.0, 27.0, LinearCost(per_tuple=1.0))
    assert len(case.replan(Remaining(0, 0, 20, tasks=20), now=0.0).batches) > 1
    one = case.replan(Remaining(0, 0, 20, tasks=1), now=0.0)
    assert [b.size for b in one.batches] == [20]
    assert not one.feasible
    assert "joined" in (one.reason or "")


def test_nothing_left_plans_no_batch() -> None:
    case = Case(ArrivalCurve.fixed_rate(0.0, 3.0, 4), 4.0, 20.0, MERGE)
    result = case.replan(Remaining(4, 2, 4, tasks=1), now=5.0)
    assert result.batches == []
    assert result.feasible
    assert result.finish == 5.0 + MERGE.cost(2)


def test_bad_state_is_refused() -> None:
    with pytest.raises(ValueError, match="tasks"):
        Remaining(0, 0, 4, tasks=0)


@st.composite
def cases(draw: st.DrawFn) -> tuple[int, Case]:
    total = draw(st.integers(2, 12))
    arrival = draw(arrivals(total))
    window_end = arrival.time_of(total) + draw(st.integers(0, 4)) / 4
    deadline = window_end + draw(st.integers(0, 120)) / 4
    return total, Case(arrival, window_end, deadline, draw(linear_costs), draw(linear_costs))


@settings(max_examples=300, deadline=None)
@given(cases(), st.data())
def test_feasible_from_wherever_the_original_plan_still_holds(drawn: tuple[int, Case], data: st.DataObject) -> None:
    total, case = drawn
    original = case.replan(Remaining(0, 0, total, tasks=total), now=case.arrival.time_of(1))
    assert covers(original.batches, 1, total)
    if not original.feasible or len(original.batches) < 2:
        return
    p = data.draw(st.integers(1, len(original.batches) - 1))
    ended, next_start = original.batches[p - 1].end, original.batches[p].start
    now = data.draw(st.sampled_from([ended, next_start, ended + (next_start - ended) / 2]))
    state = Remaining(original.batches[p - 1].last, p, total, tasks=len(original.batches) - p)
    again = case.replan(state, now=now)
    assert again.feasible, again.reason
    assert len(again.batches) <= state.tasks
    assert covers(again.batches, state.done + 1, total)
    assert again.finish <= case.deadline


@settings(max_examples=300, deadline=None)
@given(cases(), st.data())
def test_every_unit_once_at_most_the_tasks_left_none_before_now(drawn: tuple[int, Case], data: st.DataObject) -> None:
    total, case = drawn
    done = data.draw(st.integers(0, total))
    tasks = data.draw(st.integers(1, total))
    now = data.draw(st.integers(0, 200)) / 4
    result = case.replan(Remaining(done, min(done, 1), total, tasks=tasks), now=now)
    assert len(result.batches) <= tasks
    if done < total:
        assert covers(result.batches, done + 1, total)
    else:
        assert result.batches == []
    previous_end = -math.inf
    for b in result.batches:
        assert b.start >= max(now, case.arrival.time_of(b.last), previous_end)
        previous_end = b.end
    assert result.batches == [] or result.batches[-1].start >= case.window_end
    if result.feasible:
        assert result.finish <= case.deadline
