"""`iqp simulate`: options parsed and refused by name, a workload file, fitted cost models, and
the picture."""

from __future__ import annotations

import json
import re
import struct
from typing import TYPE_CHECKING, Any

import pytest

from airflow_iqp.cli import main
from airflow_iqp.declaration import EXAMPLE_COST_MODELS

if TYPE_CHECKING:
    from pathlib import Path

GOOD: dict[str, Any] = {
    "name": "a",
    "cost": {"per_tuple": 0.01, "overhead": 1.0},
    "arrival": {"start": 1, "end": 100, "total": 100},
}


def workload(tmp_path: Path, queries: list[dict[str, Any]]) -> Path:
    file = tmp_path / "workload.json"
    file.write_text(json.dumps({"window_end": 100, "queries": queries}))
    return file


def models(tmp_path: Path, names: tuple[str, ...] = ("q6", "cq1")) -> Path:
    directory = tmp_path / "models"
    directory.mkdir(exist_ok=True)
    for name in names:
        (directory / f"{name}.json").write_text((EXAMPLE_COST_MODELS / f"{name}.json").read_text())
    return directory


def test_a_workload_prints_the_table_and_draws_the_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    qs = [GOOD | {"name": n, "merge": {"points": [[2, 0.5], [100, 1.5]]}} for n in ("a", "b")]
    png = tmp_path / "out.png"
    assert main(["simulate", "--workload", str(workload(tmp_path, qs)), "--png", str(png)]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.strip().startswith(("1.0", "0.1"))]
    assert len(rows) == 2
    assert all(len(row) == 1 + 2 * 8 for row in rows)  # delta, then met and cost for each of 8 columns
    assert rows[0][1] == "2/2"
    assert f"wrote {png}" in out
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert struct.unpack(">II", data[16:24]) == (1100, 800)


def test_fitted_cost_models_report_the_measured_volume_by_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", "--cost-models", str(models(tmp_path)), "--policies", "rr,llf-trad"]) == 0
    out = capsys.readouterr().out
    assert "2 queries from 4500 files at 1 file/s, profile FR, path in_process, volume measured" in out
    assert "(TPC-H scale 0.01: 15000..60175 rows per query" in out
    assert "cq1 4500f/1b" in out
    header = next(line for line in out.splitlines() if line.split()[:1] == ["delta"])
    assert header.split() == ["delta", "rr", "llf-trad"]  # in the order asked for


def test_a_random_deadline_order_names_its_seed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", "--cost-models", str(models(tmp_path)), "--order", "random", "--seed", "3"]
    assert main([*argv, "--policies", "edf", "--profile", "VR3", "--path", "spark_submit"]) == 0
    assert "deadlines staggered in random order (seed 3)" in capsys.readouterr().out


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
        (["--policies", ","], "--policies"),
        (["--order", "alphabetical"], "--order"),
        (["--profile", "VR9"], "--profile"),
    ],
)
def test_a_bad_option_is_named(argv: list[str], option: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["simulate", *argv])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}" in err
    assert "Traceback" not in err


def test_tau_max_below_one_tuple_names_the_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # spark_submit start-up is 11-16 s a batch: no tuple of q6 fits in 5 s.
    argv = ["simulate", "--cost-models", str(models(tmp_path, ("q6",))), "--path", "spark_submit", "--tau-max", "5"]
    assert main(argv) == 2
    assert re.search(r"--tau-max 5 s is below the cost of one tuple of query 'q6'", capsys.readouterr().err)


def test_a_bad_workload_exits_2_naming_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = workload(tmp_path, [GOOD | {"cost": {"points": [[1, 2], [3, -4]]}}])
    assert main(["simulate", "--workload", str(file)]) == 2
    err = capsys.readouterr().err
    assert "workload.queries[0].cost.points[1][1] must be greater than or equal to 0, got -4" in err
    assert "Traceback" not in err


def test_stream_options_do_not_apply_to_a_workload(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = workload(tmp_path, [GOOD | {"total": None}])
    assert main(["simulate", "--workload", str(file), "--volume", "paper", "--policies", "edf"]) == 0
    captured = capsys.readouterr()
    assert "--volume applies to the fitted cost models" in captured.err
    assert "1 queries from workload" in captured.out


def test_a_png_that_cannot_be_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = workload(tmp_path, [GOOD])
    argv = ["simulate", "--workload", str(file), "--policies", "edf", "--png", str(tmp_path / "no" / "x.png")]
    assert main(argv) == 2
    assert "--png" in capsys.readouterr().err


def test_spread_and_margin_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", "--cost-models", str(models(tmp_path)), "--volume", "0.1", "--spread", "0.2"]
    assert main([*argv, "--margin", "3", "--policies", "edf,edf-margin,llf-idle-margin"]) == 0
    out = capsys.readouterr().out
    assert "job costs spread 0.2 (seed 0), margin 3" in out
    header = next(line for line in out.splitlines() if line.strip().startswith("delta"))
    assert header.split() == ["delta", "edf", "edf-margin", "llf-idle-margin"]


def test_margin_columns_without_spread_say_they_add_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--cost-models", str(models(tmp_path)), "--policies", "edf-margin"]) == 0
    assert "the -margin columns add no margin" in capsys.readouterr().err


def test_a_negative_spread_is_refused_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["simulate", "--spread", "-1"])
    assert "--spread: must be a finite number >= 0" in capsys.readouterr().err


def test_the_default_models_are_the_ones_the_package_ships(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--policies", "edf"]) == 0
    shipped = len(list(EXAMPLE_COST_MODELS.glob("*.json")))
    assert f"{shipped} queries from 4500 files" in capsys.readouterr().out


def test_capacity_compares_the_controllers_per_delta(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", "--cost-models", str(models(tmp_path)), "--capacity", "elastic,fixed,reactive", "--btu", "60"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "capacity at confidence 0.95; BTU 60 s" in out
    row = next(line for line in out.splitlines() if line.startswith("   1.0 "))
    cells = re.findall(r"(\d+)/2 (\d+) \((\d+)\)", row)  # met, billed core-seconds, most cores, per controller
    assert [met for met, _, _ in cells] == ["2", "2", "2"]
    billed = [float(b) for _, b, _ in cells]
    assert billed[0] < billed[1], "elastic leases nothing while the windows are open: all work is after"


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["--capacity", "elastic,static"], "--capacity"),
        (["--confidence", "1"], "--confidence"),
        (["--btu", "0"], "--btu"),
    ],
)
def test_a_bad_capacity_option_is_named(argv: list[str], option: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["simulate", *argv])
    assert f"argument {option}" in capsys.readouterr().err
