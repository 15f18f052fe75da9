"""The one ordering of waiting jobs: each policy's key, and the ties (registration, then id)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_iqp.constants import Policy
from airflow_iqp.dynamic import Candidate, best_first


def candidate(request: int, deadline: float, remaining: float, registered: float, last_served: float) -> Candidate:
    return Candidate(request, f"q{request}", deadline, remaining, registered, last_served)


# At now = 10: 1 has the earliest deadline, 2 the least laxity (20 - 10 - 9.5 against 15 - 10 - 4), 3 the least
# work; 4 was never served, so round robin takes it first, then the longest unserved (3).
QUEUE = [
    candidate(1, 15.0, 4.0, 0.0, 5.0),
    candidate(2, 20.0, 9.5, 0.0, 6.0),
    candidate(3, 30.0, 1.0, 0.0, 2.0),
    candidate(4, 40.0, 5.0, 0.0, -math.inf),
]


@pytest.mark.parametrize(
    ("policy", "order"),
    [(Policy.EDF, [1, 2, 3, 4]), (Policy.LLF, [2, 1, 3, 4]), (Policy.SJF, [3, 1, 4, 2]), (Policy.RR, [4, 3, 1, 2])],
)
def test_each_policy_orders_the_queue(policy: Policy, order: list[int]) -> None:
    assert [c.request for c in best_first(policy, QUEUE, 10.0)] == order
    assert [c.request for c in best_first(policy.value, QUEUE[::-1], 10.0)] == order


@pytest.mark.parametrize("policy", list(Policy))
def test_ties_go_to_the_earlier_registration_then_to_the_smaller_id(policy: Policy) -> None:
    tied = [candidate(7, 20.0, 5.0, 3.0, -math.inf), candidate(9, 20.0, 5.0, 1.0, -math.inf)]
    tied += [candidate(8, 20.0, 5.0, 3.0, -math.inf)]
    assert [c.request for c in best_first(policy, tied, 10.0)] == [9, 7, 8]


@given(
    st.lists(
        st.tuples(st.sampled_from([10.0, 20.0]), st.sampled_from([1.0, 2.0]), st.sampled_from([0.0, 1.0])),
        min_size=1,
        max_size=8,
    ),
    st.sampled_from(list(Policy)),
)
def test_the_order_is_total_and_does_not_depend_on_the_input_order(
    fields: list[tuple[float, float, float]], policy: Policy
) -> None:
    queue = [candidate(i, d, r, reg, reg - 1) for i, (d, r, reg) in enumerate(fields)]
    ranked = best_first(policy, queue, 5.0)
    assert sorted(c.request for c in ranked) == list(range(len(queue)))
    assert best_first(policy, ranked[::-1], 5.0) == ranked
    keys = [c.key(policy, 5.0) for c in ranked]
    assert keys == sorted(keys)
    assert len(set(keys)) == len(keys)  # the id breaks every tie


def test_an_unknown_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="policy must be one of"):
        best_first("fifo", QUEUE, 0.0)


@given(
    st.lists(
        st.tuples(
            st.floats(0.0, 100.0),  # deadline
            st.floats(0.0, 10.0),  # remaining
            st.none() | st.floats(-1000.0, 0.0),  # the backfilled window's start, None for live
        ),
        min_size=1,
        max_size=10,
    ),
    st.sampled_from(list(Policy)),
)
def test_every_live_job_goes_before_every_backfill_job_and_backfills_oldest_window_first(
    fields: list[tuple[float, float, float | None]], policy: Policy
) -> None:
    queue = [replace(candidate(i, d, r, float(i), -math.inf), backfill_window=w) for i, (d, r, w) in enumerate(fields)]
    ranked = best_first(policy, queue, 5.0)
    tiers = [c.backfill_window is not None for c in ranked]
    assert tiers == sorted(tiers)  # no live job after a backfill job
    backfilled = [c.backfill_window for c in ranked if c.backfill_window is not None]
    assert backfilled == sorted(backfilled)


def test_a_backfill_job_with_a_long_past_deadline_waits_behind_a_live_one() -> None:
    live = candidate(1, deadline=100.0, remaining=5.0, registered=3.0, last_served=-math.inf)
    old = replace(
        candidate(2, deadline=-1e6, remaining=5.0, registered=1.0, last_served=-math.inf), backfill_window=-2e6
    )
    for policy in Policy:
        assert [c.request for c in best_first(policy, [old, live], 10.0)] == [1, 2]
