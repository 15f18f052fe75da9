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
from airflow_iqp.commands import simulate as command
from airflow_iqp.planning import ArrivalCurve, LinearCost
from airflow_iqp.simulation import SimQuery, SimResult, simulate

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
        ("partial", 3, 3.0),
        ("partial", 3, 7.0),
        ("partial", 3, 11.0),
        ("partial", 1, 15.0),
        ("merge", 4, 17.0),
    ]


def test_deadline_before_window_end_is_allowed_and_missed() -> None:
    q = SimQuery("q", 5, ArrivalCurve.fixed_rate(0, 10, 5), 10.0, 5.0, LinearCost(1.0), None)
    result = simulate([q], policy="edf", alpha=0.5, tau_max=10.0)
    assert not result.outcomes["q"].met
    assert not result.all_met


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
    [
        ("total", 0, "total must be a whole number in 1..5"),
        ("total", 6, "total"),
        ("deadline", float("nan"), "deadline"),
    ],
)
def test_bad_query_fields_are_named(field: str, value: object, match: str) -> None:
    fields = {
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


def workload(tmp_path: Path, queries: list[dict]) -> Path:
    file = tmp_path / "workload.json"
    file.write_text(json.dumps({"window_end": 100, "queries": queries}))
    return file


def test_cli_runs_a_workload_and_draws_the_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    qs = [
        {
            "name": n,
            "cost": {"per_tuple": 0.01, "overhead": 1.0},
            "merge": {"points": [[2, 0.5], [100, 1.5]]},
            "arrival": {"start": 1, "end": 100, "total": 100},
        }
        for n in ("a", "b")
    ]
    png = tmp_path / "out.png"
    assert main(["simulate", "--workload", str(workload(tmp_path, qs)), "--png", str(png)]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.strip().startswith(("1.0", "0.1"))]
    assert len(rows) == 2
    assert all(len(row) == 13 for row in rows)
    assert rows[0][1] == "2/2"
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert struct.unpack(">II", data[16:24])[0] > 0


@pytest.mark.parametrize(
    ("queries", "match"),
    [
        ([{"cost": {"per_tuple": 1}, "arrival": {"start": 0, "end": 1, "total": 2}}], r"queries\[0\].name is missing"),
        (
            [{"name": "a", "cost": {"overhead": 1}, "arrival": {"start": 0, "end": 1, "total": 2}}],
            r"queries\[0\].cost.per_tuple",
        ),
        ([{"name": "a", "cost": {"per_tuple": 1}, "arrival": {"points": []}}], r"queries\[0\].arrival"),
        ([], "workload.queries must be a non-empty list"),
    ],
)
def test_cli_names_the_bad_workload_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], queries: list, match: str
) -> None:
    assert main(["simulate", "--workload", str(workload(tmp_path, queries))]) == 2
    assert re.search(match, capsys.readouterr().err)


