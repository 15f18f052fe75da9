"""The workload file: what it builds, and every problem named by the path of the field to fix."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

import pytest

from airflow_iqp.planning import LinearCost, PiecewiseLinearCost
from airflow_iqp.simulation.workload import load_workload

if TYPE_CHECKING:
    from pathlib import Path

GOOD: dict[str, Any] = {
    "name": "a",
    "cost": {"per_tuple": 0.01, "overhead": 1.0},
    "arrival": {"start": 1, "end": 100, "total": 100},
}


def write(tmp_path: Path, document: object) -> Path:
    file = tmp_path / "workload.json"
    file.write_text(document if isinstance(document, str) else json.dumps(document))
    return file


def test_both_forms_of_cost_and_arrival_and_the_optional_fields(tmp_path: Path) -> None:
    stepped = {
        "name": "b",
        "cost": {"points": [[1, 0.5], [10, 2.0]]},
        "merge": {"per_tuple": 0.25},
        "arrival": {"points": [[2, 3], [5, 7]]},
        "total": None,
        "submit_at": 1.5,
    }
    queries, window_end = load_workload(write(tmp_path, {"window_end": 50, "queries": [GOOD, stepped]}))
    assert window_end == 50.0
    a, b = queries
    assert (a.name, a.total, a.arrival.total, a.arrival.first_arrival) == ("a", 100, 100, 1.0)
    assert a.cost == LinearCost(0.01, 1.0)
    assert a.agg_cost is None
    assert a.submit_at is None
    assert (a.window_end, a.deadline) == (50.0, 50.0)  # the protocol staggers deadlines later
    assert (b.name, b.total, b.arrival.total, b.arrival.count_at(4.9)) == ("b", None, 7, 3)
    assert b.cost == PiecewiseLinearCost([(1, 0.5), (10, 2.0)])
    assert b.agg_cost == LinearCost(0.25)
    assert b.submit_at == 1.5


@pytest.mark.parametrize(
    ("document", "match"),
    [
        ("{not json", r"is not valid JSON: key must be a string"),
        ("[1, 2]", r"workload must be a JSON object, got \[1, 2\]"),
        ({"queries": [GOOD]}, r"workload\.window_end is missing"),
        ({"window_end": "100", "queries": [GOOD]}, r"workload\.window_end must be a valid number, got '100'"),
        ({"window_end": True, "queries": [GOOD]}, r"workload\.window_end must be a valid number, got True"),
        ({"window_end": -5, "queries": [GOOD]}, r"workload\.window_end must be greater than or equal to 0, got -5"),
        ({"window_end": 100, "queries": [GOOD], "deadline": 5}, r"workload has an unknown field 'deadline'"),
        ({"window_end": 100, "queries": []}, r"workload\.queries must not be empty"),
        ({"window_end": 100, "queries": ["a"]}, r"workload\.queries\[0\] must be a JSON object, got 'a'"),
        ({"window_end": 100, "queries": [GOOD | {"name": 5}]}, r"queries\[0\]\.name must be a valid string"),
        ({"window_end": 100, "queries": [GOOD | {"name": " "}]}, r"queries\[0\]\.name: must be a non-empty string"),
        (
            {"window_end": 100, "queries": [GOOD, GOOD]},
            r"workload\.queries: names must differ: queries\[1\] is named 'a' like queries\[0\]",
        ),
        (
            {"window_end": 100, "queries": [GOOD | {"cost": {"per_tuple": "x"}}]},
            r"queries\[0\]\.cost\.per_tuple must be a valid number, got 'x'",
        ),
        (
            {"window_end": 100, "queries": [GOOD | {"cost": {"per_tuple": -1}}]},
            r"queries\[0\]\.cost\.per_tuple must be greater than or equal to 0",
        ),
        (
            {"window_end": 100, "queries": [GOOD | {"cost": {"overhead": 1}}]},
            r"queries\[0\]\.cost: give either 'points' or 'per_tuple'",
        ),
        (
            {"window_end": 100, "queries": [GOOD | {"cost": {"points": [[1, 2]], "per_tuple": 1}}]},
            r"queries\[0\]\.cost: give either 'points' or 'per_tuple'",
        ),
        (
            {"window_end": 100, "queries": [GOOD | {"cost": {"points": 5}}]},
            r"queries\[0\]\.cost\.points must be a valid array",
        ),
        (
            {"window_end": 100, "queries": [GOOD | {"cost": {"points": [[1, 2], [3, -4]]}}]},
            r"queries\[0\]\.cost\.points\[1\]\[1\] must be greater than or equal to 0, got -4",
        ),
        (
            {"window_end": 100, "queries": [GOOD | {"cost": {"points": [[1, 2], [3]]}}]},
            r"queries\[0\]\.cost\.points\[1\]\[1\] is missing",
        ),
        (
            {"window_end": 100, "queries": [GOOD | {"cost": {"points": [[5, 2], [3, 4]]}}]},
            r"queries\[0\]\.cost: points\[1\] = \(3\.0, 4\.0\): tuples must be strictly increasing",
        ),
        (
            {"window_end": 100, "queries": [GOOD | {"merge": {"per_tuple": 1, "overheads": 2}}]},
            r"queries\[0\]\.merge has an unknown field 'overheads'",
        ),
        (
            {"window_end": 100, "queries": [GOOD | {"arrival": {"start": 1, "end": 10, "total": 0}}]},
            r"queries\[0\]\.arrival\.total must be greater than or equal to 1",
        ),
        (
            {"window_end": 100, "queries": [GOOD | {"arrival": {"start": 1, "end": 10, "total": "5"}}]},
            r"queries\[0\]\.arrival\.total must be a valid integer, got '5'",
        ),
        (
            {"window_end": 100, "queries": [GOOD | {"arrival": {"start": 1, "total": 5}}]},
            r"queries\[0\]\.arrival: give either 'points' or all of 'start', 'end' and 'total'",
        ),
        (
            {"window_end": 100, "queries": [GOOD | {"arrival": {"start": 10, "end": 1, "total": 5}}]},
            r"queries\[0\]\.arrival: end \(1\) must not be before start \(10\)",
        ),
        (
            {"window_end": 100, "queries": [GOOD | {"arrival": {"points": [[0, 2.5]]}}]},
            r"queries\[0\]\.arrival\.points\[0\]\[1\] must be a valid integer, got 2\.5",
        ),
        (
            {"window_end": 100, "queries": [GOOD | {"arrival": {"points": [[0, 0]]}}]},
            r"queries\[0\]\.arrival: must deliver at least one tuple",
        ),
        (
            {"window_end": 100, "queries": [GOOD | {"arrival": {"points": [[0, 3], [1, 2]]}}]},
            r"queries\[0\]\.arrival: points\[1\] cumulative tuples 2 decrease",
        ),
        ({"window_end": 100, "queries": [GOOD | {"total": 500}]}, r"queries\[0\]: total \(500\) exceeds the 100"),
        ({"window_end": 100, "queries": [GOOD | {"total": 2.5}]}, r"queries\[0\]\.total must be a valid integer"),
        ({"window_end": 100, "queries": [GOOD | {"submit_at": -5}]}, r"queries\[0\]\.submit_at must be greater"),
        ({"window_end": 100, "queries": [GOOD | {"deadline": 5}]}, r"queries\[0\] has an unknown field 'deadline'"),
    ],
)
def test_a_bad_field_is_named_by_its_path(tmp_path: Path, document: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        load_workload(write(tmp_path, document))


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    document = {"window_end": -1, "queries": [GOOD, GOOD | {"cost": {"per_tuple": "x"}, "arrival": {}}]}
    with pytest.raises(ValueError, match="workload.window_end") as error:
        load_workload(write(tmp_path, document))
    message = str(error.value)
    assert "workload.window_end must be greater than or equal to 0" in message
    assert "workload.queries[1].cost.per_tuple must be a valid number" in message
    assert "workload.queries[1].arrival: give either 'points'" in message


def test_json_that_is_not_finite_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"workload\.window_end must be a finite number, got inf"):
        load_workload(write(tmp_path, '{"window_end": 1e400, "queries": []}'))


def test_a_file_that_cannot_be_read(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=re.escape(f"--workload {tmp_path / 'absent.json'} does not exist")):
        load_workload(tmp_path / "absent.json")
    with pytest.raises(ValueError, match="cannot be read"):
        load_workload(tmp_path)
    (tmp_path / "latin1.json").write_bytes(b'{"window_end": "\xe9"}')
    with pytest.raises(ValueError, match="is not UTF-8 text"):
        load_workload(tmp_path / "latin1.json")
