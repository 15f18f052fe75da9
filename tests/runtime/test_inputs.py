"""A window's input as a listing shows it: the spec that travels in XCom and trigger kwargs, a
real directory cut into the window by modification time, and the units batches have not taken."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta, timezone
from typing import TYPE_CHECKING

import pytest

from airflow_iqp.runtime.inputs import ORIGIN, InputSpec, files_by_stream, untaken
from airflow_iqp.streams.assign import InputUnit
from airflow_iqp.streams.files import DataFile
from airflow_iqp.streams.spec import FileStream

if TYPE_CHECKING:
    from pathlib import Path

T0 = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
WINDOW = timedelta(minutes=10)


def land(directory: Path, relative: str, at: datetime, data: bytes = b"rows") -> Path:
    """A file that landed at `at` (its modification time)."""
    path = directory / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.utime(path, (at.timestamp(), at.timestamp()))
    return path


def unit(relative: str, *streams: str, at: datetime = T0) -> InputUnit:
    files = tuple(DataFile(s, f"file:///data/{s}/{relative}", relative, 1, at) for s in streams)
    return InputUnit(relative, files, at, T0)


def test_the_spec_round_trips_through_json() -> None:
    streams = {
        "sales": FileStream("s3://bucket/sales/", conn_id="aws_default", lateness=timedelta(minutes=2)),
        "events": FileStream("/data/events", format="csv", schema="id BIGINT", options={"header": "true"}),
    }
    spec = InputSpec.of(streams, T0, WINDOW)
    again = InputSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
    assert again == spec
    assert again.file_streams() == streams
    assert (again.window_start, again.window_end) == (T0, T0 + WINDOW)


def test_the_window_start_is_kept_in_utc() -> None:
    local = T0.astimezone(timezone(timedelta(hours=2)))
    spec = InputSpec.of({"sales": FileStream("/data/sales")}, local, WINDOW)
    assert spec.window_start.utcoffset() == timedelta(0)
    assert spec.window_start == T0
    assert InputSpec.from_dict(spec.to_dict()).window_start.utcoffset() == timedelta(0)


def test_look_cuts_a_real_directory_into_the_window_by_modification_time(tmp_path: Path) -> None:
    sales = tmp_path / "sales"
    land(sales, "b.parquet", T0 + timedelta(minutes=3))
    land(sales, "a.parquet", T0 + timedelta(minutes=5))
    land(sales, "day=1/c.parquet", T0 + timedelta(minutes=1))
    land(sales, "old.parquet", T0 - timedelta(seconds=1))
    land(sales, "next.parquet", T0 + WINDOW)  # a window includes its start, not its end
    land(sales, "_SUCCESS", T0 + timedelta(minutes=2))
    land(sales, ".a.parquet.crc", T0 + timedelta(minutes=2))
    land(sales, "_temporary/0/d.parquet", T0 + timedelta(minutes=2))
    spec = InputSpec.of({"sales": FileStream(str(sales))}, T0, WINDOW)

    during = spec.look(now=T0 + timedelta(minutes=6))
    assert [u.relative for u in during.units] == ["day=1/c.parquet", "b.parquet", "a.parquet"]  # arrival order
    assert [u.relative for u in during.earlier] == ["old.parquet"]
    assert [u.relative for u in during.later] == ["next.parquet"]
    assert not during.final
    assert during.final_at == T0 + WINDOW
    assert during.units[0].files[0].uri == f"file://{sales}/day=1/c.parquet"
    assert all(u.window_start == T0 for u in during.units)

    assert spec.look(now=T0 + WINDOW).final


def test_lateness_keeps_the_input_open_after_the_window_end(tmp_path: Path) -> None:
    stream = FileStream(str(tmp_path / "sales"), lateness=timedelta(minutes=2))
    land(tmp_path / "sales", "a.parquet", T0 + timedelta(minutes=1))
    spec = InputSpec.of({"sales": stream}, T0, WINDOW)
    assert not spec.look(now=T0 + WINDOW + timedelta(minutes=1)).final
    after = spec.look(now=T0 + WINDOW + timedelta(minutes=2))
    assert after.final
    assert after.final_at == T0 + WINDOW + timedelta(minutes=2)


def test_a_stream_directory_that_does_not_exist_yet_is_an_empty_input(tmp_path: Path) -> None:
    spec = InputSpec.of({"sales": FileStream(str(tmp_path / "sales"))}, T0, WINDOW)
    selection = spec.look(now=T0 + WINDOW)
    assert selection.units == ()
    assert selection.final


def test_streams_are_aligned_by_relative_path(tmp_path: Path) -> None:
    for name in ("orders", "lineitem"):
        land(tmp_path / name, "part-1.parquet", T0 + timedelta(minutes=1))
    land(tmp_path / "orders", "part-2.parquet", T0 + timedelta(minutes=2))  # its lineitem has not landed
    land(tmp_path / "lineitem", "part-3.parquet", T0 + timedelta(minutes=2))  # nor has this one's order
    streams = {name: FileStream(str(tmp_path / name)) for name in ("orders", "lineitem")}
    selection = InputSpec.of(streams, T0, WINDOW).look(now=T0 + timedelta(minutes=3))
    assert [u.relative for u in selection.units] == ["part-1.parquet"]
    assert [f.stream for f in selection.units[0].files] == ["lineitem", "orders"]
    assert sorted((f.stream, f.relative) for f in selection.unmatched) == [
        ("lineitem", "part-3.parquet"),
        ("orders", "part-2.parquet"),
    ]


def test_untaken_keeps_the_units_no_batch_froze_in_their_order() -> None:
    units = [unit(f"p{i}", "orders", "lineitem") for i in range(4)]
    taken = {units[1].files[0].uri, units[3].files[1].uri}  # one file of a unit taken: the unit is taken
    assert untaken(units, taken) == [units[0], units[2]]
    assert untaken(units, set()) == units
    assert untaken([], {"file:///x"}) == []


def test_files_by_stream_groups_the_units_files_in_unit_order() -> None:
    units = [unit("p2", "orders", "lineitem"), unit("p1", "orders", "lineitem")]
    grouped = files_by_stream(units)
    assert list(grouped) == ["orders", "lineitem"]
    assert [f.relative for f in grouped["orders"]] == ["p2", "p1"]
    assert [f.relative for f in grouped["lineitem"]] == ["p2", "p1"]
    assert all(f.stream == stream for stream, files in grouped.items() for f in files)
    assert files_by_stream([]) == {}


def test_windows_count_from_the_timetables_origin(tmp_path: Path) -> None:
    assert datetime(2000, 1, 1, tzinfo=UTC) == ORIGIN
    stream = FileStream(str(tmp_path / "sales"))
    with pytest.raises(ValueError, match="no window start for windows of 0:10:00 from 2000-01-01"):
        InputSpec.of({"sales": stream}, T0 + timedelta(minutes=1), WINDOW).look(now=T0)


def test_a_task_look_at_a_join_not_windowed_by_one_path_pattern_lists_whole(tmp_path: Path) -> None:
    orders = FileStream(str(tmp_path / "orders"), window_by="path", pattern="dt={date}")
    clicks = FileStream(str(tmp_path / "clicks"))  # by arrival
    day = timedelta(days=1)
    start = T0.replace(hour=0)
    land(tmp_path / "orders", "dt=2025-12-31/part-0.parquet", start)  # its path: the day before
    land(tmp_path / "clicks", "dt=2025-12-31/part-0.parquet", start + timedelta(hours=1))  # landed in the window
    spec = InputSpec.of({"orders": orders, "clicks": clicks}, start, day)

    own = spec.look_own(now=start + day / 2)

    assert [u.relative for u in own.units] == ["dt=2025-12-31/part-0.parquet"], "the unit is its latest member's"
    assert own.units == spec.look(now=start + day / 2).units


def test_schema_samples_come_from_any_window_for_an_empty_one(tmp_path: Path) -> None:
    sales = tmp_path / "sales"
    land(sales, "dt=2026-01-01/hour=09/a.parquet", T0)
    stream = FileStream(str(sales), window_by="path", pattern="dt={date}/hour={hour}")
    spec = InputSpec.of({"sales": stream}, T0, WINDOW)

    empty = spec.look_own(now=T0 + WINDOW)

    assert empty.units == ()
    assert empty.earlier == (), "only the window's partition was listed"
    assert spec.schema_samples(empty) == {"sales": f"file://{sales}/dt=2026-01-01/hour=09/a.parquet"}
