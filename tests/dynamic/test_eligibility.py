"""Triggering (Section 4): MinBatch arrived, slow input, closed window."""

from __future__ import annotations

import math

import pytest

from airflow_iqp.constants import JobKind
from airflow_iqp.dynamic import estimate_total, expected_time_of, next_ready_time, ready_job, ready_since
from tests.dynamic import slow, state


def test_waits_for_min_batch_then_runs_it() -> None:
    s = state()
    assert ready_job(s, 2.0, True) is None
    assert next_ready_time(s, 2.0, True) == 3.0
    job = ready_job(s, 3.0, True)
    assert job is not None
    assert (job.kind, job.size, job.cost) == (JobKind.PARTIAL, 3, 4.0)


def test_takes_only_min_batch_even_when_more_arrived() -> None:
    job = ready_job(state(), 9.0, True)
    assert job is not None
    assert job.size == 3


def test_slow_input_fires_when_the_expected_time_passes() -> None:
    s = state(slow())
    assert expected_time_of(3, 10, 1.0, 10.0) == 3.0
    assert ready_job(s, 2.5, True) is None
    assert next_ready_time(s, 2.5, True) == 3.0
    job = ready_job(s, 3.0, True)
    assert job is not None
    assert job.size == 2


def test_closed_window_runs_whatever_remains() -> None:
    s = state(processed=9, batches=3)
    assert ready_job(s, 9.5, True) is None  # tuple 10 arrives at 10
    job = ready_job(s, 10.0, True)
    assert job is not None
    assert job.size == 1


def test_traditional_takes_whatever_arrived() -> None:
    job = ready_job(state(), 2.0, False)
    assert job is not None
    assert job.size == 2


def test_merge_is_ready_once_everything_is_processed() -> None:
    job = ready_job(state(processed=10, batches=4), 20.0, True)
    assert job is not None
    assert (job.kind, job.size, job.cost) == (JobKind.MERGE, 4, 3.0)


def test_nothing_before_submission_or_after_finish() -> None:
    s = state()
    assert ready_job(s, 0.5, True) is None
    s.finish = 12.0
    assert ready_job(s, 20.0, True) is None
    assert next_ready_time(s, 20.0, True) == math.inf


@pytest.mark.parametrize(
    ("arrived", "now", "expected"),
    [(10, 11.0, 10), (0, 5.0, 0), (5, 1.0, 5), (3, 4.0, 9), (3, 10.0, 3)],
)
def test_estimate_total_extrapolates_the_rate_to_the_window_end(arrived: int, now: float, expected: int) -> None:
    assert estimate_total(arrived, 1.0, now, 10.0) == expected


def test_ready_since_is_when_the_job_ready_now_became_ready() -> None:
    # MinBatch 3: tuple 3 lands at 3; a slow stream's batch fires when tuple 3 was due (3).
    assert ready_since(state(), 1.0, 8.0, True) == 3.0
    assert ready_since(state(slow()), 1.0, 8.0, True) == 3.0
    assert ready_since(state(), 5.0, 8.0, True) == 5.0  # already ready when watching began
    assert ready_since(state(), 1.0, 8.0, False) == 1.0  # any tuple makes a traditional batch
    merge_next = state(processed=10, batches=4)
    assert ready_since(merge_next, 12.0, 20.0, True) == 12.0


def test_ready_since_waits_for_submission() -> None:
    late = state()
    late.submit_at = 6.0
    assert ready_since(late, 1.0, 9.0, True) == 6.0
