"""How EDF, LLF and SJF rank a waiting job, and the policy names."""

from __future__ import annotations

import pytest

from airflow_iqp.constants import Policy
from airflow_iqp.dynamic import check_policy, rank


@pytest.mark.parametrize(
    ("policy", "expected"),
    [(Policy.EDF, 100.0), (Policy.LLF, 100.0 - 40.0 - 25.0), (Policy.SJF, 25.0)],
)
def test_rank_is_the_deadline_the_laxity_or_the_remaining_work(policy: Policy, expected: float) -> None:
    assert rank(policy, deadline=100.0, remaining=25.0, now=40.0) == expected


def test_laxity_falls_as_time_passes_and_deadline_and_work_do_not() -> None:
    assert rank(Policy.LLF, 100.0, 25.0, 50.0) == rank(Policy.LLF, 100.0, 25.0, 40.0) - 10.0
    assert rank(Policy.EDF, 100.0, 25.0, 50.0) == rank(Policy.EDF, 100.0, 25.0, 40.0)
    assert rank(Policy.SJF, 100.0, 25.0, 50.0) == rank(Policy.SJF, 100.0, 25.0, 40.0)


def test_round_robin_has_no_rank() -> None:
    with pytest.raises(ValueError, match="does not rank queries"):
        rank(Policy.RR, 100.0, 25.0, 40.0)


def test_check_policy_turns_a_name_into_the_policy() -> None:
    assert [check_policy(name) for name in ("edf", "llf", "sjf", "rr")] == list(Policy)
    assert check_policy(Policy.RR) is Policy.RR
    with pytest.raises(ValueError, match="policy must be one of edf, llf, sjf, rr, got 'fifo'"):
        check_policy("fifo")
