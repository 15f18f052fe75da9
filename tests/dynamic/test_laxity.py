"""Equation (9) and the remaining work it subtracts, on hand-computed cases."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from airflow_iqp.constants import BatchStatus, WindowStatus
from airflow_iqp.dynamic import laxity, remaining_cost, window_remaining
from airflow_iqp.dynamic.laxity import unfinished
from tests.dynamic import state


def test_min_batch_of_the_helper_query_is_three() -> None:
    assert state().min_batch(0.0) == 3


def test_remaining_prices_pending_batches_and_the_merge_of_all_partials() -> None:
    # 6 pending in batches of 3: 2 * cost(3) = 8; 2 done + 2 to come: agg(4) = 1 + 0.5 * 4 = 3.
    s = state(processed=4, batches=2)
    assert remaining_cost(s, 12.0, 3) == pytest.approx(11.0)
    assert laxity(s, 12.0, 3) == pytest.approx(30.0 - 12.0 - 11.0)


def test_remainder_batch_and_single_batch_pricing() -> None:
    s = state(processed=3, batches=1)
    # 7 pending in 3s: cost(3) * 2 + cost(1) = 10; 1 + 3 partials: agg(4) = 3.
    assert remaining_cost(s, 5.0, 3) == pytest.approx(13.0)
    # One batch of 7 (traditional): cost(7) = 8 and agg(2) = 2.
    assert remaining_cost(s, 5.0, None) == pytest.approx(10.0)


def test_after_the_last_partial_only_the_merge_remains() -> None:
    s = state(processed=10, batches=4)
    assert remaining_cost(s, 20.0, 3) == pytest.approx(3.0)
    assert laxity(s, 20.0, 3) == pytest.approx(7.0)


def test_negative_laxity_when_the_deadline_is_lost() -> None:
    assert laxity(state(deadline=5.0), 4.0, 3) < 0


@dataclass(frozen=True)
class Planned:
    status: BatchStatus
    predicted_cost: float


def test_a_windows_remaining_work_is_its_unfinished_batches_and_its_merge() -> None:
    batches = [
        Planned(status, cost) for status, cost in zip(BatchStatus, (1.0, 2.0, 4.0, 8.0, 16.0, 32.0), strict=True)
    ]
    # planned, waiting, running and failed batches still need all their seconds; done and skipped ones none
    assert [unfinished(b) for b in batches] == [True, True, True, False, True, False]
    assert window_remaining(WindowStatus.RUNNING, batches, 100.0) == 1 + 2 + 4 + 16 + 100
    assert window_remaining(WindowStatus.PLANNED, [], 100.0) == 100.0
    assert window_remaining(WindowStatus.MERGED, batches, 100.0) == 0.0
    assert window_remaining(WindowStatus.FAILED, batches, 100.0) == 0.0
