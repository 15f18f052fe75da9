"""The paper's Fig. 2 cases: tuple i arrives at time i, two tuples per time unit, no merge cost."""

from __future__ import annotations

import pytest

from airflow_iqp.planning import ArrivalCurve, LinearCost, PiecewiseLinearCost, Plan, plan_single_query

CASES = {
    16: [(10, 11, 16)],
    15: [(10, 10, 15)],
    12: [(6, 7, 10), (4, 10, 12)],
    11: [(4, 6, 8), (4, 8, 10), (2, 10, 11)],
}


@pytest.mark.parametrize("method", ["greedy", "mip"])
@pytest.mark.parametrize("deadline", sorted(CASES))
def test_paper_worked_case(deadline: int, method: str) -> None:
    plan = plan_single_query(
        total=10,
        arrival=ArrivalCurve.fixed_rate(1, 10, 10),
        window_end=10,
        deadline=deadline,
        cost=LinearCost(per_tuple=0.5),
        method=method,
    )
    assert plan.feasible
    assert [(b.size, b.start, b.end) for b in plan.batches] == CASES[deadline]
    assert plan.finish == deadline
    assert plan.total_cost == 5.0
    assert (plan.merge is None) == (len(CASES[deadline]) == 1)


def test_mip_beats_greedy_where_concave_cost_rewards_a_different_cut() -> None:
    """Greedy fills the newest batch first; with concave cost a more even cut can be cheaper."""

    def plan(method: str) -> Plan:
        return plan_single_query(
            total=5,
            arrival=ArrivalCurve.fixed_rate(0, 4, 5),
            window_end=4,
            deadline=4.5,
            cost=PiecewiseLinearCost([(1, 0.5), (2, 1.0), (3, 1.25)]),
            method=method,
        )

    greedy, mip = plan("greedy"), plan("mip")
    assert greedy.feasible
    assert mip.feasible
    assert mip.total_cost < greedy.total_cost