def test_cli_on_fitted_cost_models(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    models = tmp_path / "models"
    models.mkdir()
    for name in ("q6", "q12"):
        (models / f"{name}.json").write_text((REPO / "cost_models" / f"{name}.json").read_text())
    assert main(["simulate", "--cost-models", str(models), "--profile", "VR3"]) == 0
    out = capsys.readouterr().out
    assert "2 queries" in out
    assert "edf-trad" in out


# --- the protocol of `iqp simulate` (Section 7.4) -------------------------------------------


def test_staggered_deadlines_follow_the_formula() -> None:
    # D_i = we + delta * (sum of cost(N_j), j <= i), in single-batch cost order.
    arrival = ArrivalCurve.fixed_rate(1, 100, 10)
    qs = [
        SimQuery(name, 10, arrival, 100.0, 100.0, LinearCost(per_tuple, 1.0), None)
        for name, per_tuple in (("c", 3.0), ("a", 1.0), ("b", 2.0))
    ]  # single batch: 31, 11, 21 s
    for delta in command.DELTAS:
        out = command.staggered(qs, 100.0, delta)
        assert [q.name for q in out] == ["a", "b", "c"]
        assert [q.deadline for q in out] == pytest.approx([100 + delta * 11, 100 + delta * 32, 100 + delta * 63])
        assert all(q.window_end == 100.0 and q.total == 10 for q in out)
    by_order = command.staggered(qs, 100.0, 0.5, ["c", "a", "b"])
    assert [q.deadline for q in by_order] == pytest.approx([115.5, 121.0, 131.5])
    with pytest.raises(ValueError, match="every query exactly once"):
        command.staggered(qs, 100.0, 0.5, ["a", "b"])


def test_random_deadline_order_is_a_seeded_permutation() -> None:
    arrival = ArrivalCurve.fixed_rate(1, 100, 10)
    qs = [SimQuery(f"q{i}", 10, arrival, 100.0, 100.0, LinearCost(1.0 + i), None) for i in range(8)]
    first = command.deadline_order(qs, "random", 7)
    assert sorted(first) == sorted(q.name for q in qs)
    assert first == command.deadline_order(qs, "random", 7)
    assert {tuple(command.deadline_order(qs, "random", seed)) for seed in range(5)} != {tuple(first)}
    assert command.deadline_order(qs, "cost") == [f"q{i}" for i in range(8)]


def test_back_to_back_schedule_meets_delta_one_deadlines_exactly() -> None:
    # Three one-tuple queries ready at we: EDF finishes each exactly at its delta-1 deadline.
    # Summed as we + (0.1 + 0.2 + 1.1) the last deadline would be 1 ulp before that finish.
    at_we = ArrivalCurve.from_points([(4500, 1)])
    qs = [SimQuery(f"q{i}", 1, at_we, 4500.0, 4500.0, LinearCost(c), None) for i, c in enumerate((0.1, 0.2, 1.1))]
    result = simulate(command.staggered(qs, 4500.0, 1.0), policy="edf", alpha=0.5, tau_max=10.0)
    assert result.all_met
    assert [o.finish for o in result.outcomes.values()] == [o.deadline for o in result.outcomes.values()]


def models(tmp_path: Path, names: tuple[str, ...] = ("q6", "cq1")) -> Path:
    directory = tmp_path / "models"
    directory.mkdir(exist_ok=True)
    for name in names:
        (directory / f"{name}.json").write_text((REPO / "cost_models" / f"{name}.json").read_text())
    return directory


@pytest.mark.parametrize(("volume", "factor"), [("measured", 1.0), ("paper", command.PAPER_SCALE / 0.01), (0.02, 2.0)])
def test_volume_scales_each_models_measured_rows(tmp_path: Path, volume: str | float, factor: float) -> None:
    # q6 reads lineitem (60175 rows measured at scale 0.01), cq1 orders (15000 rows).
    queries, window_end, volumes = command.paper_workload(models(tmp_path), "in_process", "FR", volume)
    assert window_end == 4500.0
    assert command.PAPER_SCALE == pytest.approx(27.9)
    rows = {q.name: q.total for q in queries}
    assert rows == {"q6": round(60175 * factor), "cq1": round(15000 * factor)}
    assert {v.query: v.measured_rows for v in volumes} == {"q6": 60175, "cq1": 15000}
    for q in queries:
        assert q.submit_at == 1.0
        assert q.window_end == 4500.0
        assert q.arrival.first_arrival == 1.0
        assert q.arrival.time_of(q.total) == 4500.0
        assert q.arrival.count_at(2.0) == q.total * 2 // 4500  # rows of the first two files


def test_slow_profile_delivers_after_the_window_end(tmp_path: Path) -> None:
    queries, _ = command._paper_queries(models(tmp_path, ("q6",)), "spark_submit", "VR3")
    (q,) = queries
    assert q.arrival.time_of(q.total) == pytest.approx(4520.0)  # the last file 20 s late
    assert q.submit_at == 1.0
    assert q.window_end == 4500.0


def test_cli_reports_the_measured_volume_by_default(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--cost-models", str(models(tmp_path)), "--policies", "edf,llf-trad"]) == 0
    out = capsys.readouterr().out
    assert "volume measured (TPC-H scale 0.01: 15000..60175 rows per query" in out
    assert "MinBatch" in out
    assert "cq1 4500f/1b" in out
    header = next(line for line in out.splitlines() if line.split()[:1] == ["delta"])
    assert header.split() == ["delta", "edf", "llf-trad"]


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["--volume", "huge"], "--volume"),
        (["--volume", "-1"], "--volume"),
        (["--volume", "0"], "--volume"),
        (["--volume", "nan"], "--volume"),
        (["--alpha", "0"], "--alpha"),
        (["--alpha", "-0.5"], "--alpha"),
        (["--tau-max", "-1"], "--tau-max"),
        (["--tau-max", "inf"], "--tau-max"),
        (["--policies", "fifo"], "--policies"),
        (["--policies", "edf,edf"], "--policies"),
        (["--order", "alphabetical"], "--order"),
        (["--profile", "VR9"], "--profile"),
    ],
)
def test_cli_bad_option_names_it(argv: list[str], option: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["simulate", *argv])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}" in err
    assert "Traceback" not in err


