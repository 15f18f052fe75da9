"""Planners against exhaustive search over every cut of a few tuples into batches."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_iqp.planning import Plan, plan_single_query
from tests.planning import brute_force
from tests.planning.plan_checks import assert_valid_schedule
from tests.planning.strategies import concave_costs, deadlines, instances, linear_costs

any_cost = st.one_of(linear_costs, concave_costs())


def slow(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def plan(inst: brute_force.Instance, deadline: float, method: str) -> Plan:
    return plan_single_query(
        total=inst.total,
        arrival=inst.arrival,
        window_end=inst.window_end,
        deadline=deadline,
        cost=inst.cost,
        agg_cost=inst.agg_cost,
        method=method,
    )


@slow(600)
@given(data=st.data(), inst=instances(any_cost))
def test_greedy_is_never_wrong_about_feasibility(data: st.DataObject, inst: brute_force.Instance) -> None:
    deadline = data.draw(deadlines(inst))
    result = plan(inst, deadline, "greedy")
    assert result.feasible == (brute_force.best(inst, deadline) is not None)
    assert_valid_schedule(inst, result, deadline)


@slow(400)
@given(data=st.data(), inst=instances(linear_costs))
def test_greedy_is_cost_optimal_for_linear_cost(data: st.DataObject, inst: brute_force.Instance) -> None:
    deadline = data.draw(deadlines(inst))
    optimum = brute_force.best(inst, deadline)
    result = plan(inst, deadline, "greedy")
    if optimum is not None:
        assert math.isclose(result.total_cost, optimum, rel_tol=1e-9, abs_tol=1e-12)


@slow(200)
@given(data=st.data(), inst=instances(any_cost, max_total=7))
def test_mip_is_cost_optimal(data: st.DataObject, inst: brute_force.Instance) -> None:
    deadline = data.draw(deadlines(inst))
    optimum = brute_force.best(inst, deadline)
    result = plan(inst, deadline, "mip")
    assert_valid_schedule(inst, result, deadline)
    assert result.feasible == (optimum is not None)
    if optimum is not None:
        assert math.isclose(result.total_cost, optimum, rel_tol=1e-9, abs_tol=1e-12)


@slow(300)
@given(inst=instances(any_cost))
def test_infeasible_plan_is_for_the_earliest_feasible_deadline(inst: brute_force.Instance) -> None:
    earliest = brute_force.earliest_deadline(inst)
    deadline = max(inst.arrival.time_of(1), earliest - 1.0)
    result = plan(inst, deadline, "greedy")
    if deadline >= earliest:
        assert result.feasible
        return
    assert not result.feasible
    assert result.earliest_deadline is not None
    assert result.reason is not None
    assert math.isclose(result.earliest_deadline, earliest, rel_tol=1e-9, abs_tol=1e-9)
    assert f"{earliest:.6g}" in result.reason
    assert_valid_schedule(inst, result, deadline)
