"""Equation (9) on hand-computed cases."""

from __future__ import annotations

import pytest

from airflow_iqp.dynamic import laxity, remaining_cost
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
