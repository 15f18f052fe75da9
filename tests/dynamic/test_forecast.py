"""A window's forecast finish: its own jobs in order, each after its release, behind the jobs
holding the resources and those the dispatcher serves first."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_iqp.dynamic.forecast import Backlog, Pending, finish

seconds = st.floats(min_value=0, max_value=1e4)
times = st.floats(min_value=-1e4, max_value=1e4)
jobs = st.lists(st.builds(Pending, seconds, st.one_of(st.just(-math.inf), times)), max_size=6)
busy = st.lists(times, min_size=1, max_size=4)
ahead = st.lists(seconds, max_size=6)


def test_one_resource_runs_the_queue_ahead_then_the_windows_jobs() -> None:
    # the holder ends at 30; two jobs ahead (10 s, 5 s); then batch (20 s, released at 40) and merge (8 s)
    backlog = Backlog(None, (Pending(20, release=40), Pending(8)))
    assert finish(0, backlog, busy_until=[30], ahead=[10, 5]) == 45 + 20 + 8
    assert finish(0, backlog, busy_until=[30], ahead=[]) == 40 + 20 + 8  # waits for its release instead
    assert finish(0, backlog, busy_until=[0, 30], ahead=[10, 5]) == 40 + 20 + 8  # the jobs ahead share two


def test_the_windows_own_running_job_comes_first() -> None:
    backlog = Backlog(running_until=50, jobs=(Pending(8),))
    assert finish(0, backlog, busy_until=[50, 0], ahead=[]) == 58  # one job at a time, the other resource idle
    assert finish(60, backlog, busy_until=[60, 60], ahead=[]) == 68  # overrun: it ends now at the soonest


def test_nothing_left_finishes_now() -> None:
    assert finish(7, Backlog(None, ()), busy_until=[100], ahead=[50]) == 7


@given(st.floats(min_value=0, max_value=1e4), jobs, busy, ahead)
def test_the_finish_leaves_room_for_every_own_job_after_its_release(
    now: float, own: list[Pending], holders: list[float], queue: list[float]
) -> None:
    end = finish(now, Backlog(None, tuple(own)), holders, queue)
    assert end >= now + sum(j.seconds for j in own) - 1e-6
    for i, job in enumerate(own):
        assert end >= job.release + sum(j.seconds for j in own[i:]) - 1e-6


@given(st.floats(min_value=0, max_value=1e4), jobs, busy, ahead, seconds)
def test_more_work_ahead_or_a_later_holder_never_finishes_sooner(
    now: float, own: list[Pending], holders: list[float], queue: list[float], more: float
) -> None:
    backlog = Backlog(None, tuple(own))
    end = finish(now, backlog, holders, queue)
    assert finish(now, backlog, holders, [*queue, more]) >= end - 1e-6
    assert finish(now, backlog, [holders[0] + more, *holders[1:]], queue) >= end - 1e-6


@given(st.floats(min_value=0, max_value=1e4), jobs, busy, ahead)
def test_another_resource_never_finishes_later(
    now: float, own: list[Pending], holders: list[float], queue: list[float]
) -> None:
    backlog = Backlog(None, tuple(own))
    assert finish(now, backlog, [*holders, now], queue) <= finish(now, backlog, holders, queue) + 1e-6


def test_bad_input_is_refused_with_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="at least one resource"):
        finish(0, Backlog(None, ()), busy_until=[], ahead=[])
    with pytest.raises(ValueError, match="a pending job's seconds must be >= 0"):
        Pending(-1)
    with pytest.raises(ValueError, match="a pending job's release must be a time or -inf"):
        Pending(1, release=math.nan)
    with pytest.raises(ValueError, match="a job ahead's seconds must be a finite number"):
        finish(0, Backlog(None, ()), busy_until=[0], ahead=[math.inf])
