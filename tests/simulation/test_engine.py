"""The discrete-event engine: invariants on random workloads, the paper's claims on small
constructed ones, each policy's order with the live dispatcher's ties, and bad input."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_iqp.constants import JobKind, Policy
from airflow_iqp.planning import ArrivalCurve, LinearCost
from airflow_iqp.simulation import LogEntry, Noise, SimQuery, SimResult, simulate


@st.composite
def queries(draw: st.DrawFn) -> list[SimQuery]:
    out = []
    for i in range(draw(st.integers(1, 4))):
        start = draw(st.integers(0, 10))
        total = draw(st.integers(1, 20))
        arrival: ArrivalCurve
        if draw(st.booleans()):
            arrival = ArrivalCurve.fixed_rate(start, start + draw(st.integers(0, 20)), total)
        else:
            gaps = draw(st.lists(st.integers(0, 6), min_size=total, max_size=total))
            arrival = ArrivalCurve.from_points([(start + sum(gaps[: n + 1]), n + 1) for n in range(total)])
        last = arrival.time_of(total)
        out.append(
            SimQuery(
                name=f"q{i}",
                total=draw(st.sampled_from([total, None, max(1, total - 2)])),
                arrival=arrival,
                window_end=last + draw(st.integers(-3, 3)),
                deadline=last + draw(st.integers(0, 40)),
                cost=LinearCost(draw(st.sampled_from([0.25, 0.5, 1.0])), draw(st.sampled_from([0.0, 0.5, 2.0]))),
                agg_cost=draw(st.sampled_from([None, LinearCost(0.25), LinearCost(0.25, 1.0)])),
                submit_at=draw(st.sampled_from([None, start - 2, start + 3])),
            )
        )
    return out


def check_invariants(qs: list[SimQuery], result: SimResult, tau_max: float, min_batch: bool) -> None:
    by_name = {q.name: q for q in qs}
    for before, after in zip(result.log, result.log[1:]):
        assert after.start >= before.end, "one resource, non-preemptive: no overlap"
    processed: dict[str, int] = defaultdict(int)
    partials: dict[str, list[LogEntry]] = defaultdict(list)
    merges: dict[str, list[LogEntry]] = defaultdict(list)
    for entry in result.log:
        q = by_name[entry.query]
        if entry.kind == JobKind.PARTIAL:
            submit = q.arrival.first_arrival if q.submit_at is None else q.submit_at
            processed[q.name] += entry.size
            assert entry.start >= submit
            assert q.arrival.count_at(entry.start) >= processed[q.name], "a batch ran before its tuples arrived"
            assert entry.end - entry.start == pytest.approx(q.cost.cost(entry.size))
            if min_batch:
                assert q.cost.cost(entry.size) <= tau_max
            partials[q.name].append(entry)
        else:
            assert entry.kind == JobKind.MERGE
            merges[q.name].append(entry)
    for q in qs:
        outcome = result.outcomes[q.name]
        assert processed[q.name] == q.tuples, "every tuple exactly once"
        assert outcome.batches == len(partials[q.name])
        spent = sum(e.end - e.start for e in partials[q.name] + merges[q.name])
        assert outcome.cost == pytest.approx(spent)
        if outcome.batches == 1:
            assert not merges[q.name]
            assert outcome.finish == partials[q.name][0].end
        else:
            (merge,) = merges[q.name]
            assert merge.size == outcome.batches
            assert merge.start >= partials[q.name][-1].end
            assert outcome.finish == merge.end
        assert outcome.met == (outcome.finish <= q.deadline)


@settings(max_examples=150, deadline=None)
@given(
    qs=queries(),
    policy=st.sampled_from(list(Policy)),
    alpha=st.sampled_from([0.25, 0.5, 1.0]),
    min_batch=st.booleans(),
)
def test_invariants_on_random_workloads(qs: list[SimQuery], policy: Policy, alpha: float, min_batch: bool) -> None:
    result = simulate(qs, policy=policy, alpha=alpha, tau_max=10.0, min_batch=min_batch)
    check_invariants(qs, result, 10.0, min_batch)


# --- each policy's order ---------------------------------------------------------------------


def three() -> list[SimQuery]:
    """a: cost 8, deadline 14 (laxity 6); b: cost 1, deadline 12 (laxity 11); c: cost 3,
    deadline 10 (laxity 7); all ready at 0. EDF, LLF, SJF and RR each give a different order.
    """
    at_zero = ArrivalCurve.from_points([(0, 1)])
    return [
        SimQuery(name, 1, at_zero, 0.0, deadline, LinearCost(per_tuple=cost), None)
        for name, cost, deadline in (("a", 8.0, 14.0), ("b", 1.0, 12.0), ("c", 3.0, 10.0))
    ]


@pytest.mark.parametrize(("policy", "order"), [("edf", "cba"), ("llf", "acb"), ("sjf", "bca"), ("rr", "abc")])
def test_pick_order(policy: str, order: str) -> None:
    result = simulate(three(), policy=policy, alpha=0.5, tau_max=10.0)
    assert "".join(entry.query for entry in result.log) == order
    assert all(entry.kind == JobKind.PARTIAL for entry in result.log)  # one batch each: no merge


def test_llf_recomputes_laxity_at_each_pick() -> None:
    # After a runs (0..8), c's laxity is 10 - 8 - 3 = -1 and b's 12 - 8 - 1 = 3.
    result = simulate(three(), policy="llf", alpha=0.5, tau_max=10.0)
    assert [(e.query, e.start, e.end) for e in result.log] == [("a", 0, 8), ("c", 8, 11), ("b", 11, 12)]


def test_round_robin_serves_the_query_served_least_recently() -> None:
    # Traditional batches, 1 s a tuple. x and z are ready at 0 (x first: it comes first in the
    # workload), z runs at 1; at 2 x and y are ready: y was never served, so y goes before x,
    # where a rotation in submission order would come back to x after z.
    def query(name: str, arrivals: list[tuple[float, int]]) -> SimQuery:
        return SimQuery(name, None, ArrivalCurve.from_points(arrivals), 2.0, 100.0, LinearCost(1.0), None, 0.0)

    qs = [query("x", [(0, 1), (1.5, 2)]), query("y", [(1.5, 1)]), query("z", [(0, 1)])]
    result = simulate(qs, policy="rr", alpha=0.5, tau_max=10.0, min_batch=False)
    partials = [(e.query, e.start) for e in result.log if e.kind == JobKind.PARTIAL]
    assert partials == [("x", 0.0), ("z", 1.0), ("y", 2.0), ("x", 3.0)]


@pytest.mark.parametrize("policy", list(Policy))
def test_ties_go_to_the_job_that_became_ready_first_then_to_the_workload_order(policy: Policy) -> None:
    # c holds the resource from 0 to 3. a's tuple lands at 2, b's at 1: at 3 both wait with the
    # same deadline and cost, and b asked first. d and e land together at 1.5 after b and tie
    # on everything: the workload's order decides (e before d), not the name.
    def query(name: str, at: float, cost: float = 1.0, deadline: float = 50.0) -> SimQuery:
        return SimQuery(name, 1, ArrivalCurve.from_points([(at, 1)]), at, deadline, LinearCost(cost), None, 0.0)

    qs = [query("c", 0.0, 3.0, 4.0), query("a", 2.0), query("e", 1.5), query("d", 1.5), query("b", 1.0)]
    result = simulate(qs, policy=policy, alpha=0.5, tau_max=10.0)
    assert [e.query for e in result.log] == ["c", "b", "e", "d", "a"]


def test_the_merge_asks_when_the_last_batch_ends() -> None:
    # Traditional batches. p's last partial ends at 4 and its merge asks then, as r does, whose
    # earlier deadline wins (4..6); q's tuple lands at 5. At 6 the merge and q tie on the
    # deadline: the merge asked first, so it runs first although q comes first in the workload.
    def query(name: str, arrivals: list[tuple[float, int]], cost: float, deadline: float) -> SimQuery:
        arrival = ArrivalCurve.from_points(arrivals)
        return SimQuery(name, None, arrival, 5.0, deadline, LinearCost(cost), LinearCost(3.0), 0.0)

    qs = [query("q", [(5, 1)], 1.0, 50.0), query("r", [(4, 1)], 2.0, 10.0), query("p", [(0, 1), (2, 2)], 2.0, 50.0)]
    result = simulate(qs, policy="edf", alpha=0.5, tau_max=10.0, min_batch=False)
    assert [(e.query, e.kind, e.start) for e in result.log] == [
        ("p", JobKind.PARTIAL, 0.0),
        ("p", JobKind.PARTIAL, 2.0),
        ("r", JobKind.PARTIAL, 4.0),
        ("p", JobKind.MERGE, 6.0),
        ("q", JobKind.PARTIAL, 12.0),
    ]


# --- the paper's claims on small workloads ---------------------------------------------------


def test_slow_input_starts_a_batch_before_min_batch_arrived() -> None:
    # cost(n) = 1 + n, agg(k) = 1 + k/2: MinBatch 3 at alpha 0.6. Tuples 1-2 on time, 3-10 at 20.
    slow = ArrivalCurve.from_points([(1, 1), (2, 2), (20, 10)])
    q = SimQuery("q", 10, slow, 10.0, 50.0, LinearCost(1.0, 1.0), LinearCost(0.5, 1.0))
    first = simulate([q], policy="edf", alpha=0.6, tau_max=10.0).log[0]
    assert (first.start, first.size) == (3.0, 2)  # tuple 3 was due at 3
    assert slow.count_at(first.start) < 3


def test_edf_and_llf_meet_a_staggered_workload_that_sjf_and_rr_miss() -> None:
    # D_i = we + (sum of single-batch costs so far), sorted long (5 s) then short (1 s).
    at_zero = ArrivalCurve.from_points([(0, 1)])
    qs = [
        SimQuery("short", 1, at_zero, 0.0, 6.0, LinearCost(1.0), None),
        SimQuery("long", 1, at_zero, 0.0, 5.0, LinearCost(5.0), None),
    ]
    met = {p: simulate(qs, policy=p, alpha=0.5, tau_max=10.0).all_met for p in Policy}
    assert met == {Policy.EDF: True, Policy.LLF: True, Policy.SJF: False, Policy.RR: False}


def test_traditional_baselines_cost_more_than_min_batch() -> None:
    # Overhead-dominated batches on a slow stream: whatever-arrived batches are tiny.
    qs = [
        SimQuery(
            name,
            100,
            ArrivalCurve.fixed_rate(1, 100, 100),
            100.0,
            deadline,
            LinearCost(0.01, 1.0),
            LinearCost(0.01, 0.5),
        )
        for name, deadline in (("a", 110.0), ("b", 120.0))
    ]
    for policy in (Policy.EDF, Policy.LLF):
        dynamic = simulate(qs, policy=policy, alpha=0.5, tau_max=30.0)
        baseline = simulate(qs, policy=policy, alpha=0.5, tau_max=30.0, min_batch=False)
        assert dynamic.normalized_cost <= 1.5 + 1e-9
        assert baseline.normalized_cost > 3 * dynamic.normalized_cost
        assert dynamic.all_met


def test_unknown_total_waits_for_a_rate_then_estimates_it() -> None:
    # Ten tuples at 1..10, total undeclared: at 1 no rate is known, at 2 the estimate is 10.
    q = SimQuery("q", None, ArrivalCurve.fixed_rate(1, 10, 10), 10.0, 50.0, LinearCost(1.0, 1.0), LinearCost(0.5, 1.0))
    result = simulate([q], policy="edf", alpha=0.6, tau_max=10.0)
    assert [(e.kind, e.size, e.start) for e in result.log] == [
        (JobKind.PARTIAL, 3, 3.0),
        (JobKind.PARTIAL, 3, 7.0),
        (JobKind.PARTIAL, 3, 11.0),
        (JobKind.PARTIAL, 1, 15.0),
        (JobKind.MERGE, 4, 17.0),
    ]


def test_deadline_before_window_end_is_allowed_and_missed() -> None:
    q = SimQuery("q", 5, ArrivalCurve.fixed_rate(0, 10, 5), 10.0, 5.0, LinearCost(1.0), None)
    result = simulate([q], policy="edf", alpha=0.5, tau_max=10.0)
    assert not result.outcomes["q"].met
    assert not result.all_met


# --- bad input -------------------------------------------------------------------------------


def one(name: str = "q", per_tuple: float = 1.0) -> SimQuery:
    return SimQuery(name, 5, ArrivalCurve.fixed_rate(0, 10, 5), 10.0, 20.0, LinearCost(per_tuple), None)


@pytest.mark.parametrize(
    ("kwargs", "qs", "match"),
    [
        ({"policy": "fifo"}, [one()], "policy must be one of edf, llf, sjf, rr"),
        ({"alpha": 0.0}, [one()], "alpha must be > 0"),
        ({"alpha": float("nan")}, [one()], "alpha must be a finite number"),
        ({"tau_max": -1.0}, [one()], "tau_max must be > 0"),
        ({"tau_max": 2.0}, [one("fast", 1.0), one("slow", 3.0)], "one tuple of query 'slow'"),
        ({}, [], "queries must hold at least one query"),
        ({}, [one("q"), one("q")], "duplicate name 'q'"),
    ],
)
def test_bad_input_names_the_field(kwargs: dict[str, Any], qs: list[SimQuery], match: str) -> None:
    args: dict[str, Any] = {"policy": "edf", "alpha": 0.5, "tau_max": 10.0} | kwargs
    with pytest.raises(ValueError, match=match):
        simulate(qs, **args)


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("total", 0, r"query 'q': total must be >= 1"),
        ("total", 2.5, r"query 'q': total must be a whole number"),
        ("total", 6, r"query 'q': total \(6\) exceeds the 5 tuples of its arrival"),
        ("deadline", float("nan"), r"query 'q': deadline must be a finite number"),
        ("window_end", True, r"query 'q': window_end must be a finite number"),
        ("submit_at", "0", r"query 'q': submit_at must be a finite number"),
        ("name", "", r"name must be a non-empty string"),
    ],
)
def test_bad_query_fields_are_named(field: str, value: object, match: str) -> None:
    fields: dict[str, Any] = {
        "name": "q",
        "total": 5,
        "arrival": ArrivalCurve.fixed_rate(0, 10, 5),
        "window_end": 10.0,
        "deadline": 20.0,
        "cost": LinearCost(1.0),
        "agg_cost": None,
    } | {field: value}
    with pytest.raises(ValueError, match=match):
        SimQuery(**fields)


def demo_collision() -> list[SimQuery]:
    """The demo's collision: q14's 29 s batch is ready at 119.2 s (deadline 270 s); q6's whole
    window, one 20 s batch, is ready 0.3 s later, when its last tuple lands (deadline 165 s).
    A 5 s overhead per batch and alpha 0.1 make each window one batch.
    """
    return [
        SimQuery("q6", 100, ArrivalCurve.fixed_rate(0.0, 119.5, 100), 119.5, 165.0, LinearCost(0.15, 5.0), None),
        SimQuery("q14", 100, ArrivalCurve.fixed_rate(0.0, 119.2, 100), 119.2, 270.0, LinearCost(0.24, 5.0), None),
    ]


@pytest.mark.parametrize("policy", [Policy.EDF, Policy.LLF])
def test_the_earlier_deadline_released_moments_later_is_served_first_with_inserted_idle_time(policy: Policy) -> None:
    queries = demo_collision()
    busy = simulate(queries, policy=policy, alpha=0.1, tau_max=30.0)
    assert [(e.query, e.start) for e in busy.log] == [("q14", 119.2), ("q6", pytest.approx(148.2))]
    assert not busy.outcomes["q6"].met  # 148.2 + 20 > 165: the blocking of the issue
    assert busy.idles == []

    waiting = simulate(queries, policy=policy, alpha=0.1, tau_max=30.0, idle=True)
    assert [(e.query, e.start) for e in waiting.log] == [("q6", 119.5), ("q14", 139.5)]
    assert waiting.all_met
    [idle] = waiting.idles
    assert (idle.start, idle.end, idle.passed_over, idle.waits_for) == (119.2, 119.5, "q14", "q6")
    assert "q6 is released at 119.500" in idle.reason
    assert waiting.total_cost == busy.total_cost  # the same jobs, in another order


def test_idling_holds_no_job_that_ends_before_the_earlier_deadline_is_released() -> None:
    """q14's job is short enough to end before q6's is released: granted at once."""
    q6, q14 = demo_collision()
    short = SimQuery("q14", 10, ArrivalCurve.fixed_rate(0.0, 100.0, 10), 100.0, 270.0, LinearCost(0.1, 5.0), None)
    result = simulate([q6, short], policy=Policy.EDF, alpha=0.1, tau_max=30.0, idle=True)
    assert [e.query for e in result.log] == ["q14", "q6"]
    assert result.idles == []
    assert result.all_met


@settings(max_examples=150, deadline=None)
@given(qs=queries(), policy=st.sampled_from([Policy.EDF, Policy.LLF]))
def test_with_inserted_idle_time_every_invariant_still_holds(qs: list[SimQuery], policy: Policy) -> None:
    result = simulate(qs, policy=policy, alpha=0.5, tau_max=30.0, idle=True)
    check_invariants(qs, result, 30.0, True)
    for idle in result.idles:
        assert idle.end > idle.start
        assert not any(e.start < idle.end and e.end > idle.start for e in result.log), "idle means no job runs"


# -- jobs that stray from the model, and the margin that plans for it ---------------------------


def test_noise_draws_have_mean_one_and_the_spread() -> None:
    noise = Noise(spread=0.3, seed=7)
    draws = [noise.factor("q", JobKind.PARTIAL, i) for i in range(4000)]
    mean = sum(draws) / len(draws)
    std = (sum((d - mean) ** 2 for d in draws) / len(draws)) ** 0.5
    assert mean == pytest.approx(1.0, abs=0.03)
    assert std == pytest.approx(0.3, abs=0.03)
    assert min(draws) > 0
    assert draws == [Noise(spread=0.3, seed=7).factor("q", JobKind.PARTIAL, i) for i in range(4000)]
    assert draws != [Noise(spread=0.3, seed=8).factor("q", JobKind.PARTIAL, i) for i in range(4000)]


def noisy_query(deadline: float) -> SimQuery:
    return SimQuery(
        name="q",
        total=40,
        arrival=ArrivalCurve.fixed_rate(0.0, 39.0, 40),
        window_end=39.0,
        deadline=deadline,
        cost=LinearCost(0.5, 1.0),
        agg_cost=LinearCost(0.25, 0.5),
    )


@pytest.mark.parametrize("margin", [0.0, 2.0])
def test_jobs_take_the_models_cost_times_their_draw_whatever_the_margin(margin: float) -> None:
    q = noisy_query(80.0)
    noise = Noise(spread=0.4, margin=margin, seed=1)
    result = simulate([q], policy="edf", alpha=0.5, tau_max=30.0, noise=noise)
    partials = [e for e in result.log if e.kind == JobKind.PARTIAL]
    assert len(partials) > 1
    for i, entry in enumerate(partials):
        expected = q.cost.cost(entry.size) * noise.factor("q", JobKind.PARTIAL, i)
        assert entry.end - entry.start == pytest.approx(expected)
    assert result.outcomes["q"].cost == pytest.approx(sum(e.end - e.start for e in result.log))


def test_without_spread_the_margin_changes_nothing() -> None:
    q = noisy_query(60.0)
    plain = simulate([q], policy="llf", alpha=0.5, tau_max=30.0)
    margin = simulate([q], policy="llf", alpha=0.5, tau_max=30.0, noise=Noise(spread=0.0, margin=2.0))
    assert margin.log == plain.log


def test_the_scheduler_estimates_with_the_margin() -> None:
    q = noisy_query(60.0)
    state = q.state(alpha=0.5, tau_max=30.0, margin=1.4)
    assert state.cost.cost(10) == pytest.approx(1.4 * q.cost.cost(10))
    assert state.agg_cost is not None
    assert state.agg_cost.cost(3) == pytest.approx(1.4 * LinearCost(0.25, 0.5).cost(3))


def test_a_negative_spread_is_refused() -> None:
    with pytest.raises(ValueError, match="spread"):
        Noise(spread=-0.1)
