"""The paper's protocol (Section 7.4): the stream and its volumes, staggered deadlines and
their order, the columns of the table, MinBatch's summary, and bad cost models."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from airflow_iqp.constants import Policy
from airflow_iqp.declaration import EXAMPLE_COST_MODELS
from airflow_iqp.planning import ArrivalCurve, LinearCost
from airflow_iqp.simulation import SimQuery, simulate
from airflow_iqp.simulation.protocol import (
    COLUMNS,
    DELTAS,
    PAPER_SCALE,
    Column,
    Experiment,
    deadline_order,
    min_batch_summary,
    paper_workload,
    staggered,
)

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


def models(tmp_path: Path, names: tuple[str, ...] = ("q6", "cq1")) -> Path:
    directory = tmp_path / "models"
    directory.mkdir(exist_ok=True)
    for name in names:
        (directory / f"{name}.json").write_text((EXAMPLE_COST_MODELS / f"{name}.json").read_text())
    return directory


def three_by_cost() -> list[SimQuery]:
    """Single-batch costs: c 31 s, a 11 s, b 21 s."""
    arrival = ArrivalCurve.fixed_rate(1, 100, 10)
    return [
        SimQuery(name, 10, arrival, 100.0, 100.0, LinearCost(per_tuple, 1.0), None)
        for name, per_tuple in (("c", 3.0), ("a", 1.0), ("b", 2.0))
    ]


def test_staggered_deadlines_follow_the_formula() -> None:
    # D_i = we + delta * (sum of cost(N_j), j <= i), in single-batch cost order.
    qs = three_by_cost()
    for delta in DELTAS:
        out = staggered(qs, 100.0, delta)
        assert [q.name for q in out] == ["a", "b", "c"]
        assert [q.deadline for q in out] == pytest.approx([100 + delta * 11, 100 + delta * 32, 100 + delta * 63])
        assert all(q.window_end == 100.0 and q.total == 10 for q in out)
    by_order = staggered(qs, 100.0, 0.5, ["c", "a", "b"])
    assert [q.deadline for q in by_order] == pytest.approx([115.5, 121.0, 131.5])
    with pytest.raises(ValueError, match="every query exactly once"):
        staggered(qs, 100.0, 0.5, ["a", "b"])


def test_random_deadline_order_is_a_seeded_permutation() -> None:
    arrival = ArrivalCurve.fixed_rate(1, 100, 10)
    qs = [SimQuery(f"q{i}", 10, arrival, 100.0, 100.0, LinearCost(1.0 + i), None) for i in range(8)]
    first = deadline_order(qs, "random", 7)
    assert sorted(first) == sorted(q.name for q in qs)
    assert first == deadline_order(qs, "random", 7)
    assert {tuple(deadline_order(qs, "random", seed)) for seed in range(5)} != {tuple(first)}
    assert deadline_order(qs, "cost") == [f"q{i}" for i in range(8)]
    with pytest.raises(ValueError, match="--order must be one of cost, random"):
        deadline_order(qs, "alphabetical")


def test_back_to_back_schedule_meets_delta_one_deadlines_exactly() -> None:
    # Three one-tuple queries ready at we: EDF finishes each exactly at its delta-1 deadline.
    # Summed as we + (0.1 + 0.2 + 1.1) the last deadline would be 1 ulp before that finish.
    at_we = ArrivalCurve.from_points([(4500, 1)])
    qs = [SimQuery(f"q{i}", 1, at_we, 4500.0, 4500.0, LinearCost(c), None) for i, c in enumerate((0.1, 0.2, 1.1))]
    result = simulate(staggered(qs, 4500.0, 1.0), policy="edf", alpha=0.5, tau_max=10.0)
    assert result.all_met
    assert [o.finish for o in result.outcomes.values()] == [o.deadline for o in result.outcomes.values()]


def test_the_columns_are_the_four_policies_two_baselines_and_two_idling() -> None:
    assert [(c.name, c.policy, c.min_batch, c.idle) for c in COLUMNS] == [
        ("edf", Policy.EDF, True, False),
        ("llf", Policy.LLF, True, False),
        ("sjf", Policy.SJF, True, False),
        ("rr", Policy.RR, True, False),
        ("edf-trad", Policy.EDF, False, False),
        ("llf-trad", Policy.LLF, False, False),
        ("edf-idle", Policy.EDF, True, True),
        ("llf-idle", Policy.LLF, True, True),
    ]


def test_an_experiment_runs_every_column_at_every_delta() -> None:
    qs = three_by_cost()
    experiment = Experiment(qs, 100.0, ["a", "b", "c"], alpha=0.5, tau_max=40.0)
    columns = [Column("sjf", Policy.SJF, True), Column("edf-trad", Policy.EDF, False)]
    columns.append(Column("edf-idle", Policy.EDF, True, idle=True))
    table = experiment.run(columns, deltas=(1.0, 0.5))
    assert (table.columns, table.queries, table.alpha, list(table.rows)) == (tuple(columns), 3, 0.5, [1.0, 0.5])
    assert experiment.single_batch_cost == pytest.approx(63.0)
    for delta, row in table.rows.items():
        workload = experiment.workload(delta)
        assert [q.deadline for q in workload] == [q.deadline for q in staggered(qs, 100.0, delta, ["a", "b", "c"])]
        for column, result in zip(columns, row):
            expected = simulate(
                workload, policy=column.policy, alpha=0.5, tau_max=40.0, min_batch=column.min_batch, idle=column.idle
            )
            assert (result.met_count, result.total_cost) == (expected.met_count, expected.total_cost)


def test_an_experiment_refuses_a_tau_max_below_one_tuple() -> None:
    with pytest.raises(ValueError, match=r"--tau-max 3 s is below the cost of one tuple of query 'c' \(4 s\)"):
        Experiment(three_by_cost(), 100.0, ["a", "b", "c"], alpha=0.5, tau_max=3.0)


def test_min_batch_summary_in_files_or_tuples() -> None:
    # cost(n) = 1 + n, agg(k) = 1 + k/2, 10 tuples, alpha 0.6: MinBatch 3 tuples, 4 batches.
    q = SimQuery("q", 10, ArrivalCurve.fixed_rate(1, 10, 10), 10.0, 20.0, LinearCost(1.0, 1.0), LinearCost(0.5, 1.0))
    unknown = SimQuery("u", None, ArrivalCurve.fixed_rate(1, 10, 10), 10.0, 20.0, LinearCost(1.0), None)
    assert min_batch_summary([q, unknown], 0.6, 10.0, None).endswith(": q 3t/4b")
    assert min_batch_summary([q], 0.6, 10.0, 20).endswith(": q 6f/4b")
    # alpha out of reach: the largest batch within tau_max, cost(9) = 10 s
    assert min_batch_summary([q], 0.01, 10.0, None).endswith(": q 9t/2b!")


@pytest.mark.parametrize(("volume", "factor"), [("measured", 1.0), ("paper", PAPER_SCALE / 0.01), (0.02, 2.0)])
def test_volume_scales_each_models_measured_rows(tmp_path: Path, volume: str | float, factor: float) -> None:
    # q6 reads lineitem (60175 rows measured at scale 0.01), cq1 orders (15000 rows).
    queries, window_end, volumes = paper_workload(models(tmp_path), "in_process", "FR", volume)
    assert window_end == 4500.0
    assert PAPER_SCALE == pytest.approx(27.9)
    rows = {q.name: q.total for q in queries}
    assert rows == {"q6": round(60175 * factor), "cq1": round(15000 * factor)}
    assert {v.query: v.measured_rows for v in volumes} == {"q6": 60175, "cq1": 15000}
    for q in queries:
        assert q.submit_at == 1.0
        assert q.window_end == 4500.0
        assert q.arrival.first_arrival == 1.0
        assert q.arrival.time_of(q.tuples) == 4500.0
        assert q.arrival.count_at(2.0) == q.tuples * 2 // 4500  # rows of the first two files


def test_slow_profile_delivers_after_the_window_end(tmp_path: Path) -> None:
    (q,), _, _ = paper_workload(models(tmp_path, ("q6",)), "spark_submit", "VR3")
    assert q.arrival.time_of(q.tuples) == pytest.approx(4520.0)  # the last file 20 s late
    assert q.submit_at == 1.0
    assert q.window_end == 4500.0


def test_volume_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--volume 1e-09 leaves query cq1 without a row"):
        paper_workload(models(tmp_path, ("cq1",)), "in_process", "FR", 1e-9)
    with pytest.raises(ValueError, match="--volume must be one of measured, paper"):
        paper_workload(models(tmp_path, ("cq1",)), "in_process", "FR", "huge")
    with pytest.raises(ValueError, match="holds no cost model"):
        paper_workload(tmp_path / "empty", "in_process", "FR")


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda d: d.pop("scale"), r"scale must be the TPC-H scale factor"),
        (lambda d: d.update(scale="0.01"), r"scale must be the TPC-H scale factor"),
        (lambda d: d.update(scale=0), r"scale must be the TPC-H scale factor"),
        (
            lambda d: d["paths"]["in_process"]["partial"]["measured"][0].update(tuples=-3),
            r"paths\.in_process\.partial\.measured\[0\]\.tuples must be >= 1",
        ),
        (
            lambda d: d["paths"]["in_process"]["partial"]["measured"][1].update(tuples=2.5),
            r"paths\.in_process\.partial\.measured\[1\]\.tuples must be a whole number",
        ),
        (
            lambda d: d["paths"]["in_process"]["partial"].update(measured=[]),
            r"paths\.in_process\.partial\.measured must be a non-empty list",
        ),
        (lambda d: d["paths"].pop("in_process"), r"has no paths\.in_process section"),
    ],
)
def test_a_bad_cost_model_field_is_named(
    tmp_path: Path, change: Callable[[dict[str, Any]], object], match: str
) -> None:
    directory = models(tmp_path, ("q6",))
    document = json.loads((directory / "q6.json").read_text())
    change(document)
    (directory / "q6.json").write_text(json.dumps(document))
    with pytest.raises(ValueError, match=match):
        paper_workload(directory, "in_process", "FR")


def test_a_hand_written_model_is_sized_by_its_fitted_range(tmp_path: Path) -> None:
    directory = models(tmp_path, ("q6",))
    document = json.loads((directory / "q6.json").read_text())
    del document["paths"]["in_process"]["partial"]["measured"]
    (directory / "q6.json").write_text(json.dumps(document))
    (q,), _, (volume,) = paper_workload(directory, "in_process", "FR")
    last = document["paths"]["in_process"]["partial"]["points"][-1][0]
    assert q.total == volume.measured_rows == int(last)
