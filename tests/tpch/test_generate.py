"""`iqp data generate`: the split keeps every order with its lineitems, and loses no row."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_iqp.commands import data as data_command
from airflow_iqp.tpch.generate import STATIC_TABLES, generate
from airflow_iqp.tpch.manifest import MANIFEST_NAME, load_manifest, part_name

if TYPE_CHECKING:
    from pathlib import Path

FILES = 7


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("gen") / "data"
    generate(out, scale=0.01, files=FILES, seconds_per_file=2.0)
    return out


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tpchgen's own output, to compare the split against."""
    from airflow_iqp.tpch.generate import _run_tpchgen

    raw = tmp_path_factory.mktemp("raw")
    _run_tpchgen(0.01, raw)
    return raw


def read_stream(root: Path, stream: str, index: int) -> pa.Table:
    return pq.read_table(root / "stream" / stream / part_name(index))


def test_each_order_shares_its_file_index_with_all_its_lineitems(generated: Path) -> None:
    index_of_order = {}
    for i in range(FILES):
        for key in read_stream(generated, "orders", i)["o_orderkey"].to_pylist():
            assert key not in index_of_order
            index_of_order[key] = i
    for i in range(FILES):
        keys = set(read_stream(generated, "lineitem", i)["l_orderkey"].to_pylist())
        assert keys
        assert all(index_of_order[k] == i for k in keys)


def test_order_key_ranges_follow_file_order(generated: Path) -> None:
    ranges = [pc.min_max(read_stream(generated, "orders", i)["o_orderkey"]) for i in range(FILES)]
    assert all(a["max"].as_py() < b["min"].as_py() for a, b in zip(ranges, ranges[1:]))


def test_rows_equal_the_source_tables(generated: Path, source: Path) -> None:
    for stream, key in (("orders", "o_orderkey"), ("lineitem", "l_orderkey")):
        split = pq.read_table(generated / "stream" / stream)
        original = pq.read_table(source / f"{stream}.parquet")
        assert split.num_rows == original.num_rows
        assert pc.sum(split[key]).as_py() == pc.sum(original[key]).as_py()
    for table in STATIC_TABLES:
        assert (
            pq.read_table(generated / "static" / table).num_rows == pq.read_table(source / f"{table}.parquet").num_rows
        )


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(-(2**63), 2**63 - 1)), max_size=12))
def test_rows_come_out_in_key_order_whether_or_not_they_came_in_so(rows: list[tuple[int, int, int]]) -> None:
    """The split skips the sort when the keys are in order already: it must not skip it otherwise."""
    from airflow_iqp.tpch.generate import _sorted_by

    table = pa.table({"k": [r[0] for r in rows], "n": [r[1] for r in rows], "v": [r[2] for r in rows]})
    result = _sorted_by(table, "k", "n")
    out = list(zip(result["k"].to_pylist(), result["n"].to_pylist(), result["v"].to_pylist(), strict=True))
    assert [r[:2] for r in out] == sorted(r[:2] for r in rows)
    assert Counter(out) == Counter(rows)


def test_manifest_counts_match_the_files(generated: Path) -> None:
    manifest = load_manifest(generated / MANIFEST_NAME)
    assert (manifest.scale, manifest.files, manifest.seconds_per_file) == (0.01, FILES, 2.0)
    for stream, entries in manifest.streams.items():
        assert [e.index for e in entries] == list(range(FILES))
        for e in entries:
            assert e.name == part_name(e.index)
            assert e.rows == pq.read_metadata(generated / "stream" / stream / e.name).num_rows
    assert manifest.static["nation"] == 25
    assert manifest.expected_rows("orders", part_name(3)) == manifest.streams["orders"][3].rows
    with pytest.raises(KeyError, match="not in the manifest"):
        manifest.expected_rows("orders", "part-99999.parquet")


def test_event_times_lie_within_each_files_slot(generated: Path) -> None:
    manifest = load_manifest(generated / MANIFEST_NAME)
    base = np.datetime64(manifest.base_time.replace("+00:00", ""), "us")
    for stream, column in manifest.event_time_columns.items():
        for i in range(FILES):
            times = read_stream(generated, stream, i)[column].to_numpy().astype("datetime64[us]")
            seconds = (times - base) / np.timedelta64(1, "s")
            assert seconds.min() >= i * 2.0
            assert seconds.max() < (i + 1) * 2.0
    orders = read_stream(generated, "orders", 2)
    time_of_order = dict(zip(orders["o_orderkey"].to_pylist(), orders["o_event_time"].to_pylist()))
    lineitem = read_stream(generated, "lineitem", 2)
    assert all(
        time_of_order[k] == t for k, t in zip(lineitem["l_orderkey"].to_pylist(), lineitem["l_event_time"].to_pylist())
    )


def test_regenerating_replaces_atomically_and_identically(tmp_path: Path) -> None:
    out = tmp_path / "data"
    generate(out, scale=0.01, files=3)
    first = json.loads((out / MANIFEST_NAME).read_text())
    generate(out, scale=0.01, files=3)
    assert json.loads((out / MANIFEST_NAME).read_text()) == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]  # no temp or old dir left
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST_NAME, "static", "stream"]


@pytest.mark.parametrize("files", [0, -3, 10**6])
def test_bad_file_count_is_refused(tmp_path: Path, files: int) -> None:
    with pytest.raises(ValueError, match="--files"):
        generate(tmp_path / "data", scale=0.01, files=files)
    assert list(tmp_path.iterdir()) == []


def test_unrelated_directory_is_not_replaced(tmp_path: Path) -> None:
    (tmp_path / "precious.txt").write_text("keep")
    with pytest.raises(ValueError, match="refusing"):
        generate(tmp_path, files=3)
    assert (tmp_path / "precious.txt").read_text() == "keep"


def test_missing_tpchgen_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "nowhere" / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ValueError, match="tpchgen-cli not found"):
        generate(tmp_path / "data", files=3)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="iqp")
    data_command.register(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


def test_cli_generate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = parse(["data", "generate", "--out", str(tmp_path / "d"), "--files", "4"])
    assert (args.scale, args.seconds_per_file) == (0.01, 1.0)
    assert args.func(args) == 0
    assert "wrote 4 files per stream" in capsys.readouterr().out
    assert load_manifest(tmp_path / "d" / MANIFEST_NAME).files == 4
