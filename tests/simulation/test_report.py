"""The report: the setting, the table's text, and a picture with labelled axes and a legend."""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

import pytest
from matplotlib.patches import Rectangle

from airflow_iqp.constants import Policy
from airflow_iqp.planning import ArrivalCurve, LinearCost
from airflow_iqp.simulation import SimQuery
from airflow_iqp.simulation.protocol import COLUMNS, Column, Experiment, Table
from airflow_iqp.simulation.report import draw, figure, setting, table_lines

if TYPE_CHECKING:
    from pathlib import Path


def experiment() -> Experiment:
    # Overhead-dominated batches: the traditional baselines cost many times MinBatch's.
    qs = [
        SimQuery(name, 100, ArrivalCurve.fixed_rate(1, 100, 100), 100.0, 100.0, LinearCost(0.01, per_batch), None)
        for name, per_batch in (("a", 1.0), ("b", 2.0))
    ]
    return Experiment(qs, 100.0, ["a", "b"], alpha=0.5, tau_max=30.0)


@pytest.fixture(scope="module")
def table() -> Table:
    return experiment().run(COLUMNS, deltas=(1.0, 0.5, 0.1))


def test_setting_states_the_load_and_the_order() -> None:
    lines = setting(experiment(), "a test", "cost order", None)
    assert lines[0] == "2 queries from a test"
    assert "deadlines staggered in cost order: a < b" in lines[1]
    assert "sum of single-batch costs 5.0 s (0.050x the window)" in lines[2]
    assert lines[3].startswith("MinBatch (tuples/batches")


def test_table_has_a_row_per_delta_and_a_cell_per_column(table: Table) -> None:
    lines = table_lines(table)
    assert lines[1].split() == ["delta", *(c.name for c in COLUMNS)]
    rows = [line.split() for line in lines[2:]]
    assert [row[0] for row in rows] == ["1.0", "0.5", "0.1"]
    for row, results in zip(rows, table.rows.values()):
        cells = list(zip(row[1::2], row[2::2]))
        assert cells == [(f"{r.met_count}/2", f"{r.normalized_cost:.2f}x") for r in results]


def test_the_picture_labels_its_axes_and_names_every_column(table: Table) -> None:
    fig = figure(table, "the title")
    met, cost = fig.axes
    assert fig.get_suptitle() == "the title"
    assert met.get_ylabel() == "deadlines met (of 2)"
    assert cost.get_ylabel().startswith("normalized cost")
    assert cost.get_xlabel().startswith("delta")
    assert [t.get_text() for t in cost.get_xticklabels()] == ["1.0", "0.5", "0.1"]
    (legend,) = fig.legends
    names = [t.get_text() for t in legend.get_texts()]
    assert names == [
        *(c.name if c.min_batch else f"{c.name} (no MinBatch)" for c in COLUMNS),
        "1 + alpha = 1.5",
    ]
    for axes in (met, cost):
        assert len(axes.patches) == len(COLUMNS) * len(table.rows)  # one bar per column and delta
    assert all(isinstance(p, Rectangle) for p in met.patches)
    heights = [p.get_height() for p in met.patches if isinstance(p, Rectangle)]
    assert heights == [r.met_count for j in range(len(COLUMNS)) for r in (row[j] for row in table.rows.values())]
    costs = [r.normalized_cost for row in table.rows.values() for r in row]
    assert cost.get_yscale() == ("log" if max(costs) > 10 * min(costs) else "linear")


def test_a_baseline_shares_its_policys_colour_and_is_hatched() -> None:
    columns = (Column("edf", Policy.EDF, True), Column("edf-trad", Policy.EDF, False))
    table = experiment().run(columns, deltas=(1.0,))
    plain, hatched = figure(table, "t").axes[0].patches
    assert plain.get_facecolor() == hatched.get_edgecolor()
    assert not plain.get_hatch()
    assert hatched.get_hatch() == "///"


def test_draw_writes_a_png(tmp_path: Path, table: Table) -> None:
    path = tmp_path / "table.png"
    draw(table, "the title", path)
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1100, 800)
