"""The multi-query simulator: invariants on random workloads, the paper's claims on small
constructed ones, bad input, and `iqp simulate`."""

from __future__ import annotations

import json
import re
import struct
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_iqp.cli import main
from airflow_iqp.planning import ArrivalCurve, LinearCost
from airflow_iqp.simulate import SimQuery, SimResult, simulate

REPO = Path(__file__).resolve().parent.parent


@st.composite
def queries(draw: st.DrawFn) -> list[SimQuery]:
    out = []
    for i in range(draw(st.integers(1, 4))):
        start = draw(st.integers(0, 10))
        total = draw(st.integers(1, 20))
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
    partials: dict[str, list] = defaultdict(list)
    merges: dict[str, list] = defaultdict(list)
    for entry in result.log:
        q = by_name[entry.query]
        if entry.kind == "partial":
            submit = q.arrival.first_arrival if q.submit_at is None else q.submit_at
            processed[q.name] += entry.size
            assert entry.start >= submit
            assert q.arrival.count_at(entry.start) >= processed[q.name], "a batch ran before its tuples arrived"
            assert entry.end - entry.start == pytest.approx(q.cost.cost(entry.size))
            if min_batch:
                assert q.cost.cost(entry.size) <= tau_max
            partials[q.name].append(entry)
        else:
            assert entry.kind == "merge"
            merges[q.name].append(entry)
    for q in qs:
        outcome = result.outcomes[q.name]
        assert processed[q.name] == q.tuples, "every tuple exactly once"
        assert outcome.batches == len(partials[q.name])
        spent = sum(e.end - e.start for e in partials[q.name] + merges[q.name])
        assert outcome.cost == pytest.approx(spent)
        if outcome.batches == 1:
            assert not merges[q.name] and outcome.finish == partials[q.name][0].end
        else:
            (merge,) = merges[q.name]
            assert merge.size == outcome.batches and merge.start >= partials[q.name][-1].end
            assert outcome.finish == merge.end
        assert outcome.met == (outcome.finish <= q.deadline)


@settings(max_examples=150, deadline=None)
@given(
    qs=queries(),
    policy=st.sampled_from(["edf", "llf", "sjf", "rr"]),
    alpha=st.sampled_from([0.25, 0.5, 1.0]),
    min_batch=st.booleans(),
)
def test_invariants_on_random_workloads(qs: list[SimQuery], policy: str, alpha: float, min_batch: bool) -> None:
    result = simulate(qs, policy=policy, alpha=alpha, tau_max=10.0, min_batch=min_batch)
    check_invariants(qs, result, 10.0, min_batch)


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
    met = {p: simulate(qs, policy=p, alpha=0.5, tau_max=10.0).all_met for p in ("edf", "llf", "sjf", "rr")}
    assert met == {"edf": True, "llf": True, "sjf": False, "rr": False}


def test_traditional_baselines_cost_more_than_min_batch() -> None:
    # Overhead-dominated batches on a slow stream: whatever-arrived batches are tiny.
    qs = [
        SimQuery(name, 100, ArrivalCurve.fixed_rate(1, 100, 100), 100.0, deadline, LinearCost(0.01, 1.0), LinearCost(0.01, 0.5))
        for name, deadline in (("a", 110.0), ("b", 120.0))
    ]
    for policy in ("edf", "llf"):
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
        ("partial", 3, 3.0), ("partial", 3, 7.0), ("partial", 3, 11.0), ("partial", 1, 15.0), ("merge", 4, 17.0)
    ]


def test_deadline_before_window_end_is_allowed_and_missed() -> None:
    q = SimQuery("q", 5, ArrivalCurve.fixed_rate(0, 10, 5), 10.0, 5.0, LinearCost(1.0), None)
    result = simulate([q], policy="edf", alpha=0.5, tau_max=10.0)
    assert not result.outcomes["q"].met and not result.all_met


