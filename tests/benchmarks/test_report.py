from __future__ import annotations

import dataclasses

import pytest

from benchmarks.ssbench.harness import RunRow
from benchmarks.ssbench.report import cells, format_runs, format_table, format_totals, plot, ratios


def row(query, config, cpu, status="ok", repeat=0):
    return RunRow(
        query=query,
        config=config,
        repeat=repeat,
        files=60,
        speedup=4.0,
        status=status,
        cpu_s=cpu,
        busy_s=1.0,
        batches=1,
        peak_rss=1,
        deadline_met=True,
        result_ok=status == "ok",
        ready_after_close_s=1.0,
        startup_cpu_s=1.0,
        airflow_cpu_s=None,
        loop_cpu_s=None,
        load_1m=1.5,
        dropped_by_watermark=0,
        state_bytes=0,
        error=None,
    )


ROWS = [
    row("q6", "IQP-1D", 2.0),
    row("q6", "IQP-1D", 4.0, repeat=1),
    row("q6", "IQP-1D", 100.0, status="invalid", repeat=2),
    row("q6", "SS-default", 30.0),
    row("q3", "IQP-1D", 10.0),
    row("q3", "SS-default", 50.0),
    row("q3", "SS-once", None, status="refused"),
]


def test_cells_take_the_median_of_valid_runs_and_name_the_failures():
    table = cells(ROWS)
    assert table[("q6", "IQP-1D")].value == pytest.approx(3.0)
    assert table[("q6", "IQP-1D")].runs == 3
    assert table[("q3", "SS-once")].value is None
    assert table[("q3", "SS-once")].note == "refused"


def test_ratios_per_query_and_in_total():
    by_query = ratios(ROWS, "IQP-1D")
    assert by_query["q6"]["SS-default"] == pytest.approx(10.0)
    assert by_query["q3"]["SS-default"] == pytest.approx(5.0)
    assert by_query["q3"]["SS-once"] is None
    assert by_query["total"]["SS-default"] == pytest.approx((30.0 + 50.0) / (3.0 + 10.0))
    assert by_query["total"]["IQP-1D"] == pytest.approx(1.0)


def test_total_leaves_out_queries_without_a_baseline():
    rows = [row("q6", "SS-default", 30.0), row("q3", "IQP-1D", 10.0), row("q3", "SS-default", 20.0)]
    assert ratios(rows, "IQP-1D")["total"]["SS-default"] == pytest.approx(2.0)


def test_format_table_shows_ratios_costs_and_refusals():
    text = format_table(ROWS, "IQP-1D")
    assert "10.00x (30.0 s)" in text
    assert "refused" in text
    assert text.splitlines()[-2].startswith("total")


def test_format_runs_has_a_line_per_run_with_its_status():
    lines = format_runs(ROWS).splitlines()
    assert len(lines) == 2 + len(ROWS)
    assert "refused" in lines[-1]
    assert "1.50" in lines[2]  # the load when the run started


def test_format_totals_divides_each_streaming_total_by_each_of_ours():
    rows = [*ROWS, row("q6", "IQP-dyn", 1.0), row("q3", "IQP-dyn", 5.0)]
    lines = format_totals(rows).splitlines()
    assert lines[0].split()[-2:] == ["IQP-1D", "IQP-dyn"]
    default = lines[2].split()
    assert default[0] == "SS-default"
    assert default[1] == f"{(30.0 + 50.0) / (3.0 + 10.0):.2f}x"
    assert default[2] == f"{(30.0 + 50.0) / (1.0 + 5.0):.2f}x"
    assert lines[3].split() == ["SS-once", "-", "-"]


def test_ratios_in_busy_seconds_use_the_busy_column():
    rows = [row("q6", "IQP-1D", 2.0), row("q6", "SS-default", 30.0)]
    rows[1] = dataclasses.replace(rows[1], busy_s=5.0)
    assert ratios(rows, "IQP-1D", "busy_s")["q6"]["SS-default"] == pytest.approx(5.0)
    assert "busy seconds" in format_totals(rows, "busy_s")


def test_plot_writes_a_png(tmp_path):
    path = tmp_path / "ratios.png"
    plot([*ROWS, row("q6", "IQP-dyn", 1.0)], path)
    assert path.read_bytes()[:4] == b"\x89PNG"
