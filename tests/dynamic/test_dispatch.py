"""The one ordering of waiting jobs: each policy's key, and the ties (registration, then id)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_iqp.constants import Policy
from airflow_iqp.dynamic import Candidate, Upcoming, best_first, inserted_idle
from airflow_iqp.dynamic.dispatch import RankedEntry


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


# The demo's collision at now = 119.2: q14's 29 s job ready, q6's job (20 s of work left, its
# deadline 165) released at 119.5.
Q14 = Candidate(2, "q14", 270.0, 30.0, 119.2, -math.inf)
Q6 = Upcoming("q6", 119.5, 165.0, 20.0)


def test_the_resource_waits_for_an_earlier_deadline_that_would_miss_behind_a_long_job() -> None:
    held = inserted_idle(Q14, 29.0, [Q6], 119.2)
    assert held is not None
    assert (held.passed_over, held.waits_for) == (Q14, Q6)
    assert "q6 is released at 119.500" in held.reason
    assert "behind q14's 29.0 s job" in held.reason


@pytest.mark.parametrize(
    ("candidate", "duration", "job", "why"),
    [
        (Q14, 29.0, Upcoming("q6", 119.5, 175.0, 20.0), "meets its deadline even behind the job"),
        (Q14, 0.2, Q6, "the job ends before the release"),
        (Q14, 29.0, Upcoming("q6", 148.3, 165.0, 20.0), "released after the job ends"),
        (Q14, 29.0, Upcoming("q6", 119.2, 165.0, 20.0), "already released: it is ready, not upcoming"),
        (Q14, 29.0, Upcoming("q6", 119.5, 300.0, 20.0), "a later deadline than the candidate's"),
        (Q14, 29.0, Upcoming("q6", 119.5, 130.0, 20.0), "misses even if served at its release"),
        (Candidate(2, "q14", 160.0, 30.0, 119.2, -math.inf), 29.0, Upcoming("q6", 119.5, 155.0, 20.0), "no laxity"),
        (Candidate(2, "q14", 270.0, math.nan, 119.2, -math.inf), 29.0, Q6, "the candidate is unpriced"),
        (Q14, 29.0, Upcoming("q14", 119.5, 165.0, 20.0), "its own next job"),
    ],
)
def test_the_resource_is_granted_at_once_otherwise(
    candidate: Candidate, duration: float, job: Upcoming, why: str
) -> None:
    assert inserted_idle(candidate, duration, [job], 119.2) is None, why


def test_of_several_upcoming_jobs_the_earliest_deadline_is_waited_for() -> None:
    later = Upcoming("q1", 120.0, 160.0, 15.0)
    held = inserted_idle(Q14, 29.0, [Q6, later], 119.2)
    assert held is not None
    assert held.waits_for == later


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


def test_a_stored_ranking_entry_reads_back_named_and_from_a_grant_made_before_entries_were_named() -> None:
    entry = RankedEntry(7, "q6", 1_700_000_000.5)
    assert RankedEntry.read(entry.stored()) == entry
    assert RankedEntry.read([7, "q6", 1_700_000_000.5]) == entry  # the positional form older grants kept
    assert RankedEntry.read({"request": "3", "query": "q1", "key": None}) == RankedEntry(3, "q1", None)