def one(name: str = "q", per_tuple: float = 1.0) -> SimQuery:
    return SimQuery(name, 5, ArrivalCurve.fixed_rate(0, 10, 5), 10.0, 20.0, LinearCost(per_tuple), None)


@pytest.mark.parametrize(
    ("kwargs", "qs", "match"),
    [
        ({"policy": "fifo"}, [one()], "policy must be one of"),
        ({"alpha": 0.0}, [one()], "alpha must be a finite number > 0"),
        ({"alpha": -1.0}, [one()], "alpha"),
        ({"tau_max": 2.0}, [one("fast", 1.0), one("slow", 3.0)], "one tuple of query 'slow'"),
        ({}, [], "queries must hold at least one query"),
        ({}, [one("q"), one("q")], "duplicate name 'q'"),
    ],
)
def test_bad_input_names_the_field(kwargs: dict, qs: list[SimQuery], match: str) -> None:
    args = {"policy": "edf", "alpha": 0.5, "tau_max": 10.0} | kwargs
    with pytest.raises(ValueError, match=match):
        simulate(qs, **args)


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [("total", 0, "total must be a whole number in 1..5"), ("total", 6, "total"), ("deadline", float("nan"), "deadline")],
)
def test_bad_query_fields_are_named(field: str, value: object, match: str) -> None:
    fields = {"name": "q", "total": 5, "arrival": ArrivalCurve.fixed_rate(0, 10, 5), "window_end": 10.0,
              "deadline": 20.0, "cost": LinearCost(1.0), "agg_cost": None} | {field: value}
    with pytest.raises(ValueError, match=match):
        SimQuery(**fields)


def workload(tmp_path: Path, queries: list[dict]) -> Path:
    file = tmp_path / "workload.json"
    file.write_text(json.dumps({"window_end": 100, "queries": queries}))
    return file


def test_cli_runs_a_workload_and_draws_the_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    qs = [
        {"name": n, "cost": {"per_tuple": 0.01, "overhead": 1.0}, "merge": {"points": [[2, 0.5], [100, 1.5]]},
         "arrival": {"start": 1, "end": 100, "total": 100}}
        for n in ("a", "b")
    ]
    png = tmp_path / "out.png"
    assert main(["simulate", "--workload", str(workload(tmp_path, qs)), "--png", str(png)]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.strip().startswith(("1.0", "0.1"))]
    assert len(rows) == 2 and all(len(row) == 13 for row in rows)  # delta + 6 x (met, cost)
    assert rows[0][1] == "2/2"
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and struct.unpack(">II", data[16:24])[0] > 0


@pytest.mark.parametrize(
    ("queries", "match"),
    [
        ([{"cost": {"per_tuple": 1}, "arrival": {"start": 0, "end": 1, "total": 2}}], r"queries\[0\].name is missing"),
        ([{"name": "a", "cost": {"overhead": 1}, "arrival": {"start": 0, "end": 1, "total": 2}}], r"queries\[0\].cost.per_tuple"),
        ([{"name": "a", "cost": {"per_tuple": 1}, "arrival": {"points": []}}], r"queries\[0\].arrival"),
        ([], "workload.queries must be a non-empty list"),
    ],
)
def test_cli_names_the_bad_workload_field(tmp_path: Path, capsys: pytest.CaptureFixture[str], queries: list, match: str) -> None:
    assert main(["simulate", "--workload", str(workload(tmp_path, queries))]) == 2
    assert re.search(match, capsys.readouterr().err)


def test_cli_on_fitted_cost_models(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    models = tmp_path / "models"
    models.mkdir()
    for name in ("q6", "q12"):
        (models / f"{name}.json").write_text((REPO / "cost_models" / f"{name}.json").read_text())
    assert main(["simulate", "--cost-models", str(models), "--profile", "VR3"]) == 0
    out = capsys.readouterr().out
    assert "2 queries" in out and "edf-trad" in out
