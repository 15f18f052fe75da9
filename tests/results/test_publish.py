"""Publishing a window's merged result where the DAG declared, and reading it back: one Parquet
file and a marker, replaced whole, on a local directory (plain path and file://)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_iqp.results.publish import DATA_NAME, MARKER_NAME, ResultError, publish, read_marker, read_result

if TYPE_CHECKING:
    from pathlib import Path


def committed(tmp_path: Path, name: str, rows: list[dict[str, Any]]) -> Path:
    """A merge job's committed output: one part file under Spark's naming, and Spark's marker."""
    directory = tmp_path / "work" / name
    directory.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), directory / "part-00000-0f1e2d.snappy.parquet")
    (directory / "_SUCCESS").write_bytes(b"")
    return directory


def test_a_result_is_one_parquet_file_and_its_marker(tmp_path: Path) -> None:
    rows = [{"category": "a", "total": 3}, {"category": "b", "total": 5}]
    target = tmp_path / "results" / "sales" / "20260101T100000"
    metadata = {"window_start": "2026-01-01T10:00:00+00:00", "rows": 2, "at": datetime(2026, 1, 1, tzinfo=UTC)}
    location = publish(committed(tmp_path, "result", rows), str(target), metadata)
    assert location == str(target)
    assert sorted(p.name for p in target.iterdir()) == [MARKER_NAME, DATA_NAME]
    assert read_result(location) == rows
    marker = read_marker(location)
    assert marker["rows"] == 2
    assert marker["at"] == "2026-01-01 00:00:00+00:00"  # what JSON cannot hold is written as text
    assert json.loads((target / MARKER_NAME).read_text()) == marker


def test_a_file_uri_target_is_published_and_read_as_well(tmp_path: Path) -> None:
    target = (tmp_path / "results" / "w").as_uri()
    location = publish(committed(tmp_path, "result", [{"n": 1}]), target, {"rows": 1})
    assert location == target
    assert read_result(location) == [{"n": 1}]
    assert (tmp_path / "results" / "w" / DATA_NAME).is_file()


def test_a_second_publish_replaces_the_first_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = str(tmp_path / "results" / "w")
    publish(committed(tmp_path, "first", [{"n": 1}, {"n": 2}]), target, {"rows": 2, "remerged": False})
    publish(committed(tmp_path, "second", [{"n": 7}]), target, {"rows": 1, "remerged": True})
    assert read_result(target) == [{"n": 7}]
    assert read_marker(target) == {"rows": 1, "remerged": True}
    assert sorted(p.name for p in (tmp_path / "results" / "w").iterdir()) == [MARKER_NAME, DATA_NAME]


def test_an_empty_result_keeps_its_columns(tmp_path: Path) -> None:
    directory = tmp_path / "work" / "empty"
    directory.mkdir(parents=True)
    pq.write_table(
        pa.table({"category": pa.array([], pa.string()), "total": pa.array([], pa.int64())}),
        directory / "part-00000.parquet",
    )
    target = str(tmp_path / "results" / "empty")
    publish(directory, target, {"rows": 0})
    assert read_result(target) == []
    assert pq.read_schema(tmp_path / "results" / "empty" / DATA_NAME).names == ["category", "total"]


@pytest.mark.parametrize("parts", [0, 2])
def test_a_committed_result_must_hold_exactly_one_part_file(tmp_path: Path, parts: int) -> None:
    directory = tmp_path / "work" / "result"
    directory.mkdir(parents=True)
    for i in range(parts):
        pq.write_table(pa.table({"n": [i]}), directory / f"part-{i:05d}.parquet")
    with pytest.raises(ResultError, match=rf"must hold exactly one part-\*\.parquet to publish, found {parts}"):
        publish(directory, str(tmp_path / "results" / "w"), {})
    assert not (tmp_path / "results" / "w").exists()


def test_a_result_without_its_marker_was_never_committed(tmp_path: Path) -> None:
    target = tmp_path / "results" / "w"
    target.mkdir(parents=True)
    pq.write_table(pa.table({"n": [1]}), target / DATA_NAME)  # data written, marker not (yet)
    with pytest.raises(ResultError, match=rf"no result at {target}: {MARKER_NAME} is missing"):
        read_marker(str(target))
    with pytest.raises(ResultError, match=f"{MARKER_NAME} is missing"):
        read_result(str(target))
    with pytest.raises(ResultError, match="never committed"):
        read_marker(str(tmp_path / "nowhere"))


def test_a_target_that_cannot_be_written_is_named(tmp_path: Path) -> None:
    blocker = tmp_path / "results"
    blocker.write_text("a file where the results directory should be")
    with pytest.raises(ResultError, match=f"cannot publish the result to {blocker}/w"):
        publish(committed(tmp_path, "result", [{"n": 1}]), str(blocker / "w"), {})
