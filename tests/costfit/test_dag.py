"""`iqp fit-cost-model --dag`: a declared DAG's query fitted on files no iqp command wrote."""

from __future__ import annotations

import json
import os
import uuid
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_iqp.cli import main
from airflow_iqp.constants import ExecutionPath
from airflow_iqp.costfit.dag import all_units, load_declaration
from airflow_iqp.declaration import ArrivalRate, declare
from airflow_iqp.streams.spec import FileStream

if TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

T0 = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
SQL = "SELECT category, count(*) AS sales, sum(amount) AS revenue FROM sales GROUP BY category"
DAG_FILE = """
from datetime import UTC, datetime, timedelta
from airflow_iqp import FileStream, intermittent_query

for name, path in {streams}:
    globals()[name] = intermittent_query(
        dag_id=name,
        query="sales.sql",
        window=timedelta(minutes=1),
        deadline=timedelta(seconds=30),
        streams={{"sales": FileStream(path)}},
        output="{results}/{{dag_id}}/{{window_start}}",
        start_date=datetime(2026, 1, 1, tzinfo=UTC),
    )
"""


def write_sales(directory: Path, rows: int, at: datetime) -> Path:
    """Made-up sales under a random name, modified at `at`."""
    table = pa.table(
        {
            "sale_id": pa.array(range(rows), pa.int64()),
            "category": pa.array([("books", "games", "toys")[i % 3] for i in range(rows)]),
            "amount": pa.array([1.25 * (i % 7) for i in range(rows)], pa.float64()),
        }
    )
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{uuid.uuid4().hex}.parquet"
    pq.write_table(table, path)
    os.utime(path, (at.timestamp(), at.timestamp()))
    return path


def dag_file(tmp_path: Path, streams: dict[str, Path]) -> Path:
    (tmp_path / "sales.sql").write_text(SQL)
    path = tmp_path / "sales_dag.py"
    pairs = repr([(name, str(directory)) for name, directory in streams.items()])
    path.write_text(DAG_FILE.format(streams=pairs, results=tmp_path / "results"))
    return path


@pytest.fixture
def sales(tmp_path: Path) -> tuple[Path, list[int]]:
    """Five files over three windows, in arrival order, and hidden files beside them."""
    directory = tmp_path / "sales"
    rows = [20, 35, 50, 65, 80]
    for i, n in enumerate(rows):
        write_sales(directory, n, T0 + timedelta(seconds=30 * i))
    (directory / "_SUCCESS").write_text("")
    (directory / ".upload.parquet").write_bytes(b"half a file")
    return directory, rows


def test_every_unit_of_every_window_in_arrival_order(tmp_path: Path, sales: tuple[Path, list[int]]) -> None:
    directory, rows = sales
    declaration = load_declaration(dag_file(tmp_path, {"iqp_sales": directory}))
    units, selection = all_units(declaration, now=T0 + timedelta(minutes=10))
    assert [pq.read_metadata(u.files[0].uri.removeprefix("file://")).num_rows for u in units] == rows
    assert len({u.window_start for u in units}) == 3
    assert not selection.unmatched
    assert not selection.unassigned


def test_a_file_missing_from_another_stream_is_left_out(tmp_path: Path) -> None:
    left, right = tmp_path / "left", tmp_path / "right"
    for name in ("a.parquet", "b.parquet"):
        for directory in (left, right):
            directory.mkdir(exist_ok=True)
            pq.write_table(pa.table({"x": [1]}), directory / name)
    pq.write_table(pa.table({"x": [1]}), left / "c.parquet")
    streams = {"l": FileStream(str(left)), "r": FileStream(str(right))}
    (tmp_path / "join.sql").write_text("SELECT count(*) AS n FROM l JOIN r ON l.x = r.x")
    declaration = declare(
        dag_id="join",
        query=tmp_path / "join.sql",
        window=timedelta(minutes=1),
        deadline=timedelta(seconds=30),
        streams=streams,
        output=str(tmp_path / "out/{window_start}"),
    )
    units, selection = all_units(declaration)
    assert sorted(u.relative for u in units) == ["a.parquet", "b.parquet"]
    assert all(len(u.files) == 2 for u in units)
    assert [f.relative for f in selection.unmatched] == ["c.parquet"]


def test_a_file_of_several_declarations_needs_a_dag_id(tmp_path: Path, sales: tuple[Path, list[int]]) -> None:
    directory, _ = sales
    path = dag_file(tmp_path, {"first": directory, "second": directory})
    with pytest.raises(ValueError, match=r"2 intermittent queries \(first, second\); name one with --dag-id"):
        load_declaration(path)
    assert load_declaration(path, "second").dag_id == "second"
    with pytest.raises(ValueError, match="declares no intermittent query 'third'"):
        load_declaration(path, "third")


def test_bad_command_lines_say_what_to_give(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fit-cost-model"]) == 2
    assert "or a DAG file with --dag" in capsys.readouterr().err
    assert main(["fit-cost-model", "--dag", str(tmp_path / "x.py"), "--data", str(tmp_path)]) == 2
    assert "--dag measures the DAG's own files" in capsys.readouterr().err
    assert main(["fit-cost-model", "--dag", str(tmp_path / "nope.py")]) == 2
    assert "nope.py does not exist" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["fit-cost-model", "--dag", str(dag_file(tmp_path, {"iqp_sales": empty}))]) == 2
    assert "hold no input yet" in capsys.readouterr().err


def test_fitted_on_the_dags_own_files_loads_in_a_declaration(
    spark: SparkSession, tmp_path: Path, sales: tuple[Path, list[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    directory, rows = sales
    monkeypatch.chdir(tmp_path)
    code = main(["fit-cost-model", "--dag", str(dag_file(tmp_path, {"iqp_sales": directory})), "--paths", "in_process"])
    assert code == 0
    out = tmp_path / "iqp_sales.json"  # by default <dag_id>.json
    document = json.loads(out.read_text())
    assert (document["dag_id"], document["units"], document["unit"]) == ("iqp_sales", len(rows), "rows")
    measured = document["paths"]["in_process"]["partial"]["measured"]
    # Rows from the jobs' markers: all units in the one-batch split, the first unit alone.
    assert [m["tuples"] for m in measured if m["batches"] == 1] == [sum(rows)]
    assert [m["tuples"] for m in measured if m["batches"] is None] == [rows[0]]
    assert sorted(m["tuples"] for m in measured if m["batches"] == 2) == [sum(rows[:2]), sum(rows[2:])]
    assert [m["partials"] for m in document["paths"]["in_process"]["merge"]["measured"]] == [1, 2, 4]

    declaration = declare(
        dag_id="iqp_sales",
        query=tmp_path / "sales.sql",
        window=timedelta(minutes=1),
        deadline=timedelta(seconds=30),
        streams={"sales": FileStream(str(directory))},
        output=str(tmp_path / "results/{window_start}"),
        rate=ArrivalRate(files_per_second=0.04, rows_per_file=50),
        cost_model=str(out),
        execution_path=ExecutionPath.IN_PROCESS,
    )
    model = declaration.fitted_model(ExecutionPath.IN_PROCESS)
    assert model.partial.cost(sum(rows)) >= model.partial.cost(rows[0]) > 0
    assert model.merge.cost(2) > 0
