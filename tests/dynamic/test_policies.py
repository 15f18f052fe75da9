"""Each policy's pick order on three one-tuple queries that all arrive at time 0.

a: cost 8, deadline 14 (laxity 6); b: cost 1, deadline 12 (laxity 11); c: cost 3, deadline 10
(laxity 7). EDF, LLF, SJF and RR each give a different order.
"""

from __future__ import annotations

import pytest

from airflow_iqp.dynamic import POLICIES, make_policy
from airflow_iqp.planning import ArrivalCurve, LinearCost
from airflow_iqp.simulation import SimQuery, simulate
from tests.dynamic import state


def three() -> list[SimQuery]:
    at_zero = ArrivalCurve.from_points([(0, 1)])
    return [
        SimQuery(name, 1, at_zero, 0.0, deadline, LinearCost(per_tuple=cost), None)
        for name, cost, deadline in (("a", 8.0, 14.0), ("b", 1.0, 12.0), ("c", 3.0, 10.0))
    ]


@pytest.mark.parametrize(
    ("policy", "order"),
    [("edf", "cba"), ("llf", "acb"), ("sjf", "bca"), ("rr", "abc")],
)
def test_pick_order(policy: str, order: str) -> None:
    result = simulate(three(), policy=policy, alpha=0.5, tau_max=10.0)
    assert "".join(entry.query for entry in result.log) == order
    assert all(entry.kind == "partial" for entry in result.log)  # one batch each: no merge


def test_llf_recomputes_laxity_at_each_pick() -> None:
    # After a runs (0..8), c's laxity is 10 - 8 - 3 = -1 and b's 12 - 8 - 1 = 3.
    result = simulate(three(), policy="llf", alpha=0.5, tau_max=10.0)
    assert [(e.query, e.start, e.end) for e in result.log] == [("a", 0, 8), ("c", 8, 11), ("b", 11, 12)]


def test_ties_go_to_the_smaller_name() -> None:
    twins = [state(), state()]
    twins[1].name = "p"
    for policy in POLICIES:
        chooser = make_policy(policy, ["q", "p"], True)
        assert chooser(twins, 3.0).name == ("q" if policy == "rr" else "p")


def test_round_robin_rotates_past_the_last_served() -> None:
    qs = [state(), state(), state()]
    for s, name in zip(qs, "xyz"):
        s.name = name
    chooser = make_policy("rr", ["x", "y", "z"], True)
    assert [chooser(qs, 0.0).name for _ in range(4)] == ["x", "y", "z", "x"]
    assert chooser([qs[0], qs[2]], 0.0).name == "z"  # after x, y is not ready


def test_unknown_policy_is_named() -> None:
    with pytest.raises(ValueError, match="policy must be one of edf, llf, sjf, rr"):
        make_policy("fifo", [], True)