def test_cli_tau_max_below_one_tuple_names_the_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # spark_submit start-up is 11-16 s a batch: no tuple of q6 fits in 5 s.
    assert (
        main(["simulate", "--cost-models", str(models(tmp_path, ("q6",))), "--path", "spark_submit", "--tau-max", "5"])
        == 2
    )
    assert re.search(r"--tau-max 5 s is below the cost of one tuple of query 'q6'", capsys.readouterr().err)


def test_cli_volume_too_small_for_a_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--cost-models", str(models(tmp_path, ("cq1",))), "--volume", "1e-9"]) == 2
    assert "--volume 1e-09 leaves query cq1 without a row" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda d: d.pop("scale"), r"scale must be the TPC-H scale factor"),
        (lambda d: d.update(scale="0.01"), r"scale must be the TPC-H scale factor"),
        (
            lambda d: d["paths"]["in_process"]["partial"]["measured"][0].update(tuples=-3),
            r"paths\.in_process\.partial\.measured\[0\]\.tuples must be a whole number >= 1",
        ),
        (lambda d: d["paths"].pop("in_process"), r"has no paths\.in_process section"),
    ],
)
def test_cli_names_the_bad_cost_model_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change, match: str
) -> None:
    directory = models(tmp_path, ("q6",))
    document = json.loads((directory / "q6.json").read_text())
    change(document)
    (directory / "q6.json").write_text(json.dumps(document))
    assert main(["simulate", "--cost-models", str(directory)]) == 2
    assert re.search(match, capsys.readouterr().err)


GOOD = {"name": "a", "cost": {"per_tuple": 0.01, "overhead": 1.0}, "arrival": {"start": 1, "end": 100, "total": 100}}


