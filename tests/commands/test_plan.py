"""`iqp plan` from parameters and from a cost-model file."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from airflow_iqp.cli import main

if TYPE_CHECKING:
    from pathlib import Path


def test_plan_from_parameters_prints_the_paper_case(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["plan", "--tuples", "10", "--window-start", "1", "--window-end", "10", "--deadline", "2", "--per-tuple", "0.5"]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "meets deadline 12.000" in out
    lines = [line.split() for line in out.splitlines()]
    assert ["1", "6", "1..6", "6.000", "7.000", "10.000", "3.000"] in lines
    assert ["2", "4", "7..10", "10.000", "10.000", "12.000", "2.000"] in lines


def test_infeasible_plan_exits_1_and_says_the_earliest_deadline(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "plan",
            "--tuples",
            "10",
            "--window-start",
            "1",
            "--window-end",
            "10",
            "--deadline",
            "0.2",
            "--per-tuple",
            "0.5",
        ]
    )
    assert code == 1
    assert "earliest feasible deadline is 10.5" in capsys.readouterr().out


def test_plan_from_cost_model_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "q.json"
    fitted = {"partial": {"points": [[1, 12.0], [1000, 22.0]]}, "merge": {"points": [[2, 8.0], [10, 12.0]]}}
    model.write_text(json.dumps({"query": "q", "paths": {"spark_submit": fitted}}))
    code = main(["plan", "--tuples", "1000", "--window-end", "100", "--deadline", "21.95", "--cost-model", str(model)])
    out = capsys.readouterr().out
    assert code == 0
    assert "merge" in out
    assert "meets deadline 121.950" in out


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("not json", "not valid JSON"),
        ('{"paths": {}}', "no paths.spark_submit"),
        (
            '{"paths": {"spark_submit": {"partial": {"points": [[2, 1], [1, 2]]}, "merge": {"points": [[1, 1]]}}}}',
            "partial: points[1]",
        ),
    ],
)
def test_bad_cost_model_file(tmp_path: Path, capsys: pytest.CaptureFixture[str], document: str, message: str) -> None:
    model = tmp_path / "bad.json"
    model.write_text(document)
    code = main(["plan", "--tuples", "10", "--window-end", "10", "--deadline", "3", "--cost-model", str(model)])
    assert code == 2
    assert message in capsys.readouterr().err


def test_iqp_console_script_runs() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "airflow_iqp.cli",
            "plan",
            "--tuples",
            "5",
            "--window-end",
            "4",
            "--deadline",
            "9",
            "--per-tuple",
            "1",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "meets deadline" in result.stdout
