"""Bad declarations fail when the DAG file is parsed, with a message that says what to fix."""

from __future__ import annotations

import json
import math
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest

from airflow_iqp.declaration import ArrivalRate, declare, plan_files
from airflow_iqp.exceptions import InvalidDeclaration

if TYPE_CHECKING:
    from pathlib import Path

MODEL = {
    "query": "q6",
    "paths": {
        "spark_submit": {"partial": {"points": [[430, 6.5], [17200, 26.0]]}, "merge": {"points": [[1, 5.0], [8, 6.0]]}}
    },
}


@pytest.fixture
def cost_model(tmp_path: Path) -> Path:
    path = tmp_path / "q6.json"
    path.write_text(json.dumps(MODEL))
    return path


RATE = ArrivalRate(files_per_second=2, rows_per_file=430)


def args(cost_model: Path, **overrides: object) -> dict[str, Any]:
    base: dict[str, Any] = {
        "query": "q6",
        "window": timedelta(seconds=20),
        "deadline": timedelta(seconds=30),
        "landing": "/tmp/landing",
        "rate": RATE,
        "cost_model": cost_model,
    }
    return base | overrides


def test_good_declaration_plans_two_batches(cost_model: Path) -> None:
    declaration = declare(**args(cost_model))
    planned = plan_files(declaration, RATE)
    assert planned.plan.feasible
    assert len(planned.plan.batches) == 2
    assert planned.finish <= 20 + 30


def test_unknown_query_file_lists_the_known_ones(cost_model: Path) -> None:
    with pytest.raises(InvalidDeclaration, match=r"query: unknown query 'q66'.*known queries: q1, q3"):
        declare(**args(cost_model, query="q66"))


def test_unsupported_sql_names_the_construct(cost_model: Path, tmp_path: Path) -> None:
    query = tmp_path / "distinct.sql"
    query.write_text(
        "-- name: distinct\n-- streams: lineitem\n-- static:\nselect count(distinct l_suppkey) as n from lineitem\n"
    )
    with pytest.raises(InvalidDeclaration, match=r"COUNT\(DISTINCT"):
        declare(**args(cost_model, query=str(query)))


def test_missing_cost_model(tmp_path: Path) -> None:
    with pytest.raises(InvalidDeclaration, match=r"cost_model: .*nope.json does not exist.*iqp fit-cost-model"):
        declare(**args(tmp_path / "nope.json"))


def test_malformed_cost_model_names_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {"paths": {"spark_submit": {"partial": {"points": [[10, 5.0], [5, 6.0]]}, "merge": {"points": [[1, 1.0]]}}}}
        )
    )
    with pytest.raises(InvalidDeclaration, match=r"paths.spark_submit.partial: points\[1\]"):
        declare(**args(bad))


def test_unmeetable_deadline_says_the_earliest_feasible_one(cost_model: Path) -> None:
    with pytest.raises(
        InvalidDeclaration, match=r"can never be met .* earliest feasible deadline is ([\d.]+) s"
    ) as info:
        declare(**args(cost_model, deadline=timedelta(seconds=10)))
    earliest = float(info.value.args[0].rsplit("is ", 1)[1].split(" s")[0])
    declare(**args(cost_model, deadline=timedelta(seconds=earliest)))  # and that one works


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"window": timedelta(0)}, "window"),
        ({"deadline": -timedelta(seconds=1)}, "deadline"),
        ({"rate": "sometimes"}, "rate"),
    ],
)
def test_bad_fields_are_named(cost_model: Path, overrides: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidDeclaration, match=field):
        declare(**args(cost_model, **overrides))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"files_per_second": 0, "rows_per_file": 10}, r"rate.files_per_second must be > 0, got 0"),
        ({"files_per_second": True, "rows_per_file": 10}, r"rate.files_per_second must be a finite number, got True"),
        ({"files_per_second": 1, "rows_per_file": math.nan}, r"rate.rows_per_file must be a finite number, got nan"),
        ({"files_per_second": 1, "rows_per_file": "430"}, r"rate.rows_per_file must be a finite number, got '430'"),
    ],
)
def test_bad_rate_is_named(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidDeclaration, match=message):
        ArrivalRate(**kwargs)  # type: ignore[arg-type]  # wrong on purpose


def test_rate_numbers_become_floats() -> None:
    rate = ArrivalRate(files_per_second=2, rows_per_file=430)
    assert (type(rate.files_per_second), type(rate.rows_per_file)) == (float, float)
    assert rate.files_in(timedelta(seconds=20)) == 40


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"mode": "eager"}, "mode must be one of 'static', 'dynamic', got 'eager'"),
        ({"alpha": 0.5}, "alpha and tau_max apply to mode='dynamic' only"),
        ({"mode": "dynamic", "alpha": 0, "tau_max": 30}, "alpha must be a number > 0"),
        ({"mode": "dynamic", "alpha": -1.0, "tau_max": 30}, "alpha must be a number > 0"),
        ({"mode": "dynamic", "alpha": 0.5}, "tau_max must be a positive timedelta or number of seconds"),
        ({"mode": "dynamic", "alpha": 0.5, "tau_max": timedelta(0)}, "tau_max must be a positive"),
        # one file of 430 rows costs 6.5 s by the model
        (
            {"mode": "dynamic", "alpha": 0.5, "tau_max": 6.0},
            r"tau_max \(6 s\) is below the cost of one file of q6 .*6\.5 s",
        ),
    ],
)
def test_bad_dynamic_mode_fields_are_named(cost_model: Path, overrides: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidDeclaration, match=message):
        declare(**args(cost_model, **overrides))


def test_dynamic_mode_sizes_min_batch_within_alpha_and_tau_max(cost_model: Path) -> None:
    from airflow_iqp.declaration import dynamic_batching

    declaration = declare(**args(cost_model, mode="dynamic", alpha=0.5, tau_max=timedelta(seconds=20)))
    batching = dynamic_batching(declaration, RATE)

    def cost_of(files: int) -> float:  # the model's partial cost, in files of 430 rows
        return 6.5 + (26.0 - 6.5) * (files * 430 - 430) / (17200 - 430)

    assert batching.expected_files == 40
    assert batching.min_batch.alpha_met
    assert batching.min_batch.cost_ratio <= 1.5
    assert cost_of(batching.max_batch) <= 20 < cost_of(batching.max_batch + 1)
    assert batching.min_batch.size <= batching.max_batch
    assert batching.slots == 2 * -(-40 // batching.min_batch.size) + 1


def test_a_static_declaration_has_no_min_batch(cost_model: Path) -> None:
    from airflow_iqp.declaration import dynamic_batching

    declaration = declare(**args(cost_model))
    with pytest.raises(InvalidDeclaration, match="q6 is declared mode='static': it has no alpha and tau_max"):
        dynamic_batching(declaration, RATE)