@pytest.mark.parametrize(
    ("document", "match"),
    [
        ("{not json", r"is not valid JSON"),
        ("[1, 2]", r"must hold a JSON object"),
        ({"queries": [GOOD]}, r"workload\.window_end is missing"),
        ({"window_end": "100", "queries": [GOOD]}, r"workload\.window_end must be a number of seconds, got '100'"),
        ({"window_end": -5, "queries": [GOOD]}, r"workload\.window_end must be >= 0, got -5"),
        ({"window_end": 100, "queries": [GOOD], "deadline": 5}, r"workload has an unknown field 'deadline'"),
        ({"window_end": 100, "queries": ["a"]}, r"queries\[0\] must be an object"),
        ({"window_end": 100, "queries": [GOOD | {"name": 5}]}, r"queries\[0\]\.name must be a non-empty string"),
        ({"window_end": 100, "queries": [GOOD, GOOD]}, r"queries\[1\]\.name 'a' is already the name of queries\[0\]"),
        (
            {"window_end": 100, "queries": [GOOD | {"cost": {"per_tuple": "x"}}]},
            r"queries\[0\]\.cost\.per_tuple must be a finite number",
        ),
        (
            {"window_end": 100, "queries": [GOOD | {"cost": {"per_tuple": -1}}]},
            r"queries\[0\]\.cost\.per_tuple must be >= 0",
        ),
        (
            {"window_end": 100, "queries": [GOOD | {"cost": {"points": 5}}]},
            r"queries\[0\]\.cost\.points must be a non-empty list",
        ),
        (
            {"window_end": 100, "queries": [GOOD | {"cost": {"points": [[-1, 2], [3, 4]]}}]},
            r"cost\.points\[0\] tuples must be >= 0",
        ),
        (
            {"window_end": 100, "queries": [GOOD | {"merge": {"per_tuple": 1, "overheads": 2}}]},
            r"merge has an unknown field 'overheads'",
        ),
        (
            {"window_end": 100, "queries": [GOOD | {"arrival": {"start": 1, "end": 10, "total": -5}}]},
            r"arrival\.total must be a whole number >= 1",
        ),
        (
            {"window_end": 100, "queries": [GOOD | {"arrival": {"start": 1, "end": 10, "total": "5"}}]},
            r"arrival\.total must be a whole number >= 1",
        ),
        (
            {"window_end": 100, "queries": [GOOD | {"arrival": {"start": -1, "end": 10, "total": 5}}]},
            r"arrival\.start must be >= 0",
        ),
        (
            {"window_end": 100, "queries": [GOOD | {"arrival": {"points": [[0, "3"]]}}]},
            r"arrival\.points\[0\] cumulative tuples must be a whole number",
        ),
        (
            {"window_end": 100, "queries": [GOOD | {"arrival": {"points": [[0, 0]]}}]},
            r"arrival must deliver at least one tuple",
        ),
        (
            {"window_end": 100, "queries": [GOOD | {"total": 500}]},
            r"queries\[0\]\.total \(500\) exceeds the 100 tuples",
        ),
        ({"window_end": 100, "queries": [GOOD | {"total": 2.5}]}, r"queries\[0\]\.total must be a whole number >= 1"),
        ({"window_end": 100, "queries": [GOOD | {"submit_at": -5}]}, r"queries\[0\]\.submit_at must be >= 0"),
        ({"window_end": 100, "queries": [GOOD | {"deadline": 5}]}, r"queries\[0\] has an unknown field 'deadline'"),
        (
            {"window_end": 100, "queries": [GOOD | {"cost": {"per_tuple": 50}}]},
            r"--tau-max 30 s is below the cost of one tuple of query 'a'",
        ),
    ],
)
def test_cli_malformed_workload_is_a_clean_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], document: object, match: str
) -> None:
    file = tmp_path / "workload.json"
    file.write_text(document if isinstance(document, str) else json.dumps(document))
    assert main(["simulate", "--workload", str(file)]) == 2
    err = capsys.readouterr().err
    assert re.search(match, err)
    assert "Traceback" not in err


def test_cli_workload_that_is_not_a_readable_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--workload", str(tmp_path / "absent.json")]) == 2
    err = capsys.readouterr().err
    assert "--workload" in err
    assert "does not exist" in err
    assert main(["simulate", "--workload", str(tmp_path)]) == 2
    assert "cannot be read" in capsys.readouterr().err


def test_cli_workload_with_unknown_total_and_stream_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = workload(tmp_path, [GOOD | {"total": None}])
    assert main(["simulate", "--workload", str(file), "--volume", "paper", "--policies", "edf"]) == 0
    captured = capsys.readouterr()
    assert "--volume applies to the fitted cost models" in captured.err
    assert "1 queries from workload" in captured.out


def test_cli_png_that_cannot_be_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = workload(tmp_path, [GOOD])
    assert (
        main(["simulate", "--workload", str(file), "--policies", "edf", "--png", str(tmp_path / "no" / "x.png")]) == 2
    )
    assert "--png" in capsys.readouterr().err
