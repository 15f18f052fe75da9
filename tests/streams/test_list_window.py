"""A path stream listed for one window on a local disk: only the directories its template maps
to the window, the same window input as the whole listing shows, and the same errors.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest

from airflow_iqp.streams.assign import select_window
from airflow_iqp.streams.listing import ListingError, list_files, list_window
from airflow_iqp.streams.spec import FileStream
from tests.streams import ORIGIN

if TYPE_CHECKING:
    from pathlib import Path

START = datetime(2026, 3, 4, 8, 10, tzinfo=UTC)
TEN = timedelta(minutes=10)


def land(root: Path, relative: str, at: datetime) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"rows")
    os.utime(path, (at.timestamp(), at.timestamp()))
    return path


def hive_stream(root: Path, **extra: Any) -> FileStream:
    return FileStream(str(root), window_by="path", pattern="dt={date}/hour={hour}/minute={minute}", **extra)


def test_the_window_listing_cuts_into_the_same_window_as_the_whole_listing(tmp_path: Path, ls_calls: list[str]) -> None:
    stream = hive_stream(tmp_path, close_marker="_SUCCESS")
    for day in range(3, 6):
        for hour in (7, 8, 9):
            for minute in (0, 10, 20):
                land(tmp_path, f"dt=2026-03-0{day}/hour={hour:02d}/minute={minute}/part-0.parquet", START)
    late = land(tmp_path, "dt=2026-03-04/hour=08/minute=10/part-1.parquet", START + timedelta(hours=9))
    land(tmp_path, "dt=2026-03-04/hour=08/minute=10/_SUCCESS", START + TEN)
    land(tmp_path, "dt=2026-03-04/hour=8/minute=15/part-0.parquet", START)  # unpadded hour, same window
    land(tmp_path, "region=eu/dt=2026-03-04/hour=08/minute=12/part-0.parquet", START)  # the template starts deeper
    land(tmp_path, "dt=2026-03-04/hour=08/_temporary/minute=10/part-9.parquet", START)  # a writer's leftovers

    window = list_window("events", stream, START, START + TEN)
    listed = {os.path.relpath(call, tmp_path) for call in ls_calls}
    whole = list_files("events", stream)

    def cut(listing: Any) -> Any:
        return select_window(
            {"events": stream}, {"events": listing}, start=START, window=TEN, origin=ORIGIN, now=START + TEN
        )

    assert cut(window).units == cut(whole).units
    assert {unit.relative for unit in cut(window).units} == {
        "dt=2026-03-04/hour=08/minute=10/part-0.parquet",
        str(late.relative_to(tmp_path)),
        "dt=2026-03-04/hour=8/minute=15/part-0.parquet",
        "region=eu/dt=2026-03-04/hour=08/minute=12/part-0.parquet",
    }
    assert cut(window).final  # the marker in the window's partition was listed
    assert len(window.files) == 4
    assert {"dt=2026-03-04", "dt=2026-03-04/hour=08", "dt=2026-03-04/hour=08/minute=10"} <= listed
    assert not {"dt=2026-03-03", "dt=2026-03-05", "dt=2026-03-04/hour=09", "dt=2026-03-04/hour=08/minute=20"} & listed


def test_a_regex_pattern_lists_the_whole_stream(tmp_path: Path) -> None:
    stream = FileStream(str(tmp_path), window_by="path", pattern=r"(?P<date>\d{4}-\d{2}-\d{2})")
    land(tmp_path, "2026-03-04.json", START)
    land(tmp_path, "old/2020-01-01.json", START)
    assert list_window("events", stream, START, START + TEN) == list_files("events", stream)


def test_a_missing_directory_is_empty_only_if_its_parent_exists(tmp_path: Path) -> None:
    assert list_window("events", hive_stream(tmp_path / "not-yet"), START, START + TEN).files == ()
    with pytest.raises(ListingError, match="no-such-mount"):
        list_window("events", hive_stream(tmp_path / "no-such-mount" / "events"), START, START + TEN)


def test_a_file_is_no_stream_directory(tmp_path: Path) -> None:
    path = land(tmp_path, "one.parquet", START)
    with pytest.raises(ListingError, match="is a file"):
        list_window("events", hive_stream(path), START, START + TEN)
