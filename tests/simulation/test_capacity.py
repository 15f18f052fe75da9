"""Elastic capacity in the simulator: jobs run on the cores granted, the controllers lease and
bill as they say, and on the paper's protocol the plan meets every deadline for less."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from hypothesis import given, settings

from airflow_iqp.constants import JobKind, Policy
from airflow_iqp.example_files import example_dir
from airflow_iqp.planning import ArrivalCurve, LinearCost
from airflow_iqp.planning.capacity import Speedup
from airflow_iqp.simulation import SimQuery, protocol, simulate
from airflow_iqp.simulation import capacity as cap
from airflow_iqp.simulation.engine import Noise
from tests.simulation.test_engine import queries

if TYPE_CHECKING:
    from airflow_iqp.simulation.capacity import Run

LINEARISH = Speedup(((1, 1.0), (2, 2.0), (4, 4.0)), "test: linear up to 4 cores")


@settings(max_examples=30, deadline=None)
@given(queries())
def test_one_fixed_core_runs_exactly_what_the_single_resource_runs(qs: list[SimQuery]) -> None:
    plain = simulate(qs, policy="edf", alpha=0.5, tau_max=40.0)
    one = cap.Fixed(1, LINEARISH, 60.0, 0.0)
    on_cores = simulate(qs, policy="edf", alpha=0.5, tau_max=40.0, cores=one)
    assert on_cores.log == plain.log
    assert on_cores.outcomes == plain.outcomes
    assert one.pool.held(plain.log[-1].end + 120.0) == 0, "released once the run ends"


def test_a_job_on_more_cores_takes_its_time_over_the_speedup() -> None:
    at_zero = ArrivalCurve.from_points([(0, 1)])
    qs = [SimQuery(name, 1, at_zero, 0.0, 20.0, LinearCost(8.0), None) for name in ("a", "b")]
    result = simulate(qs, policy="edf", alpha=0.5, tau_max=10.0, cores=cap.Fixed(4, LINEARISH, 60.0, 0.0))
    assert [(e.query, e.start, e.end, e.cores) for e in result.log] == [("a", 0, 2, 4), ("b", 2, 4, 4)]


def test_the_reactive_controller_adds_a_core_on_backlog_and_releases_after_its_idle_timeout() -> None:
    # Three 8 s jobs at 0, two more at 100, a 10 s threshold: a (0-8) on the first core, b with
    # 16 s ready on a second (8-12), c with 8 s ready on the two held (12-16); idle from 16 s,
    # both go at 76 s, and at 100 a single core is leased again.
    def query(name: str, at: float) -> SimQuery:
        return SimQuery(name, 1, ArrivalCurve.from_points([(at, 1)]), at, at + 50.0, LinearCost(8.0), None, at)

    reactive = cap.Reactive(10.0, 4, LINEARISH, 60.0)
    qs = [query("a", 0.0), query("b", 0.0), query("c", 0.0), query("d", 100.0), query("e", 100.0)]
    result = simulate(qs, policy=Policy.EDF, alpha=0.5, tau_max=10.0, cores=reactive)
    assert [(e.start, e.cores) for e in result.log] == [(0, 1), (8, 2), (12, 2), (100, 1), (108, 1)]
    assert result.all_met
    assert reactive.pool.held(75.0) == 2
    assert reactive.pool.held(77.0) == 0
    assert reactive.pool.held(100.0) == 1
    assert reactive.pool.billed() == 2 * 120.0 + 60.0, "both held into their second minute, then one"


def test_the_plan_leases_its_phase_cores_and_keeps_paid_ones_until_their_unit_ends() -> None:
    planned = cap.Planned(1, 3, 100.0, LINEARISH, 60.0)
    assert planned.grant(10.0, 0.0) == 1
    planned.idle(20.0)
    assert planned.pool.held(50.0) == 1, "the open phase's core stays"
    assert planned.grant(100.0, 0.0) == 3
    planned.finish(130.0)  # the first core's second unit ends then; the two others' first at 160
    assert planned.pool.held(131.0) == 2
    assert planned.pool.held(161.0) == 0
    assert planned.pool.billed() == 120.0 + 2 * 60.0


def test_window_task_prices_the_minbatch_batches_and_the_merge_after_the_close() -> None:
    arrival = ArrivalCurve.fixed_rate(0.0, 99.0, 100)
    query = SimQuery("q", 100, arrival, 99.0, 120.0, LinearCost(0.1, 1.0), LinearCost(0.5, 1.0), 0.0)
    task = cap.window_task(query, alpha=0.5, tau_max=30.0)
    assert task.period == 99.0
    assert task.deadline == 120.0
    assert task.final_work < task.work
    assert task.work == pytest.approx(query.cost.cost(100) * 1.5, rel=0.35), "MinBatch keeps within 1 + alpha"


def test_unknown_controllers_are_refused() -> None:
    queries_, window_end, _ = protocol.paper_workload(example_dir("cost_models"), "in_process", "FR")
    experiment = protocol.Experiment(queries_[:2], window_end, [q.name for q in queries_[:2]], 0.5, 30.0)
    model = cap.plan(experiment.workload(1.0), experiment)
    with pytest.raises(ValueError, match="unknown controller 'static'"):
        cap.run(experiment.workload(1.0), experiment, model, ["static"])


@pytest.mark.parametrize("btu", [60.0, 3600.0])
def test_on_the_protocol_elastic_meets_every_deadline_for_less_than_fixed_and_reactive(btu: float) -> None:
    """The paper's 13 queries at scale 1 with costs spread 0.3 (seed 0), delta 0.6."""
    queries_, window_end, _ = protocol.paper_workload(example_dir("cost_models"), "in_process", "FR", 1.0)
    order = protocol.deadline_order(queries_)
    experiment = protocol.Experiment(queries_, window_end, order, 0.5, 30.0, Noise(0.3))
    rows = cap.table(experiment, [0.6], btu=btu)
    model, runs = rows[0.6]
    by_name: dict[str, Run] = {r.controller: r for r in runs}
    assert model.open.cores is not None
    assert model.closed.cores is not None
    assert model.open.cores < model.closed.cores
    assert by_name["fixed"].peak == model.closed.cores
    assert all(r.result.all_met for r in runs)
    assert by_name["elastic"].billed < 0.7 * by_name["fixed"].billed
    assert by_name["elastic"].billed <= by_name["reactive"].billed
    assert all(e.cores >= 1 for e in by_name["elastic"].result.log if e.kind is JobKind.MERGE)
